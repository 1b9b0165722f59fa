"""``skill-retrieve explain``: why skills rank where they do.

For users tuning their descriptions.  Shows the ranking and the decision as
a query makes them (``semantic.search`` and ``decide.choose`` fill its
numbers), then splits each candidate's BM25 score by query term, with the
scorer's own per-term weights (``query.score``), so the parts add up to the
BM25 score ``--format json`` prints; each part is split by field by
re-reading the skill (build path), as the index keeps no fields.  With the
semantic tier each candidate's fused score heads its block and its BM25
score, split, stands under it.  ``--skill`` says why a skill is missing,
comparing fused score with fused score and BM25 with BM25.
"""

import sys

from retriever.cli.commands import k_type
from retriever.render import one_line, plural


def add_arguments(p):
    """Arguments of ``explain``."""
    p.add_argument("--root", action="append", default=[], metavar="DIR", help="skill folder (repeatable)")
    p.add_argument("--index", metavar="FILE", help="index file (default: per-user cache)")
    p.add_argument("--platform", metavar="NAME", help="Hermes platform")
    p.add_argument("-k", type=k_type, default=None, metavar="N", help="how many results to explain (default TOP_K)")
    p.add_argument("--skill", action="append", default=[], metavar="ID_OR_NAME",
                   help="also explain this skill, ranked or not (repeatable)")
    p.add_argument("words", nargs="*", metavar="WORDS", help="the query; read from stdin when absent")


def breakdown(skill, terms, profile, n_docs, avglen, df):
    """Per-term, per-field contributions for one skill record.

    Returns ``{term: {"total": w, "fields": {field: share}}}``: the BM25F
    weight of the term, split across fields in proportion to each field's
    part of the combined term frequency.
    """
    from retriever import index
    ft = index.field_terms(skill, profile)
    k1 = profile["k1"]
    out = {}
    for t in terms:
        parts = {}
        for f, toks in ft.items():
            c = toks.count(t)
            if not c:
                continue
            w, b = profile["fields"][f]
            parts[f] = c * index.field_norm(w, b, len(toks), avglen[f])
        tfp = sum(parts.values())
        if not tfp:
            continue
        weight = index.saturate(index.idf(n_docs, df.get(t, 0)), tfp, k1)
        out[t] = {"total": weight, "fields": {f: weight * v / tfp for f, v in parts.items()}}
    return out


_LANGS = {"en": "English", "es": "Spanish", "pt": "Portuguese", "de": "German", "fr": "French",
          "cjk": "Chinese, Japanese or Korean"}


