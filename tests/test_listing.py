"""Names only (issue 30): ``install RUNNER`` also turns the runner's own
skill listing down to names, ``--no-compact`` leaves it alone, the user's
own entries are kept, a skill added later is covered without a
re-install, and uninstall gives back exactly the file that was there.

Everything runs the real executable on temporary homes.
"""

import io
import itertools
import json
import os
import sys
import threading
import time

import pytest

from conftest import apply_diff, assert_clean, backups_of, make_skill, state_home

from retriever import fileutil
from retriever.runners import cline, codex, gemini, install as inst, listing, opencode, record


@pytest.fixture
def home(cli_env):
    return cli_env["HOME"]


@pytest.fixture
def codex_home(tmp_path):
    return tmp_path / "codex-home"


@pytest.fixture
def run(cli, codex_home):
    def go(*args):
        return cli(*args, env={"CODEX_HOME": codex_home})
    return go


def skill(root, name, desc="Does a thing.", extra=None):
    fm = {"name": name, "description": desc}
    fm.update(extra or {})
    make_skill(root, name, fm, body="# %s\n" % name)


def claude_settings(home):
    return os.path.join(home, ".claude", "settings.json")


def read(path):
    with open(path, "rb") as f:
        return f.read()


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


# ------------------------------------------------------------ Claude Code


def test_claude_code_lists_each_skill_by_name_and_keeps_the_users_entries(run, home):
    skills = os.path.join(home, ".claude", "skills")
    for n in ("alpha", "beta", "gamma"):
        skill(skills, n)
    skill(skills, "manual", extra={"disable-model-invocation": True})  # never listed anyway
    original = json.dumps({"theme": "dark", "skillOverrides": {"beta": "off", "zeta": "on"}}, indent=4) + "\n"
    write(claude_settings(home), original)
    assert_clean(run("install", "claude-code"))
    data = json.loads(read(claude_settings(home)))
    assert data["skillOverrides"] == {"beta": "off", "zeta": "on", "alpha": "name-only", "gamma": "name-only"}
    assert data["theme"] == "dark"
    # The session-start hooks: the helper's warm-up (the hook's install) and sync.
    warm, group = data["hooks"]["SessionStart"]
    assert " warm claude-code" in warm["hooks"][0]["command"]
    assert " sync claude-code" in group["hooks"][0]["command"]
    # a second install changes nothing
    before = read(claude_settings(home))
    assert_clean(run("install", "claude-code"))
    assert read(claude_settings(home)) == before
    assert_clean(run("uninstall", "claude-code"))
    assert json.loads(read(claude_settings(home))) == json.loads(original)


def test_no_compact_installs_the_hook_alone(run, home):
    skill(os.path.join(home, ".claude", "skills"), "alpha")
    assert_clean(run("install", "claude-code", "--no-compact"))
    data = json.loads(read(claude_settings(home)))
    assert "skillOverrides" not in data and list(data["hooks"]) == ["UserPromptSubmit", "SessionStart"]
    (warm,) = data["hooks"]["SessionStart"]  # the helper's warm-up, and no sync
    assert warm["hooks"][0]["command"].endswith(" warm claude-code")


def test_uninstall_deletes_the_settings_file_install_created(run, home):
    skill(os.path.join(home, ".claude", "skills"), "alpha")
    assert_clean(run("install", "claude-code"))
    assert os.path.exists(claude_settings(home))
    assert_clean(run("uninstall", "claude-code"))
    assert not os.path.exists(claude_settings(home))


def test_uninstall_keeps_an_entry_the_user_changed_since(run, home):
    skill(os.path.join(home, ".claude", "skills"), "alpha")
    skill(os.path.join(home, ".claude", "skills"), "beta")
    assert_clean(run("install", "claude-code"))
    data = json.loads(read(claude_settings(home)))
    data["skillOverrides"]["alpha"] = "off"  # the user's decision now
    write(claude_settings(home), json.dumps(data))
    assert_clean(run("uninstall", "claude-code"))
    assert json.loads(read(claude_settings(home))) == {"skillOverrides": {"alpha": "off"}}


@pytest.mark.parametrize("edited", [False, True])
def test_uninstall_keeps_the_empty_session_start_list_that_was_there(edited, run, home):
    # The sync hook's group went into the user's empty hooks.SessionStart;
    # uninstall took it out and the list with it, as if install had made
    # it: the byte-exact restore missed, and the user's key was lost.
    skill(os.path.join(home, ".claude", "skills"), "alpha")
    original = '{"hooks": {"SessionStart": []}, "x": 1}'
    write(claude_settings(home), original)
    assert_clean(run("install", "claude-code"))
    if edited:  # the user changes the file since: uninstall edits it instead
        write(claude_settings(home), json.dumps(dict(json.loads(read(claude_settings(home))), y=2)))
    assert_clean(run("uninstall", "claude-code"))
    if edited:
        assert json.loads(read(claude_settings(home))) == {"hooks": {"SessionStart": []}, "x": 1, "y": 2}
    else:
        assert read(claude_settings(home)).decode() == original


