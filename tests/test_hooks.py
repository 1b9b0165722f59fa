"""``skill-retrieve hook RUNNER``: payload in, the runner's exact JSON out.

Every test runs the real executable on a real skill tree in tmp_path with
HOME and XDG_CACHE_HOME pointing into tmp_path.  Failure cases must give the
runner's empty answer (nothing, ``{}`` for Gemini, ``{"cancel": false}`` for
Cline), exit 0, print nothing on stderr and add exactly one log line.
"""

import itertools
import json
import os
import re
import subprocess

import pytest

from conftest import make_skill, wait_until

PROMPT = "pull the text out of my scanned pdf invoice"
UNRELATED = "zzyzx qwvvb"
EMPTY = {"claude-code": "", "codex": "", "hermes": "", "gemini": "{}\n", "cline": '{"cancel": false}\n'}
RUNNERS = list(EMPTY)


_SESSIONS = itertools.count(1)


def payload(runner, prompt, cwd="/tmp", session=None):
    """A payload shaped like the one each runner sends (see docs/hook-runners.md).
    Each call is a new session unless ``session`` names one: a second
    prompt of a session is not given what the first was (retriever.session)."""
    session = session or "s%d" % next(_SESSIONS)
    if runner == "claude-code":
        return {"session_id": session, "transcript_path": "/tmp/t.jsonl", "cwd": cwd,
                "permission_mode": "default", "hook_event_name": "UserPromptSubmit",
                "prompt": prompt, "prompt_id": "p1"}
    if runner == "codex":
        return {"session_id": session, "turn_id": "t1", "transcript_path": None, "cwd": cwd,
                "hook_event_name": "UserPromptSubmit", "model": "gpt-x",
                "permission_mode": "bypassPermissions", "prompt": prompt}
    if runner == "gemini":
        return {"session_id": session, "transcript_path": "/tmp/t.json", "cwd": cwd,
                "hook_event_name": "BeforeAgent", "timestamp": "2026-01-01T00:00:00Z", "prompt": prompt}
    if runner == "cline":
        return {"clineVersion": "3.40.0", "hookName": "UserPromptSubmit", "timestamp": "1",
                "taskId": session, "workspaceRoots": [cwd], "userId": "u1",
                "userPromptSubmit": {"prompt": prompt, "attachments": []}}
    return {"hook_event_name": "pre_llm_call", "tool_name": None, "tool_input": None,
            "session_id": session, "cwd": cwd,
            "extra": {"task_id": "t", "turn_id": "u", "user_message": prompt,
                      "conversation_history": [], "is_first_turn": True, "model": "m",
                      "platform": "cli", "sender_id": "", "telemetry_schema_version": "hermes.observer.v1"}}


@pytest.fixture
def skills(tmp_path):
    """A small library: one PDF skill, two unrelated ones."""
    root = tmp_path / "skills"
    make_skill(root, "pdf-extract", {"name": "pdf-extract",
               "description": "Extract text and tables from PDF files, including scanned PDFs via OCR."})
    make_skill(root, "k8s-certs", {"name": "k8s-certs",
               "description": "Rotate Kubernetes TLS certificates and kubeconfig credentials."})
    make_skill(root, "devops/git-bisect", {"name": "git-bisect",
               "description": "Find the commit that introduced a regression with git bisect."})
    return root


@pytest.fixture
def log(cli_env):
    """Lines of the hook log (a fresh list per call)."""
    path = os.path.join(cli_env["XDG_CACHE_HOME"], "skill-retrieval", "skill-retrieval.log")

    def read():
        try:
            with open(path, encoding="utf-8") as f:
                return f.read().splitlines()
        except FileNotFoundError:
            return []
    return read


@pytest.fixture
def hook(cli):
    """``hook(runner, stdin, *args, env=None, cwd=None)``: stdin is a dict
    (JSON-encoded), str or bytes."""
    def run(runner, stdin, *args, env=None, cwd=None):
        data = json.dumps(stdin) if isinstance(stdin, (dict, list)) else stdin
        return cli("hook", runner, *args, input=data, env=env, cwd=cwd)
    return run


