"""Session memory (``retriever.session``): a session is not given again
what it was just given, nor what its agent has loaded.

The replays run the real Claude Code hook command as a subprocess, with one
session id and a transcript file in tmp_path written the way Claude Code
writes it, on a real skill tree.  The state file's own rules (0600, bounded,
a day, only ours) are checked on the file the hook writes, or on files the
module writes in tmp_path with a fake clock.
"""

import json
import os
import stat
import subprocess
import time
from pathlib import Path

import pytest

from retriever import session
from skillret_helpers import BIN, make_skill, run_cli
from retriever import semantic
from test_semantic import _wait, helpers  # noqa: F401  (the warm helper, stopped after the test)

SESSION = "0b6f2c1e-5d1a-4c53-9e55-2f6a1c1d7e01"


@pytest.fixture
def skills(tmp_path):
    """Three task skills, and four real-looking ones that share a word or
    two with small talk and acknowledgements ("week", "last", "report",
    "score") without being asked for by them."""
    root = tmp_path / "skills"
    for name, desc in [
        ("pdf-extract", "Extract text and tables from PDF files, including scanned PDF invoices via OCR."),
        ("k8s-certs", "Rotate Kubernetes TLS certificates and kubeconfig credentials of a cluster."),
        ("git-bisect", "Find the commit that introduced a regression with git bisect."),
        ("docker-slim", "Shrink Docker images with multi-stage builds, smaller base images and a .dockerignore."),
        ("self-eval", "Evaluate an agent's outputs against a rubric and report a score for each."),
        ("weekly-update", "Draft the weekly status report for the team from the week's commits and tickets."),
        ("release-notes", "Generate release notes from the commits since the last tag, grouped by change type."),
    ]:
        make_skill(root, name, {"name": name, "description": desc})
    return root


def state_file(cli_env):
    return Path(cli_env["XDG_CACHE_HOME"]) / "skill-retrieval" / "sessions.json"


@pytest.fixture
def hook(cli, skills, tmp_path):
    """``hook(prompt, session=SESSION, transcript=..., **payload)``: the
    Claude Code hook's answer, as the list of skill names it injects
    (None: it printed nothing)."""
    def run(prompt, session=SESSION, transcript=None, **extra):
        p = {"session_id": session, "transcript_path": str(transcript or tmp_path / "none.jsonl"),
             "cwd": str(tmp_path), "permission_mode": "default", "hook_event_name": "UserPromptSubmit",
             "prompt": prompt, "prompt_id": "p"}
        p.update(extra)
        if session is None:
            del p["session_id"]
        # At the defaults: the calibrated decision on (conftest turns it off).
        proc = cli("hook", "claude-code", "--root", skills, input=json.dumps(p),
                   env={"SKILL_RETRIEVAL_DECIDE": None})
        assert (proc.returncode, proc.stderr) == (0, ""), proc
        return names_in(proc.stdout)
    return run


def names_in(stdout):
    if not stdout:
        return None
    block = json.loads(stdout)["hookSpecificOutput"]["additionalContext"]
    return [line.split("**")[1] for line in block.splitlines() if line.startswith("- **")]


# ------------------------------------------------------- a Claude Code transcript