def test_sync_covers_a_skill_added_later_and_never_overwrites(cli, run, home, tmp_path):
    skills = os.path.join(home, ".claude", "skills")
    skill(skills, "alpha")
    assert_clean(run("install", "claude-code"))
    skill(skills, "late")
    skill(skills, "mine")
    data = json.loads(read(claude_settings(home)))
    data["skillOverrides"]["mine"] = "on"  # the user's own entry for a new skill
    write(claude_settings(home), json.dumps(data))
    proc = cli("sync", "claude-code", input=json.dumps({"cwd": str(tmp_path)}))
    assert_clean(proc)
    assert proc.stdout == "" and proc.stderr == ""  # a session-start hook stays silent
    ov = json.loads(read(claude_settings(home)))["skillOverrides"]
    assert ov == {"alpha": "name-only", "late": "name-only", "mine": "on"}
    # uninstall removes what install and sync added, nothing of the user's
    assert_clean(run("uninstall", "claude-code"))
    assert json.loads(read(claude_settings(home))) == {"skillOverrides": {"mine": "on"}}


def test_sync_without_install_changes_nothing_and_fails_open(cli, home, tmp_path):
    skill(os.path.join(home, ".claude", "skills"), "alpha")
    for stdin in ("", "not json", json.dumps({"cwd": str(tmp_path)})):
        proc = cli("sync", "claude-code", input=stdin)
        assert_clean(proc)
        assert proc.stdout == "" and proc.stderr == ""
    assert not os.path.exists(claude_settings(home))


def test_plugin_skills_are_reported_in_full_with_the_reason(home, monkeypatch, tmp_path):
    cfg = os.path.join(home, ".claude")
    skill(os.path.join(cfg, "skills"), "alpha")
    plugin = tmp_path / "plugin"
    skill(plugin / "skills", "zoo-skill")
    os.makedirs(plugin / ".claude-plugin")
    (plugin / ".claude-plugin" / "plugin.json").write_text(json.dumps({"name": "zoo"}))
    write(os.path.join(cfg, "plugins", "installed_plugins.json"),
          json.dumps({"version": 2, "plugins": {"zoo@m": [{"installPath": str(plugin)}]}}))
    monkeypatch.setenv("HOME", home)
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    names, full = listing.covered("claude-code", str(tmp_path))
    assert names == ["alpha"]
    assert [n for n, _ in full] == ["zoo:zoo-skill"] and "plugin" in full[0][1]


def test_a_settings_file_that_is_not_json_is_left_alone(run, home):
    skill(os.path.join(home, ".claude", "skills"), "alpha")
    write(claude_settings(home), "{not json")
    proc = run("install", "claude-code")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "settings.json" in proc.stderr
    assert read(claude_settings(home)) == b"{not json"


# ------------------------------------------------------------------ Codex


CODEX_CONFIG = '''# my codex set-up
model = "o3"   # a comment

[features]
plugins = false

[profiles.fast]
model = "o4-mini"'''


NEEDS_TOMLLIB = pytest.mark.skipif(sys.version_info < (3, 11), reason="editing config.toml needs tomllib (3.11+)")


@NEEDS_TOMLLIB
def test_codex_switch_is_added_textually_and_removed_byte_for_byte(run, codex_home):
    path = str(codex_home / "config.toml")
    write(path, CODEX_CONFIG)
    assert_clean(run("install", "codex"))
    text = read(path).decode()
    import tomllib
    data = tomllib.loads(text)
    assert data["features"] == {"omit_skill_descriptions": True, "plugins": False}
    assert data["suppress_unstable_features_warning"] is True
    assert data["profiles"] == {"fast": {"model": "o4-mini"}}
    assert "# my codex set-up" in text and "# a comment" in text
    assert_clean(run("install", "codex"))  # idempotent
    assert read(path).decode() == text
    assert_clean(run("uninstall", "codex"))
    assert read(path).decode() == CODEX_CONFIG


@NEEDS_TOMLLIB
def test_codex_keeps_the_users_own_value(run, codex_home):
    path = str(codex_home / "config.toml")
    original = "suppress_unstable_features_warning = false\n[features]\nomit_skill_descriptions = false\n"
    write(path, original)
    assert_clean(run("install", "codex", "--no-mcp"))  # (the MCP server's table: test_mcp_install.py)
    assert read(path).decode() == original
    assert_clean(run("uninstall", "codex"))
    assert read(path).decode() == original


