"""make calibrate: learn the decision of what to inject (retriever/decide.py).

Reads the hand-written calibration turns (eval/calibration/turns.jsonl,
independent of ../shared/eval), then the fit half of the plain-requests
set (eval/plain.py; each of its turns over its own library, the others
over the mixed corpus), and writes, exactly reproducibly:

1. retriever/semantic/no_skill_turns.txt: the bank of turns that need no
   skill, the text the encoder reads of each;
2. eval/calibration/features.jsonl: every turn's candidates and their
   features, computed by the product itself (``decide.choose`` fills
   ``explain``: the trainer never re-derives a feature), over the mixed
   corpus of ../shared/corpora, tier off (BM25) and tier on (fused);
3. the block between the "calibrated" markers at the end of
   retriever/decide.py: both models' weights and thresholds.

``--fit-only`` skips 1 and 2 and refits from the shipped features (what
tests/test_decide.py checks: the shipped weights are this fit's).

The fit is plain Python (Newton's method on an L2-penalised logistic
loss, fixed iterations, weights rounded to 4 places), so it gives the same
numbers on any machine.  Thresholds follow from out-of-fold predictions
and fixed targets, not from any evaluation set: the gate's is the lowest
that keeps 90% of the no-skill turns silent (85% for BM25 alone); the
second model's the lowest that keeps to 1.6 skills per task turn with 65%
of them relevant (the budgets are 2.0 and 60%: a margin for new data).
The no-skill likeness of a calibration turn is computed against the bank
without that turn's own fold, so no turn sees itself.

Validation, printed at the end: leave one collection out (the second
model and the gate refitted without the task turns of that collection,
scored on them), so the figures say how the decision carries to topics
it was not fitted on.  The held-out sets of ../shared/eval are scored by
``make eval``, never here.
"""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)
sys.path.insert(0, HERE)

TURNS = os.path.join(HERE, "calibration", "turns.jsonl")
FEATURES = os.path.join(HERE, "calibration", "features.jsonl")
BANK = os.path.join(REPO, "retriever", "semantic", "no_skill_turns.txt")
DECIDE = os.path.join(REPO, "retriever", "decide.py")
FOLDS = 5
L2 = 1.0
ITERATIONS = 30
GRID = [round(0.01 * i, 2) for i in range(1, 100)]
# No-skill turns left silent: with the encoder, nine in ten; BM25 alone
# cannot tell "sounds good" from a request as well, and at nine in ten it
# would also silence a third more of the requests (make calibrate prints it).
SILENT_TARGET = {"fused": 0.90, "bm25": 0.85}
PER_TASK = 1.6             # skills injected per task turn, at most
PRECISION = 0.65           # share of the injected skills that are relevant, at least


def load_turns(path=TURNS, plain_rows=None):
    """The calibration turns, in file order, then the fit half of the
    plain-requests set (``eval/plain.py``; ``plain_rows`` to give them):
    plain requests and chat turns over one real library each (their
    ``library``), which the models must also get right.  Its held-out
    half is never read here."""
    import plain
    with open(path, encoding="utf-8") as f:
        turns = [json.loads(line) for line in f if line.strip()]
    return turns + (plain.half("fit") if plain_rows is None else plain_rows)


def fold_of(i):
    """The fold of the i-th turn (fixed: the file's order)."""
    return i % FOLDS


# ------------------------------------------------------------ the features


def write_bank(turns):
    """The no-skill turns, as the encoder reads them, one a line."""
    from retriever.semantic import encoder_text
    lines = [" ".join(encoder_text(t["query"]).split()) for t in turns if t["kind"] != "task"]
    with open(BANK, "w", encoding="utf-8") as f:
        f.write("# Turns that need no skill (eval/calibration/turns.jsonl); written by `make calibrate`.\n")
        for line in lines:
            f.write(line + "\n")
    return lines


def skill_id(path):
    """A result's skill id as the calibration labels spell it: its folder
    relative to the corpora folder."""
    p = path.rsplit("/SKILL.md", 1)[0]
    return p.split("/corpora/", 1)[-1]


class _WithChat:
    """``provider``'s cosines, with the no-skill likeness ``chat`` measured
    against the turn's out-of-fold bank instead of the shipped one."""

    def __init__(self, provider, chat):
        self.provider, self.chat = provider, chat

    def begin(self, index_path, idx, text=None):
        session = self.provider.begin(index_path, idx)

        def cosines(text, candidates):
            from retriever import semantic
            cos = session(text, candidates)
            cos[semantic.CHAT] = self.chat
            return cos
        return cosines