def run(args):
    """Print the explanation; returns the exit code."""
    from retriever import build, query, semantic, service, settings, skills, store
    from retriever.service import query_text
    refused = service.refuse_roots(args.root)
    if refused:  # as a query: a typo must not explain an empty library
        return refused
    text = query_text(args.words)
    if not text.strip():
        sys.stderr.write("skill-retrieve: error: the query is empty; nothing to explain "
                         "(skill-retrieve explain WORDS...)\n")
        return 2
    top_k, inject_k = settings.limits(args.k)
    idx, path = service.open_index({"roots": args.root, "index": args.index, "platform": args.platform})
    service.with_learnt(idx, path, {})  # as the hook ranks: with what was learnt from loads
    hdr = idx["header"]
    profile = {"k1": hdr["params"]["k1"], "fields": hdr["params"]["fields"],
               "analyzer": hdr["params"]["analyzer"]}
    # The message as the scorer reads it: its terms, their weights (a
    # pasted block's count less) and every skill's BM25 score.
    q = query.parse(idx, text)
    terms = q["terms"]
    # The ranking and the decision exactly as a query makes them, with the
    # model in this process when the tier is on (explain is not timed).
    provider, tier = semantic.explain_provider(idx, path)
    decide = settings.get("SKILL_RETRIEVAL_DECIDE")
    info = {}
    injected, tiers = semantic.search(idx, path, text, top_k, provider, explain=info, decide=decide)
    injected = injected[:inject_k]
    recs, _, _ = skills.collect(build.scope_of(hdr)["roots"], set(hdr["disabled"]))
    by_id = {r["id"]: r for r in recs}
    by_name = {}
    for r in recs:
        by_name.setdefault(r["name"], r)
    # Document frequencies and average field lengths, as the index saw them.
    df = {}
    for t in terms:
        i = store.find_term(idx, t)
        if i >= 0:
            df[t] = store.df(idx, i)
    avglen = hdr["avglen"]
    n = hdr["n_docs"]
    w = sys.stdout.write
    w("query terms (after stopwords and stemming): %s\n" % (" ".join(terms) or "(none)"))
    if q["lang"]:
        w("language: %s, which the library (%s) is not written in%s\n"
          % (_LANGS.get(q["lang"], q["lang"]), ", ".join(_LANGS.get(x, x) for x in hdr["lang"]["library"]),
             "" if q["lang"] == "cjk" else "; its function words are left out"))
    unknown = [t for t in terms if t not in df]
    if unknown:
        w("not in any skill: %s\n" % " ".join(unknown))
        # Say what coverage counts: most CJK pairs of a sentence are not
        # words, so their absence says nothing (query.n_scored).
        skipped = [t for t in unknown if query.is_cjk_token(t)]
        if skipped:
            w("coverage counts %s in some skill and %d in none; not counted: %s in no skill "
              "(most pairs in a sentence are not words)\n"
              % (plural(len(df), "term"), len(unknown) - len(skipped), plural(len(skipped), "CJK pair")))
    if "alpha" in info:
        w("ranking: BM25 fused with the encoder: %.2f x BM25/BM25max + %.2f x cosine (BM25's weight rises "
          "with the share of the query BM25 covers, %.2f here, and is low for a query in non-Latin script or "
          "in a language the library is not written in)\n"
          % (info["alpha"], 1 - info["alpha"], info["coverage_bm25_best"]))
    else:
        w("ranking: BM25%s\n" % ("" if tier == "off" else " alone (semantic tier: %s)" % tier))
    cands = info.get("cands", [])
    printed = set(r["id"] for r in injected)
    _decision(w, idx, info, cands, printed, inject_k, decide)
    fused = "alpha" in info
    split = _by_term(idx, q)
    args_ = (terms, profile, n, avglen, df, split, fused, q["learnt"] or {})
    shown = set()
    for rank, c in enumerate(cands, 1):
        shown.add(c["id"])
        _explain_one(w, rank, c, by_id.get(c["id"]), args_, "injected" if c["id"] in printed else "not injected")
    for want in args.skill:
        rec = by_id.get(want) or by_name.get(want)
        if rec is None:
            w("%s: no such skill in this index (ids look like %s)\n"
              % (want, recs[0]["id"] if recs else "category/skill"))
            continue
        if rec["id"] in shown:
            continue
        # Its place by BM25, read off the scorer's own scores.
        pos, num, bm = 0, -1, 0.0
        for pos, (num, bm) in enumerate(query.top(q["acc"], len(q["acc"])), 1):
            if store.doc(idx, num)[0] == rec["id"]:
                break
        else:
            num = -1
        if num < 0:
            w("%s (%s) is not listed: it shares no term with the query. Words from the query that would "
              "match it must appear in its name, description, triggers, tags or body.\n"
              % (one_line(rec["name"]), one_line(rec["id"])))
            continue
        last = cands[-1] if cands else None
        c = {"n": num, "score": bm, "bm25": bm, "cos": None}
        if fused:
            # Like with like: its fused score against the last listed one's,
            # when the fused ranking has it among its candidates at all.
            ranking = semantic.search(idx, path, text, 1000, provider, decide=False)[0]
            fpos = next((i for i, r in enumerate(ranking, 1) if r["id"] == rec["id"]), None)
            where = ("it ranks #%d in the fused ranking with fused score %.3f; the last listed scores %.3f"
                     % (fpos, ranking[fpos - 1]["score"], last["score"]) if fpos else
                     "the fused ranking does not consider it (BM25's top %d and the encoder's top %d are its "
                     "candidates)" % _pools())
            w("%s (%s) is not listed: %s. By BM25 alone it ranks #%d with BM25 score %.3f; the last listed has "
              "BM25 score %.3f.\n" % (one_line(rec["name"]), one_line(rec["id"]), where, pos, bm,
                                      last["bm25"] if last else 0.0))
            if fpos:
                pos = fpos
                c.update(score=ranking[fpos - 1]["score"], cos=ranking[fpos - 1]["cosine"])
        else:
            w("%s (%s) is not listed: it ranks #%d by BM25 with score %.3f; the last listed scores %.3f.\n"
              % (one_line(rec["name"]), one_line(rec["id"]), pos, bm, last["score"] if last else 0.0))
        _explain_one(w, pos, c, rec, args_)
    return 0


def _pools():
    # The fused ranking's candidate pools: BM25's top and the encoder's.
    from retriever.semantic import fuse
    return fuse.BM25_POOL, fuse.DENSE_POOL


def _by_term(idx, q):
    """``{term: {skill number: weight}}``: each query term's part of every
    BM25 score, from the scorer itself (``query.score`` on that term
    alone, with the message's term weights), so a skill's parts add up to
    its score."""
    from retriever import query
    return {t: query.score(idx, [t], q["weights"])[0] for t in q["terms"] if t in q["found"]}


def _groups(idx, cands):
    """``{skill number: [names of its group of copies]}`` for the
    candidates that have copies in the library (the index's ``copies``)."""
    from retriever import store
    shown = set(c["n"] for c in cands)
    out = {}
    for g in idx["header"].get("copies") or ():
        if shown.intersection(g):
            names = [store.doc(idx, n)[1] for n in g]
            out.update((n, names) for n in g)
    return out


