"""Tune the semantic tier's fusion and the embedded text (issue 16).

Builds the mixed index (the 12 collections of ``make eval``'s mixed
setting), embeds its skills once per body length (cached as .npy in the
cache folder), then ranks the three query sets the constants of
retriever/semantic/fuse.py were chosen on (the external mixed rows,
eval/cjk_queries.jsonl, eval/multilingual_queries.jsonl) through the real
``semantic.search`` and ``run_eval.evaluate``, so the figures are the ones
``make eval`` prints, for a grid of BM25 weights:

    ALPHA       BM25's share for a query it covers FULL_COVER or more
    ALPHA_LOW   ... for a query it does not cover at all (the ramp's foot)
    FULL_COVER  the coverage where the ramp reaches ALPHA

Pick settings that lift every set together; a gain on one set alone is a
fit to its queries, and the product is measured on queries it never saw.

    .venv/bin/python eval/tune_semantic.py [--cache DIR] [--body 600,450]
"""

import argparse
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)
sys.path.insert(0, HERE)

import run_eval  # noqa: E402
from retriever.semantic import embed  # noqa: E402

embed.one_blas_thread()  # before numpy is imported

from retriever.semantic import fuse, vectors  # noqa: E402


def matrix(idx, cache, body):
    """The skills' vectors with ``body`` characters of body (cached)."""
    import numpy as np
    f = os.path.join(cache, "mixed-body%d.npy" % body)
    if os.path.exists(f):
        return np.load(f)
    texts = vectors.texts_of(idx, body)
    t0 = time.perf_counter()
    m = embed.encode(texts, embed.workers())
    tok = embed.model()._tokenizer
    n_tok = sum(len(tok.encode(t, out_type=int)) for t in texts)
    print("body %d: %d skills, %d tokens, embedded in %.1fs" % (body, len(texts), n_tok, time.perf_counter() - t0))
    np.save(f, m)
    return m


class Provider:
    """Cosines from a given matrix (query vectors cached): the same
    session shape as ``inproc.Provider``."""

    def __init__(self, mat):
        self.mat = mat
        self.q = {}

    def begin(self, index_path, idx, text=None):
        import numpy as np

        def ask(text, candidates):
            if text not in self.q:
                self.q[text] = embed.encode_query(text)
            allc = self.mat @ self.q[text]
            top = np.argpartition(-allc, fuse.DENSE_POOL)[:fuse.DENSE_POOL]
            out = {int(d): float(allc[d]) for d in top}
            out.update((d, float(allc[d])) for d in candidates)
            return out
        return ask


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "skill-tune"))
    ap.add_argument("--body", default=str(embed.BODY_CHARS), help="body lengths, comma-separated")
    args = ap.parse_args(argv)
    os.makedirs(args.cache, exist_ok=True)
    rows = run_eval.load_rows(os.path.join(run_eval.SHARED, "eval", "external"))
    sets = {"mixed": [r for r in rows if r["corpus"] in run_eval.MIXED],
            "multilingual": run_eval.load_jsonl(run_eval.MULTILINGUAL_QUERIES),
            "CJK": run_eval.load_cjk()}
    idx = run_eval.build_index([os.path.join(run_eval.SHARED, "corpora", c) for c in run_eval.MIXED],
                               "default", args.cache)
    shipped = (fuse.ALPHA, fuse.ALPHA_LOW, fuse.FULL_COVER)
    grid = [shipped] + [(a, lo, full) for a in (0.5, 0.6, 0.7) for lo in (0.15, 0.2, 0.25)
                        for full in (0.6, 0.8, 1.0) if (a, lo, full) != shipped]
    for body in [int(b) for b in args.body.split(",")]:
        p = Provider(matrix(idx, args.cache, body))
        for a, lo, full in grid:
            fuse.ALPHA, fuse.ALPHA_LOW, fuse.FULL_COVER = a, lo, full
            res = {k: run_eval.evaluate(v, lambda r: idx, 6, False, p) for k, v in sets.items()}
            print("body %d a %.2f low %.2f full %.1f%s  %s" % (
                body, a, lo, full, " (shipped)" if (a, lo, full) == shipped else "",
                "  ".join("%s R@5 %.3f MRR %.3f" % (k, m["R@5"], m["MRR@10"]) for k, m in res.items())))
        fuse.ALPHA, fuse.ALPHA_LOW, fuse.FULL_COVER = shipped
    return 0


if __name__ == "__main__":
    sys.exit(main())