class Transcript:
    """A Claude Code transcript (JSONL) written as the session goes."""

    def __init__(self, path):
        self.path = path
        path.write_text("")
        self.n = 0

    def add(self, rec):
        self.n += 1
        rec = dict(rec, uuid="u%d" % self.n, sessionId=SESSION, timestamp="2026-12-04T10:00:%02dZ" % self.n)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(rec, separators=(",", ":")) + "\n")

    def prompt(self, text, injected=None):
        self.add({"type": "user", "message": {"role": "user", "content": text}})
        if injected:  # the hook's context, saved in the transcript as Claude Code does
            self.add({"type": "attachment", "attachment": {
                "type": "hook_additional_context", "hookName": "UserPromptSubmit",
                "content": ["## Retrieved Skills\nload it (skill_view(name), or read its SKILL.md)\n"
                            + "".join("- **%s** (%s): ...\n" % (n, n) for n in injected)]}})

    def tool(self, name, args):
        self.add({"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_%d" % self.n, "name": name, "input": args}]}})

    def answer(self, text="Done."):
        self.add({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": text}]}})


# The ten turns.  Kinds as in ../shared/eval/turns: what a user types mid-session.
TURNS = [
    ("smalltalk", "hi! happy friday everyone"),
    ("task", "pull the text out of my scanned pdf invoice"),
    ("task", "also extract the text of the other scanned pdf invoice"),
    ("ack", "thanks, that worked!"),
    ("task", "use pdf-extract on the third invoice as well"),
    ("task", "rotate the kubernetes tls certificates of the staging cluster"),
    ("followup", "can you make that last answer a bit shorter?"),
    ("task", "find the commit that introduced the regression with git bisect"),
    ("ack", "ok merged, we can close this out. talk tomorrow"),
    ("task", "k8s-certs: the kubeconfig credentials of the prod cluster need rotating too"),
]


def replay(hook, skills, tmp_path):
    """Run the ten turns through the hook in one session; the agent loads
    k8s-certs with the Skill tool and reads git-bisect's SKILL.md during
    turn 6.  Returns the names injected at each turn (index 1 = turn 1)."""
    t = Transcript(tmp_path / "transcript.jsonl")
    got = [None]
    for n, (_, text) in enumerate(TURNS, 1):
        names = hook(text, transcript=t.path)
        got.append(names)
        t.prompt(text, names)
        if n == 6:
            t.tool("Skill", {"skill": "k8s-certs"})
            t.add({"type": "user", "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_x", "content": "Launching skill: k8s-certs"}]}})
            t.add({"type": "user", "isMeta": True, "message": {"role": "user", "content": [
                {"type": "text", "text": "Base directory for this skill: %s\n\n# Rotate" % (skills / "k8s-certs")}]}})
            t.tool("Read", {"file_path": str(skills / "git-bisect" / "SKILL.md")})
        t.answer()
    return got


def test_a_ten_turn_session_is_not_given_twice_what_it_holds(hook, skills, tmp_path):
    got = replay(hook, skills, tmp_path)
    assert "pdf-extract" in got[2]
    # Turn 3 asks the same kind of thing: the skill given at turn 2 is not given again...
    assert "pdf-extract" not in (got[3] or [])
    # ...though a session that was not given it gets it for the same words.
    assert "pdf-extract" in hook(TURNS[2][1], session="fresh-1")
    # Turn 5 names it: asked for again, given again.
    assert "pdf-extract" in got[5]
    assert "k8s-certs" in got[6]
    # The agent read git-bisect's SKILL.md (transcript): not offered at turn 8,
    # though a fresh session gets it.
    assert "git-bisect" not in (got[8] or [])
    assert "git-bisect" in hook(TURNS[7][1], session="fresh-2")
    # The agent loaded k8s-certs with the Skill tool: naming it does not
    # offer it again (it is in the agent's context already).
    assert "k8s-certs" not in (got[10] or [])
    assert "k8s-certs" in hook(TURNS[9][1], session="fresh-3")


@pytest.mark.skipif(not semantic.installed(), reason="the semantic extra is not installed")
def test_a_ten_turn_session_injects_nothing_on_acknowledgements_and_follow_ups(skills, tmp_path, helpers):
    """As `make demo` installs it: the tier on, answered by the warm helper."""
    env, _ = helpers[0](600)
    env = dict(env)
    env.pop("SKILL_RETRIEVAL_DECIDE", None)  # the default: the calibrated decision

    def warm():
        proc = run_cli(["--root", str(skills), "--format", "json", "pdf invoice"], env)
        return proc.returncode == 0 and json.loads(proc.stdout)["tiers"] == ["bm25", "semantic"]
    assert _wait(warm)

    def hook(prompt, transcript=None, session=SESSION):
        p = {"session_id": session, "transcript_path": str(transcript), "cwd": str(tmp_path),
             "hook_event_name": "UserPromptSubmit", "prompt": prompt}
        proc = run_cli(["hook", "claude-code", "--root", str(skills)], env, input=json.dumps(p))
        assert (proc.returncode, proc.stderr) == (0, ""), proc
        return names_in(proc.stdout)
    got = replay(hook, skills, tmp_path)
    quiet = {n: got[n] for n, (kind, _) in enumerate(TURNS, 1) if kind != "task"}
    assert quiet == {n: None for n in quiet}
    # ...and the task turns still get their skill, once.
    assert "pdf-extract" in got[2] and "k8s-certs" in got[6] and "git-bisect" not in (got[8] or [])


def test_the_turn_after_is_silent_when_it_would_only_repeat(hook):
    assert hook("pull the text out of my scanned pdf invoice") == ["pdf-extract"]
    assert hook("pull the text out of my scanned pdf invoice") is None
    assert hook("pull the text out of my scanned pdf invoice", session="other") == ["pdf-extract"]


