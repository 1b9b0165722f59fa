"""make eval: retrieval quality on the skill authors' own trigger queries.

Reads ../shared/eval/external/*/normalized.jsonl, builds real indexes of
../shared/corpora with the real build code, queries them with the real
query code, and prints one table comparing the seed-style configuration with
the shipped default in the same run.  A JSON report is saved so the next
change can be compared with this one (``--compare`` prints the deltas).

Settings:
  own    each query ranked against its own collection
  mixed  every query ranked against the union of 12 collections (1,098 skills)

Rows: seed-style, shipped (BM25) and, when the semantic extra is installed,
shipped + semantic (fused in process); query sets: the external rows, the
project's CJK queries and eval/multilingual_queries.jsonl (zh/ja/ko/es/de/fr);
then what is injected at the defaults, and the session development set
replayed through the hook (eval/sessions.py).
"""

import argparse
import glob
import json
import math
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)

from retriever import build, query, store  # noqa: E402

sys.path.insert(0, HERE)
from library import (MIXED, SHARED, build_index, load_jsonl, semantic_provider,  # noqa: E402,F401
                     skill_id as _skill_id, with_vectors)

CJK_QUERIES = os.path.join(HERE, "cjk_queries.jsonl")
MULTILINGUAL_QUERIES = os.path.join(HERE, "multilingual_queries.jsonl")


def load_rows(eval_dir):
    """Every labelled row of every source, with its source folder."""
    rows = []
    for path in sorted(glob.glob(os.path.join(eval_dir, "*", "normalized.jsonl"))):
        src = os.path.basename(os.path.dirname(path))
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    r = json.loads(line)
                    r["source"] = src
                    rows.append(r)
    return rows


def matches(result, names):
    """A result counts as a hit when its name or folder is an expected name."""
    folder = result["id"].rsplit("/", 1)[-1].split(":")[-1]
    return result["name"] in names or folder in names


def metrics_for(ranked_lists, expected_lists):
    """Recall@1/3/5, MRR@10 and nDCG@10 over queries with expected names."""
    r1 = r3 = r5 = mrr = ndcg = 0.0
    n = len(ranked_lists)
    for ranked, exp in zip(ranked_lists, expected_lists):
        ranks = [i for i, r in enumerate(ranked[:10]) if matches(r, exp)]
        first = ranks[0] if ranks else None
        if first is not None:
            r1 += first < 1
            r3 += first < 3
            r5 += first < 5
            mrr += 1.0 / (first + 1)
        dcg = sum(1.0 / math.log2(i + 2) for i in ranks)
        ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(exp), 10)))
        ndcg += dcg / ideal if ideal else 0.0
    if not n:
        return {}
    return {"R@1": r1 / n, "R@3": r3 / n, "R@5": r5 / n, "MRR@10": mrr / n, "nDCG@10": ndcg / n, "n": n}


def evaluate(rows, idx_for_row, inject_k, decide=True, provider=None):
    """Score one configuration over ``rows``; returns a metrics dict.
    With a semantic ``provider`` the ranking is the fused one; ``decide``
    False injects the top ``inject_k`` (the seed-style rows)."""
    if provider is not None:
        from retriever import semantic

        def search(idx, text, k, decide=True):
            return semantic.search(idx, idx["_path"], text, k, provider, decide=decide)[0]
    else:
        def search(idx, text, k, decide=True):
            return query.search(idx, text, k, decide=decide)
    pos_ranked, pos_exp, lat = [], [], []
    neg_silent = neg_total = wrong = wrong_total = 0
    injected_sizes = []
    instead_ranked, instead_exp = [], []
    pos_abstained = 0
    for r in rows:
        idx = idx_for_row(r)
        t0 = time.perf_counter()
        ranked = search(idx, r["query"], 10, decide=False)
        injected = search(idx, r["query"], inject_k, decide=decide)
        lat.append((time.perf_counter() - t0) * 1000 / 2)
        if r["should_trigger"] is True:
            injected_sizes.append(len(injected))
            pos_ranked.append(ranked)
            pos_exp.append(set(r["expected_skills"]))
            pos_abstained += not injected
        elif r["should_trigger"] is False:
            wrong_total += 1
            if r.get("target_skill") and any(matches(x, {r["target_skill"]}) for x in injected):
                wrong += 1
            if r["expected_skills"]:
                instead_ranked.append(ranked)
                instead_exp.append(set(r["expected_skills"]))
            else:
                neg_total += 1
                neg_silent += not injected
    m = metrics_for(pos_ranked, pos_exp)
    m["pos abstained"] = pos_abstained / max(1, len(pos_ranked))
    m["mean injected"] = sum(injected_sizes) / max(1, len(injected_sizes))
    m["neg silent"] = neg_silent / neg_total if neg_total else float("nan")
    m["neg n"] = neg_total
    m["wrong injected"] = wrong / wrong_total if wrong_total else float("nan")
    m["instead R@5"] = metrics_for(instead_ranked, instead_exp).get("R@5", float("nan"))
    m["latency ms p50"] = statistics.median(lat) if lat else 0.0
    m["latency ms p95"] = sorted(lat)[int(0.95 * (len(lat) - 1))] if lat else 0.0
    return m


