"""Learning from loads, measured: a user's first week, then a second.

Week one replays ../shared/eval/sessions/dev.jsonl through the Claude Code
hook's answer path (``hook.answer_in_session``, with a session memory and
a transcript per session) while a simulated agent, after each task turn,
loads a relevant skill (the injected one when one is relevant, else the
first listed) by writing a ``Skill`` tool call into the transcript, as
Claude Code writes one.  Each prompt leaves its usage record line (the
product's own ``usage.line``, in a temp record) dated in the first week.

The record is folded (``learn.fold``) into the learnt table, and week two
(``eval/second_week.jsonl``: paraphrases of week one's requests written
for this, many in the team's own words, ``jargon``: words week one used
that no skill's text holds) is replayed with ``sessions.replay_sessions``
with the table and without.  Rows: all turns, the jargon turns, the rest.
"Served": a relevant skill in context (``sessions``' definition).
"""

import argparse
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from retriever import learn, session, usage  # noqa: E402
from retriever.runners import hook  # noqa: E402

import library  # noqa: E402
import sessions  # noqa: E402

SECOND_WEEK = os.path.join(HERE, "second_week.jsonl")
DAY = 86400.0


def _folder(skill_id):
    # Claude Code's Skill tool names a skill by its folder.
    return skill_id.rsplit("/", 1)[-1]


def first_week(idx, rows, provider, where, now):
    """Replay ``rows`` as week one (``now`` - 14 days on), with the
    simulated agent's loads in a transcript per session under ``where``;
    appends each prompt's record line to ``where``/usage.log.  Returns
    the record's path."""
    log = os.path.join(where, usage.FILE)
    turns = sessions.by_session(rows)
    for k, (sid, session_turns) in enumerate(turns):
        store = {}
        transcript = os.path.join(where, "t-%s.jsonl" % sid)
        open(transcript, "w").close()
        for j, row in enumerate(session_turns):
            t = now - 14 * DAY + k * (7 * DAY / len(turns)) + 60 * j
            memo = session.begin("week1-" + sid, sessions.RUNNER, transcript=transcript, store=store, now=t)
            req = {"quiet": True, "semantic": provider, "_path": idx.get("_path")}
            note = {}
            _, injected, _ = hook.answer_in_session(sessions.RUNNER, row["query"], req, memo, idx=idx, note=note)
            usage.append(usage.line(sessions.RUNNER, usage.session_key(sessions.RUNNER, sid),
                                    usage.injected_names(injected), note["tier"], note["loaded"],
                                    row["query"], note["terms"], now=t), where=log, now=t)
            rel = row.get("relevant") or ()
            if rel:
                ids = sessions._ids(injected)
                pick = next((x for x in ids if x in rel), rel[0])
                with open(transcript, "a", encoding="utf-8") as f:
                    f.write(json.dumps({"type": "assistant", "message": {"role": "assistant", "content": [
                        {"type": "tool_use", "id": "toolu_%d" % j, "name": "Skill",
                         "input": {"skill": _folder(pick)}}]}}) + "\n")
    return log


def learnt_table(idx, log, now):
    """The learnt table folded from the record at ``log``, as the hook
    reads it."""
    entries, _ = usage.read(log, now=now)
    return learn.encode(learn.fold(idx, entries, now))


def rows_for(records):
    """``[(row name, figures)]``: all, jargon, paraphrases, no-skill."""
    jargon = [r for r in records if r.get("jargon")]
    plain = [r for r in records if r.get("relevant") and not r.get("jargon")]
    rest = [r for r in records if not r.get("relevant")]
    return [("second week, all", sessions.summarize(records)), ("  jargon", sessions.summarize(jargon)),
            ("  paraphrases", sessions.summarize(plain)), ("  no-skill turns", sessions.summarize(rest))]


def learning_rows(cache, provider=None, week1=None, week2=None):
    """``{"learning off"/"learning on": rows}`` for the tier of
    ``provider`` (None: BM25 alone)."""
    import time
    week1 = library.load_jsonl(week1 or sessions.SESSIONS)
    week2 = library.load_jsonl(week2 or SECOND_WEEK)
    if not week1 or not week2:
        return {}
    idx = sessions.mixed_index(cache, provider)
    now = time.time()
    with tempfile.TemporaryDirectory(prefix="skill-learning-") as where:
        log = first_week(idx, week1, provider, where, now)
        table = learnt_table(idx, log, now)
    out = {}
    for name, t in (("learning off", None), ("learning on", table)):
        idx["learnt"] = t
        try:
            out[name] = rows_for(sessions.replay_sessions(idx, week2, provider))
        finally:
            idx.pop("learnt", None)
    return out


def tier_rows(cache, provider):
    """The second week's rows, learning off and on, BM25 alone and, with
    ``provider``, tier on: ``{label: rows}`` (``make eval`` prints them)."""
    out = {}
    for tier, p in (("bm25", None),) + ((("semantic", provider),) if provider is not None else ()):
        for name, rows in learning_rows(cache, p).items():
            out["%s, %s" % (tier, name)] = rows
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", help="folder for the built index (default: a new temp folder)")
    ap.add_argument("--no-semantic", action="store_true", help="BM25 alone")
    args = ap.parse_args(argv)
    cache = args.cache or tempfile.mkdtemp(prefix="skill-learning-")
    sessions.print_rows(tier_rows(cache, library.semantic_provider(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