def expected_block(cli, root, prompt, runner=None):
    """The plain query's text block for the same library and prompt, its
    guidance line naming ``runner``'s way to load a skill."""
    from retriever import render
    from retriever.runners import registry
    proc = cli("--root", root, prompt)
    assert proc.returncode == 0 and proc.stdout, proc
    assert render.guidance() in proc.stdout
    load = registry.RUNNERS[runner]["load"] if runner else None
    return proc.stdout.replace(render.guidance(), render.guidance(load))


def parse(proc):
    assert proc.returncode == 0, proc
    assert proc.stderr == "", proc.stderr
    return json.loads(proc.stdout)


# --------------------------------------------------------------- shapes


@pytest.mark.parametrize("runner", RUNNERS)
def test_each_runner_gets_its_exact_shape(runner, hook, cli, skills, log):
    block = expected_block(cli, skills, PROMPT, runner)
    assert "**pdf-extract**" in block
    doc = parse(hook(runner, payload(runner, PROMPT), "--root", skills))
    if runner in ("claude-code", "codex"):
        assert doc == {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": block}}
    elif runner == "gemini":
        assert doc == {"hookSpecificOutput": {"hookEventName": "BeforeAgent", "additionalContext": block}}
    elif runner == "cline":
        assert doc == {"cancel": False, "contextModification": block}
    else:
        assert doc == {"context": block}
    assert not [l for l in log() if "error" in l.lower()]


@pytest.mark.parametrize("runner", RUNNERS)
def test_nothing_relevant_gives_the_runners_empty_answer(runner, hook, skills, log):
    proc = hook(runner, payload(runner, UNRELATED), "--root", skills)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, EMPTY[runner], "")
    # Only the index build and the tier's absence (turned off here) are logged.
    assert not [l for l in log() if "hook %s: " % runner in l and "built index" not in l
                and "answered by BM25 alone: turned off" not in l]


def test_output_is_one_json_line(hook, skills):
    proc = hook("codex", payload("codex", PROMPT), "--root", skills)
    assert proc.stdout.endswith("\n") and proc.stdout.count("\n") == 1


def test_k_flag_limits_the_skills_injected(hook, skills):
    doc = parse(hook("claude-code", payload("claude-code", "pdf kubernetes git bisect"),
                     "--root", skills, "-k", "1"))
    assert doc["hookSpecificOutput"]["additionalContext"].count("\n- **") == 1


def test_hermes_prompt_as_content_parts(hook, cli, skills):
    p = payload("hermes", None)
    p["extra"]["user_message"] = [{"type": "text", "text": "pull the text out"},
                                  {"type": "image_url", "image_url": {"url": "data:x"}},
                                  {"type": "text", "text": "of my scanned pdf invoice"}]
    doc = parse(hook("hermes", p, "--root", skills))
    assert doc == {"context": expected_block(cli, skills, "pull the text out\nof my scanned pdf invoice", "hermes")}


def test_non_ascii_prompt_and_skill(hook, tmp_path):
    root = tmp_path / "cjk"
    make_skill(root, "pdf-zh", {"name": "pdf-zh", "description": "从扫描的 PDF 文件中提取文字 (OCR)"})
    doc = parse(hook("cline", payload("cline", "帮我从扫描的PDF里提取文字"), "--root", root))
    assert "从扫描的 PDF 文件中提取文字" in doc["contextModification"]


# ------------------------------------------------------------- failures

FAILURES = {
    "malformed JSON": b'{"prompt": "pdf',
    "not an object": b'["pdf"]',
    "empty stdin": b"",
    "undecodable bytes": b"\xff\xfe\x00garbage",
}


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("case", list(FAILURES))
def test_bad_stdin_fails_open(runner, case, hook, skills, log):
    proc = hook(runner, FAILURES[case], "--root", skills)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, EMPTY[runner], "")
    lines = log()
    assert len(lines) == 1 and "hook %s: " % runner in lines[0], lines