def run(args):
    rows = load_rows(args.eval_dir)
    corpora = args.corpora
    cache = args.cache or tempfile.mkdtemp(prefix="skill-eval-")
    os.makedirs(cache, exist_ok=True)
    profiles = ["seed", "default"]
    report = {"when": time.strftime("%Y-%m-%dT%H:%M:%S"), "rows": len(rows), "results": {}}
    own_roots = lambda c: [os.path.join(corpora, c)]
    mixed_roots = [os.path.join(corpora, c) for c in MIXED]
    cjk = load_cjk()
    multi = load_jsonl(MULTILINGUAL_QUERIES)
    for profile in profiles:
        # seed-style had no abstention; the default decides (retriever/decide.py)
        decide = profile != "seed"
        own = {}
        def idx_own(r, profile=profile):
            c = r["corpus"]
            if c not in own:
                own[c] = build_index(own_roots(c), profile, cache)
            return own[c]
        mixed_idx = build_index(mixed_roots, profile, cache)
        res = {
            "own": evaluate(rows, idx_own, args.inject_k, decide),
            # Rows whose collection is not in the union (ondata, dotnet-artisan-9)
            # have no right answer there, so they are left out of mixed.
            "mixed": evaluate([r for r in rows if r["corpus"] in MIXED], lambda r: mixed_idx,
                              args.inject_k, decide),
        }
        # Task prompts with expected skills but no trigger label were never
        # used for tuning: a small held-out check.
        held = [dict(r, should_trigger=True) for r in rows
                if r["should_trigger"] is None and r["expected_skills"]]
        if held:
            res["own held-out"] = evaluate(held, idx_own, args.inject_k, decide)
        if cjk:
            res["mixed CJK"] = evaluate(cjk, lambda r: mixed_idx, args.inject_k, decide)
        if multi:
            res["multilingual"] = evaluate(multi, lambda r: mixed_idx, args.inject_k, decide)
        report["results"][profile] = res
    provider = semantic_provider(args)
    if provider is not None:
        # The semantic tier on the shipped profile: the same rows, fused.
        own_idx = {}

        def idx_own_sem(r):
            c = r["corpus"]
            if c not in own_idx:
                own_idx[c] = with_vectors(provider, build_index(own_roots(c), "default", cache))
            return own_idx[c]
        mixed_idx = with_vectors(provider, build_index(mixed_roots, "default", cache))
        res = {
            "own": evaluate(rows, idx_own_sem, args.inject_k, True, provider),
            "mixed": evaluate([r for r in rows if r["corpus"] in MIXED], lambda r: mixed_idx,
                              args.inject_k, True, provider),
        }
        if cjk:
            res["mixed CJK"] = evaluate(cjk, lambda r: mixed_idx, args.inject_k, True, provider)
        if multi:
            res["multilingual"] = evaluate(multi, lambda r: mixed_idx, args.inject_k, True, provider)
        report["results"]["semantic"] = res
        report["n_mixed_skills"] = mixed_idx["header"]["n_docs"]
    report["decision"] = {"bm25": decision_rows(rows, cache, None)}
    if provider is not None:
        report["decision"]["semantic"] = decision_rows(rows, cache, provider)
    report["sessions"], report["ceiling"] = session_rows(cache, provider)
    report["day"] = day_rows(cache, provider)
    print_table(report)
    print_decision(report["decision"])
    print("\nSessions replayed through the hook (../shared/eval/sessions; eval/sessions.py):")
    import sessions
    sessions.print_rows(report["sessions"])
    if report["ceiling"]:
        print("\nThe ranking's ceiling on those sessions: a perfect gate that injects the ranking's first k on every "
              "task turn and nothing on the others (eval/sessions.py ceiling); a budget above it needs a better ranking:")
        sessions.print_rows(report["ceiling"], sessions.CEILING_COLS)
    if report["day"]:
        print("\nThe first prompt of a session: the sessions above as one day, each after a break longer than "
              "the helper's lifetime (modelled: eval/sessions.py day):")
        sessions.print_rows({"day": report["day"]}, sessions.DAY_COLS)
    report["learning"] = learning_rows(cache, provider)
    if report["learning"]:
        print("\nLearning from loads: week one = the sessions above with an agent loading a relevant skill "
              "after each task turn, week two = eval/second_week.jsonl (eval/learning.py):")
        sessions.print_rows(report["learning"])
    out = args.report
    prev = None
    if os.path.exists(out):
        with open(out, encoding="utf-8") as f:
            prev = json.load(f)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
    if prev:
        print_deltas(prev, report)
    print("\nreport saved to %s" % os.path.relpath(out))
    return 0


