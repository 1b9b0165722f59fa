"""The session development set: ../shared/eval/sessions replayed through the hook.

Each session of ``dev.jsonl`` (12 sessions, 223 user turns, 7 languages)
is replayed in turn order through the prompt hooks' own answer path, which
the Hermes plugin's turns take too (``hook.answer_in_session``: the
answer, then the session memory), with
one session id per session and fresh state for each, at the defaults, over
the 12-collection mixed library ``run_eval`` builds.

Definitions (issue 37; the other issues of the round reuse them):

- a task turn (``relevant`` non-empty) is **in context** when a relevant
  skill was injected at that turn or at one of the session's ``WINDOW``
  turns before it (the replay has no agent, so nothing is ever loaded);
  **at turn** counts only that turn's own injections;
- **skills per task turn**: the mean number injected at task turns;
- **relevant share**: relevant injected skills over all skills injected
  on task turns; a skill in the turn's ``acceptable`` list is left out of
  both;
- **silent**: the share of no-skill turns where nothing is injected;
- **Hit@1 / Hit@3**: a relevant skill among the first one / three of the
  ranking on task turns, with the decision off and the session memory's
  filter off, but with the session's context on (what the ranking knows
  of the earlier prompts, ``session.context``, when the product has it).

``replay_sessions(idx, rows, provider)`` returns one record per turn;
``summarize(records)`` the figures; ``report(records)`` the rows (all,
per language, non-English pooled).  ``make eval`` prints them tier on and
off (``run_eval.session_rows``).
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

from retriever import session  # noqa: E402
from retriever.runners import hook  # noqa: E402

import library  # noqa: E402

SESSIONS = os.path.join(library.SHARED, "eval", "sessions", "dev.jsonl")
RUNNER = "claude-code"
WINDOW = 4  # turns before a task turn whose injections still count (the set's README)
TASK_KINDS = ("task", "followup-task")


def by_session(rows):
    """``[(session id, rows in turn order)]``, sessions in file order."""
    out = {}
    for r in rows:
        out.setdefault(r["session"], []).append(r)
    return [(sid, sorted(turns, key=lambda r: r["turn"])) for sid, turns in out.items()]


def fresh_followups(rows, window=WINDOW):
    """Ids of the follow-up task turns that need a fresh injection: none
    of their relevant skills was injected in the ``window`` turns before
    by an oracle that injects every relevant skill not injected in the
    ``window`` turns before it (the set's validator lists the same)."""
    out = set()
    for _, turns in by_session(rows):
        last = {}
        for r in turns:
            t, rel = r["turn"], r.get("relevant") or ()
            if rel and not any(x in last and t - last[x] <= window for x in rel) and r["kind"] == "followup-task":
                out.add(r["id"])
            for x in rel:
                if x not in last or t - last[x] > window:
                    last[x] = t
    return out


def _ids(results):
    return [library.skill_id(r["path"]) for r in results]


def replay_sessions(idx, rows, provider=None, window=WINDOW, hit_k=3, tier=None):
    """Replay ``rows`` (session turn dicts: session, turn, query, relevant,
    acceptable, lang, kind) session by session through the hook's answer
    path on ``idx`` (``provider``: the semantic tier, or None for BM25
    alone), a fresh in-memory state per session.  Returns one record per
    turn, in order: the row's fields plus ``injected`` (skill ids injected
    at that turn), ``ranked`` (the first ``hit_k`` of the ranking with the
    decision and the memory's filter off, the session's context on),
    ``in_context`` and ``at_turn`` (task turns; None otherwise).
    ``tier``: ``{turn id: True when the tier answers it}`` (``day``),
    else every turn is answered by ``provider``."""
    out = []
    for sid, turns in by_session(rows):
        store = {}  # fresh state: this session's memory only
        given = []  # (turn number, injected ids)
        for row in turns:
            memo = session.begin("eval-" + sid, RUNNER, store=store)
            p = provider if tier is None or tier.get(row["id"]) else None
            req = {"quiet": True, "semantic": p, "_path": idx.get("_path")}
            plain = dict(req, decide=False)
            if hasattr(session, "contextualize"):  # absent before issue 37: its BEFORE figures
                session.contextualize(plain, memo)
            ranked, _ = hook.answer_in_session(RUNNER, row["query"], plain, None, idx=idx)[1:]
            _, injected, _ = hook.answer_in_session(RUNNER, row["query"], req, memo, idx=idx)
            ids = _ids(injected)
            given.append((row["turn"], ids))
            rec = dict(row, injected=ids, ranked=_ids(ranked)[:hit_k], in_context=None, at_turn=None)
            rel = set(row.get("relevant") or ())
            if rel:
                rec["at_turn"] = bool(rel.intersection(ids))
                rec["in_context"] = any(rel.intersection(g) for t, g in given if row["turn"] - t <= window)
            out.append(rec)
    return out


# The day of sessions (``day``): the helper's life, modelled on a clock.
LOAD = 2.0           # seconds the helper takes to load the model and the vectors (issue 38)
FIRST_PROMPT = 3.0   # the first prompt, this long after the session started
PROMPT_EVERY = 60.0  # and the next ones this far apart
LIFETIME = 120.0     # the helper's idle lifetime, shortened for the replay (the product's: 1800 s)
GAP = 2 * LIFETIME   # the break between two sessions: the helper has exited by then


def day(rows, warm_at_start=True, lifetime=LIFETIME, gap=GAP, load=LOAD, first=FIRST_PROMPT,
        every=PROMPT_EVERY):
    """Which turns of ``rows`` the tier answers when their sessions follow
    one another through a day, each after a break of ``gap`` seconds:
    ``{turn id: bool}``.  The in-process eval has no helper process, so
    its life is modelled on a clock, by the product's own rules
    (docs/eval.md): the helper starts at a session's start when the
    runner has a session-start hook (``warm_at_start``; Claude Code,
    Codex, Gemini CLI), else on the first prompt it cannot answer; it
    answers once ``load`` seconds have passed; the first prompt after a
    start may wait ``client.FIRST_WAIT`` for it, when the start is at most
    ``client.RECENT`` seconds old; it exits ``lifetime`` seconds after its
    last question."""
    from retriever.semantic import client
    out = {}
    t = 0.0
    started = ready = last = None  # the helper's start, ready and last-question times

    def alive(now):
        return started is not None and now - max(last, ready) <= lifetime

    for _, turns in by_session(rows):
        if warm_at_start and not alive(t):
            started, ready = t, t + load
            last = ready  # the warm hook asks it one question when it is ready
        waited = False
        for k, row in enumerate(turns):
            now = t + first + k * every
            if not alive(now):
                started, ready, last = now, now + load, now
            wait = 0.0
            if not waited and ready > now and now - started <= client.RECENT:
                wait, waited = client.FIRST_WAIT, True
            out[row["id"]] = ready <= now + wait
            last = max(last, now)
        t = t + first + (len(turns) - 1) * every + gap
    return out


def day_rows(idx, rows, provider):
    """The "first prompt of a session" rows: ``[(row name, figures)]``
    for a day of the sessions of ``rows`` (``day``), with and without a
    session-start hook; figures: the share of prompts, and of first
    prompts, the tier answers, and the session figures of that mix."""
    out = []
    for name, warm in (("helper started at session start", True), ("helper started by the first prompt", False)):
        tier = day(rows, warm_at_start=warm)
        recs = replay_sessions(idx, rows, provider, tier=tier)
        firsts = [turns[0]["id"] for _, turns in by_session(rows)]
        m = summarize(recs)
        m["tier answers"] = sum(tier.values()) / len(tier)
        m["first prompts, tier"] = sum(tier[i] for i in firsts) / len(firsts)
        out.append((name, m))
    return out


def summarize(records):
    """The figures over ``records`` (``replay_sessions``): a dict."""
    nan = float("nan")
    task = [r for r in records if r.get("relevant")]
    rest = [r for r in records if not r.get("relevant")]
    right = counted = injected = 0
    for r in task:
        rel, ok = set(r["relevant"]), set(r.get("acceptable") or ())
        injected += len(r["injected"])
        for x in r["injected"]:
            if x not in ok:
                counted += 1
                right += x in rel
    share = lambda xs, f: sum(1 for r in xs if f(r)) / len(xs) if xs else nan  # noqa: E731
    return {"task turns": len(task), "in context": share(task, lambda r: r["in_context"]),
            "at turn": share(task, lambda r: r["at_turn"]),
            "per task turn": injected / len(task) if task else nan,
            "relevant share": right / counted if counted else nan,
            "no-skill turns": len(rest), "silent": share(rest, lambda r: not r["injected"]),
            "Hit@1": share(task, lambda r: set(r["relevant"]).intersection(r["ranked"][:1])),
            "Hit@3": share(task, lambda r: set(r["relevant"]).intersection(r["ranked"][:3]))}


def report(records):
    """``[(row name, figures)]``: all turns, each kind of task turn and the
    follow-ups that need a fresh injection (``fresh_followups``), each kind
    of no-skill turn, then per language (English first), then the
    non-English languages pooled."""
    langs = sorted({r["lang"] for r in records}, key=lambda l: (l != "en", l))
    rows = [("all", summarize(records))]
    rows += [("kind " + k, summarize([r for r in records if r["kind"] == k])) for k in TASK_KINDS]
    fresh = fresh_followups(records)
    rows.append(("follow-ups needing a fresh injection", summarize([r for r in records if r["id"] in fresh])))
    rest = sorted({r["kind"] for r in records} - set(TASK_KINDS))
    rows += [("kind " + k, summarize([r for r in records if r["kind"] == k])) for k in rest]
    rows += [(l, summarize([r for r in records if r["lang"] == l])) for l in langs]
    rows.append(("non-English", summarize([r for r in records if r["lang"] != "en"])))
    return rows


def ceiling(records, ks=(1, 2, 3), window=WINDOW):
    """What a perfect decision could reach with this ranking: ``[(row
    name, figures)]``, one row per ``k`` of ``ks``, for a gate that injects
    the ranking's first ``k`` (``ranked``: decision and memory filter off,
    context on) at every task turn and nothing at any other, scored as
    ``summarize`` scores the product.  A budget above these rows cannot be
    met by any decision: only a better ranking moves them."""
    out = []
    for k in ks:
        oracle, given = [], {}
        for r in records:
            ids = list(r["ranked"][:k]) if r.get("relevant") else []
            seen = given.setdefault(r["session"], [])
            seen.append((r["turn"], ids))
            rec = dict(r, injected=ids)
            rel = set(r.get("relevant") or ())
            if rel:
                rec["at_turn"] = bool(rel.intersection(ids))
                rec["in_context"] = any(rel.intersection(g) for t, g in seen if r["turn"] - t <= window)
            oracle.append(rec)
        out.append(("perfect gate, first %d" % k, summarize(oracle)))
    return out


COLS = ["task turns", "in context", "at turn", "per task turn", "relevant share", "no-skill turns", "silent",
        "Hit@1", "Hit@3"]


CEILING_COLS = ["task turns", "in context", "at turn", "per task turn", "relevant share"]


DAY_COLS = ["tier answers", "first prompts, tier", "task turns", "in context", "per task turn", "silent"]


def print_rows(tables, cols=COLS):
    """Print ``{tier: [(row name, figures)]}`` as one markdown table."""
    print("| sessions | tier | " + " | ".join(cols) + " |")
    print("|" + "---|" * (2 + len(cols)))
    for tier, rows in tables.items():
        for name, m in rows:
            cells = []
            for c in cols:
                v = m.get(c)
                cells.append("-" if v is None or (isinstance(v, float) and v != v) else str(v) if isinstance(v, int)
                             else "%.2f" % v if c.startswith("per") else "%.3f" % v)
            print("| %s | %s | %s |" % (name, tier, " | ".join(cells)))


def mixed_index(cache, provider=None, corpora=None):
    """The 12-collection mixed index ``run_eval`` builds, with its vectors
    when ``provider`` is given."""
    corpora = corpora or os.path.join(library.SHARED, "corpora")
    idx = library.build_index([os.path.join(corpora, c) for c in library.MIXED], "default", cache)
    return library.with_vectors(provider, idx) if provider is not None else idx


def setup(args):
    """``(rows, cache folder)`` for a command line with ``--sessions`` and
    ``--cache``: the turns (exits with one line when there are none) and
    the folder for the built index (a new temp folder by default)."""
    rows = library.load_jsonl(args.sessions)
    if not rows:
        raise SystemExit("%s: no turns (missing or empty; see --sessions)" % args.sessions)
    cache = args.cache or tempfile.mkdtemp(prefix="skill-sessions-")
    os.makedirs(cache, exist_ok=True)
    return rows, cache


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", default=SESSIONS)
    ap.add_argument("--cache", help="folder for the built index (default: a new temp folder)")
    ap.add_argument("--no-semantic", action="store_true", help="BM25 alone")
    ap.add_argument("--json", metavar="FILE", help="also write the per-turn records here")
    args = ap.parse_args(argv)
    rows, cache = setup(args)
    tables, records, ceilings = {}, {}, {}
    provider = library.semantic_provider(args)
    for tier, p in (("bm25", None),) + ((("semantic", provider),) if provider is not None else ()):
        records[tier] = replay_sessions(mixed_index(cache, p), rows, p)
        tables[tier] = report(records[tier])
        ceilings[tier] = ceiling(records[tier])
    print_rows(tables)
    print("\nThe ranking's ceiling: a perfect gate injecting its first k on task turns only:")
    print_rows(ceilings, CEILING_COLS)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(records, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