def test_malformed_json_is_named_in_the_log(hook, skills, log):
    # The C scanner's syntax errors once surfaced as "SystemError: ...
    # returned NULL without setting an exception" (json not imported).
    for raw in (b'{"prompt": "pdf', b"{not json", b'{"prompt" 1}'):
        proc = hook("claude-code", raw, "--root", skills)
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    lines = log()
    assert len(lines) == 3 and all("stdin is not valid JSON" in l for l in lines), lines


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_a_failing_hook_never_waits_on_its_log(cli, skills, cli_env, kind):
    # The log is the one place a failing hook writes.  A FIFO there with
    # no reader blocked the write's open forever, and the runner's prompt
    # with it; the line is dropped instead.
    folder = os.path.join(cli_env["XDG_CACHE_HOME"], "skill-retrieval")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    path = os.path.join(folder, "skill-retrieval.log")
    os.mkfifo(path) if kind == "fifo" else os.mkdir(path)
    try:
        proc = cli("hook", "claude-code", "--root", skills, input=b"{not json", timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail("the hook waited on a FIFO at its log")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


@pytest.mark.parametrize("runner", RUNNERS)
def test_empty_prompt_fails_open(runner, hook, skills, log):
    proc = hook(runner, payload(runner, "   \n"), "--root", skills)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, EMPTY[runner], "")
    lines = log()
    assert len(lines) == 1 and "empty prompt" in lines[0], lines


@pytest.mark.parametrize("runner", RUNNERS)
def test_missing_prompt_field_fails_open(runner, hook, skills, log):
    p = payload(runner, PROMPT)
    p.pop("prompt", None)
    p.pop("userPromptSubmit", None)
    p.get("extra", {}).pop("user_message", None)
    proc = hook(runner, p, "--root", skills)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, EMPTY[runner], "")
    lines = log()
    assert len(lines) == 1 and "hook %s: " % runner in lines[0] and "no " in lines[0], lines


@pytest.mark.parametrize("runner", RUNNERS)
def test_prompt_of_the_wrong_type_fails_open(runner, hook, skills, log):
    p = payload(runner, PROMPT)
    for d in (p, p.get("userPromptSubmit", {}), p.get("extra", {})):
        for k in ("prompt", "user_message"):
            if k in d:
                d[k] = 42
    proc = hook(runner, p, "--root", skills)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, EMPTY[runner], "")
    assert len(log()) == 1


@pytest.mark.parametrize("runner", RUNNERS)
def test_index_that_cannot_be_written_fails_open(runner, hook, skills, tmp_path, log):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    proc = hook(runner, payload(runner, PROMPT), "--root", skills, "--index", blocker / "sub" / "i.skr")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, EMPTY[runner], "")
    lines = log()
    assert len(lines) == 1 and "hook %s: " % runner in lines[0], lines


def test_corrupt_index_is_rebuilt_and_logged(hook, skills, tmp_path, log):
    index = tmp_path / "i.skr"
    # Still ours by its magic, so repaired (a file without it is refused:
    # test_hostile.py).
    index.write_bytes(b"SKRIDX\x00\x01" + b"garbage, not an index")
    doc = parse(hook("claude-code", payload("claude-code", PROMPT), "--root", skills, "--index", index))
    assert "**pdf-extract**" in doc["hookSpecificOutput"]["additionalContext"]
    assert [l for l in log() if "built index" in l and str(index) in l]


def test_missing_index_is_built_once(hook, skills, log):
    for _ in range(2):
        parse(hook("codex", payload("codex", PROMPT), "--root", skills))
    assert len([l for l in log() if "built index" in l]) == 1


