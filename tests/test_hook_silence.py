"""A hook is silent under any setting, valid or not (issue 31).

Every ``SKILL_RETRIEVAL_*`` setting of ``retriever/settings.py`` is set to
junk, all at once and one at a time, and every runner's hook is run the
way the runner runs it (the command ``install`` registers, through
``sh -c``, and the checkout's ``bin/skill-retrieve`` as the shell launcher
the repository hooks use).  Each run must exit 0, write nothing to stderr
and nothing but the runner's JSON to stdout, still inject the skill (a
junk value means the default), and say what it ignored in the log.

Junk turns the semantic tier on (its default); the helper a hook starts is
stopped after each test, by the pid in its lock file.
"""

import json
import os
import signal
import subprocess
import tempfile
import time

import pytest

from conftest import BIN, base_env, make_skill
from test_hooks import payload

from retriever import settings
from retriever.runners import install as inst
from retriever.runners.registry import NAMES as RUNNERS, RUNNERS as RECORDS

# Values no setting accepts (or odd ones it must survive): words, signs,
# non-finite numbers, hex, shell and bidi characters, a huge number, and
# relative paths for the path settings.
# (The long one stays under 100 bytes: a longer socket path moves to the
# machine's shared /tmp folder, outside the test.)
JUNK = ["junk", "-1", "nan", "1e999", "0x10", "on off", "\u202e\u200b\u2028", "9" * 90,
        "rel/dir", "; echo pwned >&2", "'\"$HOME"]
PROMPT = "merge several pdf files into one document"


@pytest.fixture
def world(tmp_path):
    """A home where every runner finds one skill, an env, and cleanup of
    any semantic helper the hooks start."""
    env = base_env(tmp_path)
    home = env["HOME"]
    for folder in (".agents/skills", ".claude/skills", ".hermes/skills"):
        make_skill(os.path.join(home, folder), "pdf-merge",
                   {"name": "pdf-merge", "description": "Merge several PDF files into one document"})
    # A short runtime folder of our own: the helper's socket lives there.
    run = tempfile.mkdtemp(prefix="sr-", dir="/tmp")
    env["XDG_RUNTIME_DIR"] = run
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    yield env, str(cwd)
    _stop_helpers(env)
    import shutil
    shutil.rmtree(run, ignore_errors=True)


def _stop_helpers(env):
    # Junk puts the helper's socket anywhere (a relative folder, /tmp for a
    # path too long): the helpers to stop are those whose environment holds
    # this test's own runtime folder, found by their pid.
    marker = ("XDG_RUNTIME_DIR=" + env["XDG_RUNTIME_DIR"]).encode()
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if b"retriever.semantic.helper" not in f.read():
                    continue
            with open("/proc/%s/environ" % pid, "rb") as f:
                if marker in f.read().split(b"\0"):
                    pids.append(int(pid))
        except OSError:
            continue
    for pid in pids:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 20
    for pid in pids:
        while time.monotonic() < deadline and os.path.exists("/proc/%d" % pid) and _running(pid):
            time.sleep(0.05)
        if _running(pid):
            os.kill(pid, signal.SIGKILL)


def _running(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(") ")[1][:1] != "Z"
    except OSError:
        return False


def _hook(runner, env, cwd, launcher):
    stdin = json.dumps({"prompt": PROMPT, "cwd": cwd} if runner == "opencode" else payload(runner, PROMPT, cwd))
    if launcher == "installed":
        argv = ["sh", "-c", inst.hook_command(runner)]
    else:
        argv = [str(BIN), "hook", runner]
    return subprocess.run(argv, input=stdin.encode(), env=env, cwd=cwd, capture_output=True, timeout=120)


def _context(runner, out):
    """The injected text of a hook's stdout; asserts it is only the runner's JSON."""
    empty = RECORDS[runner]["empty"].encode()
    if out == empty:
        return ""
    assert out.endswith(b"\n") and out.count(b"\n") == 1, out[:300]
    doc = json.loads(out)
    return (doc.get("hookSpecificOutput", {}).get("additionalContext") or doc.get("contextModification")
            or doc.get("context") or "")


def _assert_silent(runner, proc):
    assert proc.returncode == 0, proc
    assert proc.stderr == b"", proc.stderr[:500]
    text = _context(runner, proc.stdout)
    assert "**pdf-merge**" in text, proc.stdout[:500]


@pytest.mark.parametrize("junk", JUNK, ids=[j.encode("unicode_escape").decode()[:12] for j in JUNK])
def test_every_setting_junk_at_once_every_runner_stays_silent(junk, world):
    env, cwd = world
    env = dict(env, **{name: junk for name in settings.TABLE})
    for runner in RUNNERS:
        _assert_silent(runner, _hook(runner, env, cwd, "installed"))
    # The shell launcher reads SKILL_RETRIEVAL_PYTHON itself: one runner each time.
    runner = RUNNERS[JUNK.index(junk) % len(RUNNERS)]
    _assert_silent(runner, _hook(runner, env, cwd, "bin"))
    log = open(os.path.join(env["XDG_CACHE_HOME"], "skill-retrieval", "skill-retrieval.log"),
               encoding="utf-8").read()
    # What every hook reads says, in the log, which value it ignored.
    for name in ("SKILL_RETRIEVAL_TOP_K", "SKILL_RETRIEVAL_HOOK_WAIT", "SKILL_RETRIEVAL_REVALIDATE"):
        assert not _rejects(name, junk) or "ignoring %s=" % name in log, (name, log[-2000:])


def _rejects(name, raw):
    try:
        settings.parse(name, raw)
        return False
    except ValueError:
        return True


@pytest.mark.parametrize("name", list(settings.TABLE))
def test_each_setting_junk_alone_stays_silent(name, world):
    # One setting at a time, each runner in turn (so every pair of setting
    # and runner is not needed to cover both).
    env, cwd = world
    runner = RUNNERS[list(settings.TABLE).index(name) % len(RUNNERS)]
    for junk in ("junk", "-1"):
        _assert_silent(runner, _hook(runner, dict(env, **{name: junk}), cwd, "installed"))


RUNNER_ENV = ("HERMES_HOME", "HERMES_PLATFORM", "CLAUDE_CONFIG_DIR", "CLAUDE_PROJECT_DIR", "CODEX_HOME",
              "GEMINI_PROJECT_DIR", "CLINE_DIR", "OPENCODE_CONFIG_DIR", "XDG_RUNTIME_DIR", "XDG_STATE_HOME")


@pytest.mark.parametrize("junk", ["junk", "rel/dir", "\u202e\u2028", "/dev/null", ""])
def test_the_runners_own_variables_as_junk_keep_every_hook_silent(junk, world):
    # Not our settings, but read by the hooks (skill folders, platform):
    # the skills may not be found, and still nothing but JSON comes out.
    env, cwd = world
    env = dict(env, SKILL_RETRIEVAL_SEMANTIC="off", **{name: junk for name in RUNNER_ENV})
    for runner in RUNNERS:
        proc = _hook(runner, env, cwd, "installed")
        assert proc.returncode == 0 and proc.stderr == b"", proc
        _context(runner, proc.stdout)
