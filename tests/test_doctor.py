"""``skill-retrieve doctor`` on temporary homes.

Every test runs the real executable with HOME, HERMES_HOME, CODEX_HOME and
XDG_CACHE_HOME inside tmp_path; set-ups are made the way users make them
(``skill-retrieve install`` as a subprocess, hand-edited settings files).
"""

import json
import os
import stat

import pytest

from conftest import BIN, assert_clean, make_skill


@pytest.fixture
def homes(tmp_path):
    return {"HERMES_HOME": tmp_path / "hermes-home", "CODEX_HOME": tmp_path / "codex-home"}


@pytest.fixture
def run(cli, homes):
    def go(*args):
        return cli(*args, env=homes)
    return go


@pytest.fixture
def home(cli_env):
    return cli_env["HOME"]


def add_skills(home):
    root = os.path.join(home, ".claude", "skills")
    make_skill(root, "git-bisect", {"name": "git-bisect",
                                    "description": "Find the commit that introduced a bug with git bisect"})
    make_skill(root, "k8s-certs", {"name": "k8s-certs", "description": "Rotate kubernetes TLS certificates"})
    make_skill(root, "broken", "name: [unclosed\ndescription: x")
    return root


def settings(home):
    return os.path.join(home, ".claude", "settings.json")


def test_healthy_home(run, home):
    add_skills(home)
    assert_clean(run("install", "claude-code"))
    proc = run("doctor")
    assert_clean(proc, 0)
    assert "healthy: retrieval should work" in proc.stdout
    assert "claude-code" in proc.stdout and "ERROR" not in proc.stdout
    # The malformed file is reported by reason under its root.
    assert "invalid YAML (1)" in proc.stdout

    rep = json.loads(run("doctor", "--format", "json").stdout)
    assert rep["healthy"] is True
    cc = [r for r in rep["runners"] if r["runner"] == "claude-code"][0]
    assert cc["installed"] and cc["enabled"]
    assert cc["hook"]["shim"] is False and cc["hook"]["no_site"] is True
    assert os.path.isabs(cc["hook"]["interpreter"])
    assert [r["skills"] for r in rep["roots"]] == [3]
    assert list(rep["roots"][0]["malformed"]) == ["invalid YAML"]
    idx = [i for i in rep["indexes"] if "claude-code" in i["used_by"]][0]
    assert idx["state"] == "fresh" and idx["n_docs"] == 3 and idx["size"] > 0
    # The live probe ran the registered command and got skills back.
    (probe,) = rep["probes"]
    assert probe["label"] == "claude-code hook"
    assert probe["injected_chars"] > 0 and probe["ms"] > 0 and probe["floor_ms"] > 0


def test_no_skills(run):
    proc = run("doctor")
    assert_clean(proc, 1)
    assert "ERROR no skills found" in proc.stdout
    assert "fix: put skills in ~/.claude/skills" in proc.stdout
    rep = json.loads(run("doctor", "--format", "json").stdout)
    assert rep["healthy"] is False
    assert any(f["level"] == "error" and "no skills found" in f["what"] and f["fix"]
               for f in rep["findings"])


def test_broken_settings_file(run, home):
    add_skills(home)
    os.makedirs(os.path.dirname(settings(home)), exist_ok=True)
    with open(settings(home), "w") as f:
        f.write('{"hooks": {"UserPromptSubmit": [\n')
    proc = run("doctor", "--runner", "claude-code")
    assert_clean(proc, 1)
    assert settings(home) in proc.stdout
    assert "not valid JSON" in proc.stdout
    rep = json.loads(run("doctor", "--runner", "claude-code", "--format", "json").stdout)
    (f,) = [f for f in rep["findings"] if f["level"] == "error"][:1]
    assert settings(home) in f["what"] and "skill-retrieve install claude-code" in f["fix"]
    # doctor never writes: the broken file is left as it was.
    assert open(settings(home)).read() == '{"hooks": {"UserPromptSubmit": [\n'


def test_hook_through_a_shim(run, home, tmp_path):
    add_skills(home)
    assert_clean(run("install", "claude-code"))
    shim = tmp_path / "home" / ".pyenv" / "shims" / "python3"
    shim.parent.mkdir(parents=True)
    real = json.load(open(settings(home)))["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"].split()[0]
    shim.write_text('#!/bin/sh\nexec %s "$@"\n' % real)
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    data = json.load(open(settings(home)))
    h = data["hooks"]["UserPromptSubmit"][0]["hooks"][0]
    h["command"] = h["command"].replace(real, str(shim), 1)
    with open(settings(home), "w") as f:
        json.dump(data, f)
    proc = run("doctor", "--runner", "claude-code")
    # It still works (exit 0), but the shim is named with the fix.
    assert_clean(proc, 0)
    assert "shim" in proc.stdout and str(shim) in proc.stdout
    assert "fix: %s install claude-code" % BIN in proc.stdout
    rep = json.loads(run("doctor", "--runner", "claude-code", "--format", "json").stdout)
    hook = rep["runners"][0]["hook"]
    assert hook["interpreter"] == str(shim) and hook["shim"] is True
    assert any(str(shim) in f["what"] and "skill-retrieve install claude-code" in f["fix"]
               for f in rep["findings"])
    # Reinstalling replaces the shim with a real interpreter.
    assert_clean(run("install", "claude-code"))
    rep = json.loads(run("doctor", "--runner", "claude-code", "--format", "json").stdout)
    assert rep["runners"][0]["hook"]["shim"] is False