def test_unknown_runner_exits_0_with_a_message(hook, log):
    proc = hook("cursor", payload("claude-code", PROMPT))
    assert proc.returncode == 0 and proc.stdout == ""
    assert "unknown hook runner 'cursor'" in proc.stderr
    assert len(log()) == 1


def test_bad_hook_arguments_fail_open(hook, skills, log):
    # An unknown flag sends the command line to the full CLI; it still
    # answers with the runner's empty output and exit 0.
    proc = hook("cline", payload("cline", PROMPT), "--root", skills, "--bogus")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, EMPTY["cline"], "")
    assert len(log()) == 1 and "--bogus" in log()[0]


def test_hook_help(cli):
    proc = cli("hook", "--help")
    assert proc.returncode == 0 and "RUNNER" in proc.stdout


def test_settings_warnings_go_to_the_log_not_stderr(hook, skills, log):
    proc = hook("gemini", payload("gemini", PROMPT), "--root", skills,
                env={"SKILL_RETRIEVAL_TOP_K": "lots"})
    assert proc.returncode == 0 and proc.stderr == ""
    assert "pdf-extract" in json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
    assert [l for l in log() if "warning" in l and "SKILL_RETRIEVAL_TOP_K" in l]


# ----------------------------------------------------------------- size


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("script", ["ascii", "cjk"])
def test_output_stays_under_10000_chars(runner, script, hook, tmp_path):
    root = tmp_path / "many"
    for i in range(120):
        if script == "ascii":
            desc = "Invoice processing helper number %d. " % i + "Handles invoice totals and invoice lines. " * 12
        else:
            desc = "发票处理工具 %d。" % i + "处理发票金额和发票明细。" * 30
        make_skill(root, "invoice-%03d" % i, {"name": "invoice-%03d" % i, "description": desc})
    prompt = "invoice totals" if script == "ascii" else "发票"
    proc = hook(runner, payload(runner, prompt), "--root", root, "-k", "120")
    doc = parse(proc)
    assert len(proc.stdout) < 10000
    block = {"claude-code": lambda d: d["hookSpecificOutput"]["additionalContext"],
             "codex": lambda d: d["hookSpecificOutput"]["additionalContext"],
             "gemini": lambda d: d["hookSpecificOutput"]["additionalContext"],
             "cline": lambda d: d["contextModification"],
             "hermes": lambda d: d["context"]}[runner](doc)
    lines = block.splitlines()
    skills_lines = [l for l in lines if l.startswith("- **")]
    assert len(skills_lines) >= 10  # cut to fit, not dropped
    assert len(skills_lines) < 120
    # whole lines only: every skill line is complete and the block ends cleanly
    assert block.endswith("\n")
    assert all(re.match(r"- \*\*invoice-\d{3}\*\* \(invoice-\d{3}\): .+", l) for l in skills_lines)


# ---------------------------------------------------- per-runner folders


def _names(proc, runner):
    doc = parse(proc)
    text = json.dumps(doc, ensure_ascii=False)
    return set(re.findall(r"\*\*([a-z0-9:-]+)\*\*", text))


def _marked(root, name, word):
    make_skill(root, name, {"name": name, "description": "Handles %s requests." % word})


