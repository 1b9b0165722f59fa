"""Tune the semantic tier's fusion and abstention (issue 16).

Builds the mixed index (and the own indexes) with vectors, then sweeps the
fusion weights and the cosine floor over three query sets: the external
mixed rows, the project's CJK queries and the multilingual queries
(eval/multilingual_queries.jsonl).  Prints R@5 / MRR / negatives silenced
per setting so the constants in retriever/semantic/fuse.py can be checked.

    .venv/bin/python eval/tune_semantic.py [--cache DIR] [--body N]
"""

import argparse
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)
sys.path.insert(0, HERE)

import run_eval  # noqa: E402
from retriever import query  # noqa: E402
from retriever.semantic import embed, fuse, vectors  # noqa: E402


def prepared(rows, idx, mat):
    """Per row: (row, acc, bm_top, coverage, cos over all skills)."""
    import numpy as np
    qv = embed.encode([r["query"] for r in rows])
    out = []
    for r, v in zip(rows, qv):
        terms = query.query_terms(idx, r["query"])
        acc, found = query.score(idx, terms) if terms else ({}, {})
        bm_top = query.top(acc, fuse.BM25_POOL)
        cov = query.confidence(idx, found, bm_top[0][0], query.n_scored(terms, found)) if bm_top else 0.0
        out.append((r, acc, bm_top, cov, np.asarray(mat @ v)))
    return out


def ranked(idx, p, a_hi, a_fg, a_lo, min_cos, k=10):
    r, acc, bm_top, cov, allcos = p
    text = r["query"]
    if fuse.non_latin_share(text) > 0.3:
        a = a_fg
    elif cov < 0.5:
        a = a_lo
    else:
        a = a_hi
    dense = allcos.argsort()[::-1][:fuse.DENSE_POOL]
    cos = {int(d): float(allcos[d]) for d in dense}
    for d, _ in bm_top:
        cos[d] = float(allcos[d])
    fused = fuse.fuse(acc, bm_top, cos, a)
    res = [{"id": store_doc(idx, d)[0], "name": store_doc(idx, d)[1]} for d, _, _ in fused[:k]]
    silent = query.is_chitchat(text) or fuse.abstains(fused, min_cos)
    return res, silent


_DOC = {}


def store_doc(idx, d):
    from retriever import store
    key = (id(idx), d)
    if key not in _DOC:
        _DOC[key] = store.doc(idx, d)
    return _DOC[key]


def score(idx, preps, params, inject_k=6):
    pos_r, pos_e = [], []
    neg = neg_silent = 0
    inj_hits = 0
    for p in preps:
        r = p[0]
        res, silent = ranked(idx, p, *params)
        if r["should_trigger"] is True:
            pos_r.append(res)
            pos_e.append(set(r["expected_skills"]))
            inj = [] if silent else res[:inject_k]
            inj_hits += any(run_eval.matches(x, set(r["expected_skills"])) for x in inj[:5])
        elif r["should_trigger"] is False and not r["expected_skills"]:
            neg += 1
            neg_silent += silent
    m = run_eval.metrics_for(pos_r, pos_e)
    return {"R@5": m.get("R@5", 0), "MRR": m.get("MRR@10", 0),
            "R@5 inj": inj_hits / max(1, len(pos_r)),
            "neg silent": neg_silent / neg if neg else float("nan"), "n": len(pos_r), "neg": neg}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "skill-tune"))
    ap.add_argument("--body", type=int, default=embed.BODY_CHARS)
    args = ap.parse_args()
    embed.BODY_CHARS = args.body
    os.makedirs(args.cache, exist_ok=True)
    rows = run_eval.load_rows(os.path.join(run_eval.SHARED, "eval", "external"))
    mixed_rows = [r for r in rows if r["corpus"] in run_eval.MIXED]
    roots = [os.path.join(run_eval.SHARED, "corpora", c) for c in run_eval.MIXED]
    idx = run_eval.build_index(roots, "default", args.cache)
    path = [os.path.join(args.cache, f) for f in os.listdir(args.cache)
            if f.startswith("default-") and f.endswith(".skr")][0]
    t0 = time.perf_counter()
    mat = vectors.load_for(path, idx["header"])
    if mat is None:
        os.path.exists(vectors.vec_path(path)) and os.unlink(vectors.vec_path(path))
        mat, n = vectors.ensure(path, idx)
        print("embedded %d skills in %.1fs (body %d chars)" % (n, time.perf_counter() - t0, args.body))
    sets = {"mixed": mixed_rows, "cjk": run_eval.load_cjk(),
            "multilingual": [json.loads(l) for l in open(os.path.join(HERE, "multilingual_queries.jsonl"),
                                                           encoding="utf-8")]}
    preps = {k: prepared(v, idx, mat) for k, v in sets.items()}
    grid = []
    fuse.RESCALE = os.environ.get("RESCALE", "1") == "1"
    grid.append((1.0, 1.0, 1.0, 0.0))
    for a_hi in (0.4, 0.5, 0.6, 0.7, 0.8, 0.9):
        for a_fg in (0.2, 0.3):
            for a_lo in (0.3, 0.5, a_hi):
                grid.append((a_hi, a_fg, a_lo, 0.0))
    print("%-24s %s" % ("a_hi a_fg a_lo mincos", "  ".join("%-30s" % k for k in sets)))
    best = []
    for g in grid:
        res = {k: score(idx, p, g) for k, p in preps.items()}
        best.append((res["mixed"]["R@5"] + res["mixed"]["MRR"] + res["cjk"]["R@5"] + res["multilingual"]["R@5"], g, res))
    best.sort(key=lambda x: -x[0])
    for s, g, res in best[:8] + [b for b in best if b[1][0] == 1.0]:
        print("%-24s %s" % (g, "  ".join("R5 %.3f MRR %.3f n%d  " % (res[k]["R@5"], res[k]["MRR"], res[k]["n"]) for k in sets)))
    g0 = best[0][1]
    print("\ncosine floor with", g0[:3])
    for mc in (0.0, 0.15, 0.2, 0.22, 0.25, 0.28, 0.3, 0.33, 0.36, 0.4):
        g = g0[:3] + (mc,)
        res = {k: score(idx, p, g) for k, p in preps.items()}
        print("%.2f  %s" % (mc, "  ".join("%s R5inj %.3f negsil %.2f(%d)" % (k, res[k]["R@5 inj"], res[k]["neg silent"], res[k]["neg"]) for k in sets)))


if __name__ == "__main__":
    main()
