"""Hostile input, runtime side (issue 15 items 2, 5 and 9): hook command
lines that must fail open, one builder per index, and a cache that cannot
be written."""

import json
import os
import subprocess
import time

import pytest

from retriever import background, service
from skillret_helpers import BIN, assert_clean, json_results, make_skill
from test_hooks import EMPTY, payload
from test_hostile import root  # noqa: F401 (a fixture)


def log_lines(cli_env):
    path = os.path.join(cli_env["XDG_CACHE_HOME"], "skill-retrieval", "skill-retrieval.log")
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().splitlines()
    except FileNotFoundError:
        return []


def wait_for(pred, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


# -- 5. every command line starting with "hook" fails open ---------------------

@pytest.mark.parametrize("args,runner", [
    (["--fresh", "claude-code"], "claude-code"),
    (["--rerank", "codex"], "codex"),
    (["--format", "json", "gemini"], "gemini"),
    (["--bogus", "cline"], "cline"),
    (["-k", "0", "gemini"], "gemini"),
    (["--format", "xml", "cline"], "cline"),
    (["codex", "--root"], "codex"),
    (["codex", "extra", "words"], "codex"),
])
def test_odd_hook_command_lines_exit_0_with_the_runners_output(cli, cli_env, root, args, runner):
    proc = cli("hook", *args, input=json.dumps(payload(runner, "groom the zebracorn")),
               env={"CLAUDE_PROJECT_DIR": root.parent})
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    if proc.stdout != EMPTY[runner]:
        json.loads(proc.stdout)  # an answer in the runner's shape is fine too
    assert proc.stderr == ""


@pytest.mark.parametrize("args", [["--root"], [], ["--bogus"]])
def test_a_hook_without_a_runner_exits_0(cli, args):
    proc = cli("hook", *args, input="{}")
    assert proc.returncode == 0 and proc.stdout == "" and "Traceback" not in proc.stderr


def test_hook_help_still_prints_help(cli):
    proc = cli("hook", "--help")
    assert_clean(proc)
    assert "usage" in proc.stdout


def test_bad_hook_flags_are_logged_once(cli, cli_env, root):
    proc = cli("hook", "--bogus", "cline", "--root", root, input=json.dumps(payload("cline", "zebracorn")))
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, EMPTY["cline"], "")
    (line,) = log_lines(cli_env)
    assert "unknown option --bogus" in line


# -- 2. one builder per index ----------------------------------------------------

def test_the_lock_works_when_the_cache_folder_does_not_exist(tmp_path):
    lock = str(tmp_path / "not" / "yet" / "i.skr.building")
    assert background.lock(lock) == 0
    assert os.path.exists(lock)
    assert background.lock(lock) == os.getpid()  # held by a live process
    background.unlink(lock)
    assert background.lock(lock) == 0
    background.unlink(lock)


def test_a_dead_or_overrunning_holder_does_not_block_the_next_build(tmp_path):
    lock = str(tmp_path / "i.skr.building")
    dead = subprocess.Popen(["true"])
    dead.wait()
    with open(lock, "w") as f:
        f.write("%d\n" % dead.pid)
    assert background.lock(lock) == 0
    background.unlink(lock)
    with open(lock, "w") as f:
        f.write("%d\n" % os.getpid())  # alive, but started long ago
    old = time.time() - background.LOCK_STALE_AFTER - 1
    os.utime(lock, (old, old))
    assert background.lock(lock) == 0
    background.unlink(lock)