def test_claude_code_folders(hook, tmp_path, cli_env):
    home = tmp_path / "home"
    repo = tmp_path / "repo"
    sub = repo / "pkg" / "sub"
    sub.mkdir(parents=True)
    (repo / ".git").mkdir()
    _marked(home / ".claude" / "skills", "user-skill", "zebra")
    _marked(repo / ".claude" / "skills", "repo-skill", "zebra")
    _marked(sub / ".claude" / "skills", "sub-skill", "zebra")
    _marked(repo / ".agents" / "skills", "agents-skill", "zebra")
    _marked(home / ".agents" / "skills", "home-agents-skill", "zebra")
    _marked(tmp_path / ".claude" / "skills", "outside-repo", "zebra")  # above the git root
    started = tmp_path / "started"
    _marked(started / ".claude" / "skills", "started-skill", "zebra")
    plug = tmp_path / "plugin-a"
    _marked(plug / "skills", "plugin-skill", "zebra")
    off = tmp_path / "plugin-b"
    _marked(off / "skills", "disabled-plugin-skill", "zebra")
    (home / ".claude" / "plugins").mkdir(parents=True)
    (home / ".claude" / "plugins" / "installed_plugins.json").write_text(json.dumps(
        {"version": 2, "plugins": {"a@m": [{"scope": "user", "installPath": str(plug)}],
                                   "b@m": [{"scope": "user", "installPath": str(off)}]}}))
    (home / ".claude" / "settings.json").write_text(json.dumps({"enabledPlugins": {"a@m": True, "b@m": False}}))
    proc = hook("claude-code", payload("claude-code", "zebra", cwd=str(sub)), "-k", "20",
                env={"CLAUDE_PROJECT_DIR": started})
    # Claude Code 2.1.197 and 2.1.332 read no .agents/skills (checked with
    # the real CLI); a plugin skill is named plugin:folder.
    assert _names(proc, "claude-code") == {"user-skill", "repo-skill", "sub-skill", "started-skill",
                                           "a:plugin-skill"}


def test_codex_folders(hook, tmp_path):
    home = tmp_path / "home"
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "src").mkdir()
    codex_home = tmp_path / "codex-home"
    _marked(codex_home / "skills", "codex-home-skill", "zebra")
    _marked(home / ".codex" / "skills", "default-codex-home", "zebra")  # not used: CODEX_HOME is set
    _marked(repo / ".agents" / "skills", "repo-agents", "zebra")
    _marked(home / ".agents" / "skills", "user-agents", "zebra")
    _marked(repo / ".claude" / "skills", "claude-only", "zebra")
    _marked(repo / "src" / ".codex" / "skills", "cwd-codex", "zebra")
    _marked(repo / ".codex" / "skills", "parent-codex", "zebra")  # Codex 0.171.0 reads only the cwd's
    proc = hook("codex", payload("codex", "zebra", cwd=str(repo / "src")), "-k", "20",
                env={"CODEX_HOME": codex_home})
    assert _names(proc, "codex") == {"codex-home-skill", "repo-agents", "user-agents", "cwd-codex"}


def test_gemini_folders(hook, tmp_path):
    home = tmp_path / "home"
    proj = tmp_path / "proj"
    _marked(home / ".gemini" / "skills", "user-gemini", "zebra")
    _marked(home / ".agents" / "skills", "user-agents", "zebra")
    _marked(proj / ".gemini" / "skills", "proj-gemini", "zebra")
    _marked(proj / ".agents" / "skills", "proj-agents", "zebra")
    _marked(home / ".claude" / "skills", "claude-only", "zebra")
    proc = hook("gemini", payload("gemini", "zebra", cwd=str(proj)), "-k", "20")
    assert _names(proc, "gemini") == {"user-gemini", "user-agents", "proj-gemini", "proj-agents"}


def test_cline_folders(hook, tmp_path):
    home = tmp_path / "home"
    ws1, ws2 = tmp_path / "ws1", tmp_path / "ws2"
    _marked(home / ".cline" / "skills", "user-cline", "zebra")
    _marked(ws1 / ".cline" / "skills", "ws1-cline", "zebra")
    _marked(ws1 / ".clinerules" / "skills", "ws1-clinerules", "zebra")
    _marked(ws2 / ".agents" / "skills", "ws2-agents", "zebra")
    _marked(home / ".agents" / "skills", "user-agents", "zebra")
    _marked(ws2 / ".claude" / "skills", "ws2-claude-only", "zebra")
    _marked(home / ".claude" / "skills", "claude-user-only", "zebra")
    p = payload("cline", "zebra")
    p["workspaceRoots"] = [str(ws1), str(ws2)]
    proc = hook("cline", p, "-k", "20")
    # the folders Cline 3.0.65 lists skills from (checked with the real CLI)
    assert _names(proc, "cline") == {"user-cline", "ws1-cline", "ws1-clinerules", "ws2-agents", "user-agents"}