def test_a_skill_is_offered_again_after_the_recent_turns(hook):
    q = "pull the text out of my scanned pdf invoice"
    assert hook(q) == ["pdf-extract"]
    for _ in range(session.RECENT_TURNS - 1):
        assert hook(q) is None
    assert hook(q) is None  # RECENT_TURNS turns after it was given
    assert hook(q) == ["pdf-extract"]


def test_a_subagent_is_its_own_session(hook):
    q = "pull the text out of my scanned pdf invoice"
    assert hook(q) == ["pdf-extract"]
    assert hook(q, agent_id="a1", agent_type="Explore") == ["pdf-extract"]


# ------------------------------------------------------------ no session id


def test_without_a_session_id_every_prompt_is_answered_alone(hook, cli_env):
    q = "pull the text out of my scanned pdf invoice"
    assert hook(q, session=None) == ["pdf-extract"]
    assert hook(q, session=None) == ["pdf-extract"]
    assert hook(q, session="") == ["pdf-extract"]
    assert hook(q, session=42) == ["pdf-extract"]
    assert not state_file(cli_env).exists()


# ------------------------------------------------------------ the state file


def test_the_state_file_is_private(hook, cli_env):
    hook("pull the text out of my scanned pdf invoice")
    st = os.lstat(state_file(cli_env))
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    assert SESSION not in state_file(cli_env).read_text()  # ids are kept hashed
    assert [p.name for p in state_file(cli_env).parent.iterdir() if "sessions" in p.name] == ["sessions.json"]


def test_the_state_is_bounded(tmp_path):
    path = str(tmp_path / "sessions.json")
    now = time.time()
    res = [{"id": "s%02d" % i, "name": "s%02d" % i, "path": "/x/s%02d" % i, "score": 1.0} for i in range(40)]
    for i in range(session.MAX_SESSIONS + 30):
        for turn in range(3):  # many turns, every one injecting new skills
            memo = session.begin("sess-%d" % i, "claude-code", path=path, now=now + i + turn / 10)
            session.record(memo, res[turn * 12:turn * 12 + 12])
    doc = json.loads(Path(path).read_text())
    sessions = doc["sessions"]
    assert len(sessions) == session.MAX_SESSIONS
    assert all(len(e["g"]) <= session.MAX_GIVEN for e in sessions.values())
    # The least recently used went first.
    memo = session.begin("sess-0", "claude-code", path=path, now=now + 500)
    assert memo["entry"]["n"] == 1
    memo = session.begin("sess-%d" % (session.MAX_SESSIONS + 29), "claude-code", path=path, now=now + 500)
    assert memo["entry"]["n"] == 4
    assert os.path.getsize(path) < session.MAX_FILE_BYTES


def test_the_state_file_stays_under_its_size_bound(tmp_path):
    path = str(tmp_path / "sessions.json")
    long = [{"id": "x" * 900 + "%03d" % i, "name": "n", "path": "/p", "score": 1.0} for i in range(32)]
    for i in range(session.MAX_SESSIONS):
        session.record(session.begin("s%d" % i, path=path), long)
    assert os.path.getsize(path) <= session.MAX_FILE_BYTES
    # The most recent sessions are kept (not all forgotten at once).
    for i in (session.MAX_SESSIONS - 1, session.MAX_SESSIONS - 2):
        assert session.filter(session.begin("s%d" % i, path=path), long[:1]) == []


def test_a_silent_turn_with_nothing_to_count_down_writes_nothing(tmp_path):
    path = tmp_path / "sessions.json"
    r = [{"id": "pdf", "name": "pdf", "path": "/p", "score": 1.0}]
    session.record(session.begin("s", path=str(path)), r)
    for _ in range(session.RECENT_TURNS):  # the window counts down: written
        ino = os.stat(path).st_ino
        session.record(session.begin("s", path=str(path)), [])
        assert os.stat(path).st_ino != ino
    ino = os.stat(path).st_ino
    session.record(session.begin("s", path=str(path)), [])
    session.record(session.begin("other", path=str(path)), [])
    assert os.stat(path).st_ino == ino


def test_loaded_skills_are_bounded(tmp_path):
    t = Transcript(tmp_path / "t.jsonl")
    for i in range(300):
        t.tool("Skill", {"skill": "skill-%03d" % i})
    memo = session.begin("s", "claude-code", transcript=str(t.path), path=str(tmp_path / "sessions.json"))
    session.filter(memo, [{"id": "skill-299", "name": "skill-299", "path": "/p", "score": 1.0}])
    assert len(memo["entry"]["l"]) == session.MAX_LOADED
    assert "skill-299" in memo["entry"]["l"] and "skill-000" not in memo["entry"]["l"]


