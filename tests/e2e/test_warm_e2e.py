"""The session-start hook inside the real CLIs (issue 38), against the
mock model API: with the semantic helper stopped, a new session's start
runs ``skill-retrieve warm RUNNER`` (registered by ``install``), and the
session's first prompt, sent 3 s later as a user types, gets the
semantic tier's answer.

The prompt is Spanish and shares no word with the English library: BM25
alone finds nothing for it, so ``git-bisect`` in the injected block means
the tier answered (the decision is off, as in tests/test_semantic.py: the
tier's ranking is what is checked, not the gate), and the hook's tally
says so too.
Before the warm-up existed, that first prompt started the helper and got
nothing.  Every helper a test starts is stopped (then killed) after it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from retriever import semantic

from .runners import CLAUDE_VERSIONS, REPO_ROOT, claude_bin, claude_env, end_process, require_claude
from .test_claude_codex_e2e import make_library

BIN = REPO_ROOT / "bin" / "skill-retrieve"
SPANISH = "¿Cómo encuentro el cambio que introdujo el error en el historial?"
TYPING = 3.0  # seconds between the session's start and its first prompt

pytestmark = pytest.mark.skipif(not semantic.installed(), reason="the semantic extra is not installed")


@pytest.fixture
def tier_env(tmp_path):
    """The variables that turn the tier on with a helper of this test's
    own (a short runtime folder: a socket path holds 108 bytes); the
    helper is stopped, then killed, after the test."""
    run = tempfile.mkdtemp(prefix="srw-", dir="/tmp")
    extra = {"SKILL_RETRIEVAL_SEMANTIC": "on", "XDG_RUNTIME_DIR": run, "SKILL_RETRIEVAL_REVALIDATE": "off",
             "SKILL_RETRIEVAL_DECIDE": "off"}
    yield extra
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path / "home"), **extra}
    subprocess.run([str(BIN), "serve", "--stop"], env=env, capture_output=True, timeout=30)
    try:
        pid = int(Path(run, "skill-retrieval", "semantic.lock").read_text().strip() or 0)
    except (OSError, ValueError):
        pid = 0
    if pid:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    shutil.rmtree(run, ignore_errors=True)


def skr(args, home: Path, extra: dict, **kw) -> subprocess.CompletedProcess:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LC_ALL": "C.UTF-8", **extra}
    return subprocess.run([str(BIN), *args], env=env, capture_output=True, text=True, timeout=120, **kw)


def log_size(home: Path) -> int:
    """How much of our log exists now: the warm-up is read after it."""
    log = home / ".cache" / "skill-retrieval" / "skill-retrieval.log"
    return log.stat().st_size if log.exists() else 0


def typed_after_warm_up(home: Path, since: int, deadline: float = 90.0) -> None:
    """Wait as a user types: TYPING seconds, then on until a helper
    started after byte ``since`` of our log says its vectors are ready
    (up to ``deadline`` seconds)."""
    time.sleep(TYPING)
    log = home / ".cache" / "skill-retrieval" / "skill-retrieval.log"
    ready = re.compile(r"semantic helper: vectors of .* ready \(\d+ skills\)")
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if log.exists() and ready.search(log.read_bytes()[since:].decode("utf-8", "replace")):
            return
        time.sleep(0.2)


def claude_session(home: Path, project: Path, mock, extra: dict, prompt: str, version: str) -> list[dict]:
    """One Claude Code session in print mode with stream-json input: it
    starts (its SessionStart hooks run), and once the user has typed
    (:func:`typed_after_warm_up`) the prompt arrives on stdin.  Returns
    the stream-json events printed."""
    require_claude(version)
    cmd = [str(claude_bin(version)), "-p", "--input-format", "stream-json", "--output-format", "stream-json",
           "--verbose", "--include-hook-events"]
    since = log_size(home)
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT, cwd=str(project),
                                env=claude_env(home, mock, extra), start_new_session=True)
        try:
            typed_after_warm_up(home, since)
            msg = {"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": prompt}]}}
            proc.stdin.write((json.dumps(msg) + "\n").encode())
            proc.stdin.close()
            proc.wait(timeout=120)
        finally:
            end_process(proc)
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
    events = []
    for line in text.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    assert events, text[-3000:]
    return events


def hook_outputs(events: list[dict], event: str) -> list[str]:
    """The stdout of each ``event`` hook run (``--include-hook-events``)."""
    return [ev.get("stdout") or ev.get("output") or "" for ev in events
            if ev.get("type") == "system" and ev.get("subtype") == "hook_response"
            and ev.get("hook_event") in (event, None) and (ev.get("hook_name") or "").startswith(event)]


def diag(events, home: Path) -> str:
    log = home / ".cache" / "skill-retrieval" / "skill-retrieval.log"
    return "events: %s\nlog: %s" % (json.dumps(events)[-3000:], log.read_text()[-3000:] if log.exists() else "-")


@pytest.mark.parametrize("version", CLAUDE_VERSIONS)
def test_claude_code_session_start_warms_the_helper_for_the_first_prompt(mock_llm, tmp_path, tier_env, version):
    home = tmp_path / "home"
    project = tmp_path / "project"
    project.mkdir()
    make_library(home / ".claude" / "skills")
    cp = skr(["install", "claude-code"], home, tier_env)
    assert cp.returncode == 0, cp
    skr(["serve", "--stop"], home, tier_env)  # no helper: as after a break

    events = claude_session(home, project, mock_llm, tier_env, SPANISH, version)
    starts = hook_outputs(events, "SessionStart")
    prompts = hook_outputs(events, "UserPromptSubmit")
    assert len(prompts) == 1, diag(events, home)
    assert starts and all(o.strip() == "" for o in starts), diag(events, home)  # warm prints nothing
    assert "- **git-bisect**" in prompts[0], diag(events, home)
    bodies = [json.dumps(r.get("body")) for r in mock_llm.requests]
    assert any("git-bisect" in b for b in bodies), diag(events, home)
    # Which tier answered, as doctor counts it (from the usage record).
    doc = json.loads(skr(["doctor", "--format", "json", "--no-probe"], home, tier_env).stdout)
    assert doc["semantic"]["recent"] == {"prompts": 1, "bm25": 0, "why": {}}, diag(events, home)


# ----------------------------------------------------- Codex and Gemini CLI
#
# Their print modes send the prompt at once, so the 3 s a user types is
# played by running the registered hooks in order, as the runner does:
# the session-start command, then, 3 s later, the prompt hook.  That the
# real CLI runs the session-start hook is checked on a real session first.


def registered(path: Path, event: str, verb: str) -> str:
    """The command of ours registered on ``event`` in the settings file."""
    data = json.loads(path.read_text())
    (cmd,) = [h["command"] for g in data["hooks"][event] for h in g["hooks"] if (" %s " % verb) in h["command"]]
    return cmd


def warmed_by_a_real_session(home: Path, runner: str) -> bool:
    log = home / ".cache" / "skill-retrieval" / "skill-retrieval.log"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if log.exists() and "warm %s: asked the semantic helper" % runner in log.read_text():
            return True
        time.sleep(0.2)
    return False


def first_prompt_after_typing(settings: Path, prompt_event: str, runner: str, home: Path, project: Path,
                              env: dict) -> str:
    """Run the registered session-start command, wait as a user types, run
    the registered prompt hook with the Spanish prompt; its stdout."""
    full = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LC_ALL": "C.UTF-8", **env}
    since = log_size(home)
    start = {"hook_event_name": "SessionStart", "source": "startup", "cwd": str(project), "session_id": "w1"}
    cp = subprocess.run(["sh", "-c", registered(settings, "SessionStart", "warm")], input=json.dumps(start),
                        env=full, cwd=str(project), capture_output=True, text=True, timeout=30)
    assert (cp.returncode, cp.stdout, cp.stderr) == (0, "", ""), cp
    typed_after_warm_up(home, since)
    ask = {"hook_event_name": prompt_event, "prompt": SPANISH, "cwd": str(project), "session_id": "w1"}
    cp = subprocess.run(["sh", "-c", registered(settings, prompt_event, "hook")], input=json.dumps(ask),
                        env=full, cwd=str(project), capture_output=True, text=True, timeout=30)
    assert cp.returncode == 0, cp
    return cp.stdout


def test_codex_session_start_warms_the_helper_for_the_first_prompt(mock_llm, tmp_path, tier_env):
    from .runners import require_codex, run_codex, write_codex_config
    require_codex()
    home, project, codex_home = tmp_path / "home", tmp_path / "project", tmp_path / "codex"
    project.mkdir()
    make_library(home / ".agents" / "skills")
    write_codex_config(codex_home, mock_llm.port)
    env = dict(tier_env, CODEX_HOME=str(codex_home))
    assert skr(["install", "codex"], home, env).returncode == 0
    skr(["serve", "--stop"], home, env)
    cp, _ = run_codex("say hello", codex_home, mock_llm, project, home=home, extra_env=env, write_config=False)
    assert cp.returncode == 0, cp
    assert warmed_by_a_real_session(home, "codex"), cp
    skr(["serve", "--stop"], home, env)
    out = first_prompt_after_typing(codex_home / "hooks.json", "UserPromptSubmit", "codex", home, project, env)
    assert "- **git-bisect**" in out, out
    last = json.loads(skr(["last", "--format", "json"], home, env).stdout)
    assert last[-1]["tier"] == "bm25+semantic", last


def test_gemini_cli_session_start_warms_the_helper_for_the_first_prompt(tmp_path, tier_env):
    from .mockserver import MockLLM
    from .runners import require_gemini, run_gemini, write_gemini_settings
    require_gemini()
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    make_library(home / ".gemini" / "skills")
    write_gemini_settings(home)
    assert skr(["install", "gemini"], home, tier_env).returncode == 0
    skr(["serve", "--stop"], home, tier_env)
    with MockLLM() as mock:
        cp, _ = run_gemini("say hello", home, mock, project, extra_env=tier_env)
    assert warmed_by_a_real_session(home, "gemini"), cp
    skr(["serve", "--stop"], home, tier_env)
    out = first_prompt_after_typing(home / ".gemini" / "settings.json", "BeforeAgent", "gemini", home, project,
                                    tier_env)
    assert "- **git-bisect**" in out, out
