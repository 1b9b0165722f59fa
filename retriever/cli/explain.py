"""``skill-retrieve explain``: why skills rank where they do.

For users tuning their descriptions.  Re-reads the indexed skills (build
path) to split each result's score by query term and by field, and, with
``--skill``, says why a named skill is missing from the list.  Uses the same
analyzer, weights and IDF as the index, so the numbers add up to the scores
``--format json`` prints (up to float32 rounding).
"""

import sys

from retriever.cli.commands import k_type
from retriever.render import one_line


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


def run(args):
    """Print the explanation; returns the exit code."""
    from retriever import build, query, service, settings, skills, store
    from retriever.service import query_text
    text = query_text(args.words)
    top_k, inject_k = settings.limits(args.k)
    idx, path = service.open_index({"roots": args.root, "index": args.index, "platform": args.platform})
    hdr = idx["header"]
    profile = {"k1": hdr["params"]["k1"], "fields": hdr["params"]["fields"],
               "analyzer": hdr["params"]["analyzer"]}
    terms = query.query_terms(idx, text)
    results = query.search(idx, text, top_k, min_score=0, min_ratio=0)
    injected = query.search(idx, text, top_k)[:inject_k]
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
    unknown = [t for t in terms if t not in df]
    if unknown:
        w("not in any skill: %s\n" % " ".join(unknown))
    acc, found = query.score(idx, terms)
    ms, mr = query.min_score_setting(), query.min_ratio_setting()
    conf = None
    if acc:
        best = query.top(acc, 1)[0][0]
        conf = query.confidence(idx, found, best, query.n_scored(terms, found))
        # Say what the number counts: a CJK query whose pairs match nothing
        # but one word is "fully covered" only in the terms that count.
        skipped = [t for t in unknown if query.is_cjk_token(t)]
        w("confidence %.2f: the share of the counted query terms the best skill covers (%d in some skill, "
          "%d in none)%s; threshold %.2f: %s\n"
          % (conf, len(found), len(unknown) - len(skipped),
             "; not counted: %d CJK pair(s) in no skill (most pairs in a sentence are not words)"
             % len(skipped) if skipped else "", ms, "injected" if injected else "abstains, nothing is injected"))
    printed = set(r["id"] for r in injected)
    w("%d listed, %d injected%s\n" % (len(results), len(injected),
                                      "; each other one is marked with the rule that cut it" if
                                      len(results) > len(injected) else ""))
    w("\n")
    from retriever import semantic
    semantic.explain(idx, path, text, top_k, w)
    shown = set()
    for rank, r in enumerate(results, 1):
        shown.add(r["id"])
        status = "injected" if r["id"] in printed else _cut_rule(rank, r, results, conf, ms, mr, inject_k, text)
        _explain_one(w, rank, r["score"], by_id.get(r["id"]), terms, profile, n, avglen, df, status)
    for want in args.skill:
        rec = by_id.get(want) or by_name.get(want)
        if rec is None:
            w("%s: no such skill in this index (ids look like %s)\n"
              % (want, recs[0]["id"] if recs else "category/skill"))
            continue
        if rec["id"] in shown:
            continue
        contrib = breakdown(rec, terms, profile, n, avglen, df)
        total = sum(c["total"] for c in contrib.values())
        if not contrib:
            w("%s (%s) is not listed: it shares no term with the query. Words from the query that would "
              "match it must appear in its name, description, triggers, tags or body.\n"
              % (one_line(rec["name"]), one_line(rec["id"])))
            continue
        full = query.search(idx, text, 1000, min_score=0, min_ratio=0)
        pos = next((i for i, r in enumerate(full, 1) if r["id"] == rec["id"]), None)
        w("%s (%s) is not listed: it ranks %s with score %.3f; the last listed scores %.3f.\n"
          % (one_line(rec["name"]), one_line(rec["id"]), "#%d" % pos if pos else "below the cut", total,
             results[-1]["score"] if results else 0.0))
        _explain_one(w, pos or 0, total, rec, terms, profile, n, avglen, df)
    return 0


def _cut_rule(rank, r, results, conf, ms, mr, inject_k, text):
    """Why ranked result ``r`` is not injected, in the order the cuts apply."""
    from retriever import query
    if ms > 0 and query.is_chitchat(text):
        return "cut: small talk, nothing is injected"
    if ms > 0 and conf is not None and conf < ms:
        return "cut: abstention (confidence %.2f < SKILL_RETRIEVAL_MIN_SCORE %.2f)" % (conf, ms)
    floor = results[0]["score"] * mr
    if r["score"] < floor:
        return ("cut: under SKILL_RETRIEVAL_MIN_SCORE_RATIO (%.3f < %.2f x best = %.3f)"
                % (r["score"], mr, floor))
    if rank > inject_k:
        return "cut: beyond the %d injected (-k or SKILL_RETRIEVAL_INJECT_K)" % inject_k
    return "cut"


def _explain_one(w, rank, score, rec, terms, profile, n, avglen, df, status=""):
    if rec is None:
        return
    w("#%d %s (%s)  score %.3f%s\n" % (rank, one_line(rec["name"]), one_line(rec["id"]), score,
                                      "  [%s]" % status if status else ""))
    contrib = breakdown(rec, terms, profile, n, avglen, df)
    for t, c in sorted(contrib.items(), key=lambda kv: -kv[1]["total"]):
        fields = ", ".join("%s %.2f" % (f, v) for f, v in sorted(c["fields"].items(), key=lambda kv: -kv[1]))
        w("    %-18s %6.3f  (%s)\n" % (t, c["total"], fields))
    w("\n")