def test_a_session_is_forgotten_after_a_day(hook, cli_env):
    q = "pull the text out of my scanned pdf invoice"
    assert hook(q) == ["pdf-extract"]
    assert hook(q) is None
    day_ago = os.stat(state_file(cli_env)).st_mtime - session.EXPIRE_S - 60
    os.utime(state_file(cli_env), (day_ago, day_ago))
    assert hook(q) == ["pdf-extract"]


def test_each_session_expires_on_its_own_clock(tmp_path):
    path = str(tmp_path / "sessions.json")
    r = [{"id": "pdf", "name": "pdf", "path": "/p", "score": 1.0}]
    t0 = time.time() - session.EXPIRE_S  # a fake clock, a day back
    session.record(session.begin("old", path=path, now=t0), r)
    session.record(session.begin("new", path=path, now=t0 + session.EXPIRE_S - 10), r)
    later = t0 + session.EXPIRE_S + 10
    assert session.filter(session.begin("old", path=path, now=later), r) == r  # forgotten
    assert session.filter(session.begin("new", path=path, now=later), r) == []  # remembered


@pytest.mark.parametrize("content", [b"", b"{not json", b"[1, 2]", b'{"v": 1, "sessions": {"k": {"t": "x"}}}',
                                     b'{"v": 1, "sessions": {"k": {"t": 1, "n": 1, "g": [[1]], "l": [3]}}}',
                                     b"\xff\xfe garbage", b'{"v": 1, "sessions": []}'])
def test_a_damaged_state_file_is_started_over(hook, cli_env, content):
    f = state_file(cli_env)
    f.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    f.write_bytes(content)
    os.chmod(f, 0o600)
    q = "pull the text out of my scanned pdf invoice"
    assert hook(q) == ["pdf-extract"]
    assert hook(q) is None  # remembered again, in a file that is ours
    assert json.loads(f.read_text())["v"] == 1


def test_a_damaged_entry_of_this_session_starts_it_over_and_others_keep_theirs(tmp_path):
    # Only the prompt's own session is checked whole when the file is
    # read; a damaged entry there must still start that session over.
    path = tmp_path / "sessions.json"
    now = time.time()
    r = [{"id": "pdf", "name": "pdf", "path": "/p", "score": 1.0}]
    session.record(session.begin("other", "claude-code", path=str(path), now=now - 5), r)
    doc = json.loads(path.read_text())
    mine = session._key("claude-code", "mine", None)
    doc["sessions"][mine] = {"t": now - 1, "n": "two", "g": [[1, "pdf", "x", 7]], "l": {}}
    path.write_text(json.dumps(doc))
    memo = session.begin("mine", "claude-code", path=str(path), now=now)
    assert memo["entry"]["n"] == 1 and memo["entry"]["g"] == []
    assert session.filter(memo, r) == r
    session.record(memo, r)
    assert json.loads(path.read_text())["sessions"][mine]["g"] == [[1, "pdf", 1.0, ""]]
    assert session.filter(session.begin("other", "claude-code", path=str(path), now=now + 1), r) == []


def test_a_save_writes_other_sessions_back_as_read_and_parses_only_its_own(tmp_path, monkeypatch):
    """A session a line: a prompt parses only its own session's line and
    writes the others back as the bytes it read (parsing and encoding a
    full file of 100 sessions was most of the memory's cost); the file
    stays one JSON document, and a damaged line costs only its session."""
    path = tmp_path / "sessions.json"
    now = time.time()
    r = [{"id": "pdf", "name": "pdf", "path": "/p", "score": 1.0}]
    for sid in ("a", "b", "c"):
        session.record(session.begin(sid, "claude-code", path=str(path), now=now - 9), r)
    lines = path.read_bytes().split(b"\n")
    assert len(lines) == 6 and json.loads(path.read_text())["v"] == 1
    key_b = session._key("claude-code", "b", None)
    # Another session's line as some other writer spelled it, and a
    # damaged one: the first goes back to the byte, the second is dropped.
    odd = b'"%s":{"t":%r,"n":1,"g":[[1,"pdf",1.50,""]],"l":[],"x":null}' % (key_b.encode(), now - 9)
    lines[2] = odd + b","
    lines[3] = b'"%s":{"t":%r,"n":1,"g":[[1,' % (session._key("claude-code", "c", None).encode(), now - 9)
    path.write_bytes(b"\n".join(lines))
    parsed = []
    real = session.jsonlite.loads
    monkeypatch.setattr(session.jsonlite, "loads", lambda text: parsed.append(text) or real(text))
    memo = session.begin("a", "claude-code", path=str(path), now=now)
    assert len(parsed) == 1 and memo["entry"]["n"] == 2  # its own line, and only that
    session.record(memo, [dict(r[0], id="docx")])
    data = path.read_bytes()
    assert odd + b",\n" in data
    doc = json.loads(data)
    assert set(doc["sessions"]) == {key_b, session._key("claude-code", "a", None)}
    assert session.filter(session.begin("b", "claude-code", path=str(path), now=now + 1), r) == []