def load_cjk():
    """The CJK query set written for this project (queries in Chinese,
    Japanese and Korean for skills of the mixed corpus)."""
    if not os.path.exists(CJK_QUERIES):
        return []
    with open(CJK_QUERIES, encoding="utf-8") as f:
        return [json.loads(l) for l in f if l.strip()]


TURNS = os.path.join(SHARED, "eval", "turns", "dev.jsonl")
CALIBRATION = os.path.join(HERE, "calibration", "turns.jsonl")


def injected_at_defaults(idx, text, provider):
    """What a user gets for ``text``: the decision at the default TOP_K and
    INJECT_K, with the tier when ``provider`` is given."""
    from retriever import semantic, settings
    top_k, inject_k = settings.limits()
    if provider is not None:
        return semantic.search(idx, idx["_path"], text, top_k, provider)[0][:inject_k]
    return query.search(idx, text, top_k)[:inject_k]


def decision_metrics(rows, idx_for_row, provider, relevant):
    """What enters the prompt, over ``rows``: task turns (``relevant(row,
    result)`` says whether a result serves the row) and turns that need
    no skill (no relevant skill exists)."""
    from retriever import render
    task = inj_task = right = hit = 0
    neg = silent = inj_neg = 0
    chars = 0
    for r in rows:
        inj = injected_at_defaults(idx_for_row(r), r["query"], provider)
        chars += len(render.text_block(inj))
        if r["_task"]:
            task += 1
            inj_task += len(inj)
            good = sum(1 for x in inj if relevant(r, x))
            right += good
            hit += good > 0
        else:
            neg += 1
            silent += not inj
            inj_neg += len(inj)
    nan = float("nan")
    return {"task turns": task, "relevant injected": hit / task if task else nan,
            "per task turn": inj_task / task if task else nan, "relevant share": right / inj_task if inj_task else nan,
            "no-skill turns": neg, "no-skill silent": silent / neg if neg else nan,
            "per no-skill turn": inj_neg / neg if neg else nan, "chars per turn": chars / max(1, len(rows))}


def decision_rows(rows, cache, provider):
    """The decision tables: ../shared/eval/turns, the external rows on the
    mixed corpus and each on its own collection (libraries of 3 to 1,050
    skills), the multilingual and CJK queries, and the calibration turns
    (in sample: the decision was fitted on them)."""
    corpora = os.path.join(SHARED, "corpora")
    mixed = build_index([os.path.join(corpora, c) for c in MIXED], "default", cache)
    if provider is not None:
        with_vectors(provider, mixed)
    own = {}

    def idx_own(r):
        c = r["corpus"]
        if c not in own:
            own[c] = build_index([os.path.join(corpora, c)], "default", cache)
            if provider is not None:
                with_vectors(provider, own[c])
        return own[c]

    def by_id(r, x):
        return _skill_id(x["path"]) in r["relevant"]

    def by_name(r, x):
        return matches(x, set(r["expected_skills"]))

    out = {}
    turns = [dict(r, _task=bool(r["relevant"])) for r in load_jsonl(TURNS)]
    if turns:
        out["turns (dev)"] = decision_metrics(turns, lambda r: mixed, provider, by_id)
    ext = [dict(r, _task=r["should_trigger"] is True) for r in rows
           if r["should_trigger"] is True or (r["should_trigger"] is False and not r["expected_skills"])]
    out["external, mixed"] = decision_metrics([r for r in ext if r["corpus"] in MIXED], lambda r: mixed,
                                              provider, by_name)
    out["external, own collection"] = decision_metrics(ext, idx_own, provider, by_name)
    multi = [dict(r, _task=True) for r in load_jsonl(MULTILINGUAL_QUERIES) if r.get("should_trigger") is True]
    if multi:
        out["multilingual"] = decision_metrics(multi, lambda r: mixed, provider, by_name)
    cjk = [dict(r, _task=True) for r in load_cjk()]
    if cjk:
        out["CJK"] = decision_metrics(cjk, lambda r: mixed, provider, by_name)
    import plain
    for half, name in (("held", "plain requests, held-out half"), ("fit", "plain requests, fit half (in sample)")):
        rows_ = [dict(r, corpus=r["library"], _task=r["kind"] == "task") for r in plain.half(half)]
        out[name] = decision_metrics(rows_, idx_own, provider, by_id)
    cal = [dict(r, _task=bool(r["relevant"])) for r in load_jsonl(CALIBRATION)]
    if cal:
        out["calibration (in sample)"] = decision_metrics(cal, lambda r: mixed, provider, by_id)
    return out