@NEEDS_TOMLLIB
def test_codex_without_a_config_gets_one_and_loses_it_again(run, codex_home):
    path = str(codex_home / "config.toml")
    assert_clean(run("install", "codex"))
    import tomllib
    assert tomllib.loads(read(path).decode())["features"]["omit_skill_descriptions"] is True
    assert_clean(run("uninstall", "codex"))
    assert not os.path.exists(path)


@NEEDS_TOMLLIB
@pytest.mark.parametrize("text", ['model = "o3"\nfeatures = { plugins = false }\n', "model = [unclosed\n"])
def test_codex_config_it_cannot_edit_safely_is_left_alone(run, codex_home, text):
    path = str(codex_home / "config.toml")
    write(path, text)
    proc = run("install", "codex")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "config.toml" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert read(path).decode() == text


@NEEDS_TOMLLIB
def test_codex_edit_reads_back_as_intended():
    new, rec = codex.codex_edit('a = 1\n[features]\nx = 2\n[t]\ny = 3')
    import tomllib
    assert tomllib.loads(new) == {"a": 1, "suppress_unstable_features_warning": True,
                                  "features": {"x": 2, "omit_skill_descriptions": True}, "t": {"y": 3}}
    assert codex.codex_unedit(new, rec) == 'a = 1\n[features]\nx = 2\n[t]\ny = 3'


# ------------------------------------------------------------- Gemini CLI


def test_gemini_env_line_is_added_and_removed_exactly(run, home):
    path = os.path.join(home, ".gemini", ".env")
    write(path, "GEMINI_API_KEY=abc")  # no final newline
    assert_clean(run("install", "gemini"))
    assert read(path) == b"GEMINI_API_KEY=abc\nGEMINI_PROMPT_AGENTSKILLS=0\n"
    assert_clean(run("uninstall", "gemini"))
    assert read(path) == b"GEMINI_API_KEY=abc"


def test_gemini_keeps_the_users_own_setting(run, home):
    path = os.path.join(home, ".gemini", ".env")
    write(path, "export GEMINI_PROMPT_AGENTSKILLS=1\n")
    assert_clean(run("install", "gemini"))
    assert read(path) == b"export GEMINI_PROMPT_AGENTSKILLS=1\n"
    assert_clean(run("uninstall", "gemini"))
    assert read(path) == b"export GEMINI_PROMPT_AGENTSKILLS=1\n"


# --------------------------------------------------------------- OpenCode


def test_opencode_plugin_is_written_and_removed(run, home):
    plugins = os.path.join(home, ".config", "opencode", "plugins")
    assert_clean(run("install", "opencode"))
    assert sorted(os.listdir(plugins)) == ["skill-retrieval-listing.js", "skill-retrieval.js"]
    assert_clean(run("uninstall", "opencode"))
    assert not os.path.exists(plugins)