def test_two_first_prompts_start_one_build(cli_env, tmp_path):
    """No cache folder yet: both hooks used to take the 'lock' and build."""
    r = tmp_path / "big"
    for i in range(400):
        make_skill(r, "s%03d" % i, {"name": "s%03d" % i, "description": "skill %d about zebracorn%d" % (i, i)},
                   body="\n".join("line %d word%d" % (j, i * 40 + j) for j in range(40)))
    env = dict(cli_env, SKILL_RETRIEVAL_HOOK_WAIT="20")
    data = json.dumps(payload("codex", "zebracorn7")).encode()
    procs = [subprocess.Popen([str(BIN), "hook", "codex", "--root", str(r)], env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    for p in procs:  # both payloads in before either answer is read
        p.stdin.write(data)
        p.stdin.close()
    for p in procs:
        p.wait(timeout=120)
        p.stdout.close()
        p.stderr.close()
    assert all(p.returncode == 0 for p in procs)
    assert wait_for(lambda: not [f for f in os.listdir(os.path.join(cli_env["XDG_CACHE_HOME"], "skill-retrieval"))
                                 if f.endswith(".building")])
    assert len([l for l in log_lines(cli_env) if "built index" in l]) == 1, log_lines(cli_env)


def test_a_held_lock_stops_a_second_revalidator(cli, cli_env, root, tmp_path):
    index = tmp_path / "i.skr"
    assert_clean(cli("build", "--root", root, "--index", index))
    make_skill(root, "new/ocr", {"name": "ocr", "description": "Optical character recognition"})  # now stale
    lock = str(index) + ".building"
    with open(lock, "w") as f:
        f.write("%d\n" % os.getpid())  # a live revalidator holds it
    for _ in range(3):
        assert_clean(cli("--root", root, "--index", index, "pdf", env={"SKILL_RETRIEVAL_REVALIDATE": "0"}))
    # No revalidator ran: the index is still the stale one and the lock is ours.
    time.sleep(1.0)
    assert not [l for l in log_lines(cli_env) if "in background" in l]
    assert open(lock).read().strip() == str(os.getpid())
    os.unlink(lock)
    assert_clean(cli("--root", root, "--index", index, "pdf", env={"SKILL_RETRIEVAL_REVALIDATE": "0"}))
    assert wait_for(lambda: [l for l in log_lines(cli_env) if "rebuilt" in l and "in background" in l])
    assert wait_for(lambda: not os.path.exists(lock))


# -- 9. a cache that cannot be written ---------------------------------------------

def test_an_unwritable_cache_answers_from_memory_and_warns_once(cli, root, tmp_path):
    blocker = tmp_path / "cache-is-a-file"
    blocker.write_text("x")
    q = cli("--root", root, "--format", "json", "zebracorn", env={"XDG_CACHE_HOME": blocker})
    assert json_results(q)[0]["id"] == "animals/zebra"
    (line,) = q.stderr.splitlines()
    assert "cannot write index" in line and "in memory" in line
    assert blocker.read_text() == "x"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_cache_answers_a_stale_index_from_memory(cli, cli_env, root):
    assert_clean(cli("build", "--root", root))
    cache = os.path.join(cli_env["XDG_CACHE_HOME"], "skill-retrieval")
    make_skill(root, "new/ocr", {"name": "ocr", "description": "Optical character recognition"})
    os.chmod(cache, 0o555)
    try:
        q = cli("--root", root, "--format", "json", "--fresh", "optical character recognition")
    finally:
        os.chmod(cache, 0o755)
    assert json_results(q)[0]["id"] == "new/ocr"
    assert len(q.stderr.splitlines()) == 1 and "in memory" in q.stderr


def test_the_hermes_plugin_answers_from_memory_when_the_index_cannot_be_written(tmp_path, monkeypatch):
    from test_hermes_plugin import turn_kwargs
    from hermes_plugin import runtime
    home = tmp_path / "hermes"
    make_skill(home / "skills", "devops/k8s-certs", {"name": "k8s-certs",
               "description": "Rotate kubernetes TLS certificates"})
    monkeypatch.setenv("HERMES_HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("SKILL_RETRIEVAL_REVALIDATE", "off")
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    state = runtime.new_state(roots=[str(home / "skills")], index_path=str(blocker / "i.skr"), interval=None)
    out = runtime.make_pre_llm_call(state)(**turn_kwargs("rotate kubernetes certificates"))
    assert "**k8s-certs**" in out["context"]
    assert blocker.read_text() == "x"