def test_a_symlinked_state_file_is_ignored_and_left_alone(hook, cli_env, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    f = state_file(cli_env)
    f.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    f.symlink_to(victim)
    q = "pull the text out of my scanned pdf invoice"
    assert hook(q) == ["pdf-extract"]
    assert hook(q) == ["pdf-extract"]  # no memory: as without a session
    assert f.is_symlink() and victim.read_text() == "precious"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a file away")
def test_another_users_state_file_is_ignored_and_left_alone(hook, cli_env):
    f = state_file(cli_env)
    f.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    f.write_text('{"v": 1, "sessions": {}}')
    os.chmod(f, 0o600)
    os.chown(f, 12345, 12345)
    q = "pull the text out of my scanned pdf invoice"
    assert hook(q) == ["pdf-extract"]
    assert hook(q) == ["pdf-extract"]
    assert os.stat(f).st_uid == 12345 and f.read_text() == '{"v": 1, "sessions": {}}'


def test_a_state_folder_open_to_others_keeps_nothing(hook, cli_env):
    d = state_file(cli_env).parent
    d.mkdir(parents=True, exist_ok=True)
    os.chmod(d, 0o777)
    q = "pull the text out of my scanned pdf invoice"
    assert hook(q) == ["pdf-extract"]
    assert hook(q) == ["pdf-extract"]
    assert not state_file(cli_env).exists()


def test_a_state_file_of_another_mode_is_not_trusted_but_replaced(hook, cli_env):
    q = "pull the text out of my scanned pdf invoice"
    assert hook(q) == ["pdf-extract"]
    os.chmod(state_file(cli_env), 0o644)
    assert hook(q) == ["pdf-extract"]
    assert stat.S_IMODE(os.stat(state_file(cli_env)).st_mode) == 0o600


def test_prompts_of_one_session_at_once_leave_a_whole_file(skills, cli_env, tmp_path):
    p = json.dumps({"session_id": SESSION, "transcript_path": None, "prompt": "pull the text out of my scanned pdf"})
    cmd = [str(BIN), "hook", "claude-code", "--root", str(skills)]
    subprocess.run(cmd, input=p.encode(), env=cli_env, capture_output=True, check=True)  # the index
    procs = [subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=cli_env) for _ in range(8)]
    outs = [pr.communicate(p.encode(), timeout=60) for pr in procs]
    assert all(pr.returncode == 0 for pr in procs) and all(err == b"" for _, err in outs)
    doc = json.loads(state_file(cli_env).read_text())
    assert len(doc["sessions"]) == 1
    assert not [f for f in state_file(cli_env).parent.iterdir() if ".tmp-" in f.name]


def test_a_temp_file_left_by_a_killed_process_is_replaced(tmp_path):
    path = tmp_path / "sessions.json"
    left = tmp_path / ("sessions.json.tmp-%d" % os.getpid())
    left.write_text("half")
    session.record(session.begin("s", path=str(path)), [{"id": "a", "name": "a", "path": "/a", "score": 1.0}])
    assert not left.exists() and json.loads(path.read_text())["v"] == 1


# ------------------------------------------------------------ transcripts