def test_opencode_plugin_strips_descriptions_in_place(tmp_path):
    import shutil
    import subprocess
    node = shutil.which("node")
    if not node:
        pytest.skip("node not found")
    plug = tmp_path / "p.mjs"
    plug.write_text(opencode.OPENCODE_SOURCE)
    script = """
const m = await import(%s);
const p = await m.SkillRetrievalListing();
const sys = ["head <available_skills>\\n  <skill>\\n    <name>a</name>\\n    <description>DA</description>\\n"
  + "    <location>/x/a/SKILL.md</location>\\n  </skill>\\n</available_skills> tail", "other <description>keep</description>"];
await p["experimental.chat.system.transform"]({}, { system: sys });
process.stdout.write(JSON.stringify(sys));
""" % json.dumps(str(plug))
    out = subprocess.run([node, "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [
        "head <available_skills>\n  <skill>\n    <name>a</name>\n  </skill>\n</available_skills> tail",
        "other <description>keep</description>"]


# ---------------------------------------------------------- doctor, tokens


def test_doctor_shows_names_only_per_runner(run, home):
    skills = os.path.join(home, ".claude", "skills")
    skill(skills, "alpha")
    assert_clean(run("install", "claude-code"))
    skill(skills, "late")
    proc = run("doctor", "--runner", "claude-code", "--format", "json")
    info = [r for r in json.loads(proc.stdout)["runners"] if r["runner"] == "claude-code"][0]
    no = info["names_only"]
    assert no["state"] == "on" and no["covered"] == 1
    assert [n for n, _ in no["full"]] == ["late"] and "next" in no["full"][0][1]
    text = run("doctor", "--runner", "claude-code", "--no-probe").stdout
    assert "names only: on, 1 skill listed by name" in text and "in full: late" in text


def test_doctor_warns_when_names_only_is_off(run, home):
    skill(os.path.join(home, ".claude", "skills"), "alpha")
    assert_clean(run("install", "claude-code", "--no-compact"))
    text = run("doctor", "--runner", "claude-code", "--no-probe").stdout
    assert "names only: off" in text and "names-only is off" in text


def test_tokens_runner_prices_the_listing_with_and_without(run, home):
    skills = os.path.join(home, ".claude", "skills")
    for i in range(3):
        skill(skills, "s%d" % i, "x" * 100)
    proc = run("tokens", "--runner", "claude-code", "--format", "json")
    assert_clean(proc)
    c = json.loads(proc.stdout)
    assert c["skills"] == 3
    assert c["stock"] == 3 * len("- s0: %s\n" % ("x" * 100))
    assert c["names_only"] == 3 * len("- s0\n")
    text = run("tokens", "--runner", "claude-code").stdout
    assert "names only" in text and "net saving per turn" in text


def test_tokens_runner_applies_claude_codes_budget(run, home):
    skills = os.path.join(home, ".claude", "skills")
    for i in range(100):
        skill(skills, "s%02d" % i, "y" * 200)
    c = json.loads(run("tokens", "--runner", "claude-code", "--format", "json").stdout)
    assert c["budget"] == 8000 and c["unbudgeted"] > 8000
    assert c["stock"] <= 8000 and c["names_only"] == 100 * len("- s00\n")


# ------------------------------------------------------------------ Cline


def test_cline_install_writes_the_cli_plugin_beside_the_hook_file(run, home):
    plugin = os.path.join(home, ".cline", "plugins", "skill-retrieval.js")
    assert_clean(run("install", "cline", "--no-compact"))  # the plugin is the hook half: always
    text = read(plugin).decode()
    assert "beforeRun" in text and "appendContext" in text and '"hook", "cline"' in text
    assert os.path.exists(os.path.join(home, "Documents", "Cline", "Hooks", "UserPromptSubmit"))
    assert_clean(run("uninstall", "cline"))
    assert not os.path.exists(os.path.join(home, ".cline"))


def test_cline_someone_elses_plugin_is_left_alone(run, home):
    plugin = os.path.join(home, ".cline", "plugins", "skill-retrieval.js")
    write(plugin, "export default {};\n")
    proc = run("install", "cline")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr and "skill-retrieval.js" in proc.stderr
    assert read(plugin) == b"export default {};\n"


def test_cline_plugin_returns_the_hooks_context(tmp_path):
    import shutil
    import subprocess
    import sys
    node = shutil.which("node")
    if not node:
        pytest.skip("node not found")
    hook = tmp_path / "hook.py"
    # a stand-in hook: echoes the prompt it got, in Cline's output shape
    hook.write_text("import json, sys\np = json.load(sys.stdin)\n"
                    "print(json.dumps({'cancel': False, 'contextModification': 'CTX:' + p['userPromptSubmit']['prompt']"
                    " + '@' + p['workspaceRoots'][0]}))\n")
    plug = tmp_path / "p.mjs"
    plug.write_text(cline.cline_plugin("%s %s hook cline" % (sys.executable, hook)))
    script = """
const p = (await import(%s)).default;
p.setup({}, { workspaceInfo: { rootPath: "/ws" } });
const r = await p.hooks.beforeRun({ snapshot: { messages: [
  { role: "user", content: [{ type: "text", text: "<user_input mode=\\"act\\">fix the pdf</user_input>" }] }] } });
const none = await p.hooks.beforeRun({ snapshot: { messages: [] } });
process.stdout.write(JSON.stringify([r, none === undefined]));
""" % json.dumps(str(plug))
    out = subprocess.run([node, "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [{"appendContext": "CTX:fix the pdf@/ws"}, True]


def test_project_install_syncs_the_projects_settings(cli, run, tmp_path):
    proj = tmp_path / "proj"
    skills = proj / ".claude" / "skills"
    skill(str(skills), "alpha")
    assert_clean(run("install", "claude-code", "--project", proj))
    settings = proj / ".claude" / "settings.json"
    data = json.loads(settings.read_text())
    assert data["skillOverrides"] == {"alpha": "name-only"}
    _warm, group = data["hooks"]["SessionStart"]
    argv = group["hooks"][0]["command"].split()
    assert argv[-2:] == ["--project", str(proj)]
    skill(str(skills), "late")
    assert_clean(cli(*argv[4:], input=json.dumps({"cwd": str(proj)})))  # as Claude Code runs it
    assert json.loads(settings.read_text())["skillOverrides"] == {"alpha": "name-only", "late": "name-only"}


def test_doctor_says_whether_the_cline_cli_gets_the_block(run, home):
    skill(os.path.join(home, ".cline", "skills"), "alpha")
    assert_clean(run("install", "cline"))
    text = run("doctor", "--runner", "cline", "--no-probe").stdout
    assert "the runner lists names only itself" in text and "gets the block through this plugin" in text
    os.unlink(os.path.join(home, ".cline", "plugins", "skill-retrieval.js"))
    text = run("doctor", "--runner", "cline", "--no-probe").stdout
    assert "the Cline CLI never reads the hook file" in text


# ----------------------------------------------- our plugins, edited
# Install records the digest of each plugin file it writes; a copy the
# user changed since is theirs: neither install nor uninstall replaces or
# deletes it (the hook installer's rule for its scripts).

def plugin_file(runner, home):
    return os.path.join(home, ".cline", "plugins", "skill-retrieval.js") if runner == "cline" \
        else os.path.join(home, ".config", "opencode", "plugins", "skill-retrieval-listing.js")


def edit_plugin(path):
    mine = read(path).decode() + "// my own change\n"
    write(path, mine)
    return mine.encode()


@pytest.mark.parametrize("runner", ["opencode", "cline"])
def test_install_keeps_our_plugin_the_user_edited_and_says_how_to_take_ours(runner, run, home):
    path = plugin_file(runner, home)
    assert_clean(run("install", runner))
    ours = read(path)
    mine = edit_plugin(path)
    proc = run("install", runner)
    assert_clean(proc)
    assert read(path) == mine and backups_of(path) == []
    (line,) = [ln for ln in proc.stdout.splitlines() if path in ln]
    assert "edited since install" in line and "--force" in line
    assert_clean(run("install", runner, "--force"))
    assert read(path) == ours


@pytest.mark.parametrize("runner", ["opencode", "cline"])
def test_uninstall_leaves_our_plugin_the_user_edited_and_says_where(runner, run, home):
    path = plugin_file(runner, home)
    assert_clean(run("install", runner))
    mine = edit_plugin(path)
    proc = run("uninstall", runner)
    assert_clean(proc)  # the hook's own uninstall still runs
    assert read(path) == mine
    (line,) = [ln for ln in proc.stdout.splitlines() if path in ln]
    assert "edited since install" in line
    # still the user's on the next install: nothing takes it silently
    assert_clean(run("install", runner))
    assert read(path) == mine


@pytest.mark.parametrize("command", ["install", "uninstall"])
@pytest.mark.parametrize("runner", ["opencode", "cline"])
def test_a_dry_run_over_an_edited_plugin_shows_it_kept(runner, command, run, home):
    path = plugin_file(runner, home)
    assert_clean(run("install", runner))
    mine = edit_plugin(path)
    state = os.path.join(os.environ["XDG_STATE_HOME"], "skill-retrieval")
    records = {n: read(os.path.join(state, n)) for n in os.listdir(state) if n.endswith(".json")}
    proc = run(command, runner, "--dry-run")
    assert_clean(proc)
    assert "would write %s" % path not in proc.stdout and "would delete %s" % path not in proc.stdout
    (line,) = [ln for ln in proc.stdout.splitlines() if path in ln]
    assert "edited since install" in line
    assert read(path) == mine and backups_of(path) == []
    assert {n: read(os.path.join(state, n)) for n in records} == records


@pytest.mark.parametrize("runner", ["opencode", "cline"])
def test_an_unedited_older_copy_of_our_plugin_is_replaced(runner, in_process):
    # What an older version (or another interpreter path) wrote, untouched
    # since: install replaces it, and uninstall deletes what it wrote.
    path = plugin_file(runner, in_process)
    # (not monkeypatch.undo(): it would undo the test's HOME too)
    where, name = (opencode, "OPENCODE_SOURCE") if runner == "opencode" else (inst, "hook_command")
    now = getattr(where, name)
    setattr(where, name, now.replace("by name only", "by name") if runner == "opencode" else
            lambda r: "/old/venv/bin/python3 -I -S /old/bin/skill-retrieve hook cline")
    try:
        assert listing.install(runner, out=io.StringIO()) == 0
    finally:
        setattr(where, name, now)
    older = read(path)
    assert listing.install(runner, out=io.StringIO()) == 0
    assert read(path) != older and read(backups_of(path)[-1]) == older
    assert listing.uninstall(runner, out=io.StringIO()) == 0
    assert not os.path.exists(path)


@pytest.mark.parametrize("runner", ["opencode", "cline"])
def test_a_plugin_recorded_by_an_older_version_is_replaced_and_deleted_as_before(runner, in_process):
    # An older version kept no digest of the plugin: its copy (whatever
    # text it holds now) is taken as ours, as it always was.
    path = plugin_file(runner, in_process)
    assert listing.install(runner, out=io.StringIO()) == 0
    ours = read(path)
    record.forget(os.path.realpath(path), runner)
    edit_plugin(path)
    assert listing.install(runner, out=io.StringIO()) == 0
    assert read(path) == ours
    record.forget(os.path.realpath(path), runner)
    edit_plugin(path)
    assert listing.uninstall(runner, out=io.StringIO()) == 0
    assert not os.path.exists(path)


@pytest.mark.skipif(sys.version_info >= (3, 11), reason="Python 3.11+ has tomllib")
def test_without_tomllib_codex_installs_the_hook_and_says_how_to_finish(run, codex_home):
    proc = run("install", "codex")
    assert proc.returncode == 0 and proc.stderr == ""
    assert "codex: names only not set: editing" in proc.stdout and "by hand" in proc.stdout


# ------------------------------------------------- writing the user's files
# The names-only half writes the way the hook installer does
# (fileutil.update): under the installers' lock, backed up, replaced or
# deleted only if the file still holds what was read.


@pytest.fixture
def in_process(tmp_path, monkeypatch, codex_home):
    """The names-only installer called in process on the test's home."""
    monkeypatch.setenv("CODEX_HOME", str(codex_home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    return os.environ["HOME"]


RACES = {  # runner: (file, its text, the function the edit runs, what another program writes meanwhile)
    "claude-code": (lambda h, c: claude_settings(h), '{"theme": "dark"}\n', (inst, "parse_settings"),
                    '{"theme": "dark", "other": 1}\n'),
    "codex": (lambda h, c: str(c / "config.toml"), 'model = "o3"\n', (codex, "_toml"), 'model = "o3"\nother = 1\n'),
    "gemini": (lambda h, c: os.path.join(h, ".gemini", ".env"), "A=1\n", (gemini, "gemini_value"), "A=1\nB=2\n"),
}


@pytest.mark.parametrize("runner", list(RACES))
def test_names_only_merges_what_another_program_wrote_meanwhile(runner, in_process, codex_home, monkeypatch):
    if runner == "codex" and sys.version_info < (3, 11):
        pytest.skip("editing config.toml needs tomllib (3.11+)")
    where, text, (module, name), theirs = RACES[runner]
    path = where(in_process, codex_home)
    skill(os.path.join(in_process, ".claude", "skills"), "alpha")
    write(path, text)
    real, done = getattr(module, name), []

    def racing(*a, **k):
        if not done:  # once: after the installer read the file, before it writes
            done.append(1)
            write(path, theirs)
        return real(*a, **k)
    monkeypatch.setattr(module, name, racing)
    assert listing.install(runner, out=io.StringIO()) == 0
    new = read(path).decode()
    if runner == "claude-code":
        assert json.loads(new)["other"] == 1 and json.loads(new)["skillOverrides"] == {"alpha": "name-only"}
    elif runner == "codex":
        import tomllib
        data = tomllib.loads(new)
        assert data["other"] == 1 and data["features"]["omit_skill_descriptions"] is True
    else:
        assert new == "A=1\nB=2\nGEMINI_PROMPT_AGENTSKILLS=0\n"
    # the backup holds the very bytes the edit replaced: the other program's
    assert read(backups_of(path)[-1]).decode() == theirs


@pytest.mark.parametrize("runner", ["opencode", "cline"])
def test_uninstall_never_deletes_a_plugin_another_program_put_there_meanwhile(runner, in_process, monkeypatch):
    assert listing.install(runner, out=io.StringIO()) == 0
    path = cline.target() if runner == "cline" else listing.target("opencode")
    theirs = "export default {}; // someone else's plugin\n"
    real, done = fileutil.read_bytes, []

    def racing(p):
        data = real(p)
        if not done:  # the first read of uninstall: the other program writes right after it
            done.append(1)
            write(path, theirs)
        return data
    monkeypatch.setattr(fileutil, "read_bytes", racing)
    listing.uninstall(runner, out=io.StringIO())
    assert read(path).decode() == theirs


def _hold_install_lock(held, release, then=None):
    # Another install of ours: it holds the installers' lock until
    # ``release`` is set, running ``then`` (its own write) before letting go.
    with fileutil.install_lock():
        held.set()
        release.wait(30)
        if then:
            then()


def test_sync_waits_for_an_install_under_way_and_never_writes_past_it(cli, run, home, tmp_path):
    skills = os.path.join(home, ".claude", "skills")
    skill(skills, "alpha")
    assert_clean(run("install", "claude-code"))
    skill(skills, "late")
    path = claude_settings(home)
    payload = json.dumps({"cwd": str(tmp_path)})

    def install_writes():
        write(path, json.dumps(dict(json.loads(read(path)), theme="dark"), indent=2) + "\n")

    # The install lets go within sync's wait: sync then adds its entry to
    # what the install wrote.
    held, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold_install_lock, args=(held, release, install_writes))
    holder.start()
    held.wait(30)
    threading.Timer(0.5, release.set).start()
    proc = cli("sync", "claude-code", input=payload)
    holder.join()
    assert_clean(proc)
    assert proc.stdout == "" and proc.stderr == ""
    data = json.loads(read(path))
    assert data["theme"] == "dark" and data["skillOverrides"] == {"alpha": "name-only", "late": "name-only"}

    # An install that holds the lock longer than sync waits (2 s): sync
    # leaves quietly, writing nothing.
    skill(skills, "later")
    before = read(path)
    held, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold_install_lock, args=(held, release))
    holder.start()
    held.wait(30)
    try:
        t0 = time.monotonic()
        proc = cli("sync", "claude-code", input=payload)
        waited = time.monotonic() - t0
    finally:
        release.set()
        holder.join()
    assert_clean(proc)
    assert proc.stdout == "" and proc.stderr == ""
    assert read(path) == before
    assert 1.9 <= waited < 10  # it waited its 2 s, well within Claude Code's hook timeout


def _snapshot(root):
    # Every file and link below ``root``, with its bytes and mode.
    out = {}
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(d, n)
            if os.path.islink(p):
                out[p] = ("link", os.readlink(p))
            elif os.path.isfile(p):
                out[p] = (read(p), os.stat(p).st_mode)
            else:
                out[p] = ("folder", os.stat(p).st_mode)
    return out


@pytest.mark.parametrize("runner", ["claude-code", "codex", "gemini", "opencode", "cline"])
def test_uninstall_dry_run_changes_no_file_and_no_record(runner, run, home, tmp_path):
    skill(os.path.join(home, ".claude", "skills"), "alpha")
    assert_clean(run("install", runner))  # the files install writes are new: install created them
    before = {root: _snapshot(root) for root in (home, tmp_path / "codex-home", state_home(tmp_path))}
    proc = run("uninstall", runner, "--dry-run")
    assert_clean(proc)
    assert "would" in proc.stdout
    assert {root: _snapshot(root) for root in before} == before


@pytest.mark.parametrize("runner", ["claude-code", "gemini"])
def test_install_dry_run_shows_each_file_once_as_install_writes_it(runner, run, home, codex_home):
    # Both halves of install change one settings file: the dry run printed
    # it twice (the hook alone, then with the names-only entries), so a
    # reader could not tell which one install would write.
    skill(os.path.join(home, ".claude", "skills"), "alpha")
    hooks = HOOK_FILE[runner](home, codex_home)
    shown = run("install", runner, "--dry-run")
    assert_clean(shown)
    assert shown.stdout.count("would write %s:\n" % hooks) == 1, shown.stdout
    assert not os.path.exists(hooks)
    assert_clean(run("install", runner))
    for path in set(shown.stdout.split("would write ")[1:]):
        name, text = path.split(":\n", 1)
        assert shown.stdout.count("would write %s:\n" % name) == 1, (name, shown.stdout)
        # A new file: its diff adds every line install writes.
        assert apply_diff(None, text) == read(name).decode(), (name, text)


HOOK_FILE = {"claude-code": lambda h, c: claude_settings(h), "codex": lambda h, c: str(c / "hooks.json"),
             "gemini": lambda h, c: os.path.join(h, ".gemini", "settings.json")}


@pytest.mark.parametrize("runner", list(HOOK_FILE))
def test_uninstall_dry_run_shows_what_uninstall_will_write(runner, run, home, codex_home):
    if runner == "codex" and sys.version_info < (3, 11):
        pytest.skip("editing config.toml needs tomllib (3.11+)")
    skill(os.path.join(home, ".claude", "skills"), "alpha")
    hooks = HOOK_FILE[runner](home, codex_home)
    write(hooks, '{\n    "model":   "opus",\n\t"z": [1,2]\n}')  # the user's own layout
    files = {hooks, str(codex_home / "config.toml") if runner == "codex" else listing.target(runner)}
    assert_clean(run("install", runner))
    before = {p: read(p).decode() if os.path.exists(p) else None for p in files}
    shown = run("uninstall", runner, "--dry-run")
    assert_clean(shown)
    assert_clean(run("uninstall", runner))
    for path in files:
        last = max(shown.stdout.rfind("would write %s:\n" % path), shown.stdout.rfind("would delete %s\n" % path))
        assert last >= 0, (path, shown.stdout)
        said = shown.stdout[last:]
        if os.path.exists(path):  # the text it said it would write, byte for byte, as a diff
            said = "".join(itertools.takewhile(lambda ln: ln[:1] in "-+@ \\",
                                               said.splitlines(True)[1:]))
            assert apply_diff(before[path], said) == read(path).decode(), (path, said)
        else:
            assert said.startswith("would delete %s\n" % path), (path, said)


@NEEDS_TOMLLIB
def test_uninstall_asks_one_record_whether_install_created_the_file(run, codex_home):
    # "created" lived in two records (listing.json and created.json) that
    # could disagree: a second install over the file the first created
    # said "not created", and uninstall left an empty config.toml behind.
    path = str(codex_home / "config.toml")
    assert_clean(run("install", "codex"))  # no config.toml before: install creates it
    write(path, "")  # the user empties it by hand
    assert_clean(run("install", "codex"))
    assert_clean(run("uninstall", "codex"))
    assert not os.path.exists(path)  # install created it and nothing else was put in since
    assert record.created_folders(path) is None


def test_uninstall_reads_the_records_an_older_version_wrote(run, home):
    # An older version kept "created" in listing.json too, and keyed the
    # file by its path as given: a user upgrading still gets the file
    # install created taken away, with the folder made for it.
    env = os.path.join(home, ".gemini", ".env")
    write(env, "GEMINI_PROMPT_AGENTSKILLS=0\n")
    state = fileutil.state_dir()
    os.makedirs(state)
    write(os.path.join(state, "listing.json"),
          json.dumps({"gemini " + env: {"created": True, "newline": False}}))
    write(os.path.join(state, "created.json"), json.dumps({env: [os.path.dirname(env)]}))
    assert_clean(run("uninstall", "gemini"))
    assert not os.path.exists(os.path.dirname(env))
    assert record.load() == {}


@pytest.mark.skipif(__import__("shutil").which("node") is None, reason="Node.js is not installed")
def test_the_cline_plugin_warms_up_when_it_loads(run, home, cli_env, tmp_path):
    # Issue 38: Cline has no session-start hook the CLI reads; its plugin's
    # setup runs `warm cline`, detached: with the tier off here, that
    # builds the index before the task's first prompt.
    import subprocess
    skill(os.path.join(home, ".cline", "skills"), "alpha")
    assert_clean(run("install", "cline"))
    cache = os.path.join(cli_env["XDG_CACHE_HOME"], "skill-retrieval")
    for f in os.listdir(cache):
        if f.startswith("index-"):
            os.unlink(os.path.join(cache, f))  # built by install: the warm-up builds it again
    mjs = tmp_path / "plugin.mjs"
    mjs.write_text(open(cline.target()).read())
    driver = tmp_path / "load.mjs"
    driver.write_text("const m = await import(%s);\nm.default.setup({}, { workspaceInfo: { rootPath: %s } });\n"
                      % (json.dumps(str(mjs)), json.dumps(home)))
    proc = subprocess.run(["node", str(driver)], env=cli_env, capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    log = os.path.join(cache, "skill-retrieval.log")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (os.path.exists(log) and "warm cline: built index" in open(log).read()):
        time.sleep(0.1)
    assert "warm cline: built index" in open(log).read()


def test_one_table_maps_each_runner_to_its_module_with_the_same_functions():
    # Issue 42: a runner is one module plus one line in listing.MODULES;
    # nothing else dispatches on its name.
    import inspect
    from retriever.runners import skillsets
    from retriever.runners.registry import NAMES
    assert set(listing.MODULES) == set(NAMES) - {"hermes"}
    for name, mod in listing.MODULES.items():
        assert mod.NAME == name
        want = ["target", "install", "uninstall", "status", "mcp_file"] + (["roots", "cost"] if mod.LISTING else [])
        assert all(inspect.isfunction(getattr(mod, f, None)) for f in want), name
    assert listing.RUNNERS == ("claude-code", "codex", "gemini", "opencode")
    from retriever.runners import mcp_config
    assert mcp_config.RUNNERS == tuple(listing.MODULES) and "cline" not in mcp_config.PROJECT_FILES
    assert all(mod.MCP_SHAPE in ("stdio", "toml", "plain", "local") for mod in listing.MODULES.values())
    assert 'runner == "' not in inspect.getsource(listing) and "globals()" not in inspect.getsource(skillsets)
