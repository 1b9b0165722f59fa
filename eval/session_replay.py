"""What session memory saves: injected characters per turn over replayed sessions.

Reads ../shared/eval/turns/dev.jsonl (labelled user turns, in file order),
cuts it into pseudo-sessions of consecutive rows (10 turns each by default:
deterministic, no shuffling), and answers every turn through the real
answer path (``service.answer`` on the real mixed index, tier on unless
``--no-semantic``) twice: alone, as without a session id, and with the
session memory (``retriever.session``, kept in memory here).  Prints, per
setting, the characters and skills injected per turn and how often a task
turn's relevant skill is injected, or is still in the context from the
last turns.

Rows are consecutive turns written by people for separate tasks, not real
sessions: a skill comes back in them mostly when the decision injects it
as noise.  The figures say what the memory saves on top of the decision.

``replay(idx, rows, ...)`` is the function ``make eval`` can call.
"""

import argparse
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)
sys.path.insert(0, HERE)

from retriever import render, service, session  # noqa: E402

import run_eval  # noqa: E402

TURNS = os.path.join(run_eval.SHARED, "eval", "turns", "dev.jsonl")


def sessions_of(rows, length=10):
    """Consecutive rows in groups of ``length``: ``[(session id, rows)]``."""
    return [("replay-%03d" % (i // length), rows[i:i + length]) for i in range(0, len(rows), length)]


def topical_sessions(rows, between=2):
    """Sessions that come back to a need: for each skill that serves two
    or more task rows, those rows (each used once, in file order), with
    ``between`` of the other rows (in file order) after each.  Rows written
    apart, so each return is phrased anew."""
    others = [r for r in rows if r.get("kind") != "task"]
    tasks = [r for r in rows if r.get("kind") == "task" and r.get("relevant")]
    count = {}
    for r in tasks:
        for x in r["relevant"]:
            count[x] = count.get(x, 0) + 1
    by_skill, used = {}, set()
    for r in tasks:  # under the skill it shares with the most rows
        by_skill.setdefault(max(r["relevant"], key=lambda x: count[x]), []).append(r)
    out, k = [], 0
    for skill, tasks in by_skill.items():
        tasks = [t for t in tasks if t["id"] not in used]
        if len(tasks) < 2:
            continue
        turns = []
        for t in tasks[:4]:
            used.add(t["id"])
            turns.append(t)
            for _ in range(between):
                turns.append(others[k % len(others)])
                k += 1
        out.append(("topic-%03d" % len(out), turns))
    return out


def _relevant(result, relevant, corpora):
    return os.path.relpath(result["path"], corpora) in relevant


def replay(idx, rows, corpora, provider=None, length=10, recent_turns=None, stronger=None, sessions=None):
    """Replay ``rows`` (turn dicts: query, relevant, kind) as sessions of
    ``length`` turns through the answer path on ``idx`` (``provider``: the
    semantic tier, or None for BM25 alone), without and with session
    memory.  ``recent_turns`` and ``stronger`` override the module's rules
    for a sweep; ``sessions`` replaces the cut into sessions (``[(id,
    rows)]``, e.g. ``topical_sessions``).  Returns ``{"without": m, "with": m}``, each m holding
    turns, chars per turn, skills per turn, task turns with a relevant skill
    injected (``task hit``) or injected within the recent turns (``task
    in context``), and re-offers because a turn asked again (``asked``)."""
    saved = session.RECENT_TURNS, session.STRONGER
    if recent_turns is not None:
        session.RECENT_TURNS = recent_turns
    if stronger is not None:
        session.STRONGER = stronger
    try:
        out = {}
        for mode in ("without", "with"):
            store = {}
            chars = skills = turns = tasks = hit = in_context = asked = 0
            for sid, turns_of in sessions or sessions_of(rows, length):
                given = []  # (turn number, result ids) of this session
                for n, row in enumerate(turns_of, 1):
                    req = {"quiet": True, "semantic": provider, "_path": idx.get("_path")}
                    results, _ = service.answer(row["query"], req, idx=idx)
                    if mode == "with":
                        memo = session.begin(sid, "replay", store=store, ranking="+".join(req.get("tiers") or ()))
                        before = {r["id"] for r in results}
                        recent = {g[1] for g in memo["entry"]["g"] if memo["entry"]["n"] - g[0] <= session.RECENT_TURNS}
                        results = session.filter(memo, results, row["query"])
                        asked += sum(1 for r in results if r["id"] in recent and r["id"] in before)
                        session.record(memo, results)
                    turns += 1
                    chars += len(render.text_block(results))
                    skills += len(results)
                    given.append((n, results))
                    if row.get("kind") == "task" and row.get("relevant"):
                        rel = set(row["relevant"])
                        tasks += 1
                        hit += any(_relevant(r, rel, corpora) for r in results)
                        in_context += any(_relevant(r, rel, corpora) for t, rs in given
                                          if n - t <= session.RECENT_TURNS for r in rs)
            out[mode] = {"turns": turns, "chars per turn": chars / max(1, turns),
                         "skills per turn": skills / max(1, turns), "task hit": hit / max(1, tasks),
                         "task in context": in_context / max(1, tasks), "asked": asked}
        out["saved"] = 1.0 - out["with"]["chars per turn"] / max(1e-9, out["without"]["chars per turn"])
        return out
    finally:
        session.RECENT_TURNS, session.STRONGER = saved


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", default=TURNS)
    ap.add_argument("--corpora", default=os.path.join(run_eval.SHARED, "corpora"))
    ap.add_argument("--cache", help="folder for the built index (default: a new temp folder)")
    ap.add_argument("--length", type=int, default=10, help="turns per pseudo-session (default 10)")
    ap.add_argument("--sweep", action="store_true", help="also vary RECENT_TURNS and STRONGER")
    ap.add_argument("--topical", action="store_true",
                    help="sessions that come back to a need (topical_sessions) instead of consecutive rows")
    ap.add_argument("--no-semantic", action="store_true", help="BM25 alone")
    args = ap.parse_args(argv)
    rows = run_eval.load_jsonl(args.turns)
    if not rows:
        raise SystemExit("%s: no turns (missing or empty; see --turns)" % args.turns)
    cache = args.cache or tempfile.mkdtemp(prefix="skill-replay-")
    os.makedirs(cache, exist_ok=True)
    idx = run_eval.build_index([os.path.join(args.corpora, c) for c in run_eval.MIXED], "default", cache)
    provider = run_eval.semantic_provider(args)
    if provider is not None:
        idx = run_eval.with_vectors(provider, idx)
    tier = "bm25+semantic" if provider is not None else "bm25"
    cut = topical_sessions(rows) if args.topical else None
    print("%d turns of %s in %s, %d skills, %s, defaults"
          % (sum(len(t) for _, t in cut) if cut else len(rows), os.path.relpath(args.turns),
             "%d sessions that come back to a need" % len(cut) if cut else "sessions of %d" % args.length,
             idx["header"]["n_docs"], tier))
    settings = [(None, None)]
    if args.sweep:
        settings += [(n, None) for n in (1, 2, 3, 5, 8)] + [(None, s) for s in (1.5, 3.0, float("inf"))]
    head = "%-26s %10s %10s %8s %9s %9s %9s %6s" % ("setting", "chars/turn", "with mem", "saved", "skills",
                                                   "with mem", "task hit", "in ctx")
    print(head)
    report = []
    for recent, stronger in settings:
        m = replay(idx, rows, args.corpora, provider, args.length, recent, stronger, cut)
        label = "N=%d, stronger=%s" % (recent if recent is not None else session.RECENT_TURNS,
                                       stronger if stronger is not None else session.STRONGER)
        print("%-26s %10.0f %10.0f %7.0f%% %9.2f %9.2f %4.3f/%.3f %4.3f  asked again: %d"
              % (label, m["without"]["chars per turn"], m["with"]["chars per turn"], 100 * m["saved"],
                 m["without"]["skills per turn"], m["with"]["skills per turn"], m["without"]["task hit"],
                 m["with"]["task hit"], m["with"]["task in context"], m["with"]["asked"]))
        report.append({"recent_turns": recent, "stronger": stronger, **m})
    print(json.dumps(report) if os.environ.get("REPLAY_JSON") else "", end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