def compute_features(turns, corpora, cache):
    """Every turn's candidates and features, BM25 and fused."""
    import numpy as np
    import run_eval
    from retriever import query, semantic
    from retriever.semantic import embed, encoder_text, inproc
    provider = inproc.Provider(max_indexes=4)
    indexes = {}

    def index_of(t):
        # The mixed corpus, or the one library a plain request is about.
        roots = [t["library"]] if t.get("library") else run_eval.MIXED
        key = tuple(roots)
        if key not in indexes:
            idx = run_eval.build_index([os.path.join(corpora, c) for c in roots], "default", cache)
            if not provider.wait(idx["_path"], idx, timeout=1800):
                raise SystemExit("calibrate: the model or the vectors did not load (%s)" % provider.status)
            indexes[key] = idx
        return indexes[key]
    # Each fold's bank leaves that fold's own no-skill turns out.
    texts = [" ".join(encoder_text(t["query"]).split()) for t in turns]
    vecs = np.asarray(embed.encode(texts), dtype=np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    no_skill = [i for i, t in enumerate(turns) if t["kind"] != "task"]
    out = []
    for i, t in enumerate(turns):
        bank = vecs[[j for j in no_skill if fold_of(j) != fold_of(i)]]
        fold = _WithChat(provider, float(np.sort(bank @ vecs[i])[-3:].mean()))
        row = {"id": t["id"], "kind": t["kind"], "fold": fold_of(i), "relevant": t["relevant"]}
        idx = index_of(t)
        for mode in ("bm25", "fused"):
            info = {}
            if mode == "bm25":
                query.search(idx, t["query"], 6, explain=info)
            else:
                semantic.search(idx, idx["_path"], t["query"], 6, fold, explain=info)
            row[mode] = [{"id": skill_id(c["path"]), "x": c["x"]} for c in info.get("cands", [])]
        out.append(row)
    return out


# ----------------------------------------------------------------- the fit


def _sigmoid(z):
    import math
    return 1.0 / (1.0 + math.exp(-z)) if z > -40 else 0.0


def _solve(a, b):
    # Gaussian elimination with partial pivoting (a: n x n, b: n).
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[p] = m[p], m[c]
        for r in range(c + 1, n):
            f = m[r][c] / m[c][c]
            for k in range(c, n + 1):
                m[r][k] -= f * m[c][k]
    x = [0.0] * n
    for r in range(n - 1, -1, -1):
        x[r] = (m[r][n] - sum(m[r][k] * x[k] for k in range(r + 1, n))) / m[r][r]
    return x


def fit(xs, ys):
    """Logistic regression weights (the first feature is the bias, not
    penalised), rounded to 4 places."""
    d = len(xs[0])
    w = [0.0] * d
    for _ in range(ITERATIONS):
        h = [[0.0] * d for _ in range(d)]
        g = [0.0] * d
        for x, y in zip(xs, ys):
            p = _sigmoid(sum(a * b for a, b in zip(w, x)))
            s = p * (1 - p)
            for i in range(d):
                g[i] += (p - y) * x[i]
                xi = s * x[i]
                row = h[i]
                for j in range(d):
                    row[j] += xi * x[j]
        for i in range(1, d):
            g[i] += L2 * w[i]
            h[i][i] += L2
        step = _solve(h, g)
        w = [a - b for a, b in zip(w, step)]
    return [round(v, 4) for v in w]


def _p(w, x):
    return _sigmoid(sum(a * b for a, b in zip(w, x)))


def gate_data(rows, mode):
    """(features, label) of each turn with a candidate: does it need a skill."""
    return [(r[mode][0]["x"], 1.0 if r["kind"] == "task" else 0.0) for r in rows if r[mode]]


def more_data(rows, mode):
    """(features, label) of every further candidate of the task turns."""
    return [(c["x"], 1.0 if c["id"] in r["relevant"] else 0.0)
            for r in rows if r["kind"] == "task" for c in r[mode][1:]]


def fit_mode(rows, mode):
    """Both models for ``mode`` and their thresholds (see the docstring)."""
    xs, ys = zip(*gate_data(rows, mode))
    gate = fit(xs, ys)
    xs, ys = zip(*more_data(rows, mode))
    more = fit(xs, ys)
    # Out-of-fold probabilities choose the thresholds.
    pg, pm = {}, {}
    for f in range(FOLDS):
        train = [r for r in rows if r["fold"] != f]
        xs, ys = zip(*gate_data(train, mode))
        g = fit(xs, ys)
        xs, ys = zip(*more_data(train, mode))
        m = fit(xs, ys)
        for r in rows:
            if r["fold"] == f and r[mode]:
                pg[r["id"]] = _p(g, r[mode][0]["x"])
                pm[r["id"]] = [_p(m, c["x"]) for c in r[mode][1:]]
    neg = [r for r in rows if r["kind"] != "task"]
    target = SILENT_TARGET[mode]
    tg = next((t for t in GRID if sum(pg.get(r["id"], 0.0) < t for r in neg) >= target * len(neg)), GRID[-1])
    # The lowest threshold for further skills that keeps both the count
    # and the share of relevant skills within the targets.
    task = [r for r in rows if r["kind"] == "task"]
    tm = GRID[-1]
    for t in GRID:
        n = right = 0
        for r in task:
            if not r[mode] or pg[r["id"]] < tg:
                continue
            picked = [r[mode][0]] + [c for c, p in zip(r[mode][1:], pm[r["id"]]) if p >= t]
            n += len(picked)
            right += sum(c["id"] in r["relevant"] for c in picked)
        if n <= PER_TASK * len(task) and right >= PRECISION * n:
            tm = t
            break
    return {"gate": gate, "gate_threshold": tg, "more": more, "more_threshold": tm}


def decide_turn(model, cands):
    """What the shipped rule injects of ``cands`` (as decide.choose)."""
    if not cands or _p(model["gate"], cands[0]["x"]) < model["gate_threshold"]:
        return []
    return [cands[0]] + [c for c in cands[1:] if _p(model["more"], c["x"]) >= model["more_threshold"]]


def scores(rows, mode, model):
    """Turn figures: relevant injected, skills per task turn, precision,
    no-skill turns silent."""
    task = [r for r in rows if r["kind"] == "task"]
    neg = [r for r in rows if r["kind"] != "task"]
    hit = n = right = 0
    for r in task:
        inj = decide_turn(model, r[mode])
        hit += any(c["id"] in r["relevant"] for c in inj)
        n += len(inj)
        right += sum(c["id"] in r["relevant"] for c in inj)
    silent = sum(not decide_turn(model, r[mode]) for r in neg)
    return {"relevant injected": hit / max(1, len(task)), "per task turn": n / max(1, len(task)),
            "precision": right / max(1, n), "no-skill silent": silent / max(1, len(neg)), "turns": len(rows)}


def collection(skill):
    return skill.split("/", 1)[0]


def leave_one_collection_out(rows, mode):
    """Each collection's task turns scored by models fitted without them
    (the no-skill turns stay in training: they belong to no collection)."""
    out = {}
    cols = sorted(set(collection(r["relevant"][0]) for r in rows if r["kind"] == "task" and r["relevant"]))
    for col in cols:
        held = [r for r in rows if r["kind"] == "task" and r["relevant"] and collection(r["relevant"][0]) == col]
        train = [r for r in rows if r not in held]
        out[col] = scores(held, mode, fit_mode(train, mode))
    return out


def write_block(models):
    """Rewrite the calibrated block of retriever/decide.py."""
    with open(DECIDE, encoding="utf-8") as f:
        src = f.read()
    begin = src.index("# BEGIN calibrated")
    end = src.index("# END calibrated")
    block = "# BEGIN calibrated: written by `make calibrate` (eval/calibrate.py); do not edit.\n"
    for name in ("BM25", "FUSED"):
        m = models[name.lower()]
        block += "%s = {\n    \"gate\": %r,\n    \"gate_threshold\": %r,\n    \"more\": %r,\n    \"more_threshold\": %r,\n}\n" % (
            name, m["gate"], m["gate_threshold"], m["more"], m["more_threshold"])
    with open(DECIDE + ".tmp", "w", encoding="utf-8") as f:
        f.write(src[:begin] + block + src[end:])
    os.replace(DECIDE + ".tmp", DECIDE)


def fit_all(rows):
    """Both modes' models from the feature rows."""
    return {mode: fit_mode(rows, mode) for mode in ("bm25", "fused")}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpora", default=os.path.normpath(os.path.join(REPO, "..", "shared", "corpora")))
    ap.add_argument("--cache", default=os.path.join(REPO, ".cache", "calibrate"))
    ap.add_argument("--turns", default=TURNS, help="the calibration turns (default: %(default)s)")
    ap.add_argument("--fit-only", action="store_true", help="refit from eval/calibration/features.jsonl")
    ap.add_argument("--no-validate", action="store_true", help="skip leave-one-collection-out")
    args = ap.parse_args(argv)
    if not args.fit_only:
        turns = load_turns(args.turns)
        write_bank(turns)
        os.makedirs(args.cache, exist_ok=True)
        rows = compute_features(turns, args.corpora, args.cache)
        with open(FEATURES, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, sort_keys=True) + "\n")
    with open(FEATURES, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    models = fit_all(rows)
    write_block(models)
    for mode, m in models.items():
        print("%s: gate threshold %.2f, extra threshold %.2f; in sample: %s" % (
            mode, m["gate_threshold"], m["more_threshold"],
            ", ".join("%s %.3f" % kv for kv in scores(rows, mode, m).items())))
    if not args.no_validate:
        for mode in ("bm25", "fused"):
            print("\nleave one collection out (%s): task turns of the held-out collection" % mode)
            print("| collection | turns | relevant injected | per task turn | precision |")
            print("|---|---|---|---|---|")
            for col, s in leave_one_collection_out(rows, mode).items():
                print("| %s | %d | %.3f | %.2f | %.3f |" % (col, s["turns"], s["relevant injected"],
                                                         s["per task turn"], s["precision"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