def test_a_transcript_is_read_only_from_its_tail(hook, tmp_path):
    q = "pull the text out of my scanned pdf invoice"
    t = Transcript(tmp_path / "big.jsonl")
    t.tool("Skill", {"skill": "pdf-extract"})
    filler = json.dumps({"type": "assistant", "message": {"content": [{"type": "text", "text": "x" * 1000}]}})
    with open(t.path, "a") as f:
        f.write((filler + "\n") * (session.TAIL_BYTES // 1000 + 10))
    # The load is further back than the tail read: not seen.
    assert hook(q, session="big", transcript=t.path) == ["pdf-extract"]
    t.tool("Skill", {"skill": "pdf-extract"})
    assert "pdf-extract" not in (hook(q, session="big2", transcript=t.path) or [])


@pytest.mark.parametrize("kind", ["relative", "symlink", "fifo", "folder", "missing"])
def test_an_unsafe_transcript_path_is_not_read(hook, tmp_path, kind):
    (tmp_path / "cwd").mkdir(exist_ok=True)  # the hook's working folder
    t = Transcript(tmp_path / "cwd" / "real.jsonl")
    t.tool("Skill", {"skill": "pdf-extract"})
    if kind == "relative":
        path = "real.jsonl"
    elif kind == "symlink":
        path = tmp_path / "link.jsonl"
        path.symlink_to(t.path)
    elif kind == "fifo":
        path = tmp_path / "fifo.jsonl"
        os.mkfifo(path)  # opening it for reading must not wait for a writer
    elif kind == "folder":
        path = tmp_path / "dir.jsonl"
        path.mkdir()
    else:
        path = tmp_path / "gone.jsonl"
    assert hook("pull the text out of my scanned pdf invoice", transcript=path) == ["pdf-extract"]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a file away")
def test_another_users_transcript_is_not_read(hook, tmp_path):
    t = Transcript(tmp_path / "theirs.jsonl")
    t.tool("Skill", {"skill": "pdf-extract"})
    os.chown(t.path, 12345, 12345)
    assert hook("pull the text out of my scanned pdf invoice", transcript=t.path) == ["pdf-extract"]


def test_the_hooks_own_block_in_the_transcript_is_not_a_load(hook, tmp_path):
    t = Transcript(tmp_path / "t.jsonl")
    t.prompt("earlier", injected=["pdf-extract"])
    t.answer("I did not load anything.")
    assert hook("pull the text out of my scanned pdf invoice", transcript=t.path) == ["pdf-extract"]


HOSTILE = [
    "not json at all SKILL.md",
    '{"type": "assistant", "message": {"content": "Skill SKILL.md"}}',
    '{"type": "assistant", "message": {"content": [{"type": "tool_use", "name": "Skill", "input": ["pdf-extract"]}]}}',
    '{"type": "assistant", "message": {"content": [{"type": "tool_use", "name": 7, "input": {"skill": 1}}]}}',
    '{"payload": {"type": "function_call", "name": "exec_command", "arguments": "{\\"cmd\\": [[[[\\"SKILL.md\\"]]]]}"}}',
    '{"toolCalls": [null, 1, {"name": "activate_skill", "args": null}], "tool_calls": "x"}',
    '[' * 5000 + "SKILL.md",
    '{"payload": {"type": "function_call", "name": "exec_command", "arguments": "{\\"cmd\\": \\"ls */SKILL.md\\"}"}}',
    '{"type": "assistant", "message": {"content": [{"type": "tool_use", "name": "Write", '
    '"input": {"file_path": "/s/pdf-extract/SKILL.md", "content": "x"}}]}}',
]


def test_untrusted_transcript_text_neither_breaks_nor_hides_a_skill(hook, tmp_path, cli_env):
    path = tmp_path / "hostile.jsonl"
    path.write_bytes(("\n".join(HOSTILE) + "\n").encode() + b"\xff\xfe{SKILL.md\n")
    assert hook("pull the text out of my scanned pdf invoice", transcript=path) == ["pdf-extract"]
    log = Path(cli_env["XDG_CACHE_HOME"]) / "skill-retrieval" / "skill-retrieval.log"
    assert not log.exists() or "session memory" not in log.read_text()


# What each runner writes when its agent loads a skill (one record each).
LOADS = {
    "claude-code Skill tool": {"type": "assistant", "message": {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t", "name": "Skill", "input": {"skill": "pdf-extract", "args": "x"}}]}},
    "claude-code plugin skill": {"type": "assistant", "message": {"content": [
        {"type": "tool_use", "name": "Skill", "input": {"skill": "docs:pdf-extract"}}]}},
    "claude-code Read": {"type": "assistant", "message": {"content": [
        {"type": "tool_use", "name": "Read", "input": {"file_path": "/home/u/.claude/skills/pdf-extract/SKILL.md"}}]}},
    "claude-code Bash cat": {"type": "assistant", "message": {"content": [
        {"type": "tool_use", "name": "Bash", "input": {"command": "cat ~/.claude/skills/pdf-extract/SKILL.md"}}]}},
    "claude-code slash command": {"type": "user", "isMeta": True, "message": {"role": "user", "content": [
        {"type": "text", "text": "Base directory for this skill: /home/u/.claude/skills/pdf-extract\n\n# PDF"}]}},
    "codex exec_command": {"timestamp": "t", "type": "response_item", "payload": {
        "type": "function_call", "name": "exec_command", "call_id": "c",
        "arguments": json.dumps({"cmd": "sed -n '1,200p' /home/u/.agents/skills/pdf-extract/SKILL.md"})}},
    "codex shell": {"type": "response_item", "payload": {
        "type": "function_call", "name": "shell",
        "arguments": json.dumps({"command": ["bash", "-lc", "cat /s/pdf-extract/SKILL.md"]})}},
    "codex local_shell_call": {"type": "response_item", "payload": {
        "type": "local_shell_call", "action": {"type": "exec", "command": ["cat", "/s/pdf-extract/SKILL.md"]}}},
    "codex named skill": {"type": "response_item", "payload": {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "<skill>\n<name>pdf-extract</name>\n<path>/s/pdf-extract/SKILL.md</path>\n"}]}},
    "gemini activate_skill": {"id": "m", "type": "gemini", "content": "", "toolCalls": [
        {"id": "c", "name": "activate_skill", "args": {"name": "pdf-extract"}, "status": "success"}]},
    "gemini read_file": {"id": "m", "type": "gemini", "content": "", "toolCalls": [
        {"id": "c", "name": "read_file", "args": {"file_path": "/s/pdf-extract/SKILL.md"}}]},
    "hermes skill_view": {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "skill_view", "arguments": '{"name": "pdf-extract"}'}}]},
    "hermes skill_view in a category": {"role": "assistant", "tool_calls": [
        {"function": {"name": "skill_view", "arguments": '{"name": "documents/pdf-extract"}'}}]},
}


