"""Every parser of a runner's file is linear and bounded (issue 36).

Session memory reads the tail of a runner's transcript on each prompt, and
the Hermes plugin re-reads the conversation each turn.  Their text is
untrusted: one line must not cost more than one prompt, whatever it holds.
Times are process CPU time, and the bounds are loose guards against a
quadratic blow-up (the defect took seconds), not performance targets.
"""

import json
import random
import threading
import time

from retriever import session

TAIL = session.TAIL_BYTES


def bash_line(arg):
    """A Claude Code transcript line: a Bash tool call with ``arg``."""
    return (json.dumps({"type": "assistant", "message": {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t", "name": "Bash", "input": {"command": arg}}]}}) + "\n").encode()


LOAD = bash_line("cat /home/u/skills/pdf-extract/SKILL.md")


def cpu(fn, *args, **kw):
    t = time.process_time()
    out = fn(*args, **kw)
    return out, time.process_time() - t


def test_a_long_run_of_skill_md_mentions_is_read_in_linear_time(tmp_path):
    # The defect: 32 KiB of "SKILL.md/" took 2.5 s (96 KiB: 26 s here),
    # walking back one character at a time from each mention.
    path = tmp_path / "t.jsonl"
    path.write_bytes(bash_line("SKILL.md/" * (96 * 1024 // 9)) + LOAD)
    found = []
    tx, spent = cpu(session.read_transcript, str(path), None, found)
    assert spent < 1.0, spent
    assert "pdf-extract" in found and tx[2] == path.stat().st_size


def _reference(s):
    # The old walk (quadratic, right): what each mention names.
    found, i = [], s.find("SKILL.md")
    while i >= 0:
        end = i + 8
        if not (end < len(s) and (s[end].isalnum() or s[end] in "._-")):
            start = i
            while start > 0 and s[start - 1] not in " \t\n\"'`=<>|;&(),:":
                start -= 1
            token = s[start:end]
            if not any(c in token for c in "*?[]{}$") and token.endswith("/SKILL.md"):
                session._add_dir(token[:-len("/SKILL.md")], found)
        i = s.find("SKILL.md", end)
    return found


def test_the_linear_walk_names_what_the_old_walk_named():
    rng = random.Random(36)
    parts = ["SKILL.md", "/", "a", "b/", " ", "'", "*", "=", "x.", ":", "SKILL.mdx", "\n", "..", "$"]
    for _ in range(3000):
        s = "".join(rng.choice(parts) for _ in range(rng.randint(1, 40)))
        found = []
        session._skill_paths(s, found)
        assert found == _reference(s), s


def _hostile_lines(rng):
    # Kinds of lines the fuzz mixes: each holds a marker, so each is parsed.
    kinds = [
        lambda: bash_line("SKILL.md/" * rng.randint(1000, 12000)),
        lambda: bash_line(" ".join("d%d/SKILL.md" % i for i in range(rng.randint(100, 4000)))),
        lambda: bash_line("x" * rng.randint(10000, 200000) + "/SKILL.md"),
        lambda: bash_line("/" * rng.randint(10000, 100000) + "SKILL.md"),
        lambda: (b'{"message": {"content": ' + b"[" * 5000 + b'"SKILL.md"' + b"]" * 5000 + b"}}\n"),
        lambda: (b'{"message": "SKILL.md' + bytes(rng.randrange(128, 256) for _ in range(20000)) + b'"}\n'),
        lambda: (json.dumps({"message": {"content": [
            {"type": "tool_use", "name": "Read", "input": {"k%d" % i: "/p%d/SKILL.md" % i for i in range(2000)}}
            for _ in range(rng.randint(1, 20))]}}) + "\n").encode(),
        lambda: (json.dumps({"payload": {"type": "function_call", "name": "shell", "arguments": json.dumps(
            {"command": ["bash", "-lc", "SKILL.md " * rng.randint(1000, 20000)]})}}) + "\n").encode(),
        lambda: (json.dumps({"toolCalls": [{"name": "read_file", "args": {"p": "a/SKILL.md"}}] * 5000}) + "\n").encode(),
        lambda: LOAD,
    ]
    # Runs of small real loads: thousands of lines to parse, past the
    # per-prompt budget on a slow machine (then the next prompt goes on).
    kinds.append(lambda: b"".join(bash_line("cat /s/k%d/SKILL.md" % rng.randrange(10 ** 6))
                                  for _ in range(rng.randint(100, 3000))))
    return kinds


def test_fuzz_hostile_transcript_tails_cost_one_prompt_at_most(tmp_path):
    rng = random.Random(3607)
    kinds = _hostile_lines(rng)
    worst = 0.0
    for case in range(12):
        data = bytearray()
        while len(data) < TAIL:
            data += rng.choice(kinds)()
        path = tmp_path / ("t%d.jsonl" % case)
        path.write_bytes(bytes(data) + LOAD)
        tx, prompts = None, 0
        while True:  # prompt after prompt until the whole tail is read
            found, status = [], {}
            tx, spent = cpu(session.read_transcript, str(path), tx, found, status)
            worst = max(worst, spent)
            prompts += 1
            if not status:
                break
            assert prompts < 200, "no progress"
        # The real load at the end is seen once the parse gets there.
        assert "pdf-extract" in found and tx[2] == path.stat().st_size
    assert worst < 1.0, worst


def test_a_scan_cut_short_saves_its_progress(tmp_path, monkeypatch):
    # One bad line costs one prompt: the offset reached is saved even on a
    # silent turn (which otherwise writes nothing), and the next prompt
    # goes on from there.
    path = tmp_path / "t.jsonl"
    path.write_bytes(LOAD * 50)
    state = tmp_path / "cache" / "sessions.json"
    result = {"id": "docs/pdf-extract", "name": "pdf-extract", "path": "/p", "score": 1.0}
    memo = session.begin("s1", "claude-code", transcript=str(path), path=str(state))
    orig = session.read_transcript

    def tight(p, tx, found, status=None):
        return orig(p, tx, found, status, budget=-1.0)  # stops before its first line
    monkeypatch.setattr(session, "read_transcript", tight)
    assert session.filter(memo, [result], "hello") == [result]
    session.record(memo, [])
    saved = json.loads(state.read_text())["sessions"]
    assert [e["x"] for e in saved.values()][0] is not None


def test_hermes_reads_the_conversation_outside_its_lock(monkeypatch):
    from hermes_plugin import runtime
    state = {"mu": threading.Lock(), "memory": {}, "path": None}
    seen = []
    orig = session.history_loads

    def spy(history, *a, **kw):
        seen.append(state["mu"].locked())
        return orig(history, *a, **kw)
    monkeypatch.setattr(session, "history_loads", spy)
    r = {"id": "docs/pdf-extract", "name": "pdf-extract", "path": "/p", "score": 1.0}
    monkeypatch.setattr(runtime, "ensure_index", lambda st: object())
    monkeypatch.setattr(runtime, "turn_view", lambda *a: None)
    from retriever import service
    monkeypatch.setattr(service, "answer", lambda text, req, idx=None: ([dict(r)], None))
    history = [{"role": "assistant", "tool_calls": [
        {"function": {"name": "skill_view", "arguments": json.dumps({"name": "pdf-extract"})}}]}]
    assert runtime.retrieve(state, "pdf", session_id="s", history=history) == []
    assert seen == [False]


def test_a_hostile_conversation_is_read_in_bounded_time():
    big = json.dumps({"command": "SKILL.md/" * 20000})
    history = [{"role": "assistant", "tool_calls": [{"function": {"name": "terminal", "arguments": big}}]}] * 200
    history.append({"role": "assistant", "tool_calls": [
        {"function": {"name": "skill_view", "arguments": json.dumps({"name": "pdf-extract"})}}]})
    found, spent = cpu(session.history_loads, history)
    assert spent < 1.0, spent
    assert "pdf-extract" in found  # the newest is read first
