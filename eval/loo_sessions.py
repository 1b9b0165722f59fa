"""Leave one out on the session set: do the session-context settings generalise?

The session memory's settings were chosen on ../shared/eval/sessions:

- ``query.CONTEXT_WEIGHT``: how much the earlier prompts' terms weigh in a
  short turn's ranking;
- ``session.CONTINUES``: when a turn continues the session's work;
- ``semantic.CONTEXT_COS_WEIGHT``: how much the last prompt's cosines weigh
  (tier on only);
- ``query.SKILL_PRIOR``: how much the skills the session was just given
  weigh;
- ``session.RARE_NAME`` (tier on) or ``session.RARE_NAME_BM25`` (BM25
  alone): how rare a message term in a new skill's name must be for the
  turn to ask for that skill (9.0: never).

This replays the set (``sessions.replay_sessions``, tier on unless
``--no-semantic``) once per setting of a small grid, then:

- leave one session out: for each session, the setting that scores best on
  the other eleven is used on it; the held-out turns are pooled;
- leave one collection out: for each collection of the mixed library, the
  setting that scores best on the task turns none of whose relevant skills
  is in it is used on the task turns that have one there; pooled.

The score a fold maximises is the mean of "in context" and "silent" (the
issue's two product targets), Hit@1 breaking ties.  Printed: the shipped
defaults in sample, and the two pooled held-out rows, with how often each
fold picked the shipped setting.
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from retriever import query, semantic, session  # noqa: E402

import run_eval  # noqa: E402
import sessions  # noqa: E402

def knobs(tier):
    """``[(module, name, values)]``: the grid's settings, for the tier on
    (``tier`` True) or BM25 alone."""
    return [(query, "CONTEXT_WEIGHT", (0.0, 0.6, 1.2)), (session, "CONTINUES", (0.5, 0.8))] \
        + ([(semantic, "CONTEXT_COS_WEIGHT", (0.0, 0.6))] if tier else []) \
        + [(query, "SKILL_PRIOR", (0.0, 0.3)),
           (session, "RARE_NAME" if tier else "RARE_NAME_BM25", (0.5, 0.7, 9.0))]


def shipped_setting(tier=True):
    """The shipped setting, as a point of the grid."""
    return tuple(getattr(m, name) for m, name, _ in knobs(tier))


def grid_of(tier):
    """Every point of the grid, and the shipped setting."""
    import itertools
    grid = list(itertools.product(*(values for _, _, values in knobs(tier))))
    shipped = shipped_setting(tier)
    return grid if shipped in grid else grid + [shipped]


def objective(records):
    """What a fold maximises: (mean of in context and silent, Hit@1)."""
    m = sessions.summarize(records)
    vals = [v for v in (m["in context"], m["silent"]) if v == v]
    return (sum(vals) / len(vals) if vals else 0.0, m["Hit@1"] if m["Hit@1"] == m["Hit@1"] else 0.0)


def replay_grid(idx, rows, provider, grid):
    """``{setting: records}`` over ``grid`` (the module values restored)."""
    ks = knobs(provider is not None)
    saved = shipped_setting(provider is not None)
    out = {}
    try:
        for point in grid:
            for (m, name, _), v in zip(ks, point):
                setattr(m, name, v)
            out[point] = sessions.replay_sessions(idx, rows, provider)
    finally:
        for (m, name, _), v in zip(ks, saved):
            setattr(m, name, v)
    return out


def collections_of(rec):
    """The collections of a task turn's relevant skills."""
    return {x.split("/", 1)[0] for x in rec.get("relevant") or ()}


def held_out(by_setting, folds):
    """Pooled held-out records: for each ``(train(rec), test(rec))`` fold,
    the test records of the setting best on the train records; and the
    settings picked."""
    settings = list(by_setting)
    pooled, picked = [], []
    for train, test in folds:
        best = max(settings, key=lambda s: objective([r for r in by_setting[s] if train(r)]))
        picked.append(best)
        pooled += [r for r in by_setting[best] if test(r)]
    return pooled, picked


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", default=sessions.SESSIONS)
    ap.add_argument("--cache", help="folder for the built index (default: a new temp folder)")
    ap.add_argument("--no-semantic", action="store_true", help="BM25 alone")
    args = ap.parse_args(argv)
    rows, cache = sessions.setup(args)
    provider = run_eval.semantic_provider(args)
    idx = sessions.mixed_index(cache, provider)
    shipped = shipped_setting(provider is not None)
    grid = grid_of(provider is not None)
    by_setting = replay_grid(idx, rows, provider, grid)
    sids = sorted({r["session"] for r in rows})
    loso, loso_picked = held_out(by_setting, [((lambda r, s=s: r["session"] != s), (lambda r, s=s: r["session"] == s))
                                              for s in sids])
    colls = sorted(set().union(*(collections_of(r) for r in by_setting[shipped])))
    loco, loco_picked = held_out(by_setting, [((lambda r, c=c: c not in collections_of(r)),
                                               (lambda r, c=c: c in collections_of(r))) for c in colls])
    tier = "bm25+semantic" if provider is not None else "bm25"
    print("Leave one out on %s (%d turns), %s; grid of %s, %d points; shipped %s"
          % (os.path.relpath(args.sessions), len(rows), tier,
             " x ".join(name for _, name, _ in knobs(provider is not None)), len(grid), shipped))
    for s in grid:
        m = sessions.summarize(by_setting[s])
        print("  in sample %-32s in context %.3f  silent %.3f  Hit@1 %.3f" % (s, m["in context"], m["silent"],
                                                                              m["Hit@1"]))
    sessions.print_rows({tier: [("shipped, in sample", sessions.summarize(by_setting[shipped])),
                                ("leave one session out", sessions.summarize(loso)),
                                ("leave one collection out (task turns)", sessions.summarize(loco))]})
    print("folds that picked the shipped setting: sessions %d/%d, collections %d/%d"
          % (sum(p == shipped for p in loso_picked), len(loso_picked),
             sum(p == shipped for p in loco_picked), len(loco_picked)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