def test_unresolvable_hook_command(run, home, tmp_path):
    add_skills(home)
    os.makedirs(os.path.dirname(settings(home)), exist_ok=True)
    gone = str(tmp_path / "no-such-python")
    with open(settings(home), "w") as f:
        json.dump({"hooks": {"UserPromptSubmit": [{"hooks": [
            {"type": "command", "command": gone + " -I -S /x/bin/skill-retrieve hook claude-code"}]}]}}, f)
    proc = run("doctor", "--runner", "claude-code")
    assert_clean(proc, 1)
    assert "does not resolve" in proc.stdout and gone in proc.stdout


def test_runner_not_installed(run, home):
    add_skills(home)
    proc = run("doctor", "--runner", "codex")
    assert_clean(proc, 1)
    assert "fix: %s install codex" % BIN in proc.stdout


def test_misspelled_setting_is_named_with_the_one_meant(cli, homes, home):
    # SKILL_RETRIEVAL_INJECTK=2 was ignored without a word: the user kept
    # getting six skills and no hint why.  Doctor names each unknown
    # variable once, with the setting it is closest to.
    add_skills(home)
    proc = cli("doctor", "--no-probe", env=dict(homes, SKILL_RETRIEVAL_INJECTK="2",
                                                 SKILL_RETRIEVAL_WHATEVER="1", SKILL_RETRIEVAL_TOP_K="3"))
    lines = [l for l in proc.stdout.splitlines() if "SKILL_RETRIEVAL_" in l and "warn" in l]
    assert len(lines) == 2, proc.stdout
    (typo,) = [l for l in lines if "INJECTK" in l]
    assert "did you mean SKILL_RETRIEVAL_INJECT_K?" in typo
    (other,) = [l for l in lines if "WHATEVER" in l]
    assert "did you mean" not in other
    assert "SKILL_RETRIEVAL_TOP_K" not in proc.stdout  # a known setting is no finding
    rep = json.loads(cli("doctor", "--no-probe", "--format", "json",
                         env=dict(homes, SKILL_RETRIEVAL_INJECTK="2")).stdout)
    assert [f for f in rep["findings"] if "SKILL_RETRIEVAL_INJECTK" in f["what"]]


def test_a_file_given_as_root_is_one_usage_error(run, home, tmp_path):
    # doctor --root FILE said "0 skills" and "no skills found" where query,
    # build and explain say the file is no folder.
    add_skills(home)
    f = tmp_path / "notes.txt"
    f.write_text("not a skill folder\n")
    proc = run("doctor", "--root", str(f), "--no-probe")
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "%s: a file, not a folder" % f in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("what", ["file", "missing"])
def test_a_root_that_is_no_folder_beside_good_ones_is_named_as_such(run, home, tmp_path, what):
    # With a good --root beside it, doctor said "no skills in notes.txt (no
    # SKILL.md below it)", fix "skills live at notes.txt/<name>/SKILL.md":
    # a file is no folder to put skills in, and a typo is no empty folder.
    # Query and build name it "a file, not a folder" / "no such folder".
    good = add_skills(home)
    bad = tmp_path / "notes.txt"
    if what == "file":
        bad.write_text("not a skill folder\n")
    why = "a file, not a folder" if what == "file" else "no such folder"
    proc = run("doctor", "--root", good, "--root", str(bad), "--no-probe")
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert "%s: %s" % (bad, why) in proc.stdout, proc.stdout
    assert "no SKILL.md below" not in proc.stdout and "%s/<name>" % bad not in proc.stdout, proc.stdout
    rep = json.loads(run("doctor", "--root", good, "--root", str(bad), "--no-probe", "--format", "json").stdout)
    assert [f for f in rep["findings"] if f["what"].startswith("%s: %s" % (bad, why))], rep["findings"]


@pytest.mark.parametrize("runner", ["claude-code", "codex", "gemini"])
def test_doctor_shows_the_session_start_hook_and_warns_when_it_is_gone(runner, run, home, tmp_path):
    # Issue 38: install registers `warm RUNNER` on SessionStart; doctor
    # shows it, and says what its absence costs.
    add_skills(home)
    assert_clean(run("install", runner))
    rep = json.loads(run("doctor", "--runner", runner, "--no-probe", "--format", "json").stdout)
    st = rep["runners"][0]["session_start"]
    assert st["event"] == "SessionStart" and st["command"].endswith(" warm %s" % runner)
    assert "session start: SessionStart runs `warm %s`" % runner in run("doctor", "--runner", runner,
                                                                         "--no-probe").stdout
    path = rep["runners"][0]["settings"]
    data = json.load(open(path))
    data["hooks"]["SessionStart"] = [g for g in data["hooks"]["SessionStart"]
                                     if " warm %s" % runner not in g["hooks"][0]["command"]]
    with open(path, "w") as f:
        json.dump(data, f)
    rep = json.loads(run("doctor", "--runner", runner, "--no-probe", "--format", "json").stdout)
    assert rep["runners"][0]["session_start"]["command"] is None
    assert any("no session-start hook" in f["what"] and f["fix"].endswith(" install %s" % runner)
               for f in rep["findings"])
