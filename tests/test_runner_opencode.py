"""OpenCode, the sixth runner: added as one registry record.

OpenCode has no hook subprocess: its plugins are JS modules loaded in
process.  ``install opencode`` writes a plugin that, on each user message,
runs ``skill-retrieve hook opencode`` with ``{"prompt", "cwd",
"session_id"}`` on stdin and adds the ``{"context": ...}`` it prints as a
synthetic text part.  These tests hold both halves to that contract; the
plugin itself is run under the machine's Node.js when there is one.
"""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from retriever.runners import registry
from skillret_helpers import assert_clean, base_env, make_skill, run_cli


def _opencode_skills(home, project):
    make_skill(home / ".config" / "opencode" / "skills", "pdf-merge",
               {"name": "pdf-merge", "description": "Merge PDF files into one document"})
    make_skill(project / ".opencode" / "skills", "k8s-certs",
               {"name": "k8s-certs", "description": "Rotate Kubernetes TLS certificates"})
    make_skill(project / ".agents" / "skills", "release-notes",
               {"name": "release-notes", "description": "Write release notes from the git log"})


@pytest.fixture
def env(tmp_path):
    e = base_env(tmp_path)
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    _opencode_skills(Path(e["HOME"]), project)
    e["SKILL_RETRIEVAL_HOOK_WAIT"] = "30"
    return e, project


def test_opencode_is_a_registry_record():
    rec = registry.get("opencode")
    assert rec["install"]["kind"] == "script" and rec["event"] == "chat.message"
    assert "opencode" in registry.NAMES


@pytest.mark.parametrize("prompt,expect", [
    ("merge these pdf files into one", "pdf-merge"),           # user folder
    ("rotate the kubernetes tls certificates", "k8s-certs"),   # project .opencode/skills
    ("write the release notes from git log", "release-notes"),  # cross-client .agents/skills
])
def test_hook_answers_with_opencode_skills(env, prompt, expect):
    e, project = env
    proc = run_cli(["hook", "opencode"], e, input=json.dumps({"prompt": prompt, "cwd": str(project),
                                                             "session_id": "s1"}))
    assert_clean(proc)
    out = json.loads(proc.stdout)
    assert set(out) == {"context"} and "(%s)" % expect in out["context"]
    assert proc.stderr == ""


@pytest.mark.parametrize("stdin", ["", "not json", '{"cwd": "/"}', '{"prompt": 3}', "[]"])
def test_hook_fails_open(env, stdin):
    e, _ = env
    proc = run_cli(["hook", "opencode"], e, input=stdin)
    assert_clean(proc)
    assert proc.stdout == "" and proc.stderr == ""


def test_nothing_relevant_prints_nothing(env):
    e, project = env
    proc = run_cli(["hook", "opencode"], e, input=json.dumps({"prompt": "thanks!", "cwd": str(project)}))
    assert_clean(proc)
    assert proc.stdout == ""


def test_install_writes_the_plugin_and_uninstall_removes_it(env):
    e, project = env
    plugin = Path(e["HOME"]) / ".config" / "opencode" / "plugins" / "skill-retrieval.js"
    proc = run_cli(["install", "opencode"], e)
    assert_clean(proc)
    text = plugin.read_text()
    assert "hook opencode" in text and '"chat.message"' in text
    assert run_cli(["install", "opencode"], e).stdout.startswith("opencode: already installed")
    proc = run_cli(["uninstall", "opencode"], e)
    assert_clean(proc)
    assert not plugin.exists()


def test_install_refuses_to_replace_someone_elses_plugin(env):
    e, project = env
    plugin = project / ".opencode" / "plugins" / "skill-retrieval.js"
    plugin.parent.mkdir(parents=True)
    plugin.write_text("export const Mine = async () => ({})\n")
    proc = run_cli(["install", "opencode", "--project", project], e)
    assert proc.returncode == 1 and "left unchanged" in proc.stderr
    assert plugin.read_text() == "export const Mine = async () => ({})\n"


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
def test_the_installed_plugin_adds_the_block_to_the_message(env, tmp_path):
    e, project = env
    assert_clean(run_cli(["install", "opencode", "--project", project], e))
    plugin = project / ".opencode" / "plugins" / "skill-retrieval.js"
    mjs = tmp_path / "plugin.mjs"  # ESM without a package.json
    mjs.write_text(plugin.read_text())
    driver = tmp_path / "drive.mjs"
    driver.write_text(
        "const m = await import(%s);\n"
        "const hooks = await m.SkillRetrieval({ directory: %s });\n"
        "const out = { message: { role: 'user' }, parts: [{ type: 'text', text: process.argv[2] }] };\n"
        "await hooks['chat.message']({ sessionID: 's1' }, out);\n"
        "console.log(JSON.stringify(out.parts));\n" % (json.dumps(str(mjs)), json.dumps(str(project))))
    for prompt, expect in (("rotate the kubernetes tls certificates", "k8s-certs"), ("thanks!", None)):
        proc = subprocess.run(["node", str(driver), prompt], env=e, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        parts = json.loads(proc.stdout)
        assert parts[0] == {"type": "text", "text": prompt}
        if expect is None:
            assert len(parts) == 1
        else:
            assert len(parts) == 2 and parts[1]["synthetic"] is True
            assert "## Retrieved Skills" in parts[1]["text"] and "(%s)" % expect in parts[1]["text"]


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
def test_the_plugin_warms_up_when_it_loads(env, tmp_path):
    # Issue 38: OpenCode has no session-start hook; its plugin loads as a
    # session starts and runs `warm opencode` then, detached: with the tier
    # off here, that builds the project's index before any message.
    e, project = env
    assert_clean(run_cli(["install", "opencode", "--project", project], e))
    cache = Path(e["XDG_CACHE_HOME"]) / "skill-retrieval"
    for f in cache.glob("index-*"):
        f.unlink()  # built by install: the warm-up builds it again
    mjs = tmp_path / "plugin.mjs"
    mjs.write_text((project / ".opencode" / "plugins" / "skill-retrieval.js").read_text())
    driver = tmp_path / "load.mjs"
    driver.write_text("const m = await import(%s);\nawait m.SkillRetrieval({ directory: %s });\n"
                      % (json.dumps(str(mjs)), json.dumps(str(project))))
    proc = subprocess.run(["node", str(driver)], env=e, capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    log = Path(e["XDG_CACHE_HOME"]) / "skill-retrieval" / "skill-retrieval.log"
    import time
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (log.exists() and "warm opencode: built index" in log.read_text()):
        time.sleep(0.1)
    assert "warm opencode: built index" in log.read_text() and "k8s-certs" not in proc.stdout