def test_hermes_uses_only_the_folders_hermes_lists_skills_from(hook, tmp_path):
    # Hermes can load skills from its own folder and skills.external_dirs;
    # a skill only Claude Code knows must not be suggested to it.
    hh = tmp_path / "hermes-home"
    ext = tmp_path / "shared-skills"
    _marked(hh / "skills" / "research", "hermes-skill", "zebra")
    _marked(ext, "external-skill", "zebra")
    _marked(tmp_path / "home" / ".claude" / "skills", "claude-only-skill", "zebra")
    (hh / "config.yaml").write_text("skills:\n  external_dirs: [%s]\n" % ext)
    proc = hook("hermes", payload("hermes", "zebra"), env={"HERMES_HOME": hh})
    assert _names(proc, "hermes") == {"hermes-skill", "external-skill"}
    # The same home through another runner still sees Claude Code's skill.
    proc = hook("claude-code", payload("claude-code", "zebra"), env={"HERMES_HOME": hh})
    assert "claude-only-skill" in _names(proc, "claude-code")


def test_explicit_root_overrides_runner_folders(hook, tmp_path, skills):
    _marked(tmp_path / "home" / ".claude" / "skills", "user-skill", "pdf")
    proc = hook("claude-code", payload("claude-code", PROMPT), "--root", skills, "-k", "20")
    assert "user-skill" not in _names(proc, "claude-code")


@pytest.mark.parametrize("runner", ["claude-code", "codex", "gemini", "cline"])
def test_no_skill_folders_means_no_index_and_no_output(runner, hook, cli_env, log):
    proc = hook(runner, payload(runner, PROMPT, cwd=cli_env["HOME"]))
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, EMPTY[runner], "")
    cache = os.path.join(cli_env["XDG_CACHE_HOME"], "skill-retrieval")
    assert not os.path.isdir(cache) or not [f for f in os.listdir(cache) if f.endswith(".skr")]
    assert log() == []


def test_aliased_folders_are_indexed_once(hook, tmp_path, log):
    # ~/.agents/skills -> ~/.claude/skills is one folder: the index must not
    # be rebuilt on every prompt because the root lists differ.
    home = tmp_path / "home"
    _marked(home / ".claude" / "skills", "user-skill", "zebra")
    (home / ".agents").mkdir()
    (home / ".agents" / "skills").symlink_to(home / ".claude" / "skills")
    for _ in range(3):
        assert _names(hook("claude-code", payload("claude-code", "zebra", cwd=str(home))),
                      "claude-code") == {"user-skill"}
    assert len([l for l in log() if "built index" in l]) == 1


def test_new_skill_folder_is_picked_up(hook, tmp_path):
    # A project that gains a .claude/skills folder gets it on the next prompt.
    proj = tmp_path / "proj"
    proj.mkdir()
    _marked(tmp_path / "home" / ".claude" / "skills", "user-skill", "zebra")
    p = payload("claude-code", "zebra", cwd=str(proj))
    assert _names(hook("claude-code", p), "claude-code") == {"user-skill"}
    _marked(proj / ".claude" / "skills", "proj-skill", "zebra")
    p = payload("claude-code", "zebra", cwd=str(proj))  # a new session: nothing given yet
    assert _names(hook("claude-code", p), "claude-code") == {"user-skill", "proj-skill"}