@pytest.mark.parametrize("shape", list(LOADS))
def test_each_runners_way_of_loading_a_skill_is_seen(hook, tmp_path, shape):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(LOADS[shape]) + "\n")
    assert hook("pull the text out of my scanned pdf invoice", transcript=path) is None
    assert hook("pull the text out of my scanned pdf invoice", session="clean") == ["pdf-extract"]


def test_a_failed_gemini_call_is_not_a_load(hook, tmp_path):
    # As Gemini CLI 0.61 records a read_file outside its workspace.
    call = dict(LOADS["gemini read_file"]["toolCalls"][0], status="error",
                result=[{"functionResponse": {"name": "read_file", "response": {"error": "Path not in workspace"}}}])
    path = tmp_path / "session-x.jsonl"
    path.write_text(json.dumps(dict(LOADS["gemini read_file"], toolCalls=[call])) + "\n")
    assert hook("pull the text out of my scanned pdf invoice", transcript=path) == ["pdf-extract"]


def test_a_gemini_transcript_in_one_document_is_read(hook, tmp_path):
    path = tmp_path / "session-2026.json"
    path.write_text(json.dumps({"sessionId": "s", "messages": [LOADS["gemini activate_skill"]]}, indent=2))
    assert hook("pull the text out of my scanned pdf invoice", transcript=path) is None


def test_the_transcript_is_read_from_where_the_last_prompt_stopped(tmp_path):
    t = Transcript(tmp_path / "t.jsonl")
    t.tool("Skill", {"skill": "pdf-extract"})
    found = []
    tx = session.read_transcript(str(t.path), None, found)
    assert tx[2] == os.path.getsize(t.path) and "pdf-extract" in found
    t.tool("Skill", {"skill": "k8s-certs"})
    with open(t.path, "a") as f:
        f.write('{"type": "assistant", "message": {"content": [{"type": "tool_use", "name": "Skill"')  # still being written
    found = []
    tx2 = session.read_transcript(str(t.path), tx, found)
    assert "k8s-certs" in found and "pdf-extract" not in found  # only what is new
    assert tx2[2] < os.path.getsize(t.path)  # the partial line is read next time


