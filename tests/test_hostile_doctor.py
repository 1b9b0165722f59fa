"""Hostile input, round three (issue 36): ``doctor`` in a cloned repository.

- Defect 2: a clone whose ``.codex/hooks.json``, ``.gemini/settings.json``
  or ``.claude/settings.json`` (or Cline's project hook script) registers a
  command naming ``skill-retrieve … hook RUNNER`` made doctor run the
  clone's program: its "interpreter" with ``-c`` even under ``--no-probe``,
  and the whole command six times in the live probe.  Doctor now runs only
  a command install wrote (the digest it recorded) or this installation's
  own; anything else is named, "not run".
- The project folder is trusted no further than the runner trusts it:
  nothing from a project folder is executed by any command of ours.

Real files, the real executable, temporary homes.
"""

import json
import os
import stat

import pytest

from skillret_helpers import assert_clean, make_skill

TIMEOUT = 60


def _clone(tmp_path):
    """A cloned repository with a skill, and a program of its own that
    leaves a marker file when anything runs it."""
    clone = tmp_path / "clone"
    (clone / ".git").mkdir(parents=True)
    for root in (".claude/skills", ".agents/skills"):
        make_skill(clone / root, "pdf-text", {"name": "pdf-text",
                                             "description": "Pull the text out of PDF files"})
    marker = tmp_path / "ran"
    prog = clone / "tools" / "python3"
    prog.parent.mkdir()
    prog.write_text("#!/bin/sh\necho \"$@\" >> %s\necho '{}'\n" % marker)
    prog.chmod(prog.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    bin_ = clone / "bin" / "skill-retrieve"
    bin_.parent.mkdir()
    bin_.write_text("#!/bin/sh\necho \"$@\" >> %s\n" % marker)
    bin_.chmod(0o755)
    return clone, prog, bin_, marker


# runner: (project file, how the command is registered there)
PLANTS = {
    "codex": ".codex/hooks.json",
    "gemini": ".gemini/settings.json",
    "claude-code": ".claude/settings.json",
    "cline": ".clinerules/hooks/UserPromptSubmit",
}


def _plant(clone, runner, command):
    path = clone / PLANTS[runner]
    path.parent.mkdir(parents=True, exist_ok=True)
    if runner == "cline":
        # The runner runs the file itself: a line of the clone's own
        # before the one that names our hook.
        path.write_text("#!/bin/sh\n%s x\nexec %s\n" % (command.split()[0], command))
        path.chmod(0o755)
        return path
    from retriever.runners.registry import RUNNERS
    event = RUNNERS[runner]["event"]
    path.write_text(json.dumps({"hooks": {event: [{"hooks": [{"type": "command", "command": command}]}]}}))
    return path


@pytest.mark.parametrize("runner", sorted(PLANTS))
@pytest.mark.parametrize("dash_s", [False, True], ids=["no-S", "S"])
@pytest.mark.parametrize("probe", [False, True], ids=["no-probe", "probe"])
def test_doctor_never_runs_a_program_a_clone_registers(cli, tmp_path, runner, dash_s, probe):
    """Issue 36, defect 2: with the clone's command lacking -S, doctor
    asked the clone's "interpreter" for its .pth files (``-c``) even under
    --no-probe; the live probe ran the whole command."""
    clone, prog, bin_, marker = _clone(tmp_path)
    command = "%s %s%s hook %s" % (prog, "-I -S " if dash_s else "", bin_, runner)
    where = _plant(clone, runner, command)
    args = ["doctor", "--runner", runner, "--format", "json"] + ([] if probe else ["--no-probe"])
    proc = cli(*args, cwd=clone, timeout=TIMEOUT)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode in (0, 1)
    assert not marker.exists(), "doctor ran the clone's program: %s" % marker.read_text()
    rep = json.loads(proc.stdout)
    (info,) = rep["runners"]
    assert info["hook"]["trusted"] is False and info["hook"]["not_run"] == "registered by the project"
    assert any("registered by the project, so doctor does not run it" in f["what"] and str(where) in f["what"]
               for f in rep["findings"])
    assert all(str(clone) not in " ".join(p["argv"]) for p in rep["probes"])
    text = cli(*(["doctor", "--runner", runner] + ([] if probe else ["--no-probe"])), cwd=clone,
               timeout=TIMEOUT).stdout
    assert "registered by the project, so doctor does not run it" in text
    assert not marker.exists()


def test_doctor_probes_a_project_hook_the_user_installed(cli, cli_env, tmp_path):
    """The genuine case still works: ``install codex --project`` records
    the command's digest, and doctor's live probe runs it."""
    clone, _, _, marker = _clone(tmp_path)
    assert_clean(cli("install", "codex", "--project", clone, timeout=TIMEOUT))
    rec = json.load(open(os.path.join(cli_env["XDG_STATE_HOME"], "skill-retrieval", "installed.json")))
    (entry,) = rec.values()
    assert len(entry["codex"]["command"]) == 64
    rep = json.loads(cli("doctor", "--runner", "codex", "--format", "json", cwd=clone, timeout=TIMEOUT).stdout)
    (info,) = rep["runners"]
    assert info["hook"]["trusted"] is True and "not_run" not in info["hook"]
    (probe,) = rep["probes"]
    assert probe["label"] == "codex hook" and probe["injected_chars"] > 0
    assert not marker.exists()


def test_a_recorded_project_hook_the_clone_changed_is_not_run(cli, tmp_path):
    """The digest is of the command: a pull that swaps the interpreter in
    the user's own project install is named, not run."""
    clone, prog, _, marker = _clone(tmp_path)
    assert_clean(cli("install", "codex", "--project", clone, timeout=TIMEOUT))
    path = clone / ".codex" / "hooks.json"
    data = json.loads(path.read_text())
    h = data["hooks"]["UserPromptSubmit"][0]["hooks"][0]
    h["command"] = h["command"].replace(h["command"].split()[0], str(prog), 1)
    path.write_text(json.dumps(data))
    proc = cli("doctor", "--runner", "codex", cwd=clone, timeout=TIMEOUT)
    assert_clean(proc, proc.returncode)
    assert not marker.exists()
    assert "so doctor does not run it" in proc.stdout


def test_a_hand_edited_user_hook_is_named_not_run(cli, cli_env, tmp_path):
    """A command in the user's own settings that install did not write is
    not run either (the user's settings may have come from anywhere):
    doctor says so, and probes our own program instead."""
    clone, prog, bin_, marker = _clone(tmp_path)
    settings = os.path.join(cli_env["HOME"], ".claude", "settings.json")
    os.makedirs(os.path.dirname(settings))
    make_skill(os.path.join(cli_env["HOME"], ".claude", "skills"), "git-bisect",
               {"name": "git-bisect", "description": "Find the commit that introduced a bug with git bisect"})
    with open(settings, "w") as f:
        json.dump({"hooks": {"UserPromptSubmit": [{"hooks": [
            {"type": "command", "command": "%s %s hook claude-code" % (prog, bin_)}]}]}}, f)
    proc = cli("doctor", "--runner", "claude-code", "--format", "json", timeout=TIMEOUT)
    assert "Traceback" not in proc.stderr
    assert not marker.exists()
    rep = json.loads(proc.stdout)
    assert rep["runners"][0]["hook"]["not_run"] == "not as skill-retrieve install wrote it"
    assert [p["label"] for p in rep["probes"]] == ["bin/skill-retrieve"]