def test_slow_cold_build_finishes_in_the_background(hook, skills, log, cli_env):
    # A runner kills a hook that overruns its timeout; the build must not
    # die with it.  With no time to wait, the first prompt gets the empty
    # answer at once and a later prompt finds the finished index.
    import time
    p = payload("cline", PROMPT)
    proc = hook("cline", p, "--root", skills, env={"SKILL_RETRIEVAL_HOOK_WAIT": "0"})
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, EMPTY["cline"], "")
    assert [l for l in log() if "still being built" in l]
    deadline = time.monotonic() + 60
    while not [l for l in log() if "built index" in l] and time.monotonic() < deadline:
        time.sleep(0.05)
    doc = parse(hook("cline", p, "--root", skills, env={"SKILL_RETRIEVAL_HOOK_WAIT": "0"}))
    assert "**pdf-extract**" in doc["contextModification"]
    cache = os.path.join(cli_env["XDG_CACHE_HOME"], "skill-retrieval")
    assert [f for f in os.listdir(cache) if f.endswith(".skr")]
    assert not [f for f in os.listdir(cache) if f.endswith(".building")]


def test_a_build_under_way_is_not_started_twice(hook, skills, cli_env, log, tmp_path):
    index = tmp_path / "i.skr"
    lock = tmp_path / "i.skr.building"
    lock.write_text("%d\n" % os.getpid())  # a live process holds the lock
    p = payload("codex", PROMPT)
    proc = hook("codex", p, "--root", skills, "--index", index, env={"SKILL_RETRIEVAL_HOOK_WAIT": "0.2"})
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    (line,) = log()
    assert "still being built" in line and "pid %d" % os.getpid() in line
    assert not index.exists() and lock.exists()
    # a lock left by a process that is gone is taken over
    import subprocess
    dead = subprocess.Popen(["true"])
    dead.wait()
    lock.write_text("%d\n" % dead.pid)
    doc = parse(hook("codex", p, "--root", skills, "--index", index))
    assert "**pdf-extract**" in doc["hookSpecificOutput"]["additionalContext"]
    assert index.exists() and not lock.exists()


def test_hermes_hook_ranks_within_what_hermes_shows(hook, tmp_path):
    # Issue 10: a skill for another OS ranked first must neither take a
    # place nor set the floor; an enabled plugin's skill is offered by its
    # <plugin>:<skill> name, a disabled plugin's never.
    import sys
    other = "windows" if not sys.platform.startswith("win") else "linux"
    hh = tmp_path / "hermes-home"
    make_skill(hh / "skills", "legacy/ftp-finder", {"name": "ftp-finder", "platforms": [other],
               "description": "Upload release archives to the legacy FTP server from the Finder"})
    make_skill(hh / "skills", "legacy/ftp-checksum", {"name": "ftp-checksum",
               "description": "Checksum archives on an FTP server before a release"})
    for plug in ("myplug", "offplug"):
        make_skill(hh / "plugins" / plug / "skills", "ftp-mirror", {"name": "ftp-mirror",
                   "description": "Mirror release archives to a legacy FTP server"})
    (hh / "config.yaml").write_text("plugins:\n  enabled: [myplug]\n")
    env = {"HERMES_HOME": hh, "SKILL_RETRIEVAL_MIN_SCORE_RATIO": "0.7"}
    proc = hook("hermes", payload("hermes", "upload release archives to the legacy ftp server"), env=env)
    got = set(re.findall(r"\*\*([a-z0-9:-]+)\*\*", parse(proc)["context"]))
    assert got == {"ftp-checksum", "myplug:ftp-mirror"}, got


# ------------------------------------------------- the session-start hook


@pytest.mark.parametrize("runner", ["claude-code", "codex", "gemini"])
def test_the_session_start_hook_prints_nothing_and_builds_the_index_in_the_background(runner, cli, cli_env, log):
    # Issue 38: `warm RUNNER` runs when a session starts.  It prints
    # nothing (Claude Code hands a SessionStart hook's stdout to the
    # model) and leaves the work to a detached child: with the semantic
    # tier off, that child builds the index of the runner's skill set, so
    # the first prompt finds it.
    home = cli_env["HOME"]
    folder = {"claude-code": os.path.join(home, ".claude", "skills"),
              "codex": os.path.join(home, ".codex", "skills"),
              "gemini": os.path.join(home, ".gemini", "skills")}[runner]
    make_skill(folder, "pdf-extract", {"name": "pdf-extract", "description": "Extract text from scanned PDF files."})
    start = json.dumps({"hook_event_name": "SessionStart", "source": "startup", "cwd": home, "session_id": "s1"})
    proc = cli("warm", runner, input=start, cwd=home)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    cache = os.path.join(cli_env["XDG_CACHE_HOME"], "skill-retrieval")
    assert wait_until(lambda: os.path.isdir(cache) and any(f.endswith(".skr") for f in os.listdir(cache)))
    assert wait_until(lambda: "warm %s: built index" % runner in "\n".join(log()))