def test_asking_again_is_naming_the_skill_or_a_far_stronger_score():
    r = {"id": "docs/pdf-extract", "name": "pdf-extract", "path": "/p", "score": 3.0}
    assert session.asks_for(r, "use pdf-extract again", 2.0)
    assert session.asks_for(r, "(`pdf-extract`)", 2.0)
    assert not session.asks_for(r, "(pdf-extract)", 2.0)  # bare, two parts: a word (decide.meant)
    # The decision's rule (decide.names): the identifier, written exactly.
    assert not session.asks_for(r, "the pdf extract skill, please", 2.0)
    assert not session.asks_for(r, "use PDF-Extract again", 2.0)
    assert not session.asks_for(r, "my-pdf-extractor is broken", 2.0)
    assert not session.asks_for(r, "extract the pdf", 2.0)
    assert session.asks_for(r, "extract the pdf", 1.5)  # 3.0 >= 2 x 1.5
    assert not session.asks_for(r, "extract the pdf", 0.0)  # another ranking's score: not comparable


# ------------------------------------------------------------ other runners


def test_hermes_shell_hook_reads_the_conversation_it_is_given(cli, skills):
    def run(session_id, history):
        p = {"hook_event_name": "pre_llm_call", "session_id": session_id, "cwd": "/",
             "extra": {"user_message": "pull the text out of my scanned pdf invoice",
                       "conversation_history": history}}
        proc = cli("hook", "hermes", "--root", skills, input=json.dumps(p))
        assert (proc.returncode, proc.stderr) == (0, ""), proc
        return [l.split("**")[1] for l in json.loads(proc.stdout or '{"context": ""}')["context"].splitlines()
                if l.startswith("- **")]
    assert "pdf-extract" not in run("h1", [LOADS["hermes skill_view"]])
    assert run("h2", []) == ["pdf-extract"]
    assert run("h2", []) == []  # given a turn ago


def test_cline_sessions_are_its_tasks(cli, skills):
    def run(task):
        p = {"hookName": "UserPromptSubmit", "taskId": task, "workspaceRoots": ["/"],
             "userPromptSubmit": {"prompt": "pull the text out of my scanned pdf invoice", "attachments": []}}
        proc = cli("hook", "cline", "--root", skills, input=json.dumps(p))
        return "pdf-extract" in json.loads(proc.stdout).get("contextModification", "")
    assert run("task-1") and not run("task-1") and run("task-2")


@pytest.mark.parametrize("other", [
    '{"t": %d, "n": 1, "g": [], "l": []}' % 10 ** 400,            # a clock past any float: prune's arithmetic
    '{"t": %NOW, "n": 1, "g": [[1, "pdf", NaN, ""]], "l": []}',   # JSON cannot write NaN back
    '{"t": %NOW, "n": 1, "g": [], "l": [], "z": Infinity}',       # nor infinity, in a field not ours
    '{"t": true, "n": 1, "g": [], "l": []}',
    '{"t": NaN, "n": 1, "g": [], "l": []}',
])
def test_a_damaged_entry_of_another_session_neither_crashes_nor_stops_memory(tmp_path, other):
    # Another session's entry is written back as it was read: whatever it
    # holds, this session is answered and remembered, and the file saved.
    path = tmp_path / "sessions.json"
    now = time.time()
    r = [{"id": "pdf", "name": "pdf", "path": "/p", "score": 1.0}]
    text = '{"v": 1, "sessions": {"bad": %s}}' % other.replace("%NOW", repr(now - 5))
    path.write_text(text)
    os.chmod(path, 0o600)
    memo = session.begin("mine", "claude-code", path=str(path), now=now)
    assert session.filter(memo, r) == r
    session.record(memo, r)
    doc = json.loads(path.read_text(), parse_constant=lambda c: pytest.fail("%s written back" % c))
    assert session._key("claude-code", "mine", None) in doc["sessions"]
    assert session.filter(session.begin("mine", "claude-code", path=str(path), now=now + 1), r) == []


def test_a_name_in_a_pasted_block_does_not_ask_again(hook):
    # The decision counts a name only in the message's own words, not in a
    # pasted log or file (docs/decision.md); session memory asks the same
    # rule, so a traceback through the skill's own folder does not give it
    # again, while the same name in the message's own words does.
    q = "pull the text out of my scanned pdf invoice"
    assert hook(q) == ["pdf-extract"]
    log = ("it fails:\n```\nTraceback (most recent call last):\n  File \"/home/me/skills/pdf-extract/run.py\", "
           "line 3, in <module>\nValueError: no text layer\n```\n" + q)
    assert hook(log) is None
    assert hook(q + " with pdf-extract") == ["pdf-extract"]
    r = {"id": "docs/pdf-extract", "name": "pdf-extract", "path": "/p", "score": 3.0}
    assert not session.asks_for(r, "x" * 400 + " pdf-extract", 2.0)  # one long line: a paste, as the decision reads it