def _decision(w, idx, info, cands, printed, inject_k, on):
    """The decision as ``decide.choose`` made it: the gate's features and
    probability, then each candidate's, and the verdicts."""
    if not on:
        w("decision: off (SKILL_RETRIEVAL_DECIDE=off): the top %d of the ranking are injected\n\n" % inject_k)
        return
    if not cands:
        w("decision: no skill shares a word with the query or is close to it: nothing is injected\n\n")
        return
    named = info.get("named")
    groups = _groups(idx, cands)
    w("decision (%s model, docs/decision.md): the gate gives %.2f that this turn needs a skill "
      "(threshold %.2f): %s\n" % (info["mode"], info["gate"], info["gate_threshold"],
                                  "the message names a skill: what it names is injected, and nothing else"
                                  if named else "the best candidate is injected" if info["passed"]
                                  else "nothing is injected"))
    w("  gate features: %s\n" % ", ".join("%s %.3f" % (k, v) for k, v in zip(info["gate_names"][1:],
                                                                           cands[0]["x"][1:])))
    for i, c in enumerate(cands, 1):
        if named:
            verdict = ("injected (the message names it)" if c["id"] in printed else
                       "cut: beyond the %d injected (-k or SKILL_RETRIEVAL_INJECT_K)" % inject_k if c.get("named")
                       else "not injected (the message names another skill)")
        elif c.get("copy_of"):
            verdict = "not injected: a copy of %s, which takes the group's one slot" % one_line(c["copy_of"])
        elif i == 1:
            verdict = "injected" if c["id"] in printed else \
                "not injected (the gate gives %.2f < %.2f: no skill fits this turn)" % (info["gate"],
                                                                                   info["gate_threshold"]) \
                if not info["passed"] else "not injected"
        elif not info["passed"]:
            verdict = "not injected (the gate said no skill)"
        elif c["inject"] and c["id"] not in printed:
            verdict = "cut: beyond the %d injected (-k or SKILL_RETRIEVAL_INJECT_K)" % inject_k
        else:
            verdict = "%s (p %.2f %s %.2f)" % ("injected" if c["inject"] else "not injected", c["p"],
                                             ">=" if c["inject"] else "<", info["more_threshold"])
        cos = "" if c.get("cos") is None else "  cosine %.3f" % c["cos"]
        score = "score %.3f" % c["score"] if c["x"] is not None or info["mode"] == "bm25" else \
            "BM25 score %.3f, beyond the ranking" % c["bm25"]
        w("  #%d %s (%s)  %s%s  %s\n" % (i, one_line(c["name"]), one_line(c["id"]), score, cos, verdict))
        group = groups.get(c["n"])
        if group:
            w("      copies (one slot a turn; docs/decision.md): %s\n" % ", ".join(one_line(x) for x in group))
        if i > 1 and c["x"] is not None:  # (a named skill from beyond the ranking has none)
            w("      features: %s\n" % ", ".join("%s %.3f" % (k, v) for k, v in zip(info["more_names"][1:],
                                                                                c["x"][1:])))
    w("\n")


def _explain_one(w, rank, c, rec, args_, status=""):
    """One candidate: its score, and its BM25 score split by query term
    (from the scorer) and each term's part by field (re-read from the
    skill: the index keeps no fields).  With the tier the fused score
    heads it and the BM25 score, with its split, stands under it."""
    if rec is None:
        return
    terms, profile, n, avglen, df, split, fused, learnt = args_
    mark = "  [%s]" % status if status else ""
    if fused:
        # (A skill the message names from beyond the fused ranking has no
        # fused score: decide.choose took it by its name.)
        score = "no fused score" if c.get("cos") is None else "fused score %.3f, cosine %.3f" % (c["score"], c["cos"])
        w("#%d %s (%s)  %s%s\n" % (rank, one_line(rec["name"]), one_line(rec["id"]), score, mark))
        w("  BM25 score %.3f, by term:\n" % c["bm25"])
    else:
        w("#%d %s (%s)  score %.3f%s\n" % (rank, one_line(rec["name"]), one_line(rec["id"]), c["bm25"], mark))
    fields = breakdown(rec, terms, profile, n, avglen, df)
    parts = [(t, split[t][c["n"]]) for t in terms if t in split and c["n"] in split[t]]
    for t, part in sorted(parts, key=lambda tp: -tp[1]):
        f = fields.get(t, {}).get("fields") or {}
        whole = sum(f.values())
        by_field = ", ".join("%s %.2f" % (k, part * v / whole) for k, v in sorted(f.items(), key=lambda kv: -kv[1]))
        w("    %-18s %6.3f  (%s)\n" % (t, part, by_field or "fields not found"))
    if learnt.get(c["n"]):
        # What the agent's loads after like prompts added (retriever.learn).
        part = learnt[c["n"]]
        w("    %-18s %6.3f  (%.0f%% of the score; SKILL_RETRIEVAL_LEARN=off or stats --forget drops it)\n"
          % ("learnt from loads", part, 100.0 * part / c["bm25"] if c["bm25"] else 0.0))
    w("\n")
