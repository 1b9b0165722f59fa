"""Sweep scoring parameters on the external eval set (development only).

Builds indexes in memory with the real ``retriever.index.build`` (field
terms are cached per analyzer so each setting costs only the weighting) and
scores the eval queries with the same sum-of-weights rule as the query path.
Prints one line per setting: R@1, R@5, MRR@10 for mixed and own.

    .venv/bin/python eval/tune.py body=0,0.2,0.4 name=2,3 k1=1.2,1.5
"""

import itertools
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from retriever import analyze, build, index, skills  # noqa: E402
from run_eval import MIXED, SHARED, load_rows, matches  # noqa: E402

_cache = {}
_orig_field_terms = index.field_terms


def _cached_field_terms(skill, profile):
    key = (skill["id"], skill["path"], repr(sorted(profile["analyzer"].items())), tuple(sorted(profile["fields"])))
    if key not in _cache:
        _cache[key] = _orig_field_terms(skill, profile)
    return _cache[key]


index.field_terms = _cached_field_terms


def collect(roots):
    scope = build.resolve(roots)
    recs, _, _ = skills.collect(scope["roots"], set())
    recs.sort(key=lambda r: r["id"])
    return recs


def evaluate(recs, profile, rows):
    built = index.build(recs, profile)
    post = dict(zip(built["terms"], built["postings"]))
    hits1 = hits5 = mrr = 0.0
    for r in rows:
        acc = {}
        seen = set()
        for t in analyze.analyze(r["query"], profile["analyzer"]):
            if t in seen:
                continue
            seen.add(t)
            for d, w in post.get(t, ()):
                acc[d] = acc.get(d, 0.0) + w
        ranked = sorted(acc.items(), key=lambda x: (-x[1], x[0]))[:10]
        exp = set(r["expected_skills"])
        for i, (d, _) in enumerate(ranked):
            rec = recs[d]
            if matches({"id": rec["id"], "name": rec["name"]}, exp):
                hits1 += i < 1
                hits5 += i < 5
                mrr += 1.0 / (i + 1)
                break
    n = len(rows)
    return hits1 / n, hits5 / n, mrr / n


def main(argv):
    grid = {}
    for a in argv:
        k, _, v = a.partition("=")
        grid[k] = [x for x in v.split(",")]
    rows = [r for r in load_rows(os.path.join(SHARED, "eval", "external")) if r["should_trigger"] is True]
    corpora = os.path.join(SHARED, "corpora")
    mixed_recs = collect([os.path.join(corpora, c) for c in MIXED])
    mixed_rows = [r for r in rows if r["corpus"] in MIXED]
    own_recs = {c: collect([os.path.join(corpora, c)]) for c in sorted({r["corpus"] for r in rows})}
    keys = list(grid)
    for combo in itertools.product(*(grid[k] for k in keys)):
        prof = {"k1": 1.5, "analyzer": dict(index.PROFILES["default"]["analyzer"]),
                "fields": dict(index.PROFILES["default"]["fields"])}
        for k, v in zip(keys, combo):
            if k == "k1":
                prof["k1"] = float(v)
            elif k == "stem":
                prof["analyzer"]["stem"] = v
            elif k == "stop":
                prof["analyzer"]["stopwords"] = int(v)
            elif k.startswith("b_"):
                f = k[2:]
                prof["fields"][f] = (prof["fields"][f][0], float(v))
            else:
                w = float(v)
                if w == 0:
                    prof["fields"].pop(k, None)
                else:
                    prof["fields"][k] = (w, prof["fields"].get(k, (1, 0.75))[1])
        m = evaluate(mixed_recs, prof, mixed_rows)
        own = [0.0, 0.0, 0.0]
        n = 0
        for c, recs in own_recs.items():
            rs = [r for r in rows if r["corpus"] == c]
            o = evaluate(recs, prof, rs)
            for i in range(3):
                own[i] += o[i] * len(rs)
            n += len(rs)
        own = [x / n for x in own]
        print("%-60s mixed R1 %.3f R5 %.3f MRR %.3f | own R1 %.3f R5 %.3f MRR %.3f"
              % (" ".join("%s=%s" % kv for kv in zip(keys, combo)), m[0], m[1], m[2], own[0], own[1], own[2]),
              flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