@pytest.mark.parametrize("args", [["warm"], ["warm", "nope"], ["warm", "claude-code", "extra"]])
def test_a_bad_session_start_command_line_is_silent_and_logged(args, cli, log):
    proc = cli(*args, input="{}")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    assert "warm: bad command line" in "\n".join(log())


# --------------------------------------------- which tier answered (issue 38)


def test_which_tier_answered_goes_into_the_prompts_one_usage_line(hook, cli, cli_env, skills):
    """One append a prompt: the tier's answer (and why BM25 answered
    alone) is the usage record's last field, not a second log file that
    every prompt opened and wrote; doctor counts it from there."""
    for n in range(2):
        parse(hook("claude-code", {"prompt": PROMPT, "cwd": "/", "session_id": "t%d" % n}, "--root", skills))
    parse(hook("claude-code", {"prompt": PROMPT, "cwd": "/"}, "--root", skills))  # no session: not counted
    cache = os.path.join(cli_env["XDG_CACHE_HOME"], "skill-retrieval")
    assert not [n for n in os.listdir(cache) if n.startswith("prompt-tiers")]
    with open(os.path.join(cache, "usage.log")) as f:
        lines = [json.loads(l) for l in f]
    assert [l[-1] for l in lines] == ["turned off (SKILL_RETRIEVAL_SEMANTIC=off)"] * 2
    rep = json.loads(cli("doctor", "--root", skills, "--format", "json", "--no-probe").stdout)
    assert rep["semantic"]["recent"] == {"prompts": 2, "bm25": 2, "why": {"turned off": 2}}


def test_each_prompt_answered_by_bm25_alone_is_logged_with_why_and_doctor_counts_them(hook, cli, skills, log):
    for n in range(2):  # the tier is off here
        parse(hook("claude-code", {"prompt": PROMPT, "cwd": "/", "session_id": "s%d" % n}, "--root", skills))
    # Without the extra (an interpreter without numpy): said as such.
    bare = "/usr/bin/python3"
    if not os.path.exists(bare) or subprocess.run([bare, "-c", "import numpy"], capture_output=True).returncode == 0:
        pytest.skip("no interpreter without numpy here")
    parse(hook("claude-code", {"prompt": PROMPT, "cwd": "/", "session_id": "s3"}, "--root", skills,
               env={"SKILL_RETRIEVAL_SEMANTIC": "on", "SKILL_RETRIEVAL_PYTHON": bare}))
    lines = [l for l in log() if "answered by BM25 alone" in l]
    assert len(lines) == 3
    assert lines[0].endswith("hook claude-code: answered by BM25 alone: turned off (SKILL_RETRIEVAL_SEMANTIC=off)")
    assert lines[2].endswith("answered by BM25 alone: the semantic extra is not installed")
    # doctor's probe names no session, so it is not counted.
    rep = json.loads(cli("doctor", "--root", skills, "--format", "json").stdout)
    assert rep["semantic"]["recent"] == {"prompts": 3, "bm25": 3, "why": {"turned off": 2,
                                                                           "the semantic extra is not installed": 1}}
    out = cli("doctor", "--root", skills, "--no-probe").stdout
    assert ("3 of the last 3 prompts were answered by BM25 alone: turned off (2), "
            "the semantic extra is not installed (1)") in out