def session_rows(cache, provider):
    """The session development set's rows (``eval/sessions.py``), BM25
    alone and, with ``provider``, tier on: ``{tier: [(row, figures)]}``,
    and the ranking's ceiling (``sessions.ceiling``) in the same shape."""
    import sessions
    rows = load_jsonl(sessions.SESSIONS)
    if not rows:
        return {}, {}
    out, ceilings = {}, {}
    for tier, p in (("bm25", None),) + ((("semantic", provider),) if provider is not None else ()):
        records = sessions.replay_sessions(sessions.mixed_index(cache, p), rows, p)
        out[tier] = sessions.report(records)
        ceilings[tier] = sessions.ceiling(records)
    return out, ceilings


def day_rows(cache, provider):
    """The "first prompt of a session" rows (``sessions.day_rows``); [] without the tier."""
    import sessions
    rows = load_jsonl(sessions.SESSIONS)
    if not rows or provider is None:
        return []
    return sessions.day_rows(sessions.mixed_index(cache, provider), rows, provider)


def learning_rows(cache, provider):
    """The second week's rows (``learning.tier_rows``)."""
    import learning
    return learning.tier_rows(cache, provider)


DCOLS = ["task turns", "relevant injected", "per task turn", "relevant share", "no-skill turns",
         "no-skill silent", "per no-skill turn", "chars per turn"]


def print_decision(tables):
    print("\nWhat is injected at the defaults (TOP_K 6, the calibrated decision; docs/decision.md):")
    print("| query set | tier | " + " | ".join(DCOLS) + " |")
    print("|" + "---|" * (2 + len(DCOLS)))
    for tier, table in tables.items():
        for name, m in table.items():
            cells = []
            for c in DCOLS:
                v = m.get(c)
                cells.append("-" if v is None or (isinstance(v, float) and v != v) else
                             str(v) if isinstance(v, int) else "%.0f" % v if c == "chars per turn" else
                             "%.2f" % v if c.startswith("per") else "%.3f" % v)
            print("| %s | %s | %s |" % (name, tier, " | ".join(cells)))


COLS = ["R@1", "R@3", "R@5", "MRR@10", "nDCG@10", "neg silent", "wrong injected",
        "pos abstained", "mean injected", "instead R@5", "latency ms p50"]


def print_table(report):
    print("Retrieval quality on ../shared/eval/external (positives: should_trigger=true; "
          "mixed = %d skills from 12 collections)" % report.get("n_mixed_skills", 0))
    head = "| setting | config | n | " + " | ".join(COLS) + " |"
    print(head)
    print("|" + "---|" * (3 + len(COLS)))
    settings = []
    for prof, res in report["results"].items():
        for s in res:
            if s not in settings:
                settings.append(s)
    for s in settings:
        for prof, res in report["results"].items():
            m = res.get(s)
            if not m:
                continue
            cells = []
            for c in COLS:
                v = m.get(c)
                cells.append("-" if v is None or (isinstance(v, float) and v != v) else
                             ("%.2f" % v if "latency" in c or "mean" in c else "%.3f" % v))
            label = {"seed": "seed-style", "semantic": "shipped + semantic"}.get(prof, "shipped")
            print("| %s | %s | %s | %s |" % (s, label, m.get("n", "-"), " | ".join(cells)))


def print_deltas(prev, cur):
    print("\nchange against the previous report (%s):" % prev.get("when"))
    for prof, res in cur["results"].items():
        for s, m in res.items():
            p = prev.get("results", {}).get(prof, {}).get(s)
            if not p:
                continue
            d = ["%s %+.3f" % (c, m[c] - p[c]) for c in ("R@1", "R@5", "MRR@10", "neg silent")
                 if c in m and c in p and isinstance(m[c], float) and m[c] == m[c] and p[c] == p[c]]
            print("  %-9s %-8s %s" % (s, prof, ", ".join(d)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--eval-dir", default=os.path.join(SHARED, "eval", "external"))
    ap.add_argument("--corpora", default=os.path.join(SHARED, "corpora"))
    ap.add_argument("--cache", help="folder for the built indexes (default: a new temp folder)")
    ap.add_argument("--inject-k", type=int, default=6)
    ap.add_argument("--report", default=os.path.join(REPO, ".cache", "eval-report.json"))
    ap.add_argument("--no-semantic", action="store_true", help="skip the semantic tier's rows")
    args = ap.parse_args(argv)
    os.makedirs(os.path.dirname(args.report), exist_ok=True)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
