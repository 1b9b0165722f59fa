"""``install RUNNER`` registers the MCP server in the runner's own MCP
settings (issue 39): merged under the lock, backed up, the user's own
servers kept, undone exactly by ``uninstall``, left out with
``--no-mcp``; doctor runs only a server command install wrote."""

import json
import os

import pytest

from skillret_helpers import assert_clean, make_skill

FILES = {"claude-code": ".claude.json", "codex": ".codex/config.toml", "gemini": ".gemini/settings.json",
         "opencode": ".config/opencode/opencode.json", "cline": ".cline/data/settings/cline_mcp_settings.json"}


def _home(tmp_path):
    return tmp_path / "home"


def _servers(runner, path):
    text = path.read_text()
    if runner == "codex":
        import tomllib
        return tomllib.loads(text).get("mcp_servers", {})
    return json.loads(text).get("mcp" if runner == "opencode" else "mcpServers", {})


@pytest.mark.parametrize("runner", sorted(FILES))
def test_install_registers_and_uninstall_removes_exactly(cli, tmp_path, runner):
    home = _home(tmp_path)
    path = home / FILES[runner]
    path.parent.mkdir(parents=True, exist_ok=True)
    if runner == "codex":
        before = 'model = "o3"  # mine\n\n[mcp_servers.mine]\ncommand = "my-server"\n'
    else:
        before = json.dumps({"theme": "dark", ("mcp" if runner == "opencode" else "mcpServers"):
                             {"mine": {"command": "my-server"}}}, indent=4) + "\n"
    path.write_text(before)
    proc = cli("install", runner)
    assert_clean(proc)
    assert "%s: MCP server registered" % runner in proc.stdout
    servers = _servers(runner, path)
    assert "mine" in servers
    ours = servers["skill-retrieval"]
    cmd = ours["command"] if runner == "opencode" else [ours["command"]] + ours["args"]
    assert cmd[1:3] == ["-I", "-S"] and cmd[-2:] == ["mcp", runner] and os.path.isabs(cmd[0])
    again = cli("install", runner)
    assert_clean(again)
    assert "already registered" in again.stdout
    assert_clean(cli("uninstall", runner))
    assert path.read_text() == before


def test_codex_without_a_final_newline_comes_back_byte_for_byte(cli, tmp_path):
    path = _home(tmp_path) / FILES["codex"]
    path.parent.mkdir(parents=True)
    before = 'model = "o3"\n\n[profiles.fast]\nmodel = "o4-mini"'
    path.write_text(before)
    assert_clean(cli("install", "codex", "--no-compact"))
    assert "skill-retrieval" in _servers("codex", path)
    assert_clean(cli("uninstall", "codex"))
    assert path.read_text() == before


def test_a_file_install_created_is_deleted_by_uninstall(cli, tmp_path):
    home = _home(tmp_path)
    assert_clean(cli("install", "cline"))
    path = home / FILES["cline"]
    assert "skill-retrieval" in _servers("cline", path)
    assert_clean(cli("uninstall", "cline"))
    assert not path.exists() and not (home / ".cline" / "data").exists()


def test_claude_json_rewritten_by_claude_code_meanwhile_keeps_its_changes(cli, tmp_path):
    """Claude Code rewrites ~/.claude.json while it runs: uninstall then
    takes out only our entry, never restores the old bytes over its
    changes."""
    path = _home(tmp_path) / ".claude.json"
    path.write_text(json.dumps({"numStartups": 1}))
    assert_clean(cli("install", "claude-code"))
    data = json.loads(path.read_text())
    data["numStartups"] = 2
    path.write_text(json.dumps(data, indent=2))
    assert_clean(cli("uninstall", "claude-code"))
    assert json.loads(path.read_text()) == {"numStartups": 2}


def test_claude_code_is_allowed_the_read_only_tools_and_uninstall_takes_it_back(cli, tmp_path):
    """``claude -p`` denies an MCP tool nobody allowed: install allows ours
    (both only read the user's skills) beside the user's own rules."""
    settings = _home(tmp_path) / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    before = json.dumps({"permissions": {"allow": ["Bash(ls:*)"]}}, indent=2) + "\n"
    settings.write_text(before)
    assert_clean(cli("install", "claude-code"))
    assert json.loads(settings.read_text())["permissions"]["allow"] == ["Bash(ls:*)", "mcp__skill-retrieval"]
    assert_clean(cli("uninstall", "claude-code"))
    assert settings.read_text() == before
    assert_clean(cli("install", "claude-code"))
    assert_clean(cli("uninstall", "claude-code"))
    assert settings.read_text() == before


def test_no_mcp_leaves_the_server_out(cli, tmp_path):
    proc = cli("install", "gemini", "--no-mcp")
    assert_clean(proc)
    settings = _home(tmp_path) / FILES["gemini"]
    assert "mcpServers" not in json.loads(settings.read_text())
    assert "MCP" not in proc.stdout


def test_dry_run_writes_nothing(cli, tmp_path):
    proc = cli("install", "claude-code", "--dry-run")
    assert_clean(proc)
    assert "would write" in proc.stdout and "skill-retrieval" in proc.stdout
    assert not (_home(tmp_path) / ".claude.json").exists()


def test_an_entry_the_user_edited_is_kept_unless_forced(cli, tmp_path):
    path = _home(tmp_path) / ".claude.json"
    path.write_text(json.dumps({"mcpServers": {"skill-retrieval": {"command": "/opt/mine", "args": ["x"]}}}))
    proc = cli("install", "claude-code")
    assert_clean(proc)
    assert "kept your edited MCP server entry" in proc.stdout
    assert _servers("claude-code", path)["skill-retrieval"]["command"] == "/opt/mine"
    assert_clean(cli("install", "claude-code", "--force"))
    assert _servers("claude-code", path)["skill-retrieval"]["args"][-2:] == ["mcp", "claude-code"]


def test_codex_toml_that_cannot_take_a_table_is_refused_unchanged(cli, tmp_path):
    path = _home(tmp_path) / FILES["codex"]
    path.parent.mkdir(parents=True)
    before = 'mcp_servers = { mine = { command = "x" } }\n'
    path.write_text(before)
    proc = cli("install", "codex", "--no-compact")  # the names-only switch would edit it first
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "left unchanged" in proc.stderr
    assert path.read_text() == before


def test_doctor_runs_the_server_install_wrote_and_no_other(cli, tmp_path):
    home = _home(tmp_path)
    make_skill(home / ".claude" / "skills", "pdf-merge", {"name": "pdf-merge", "description": "Merge PDF files"})
    assert_clean(cli("install", "claude-code"))
    proc = cli("doctor", "--runner", "claude-code")
    assert "MCP server: answers tools/list" in proc.stdout, proc.stdout
    # A planted command under our name: never run, said so.
    marker = tmp_path / "ran"
    evil = tmp_path / "evil.sh"
    evil.write_text("#!/bin/sh\ntouch %s\n" % marker)
    evil.chmod(0o755)
    path = home / ".claude.json"
    data = json.loads(path.read_text())
    data["mcpServers"]["skill-retrieval"]["command"] = str(evil)
    path.write_text(json.dumps(data))
    proc = cli("doctor", "--runner", "claude-code")
    assert "MCP server: registered, not run: not as skill-retrieve install wrote it" in proc.stdout
    assert not marker.exists()


def test_the_claude_code_plugin_declares_the_server():
    from skillret_helpers import REPO
    plugin = json.loads((REPO / ".claude-plugin" / "plugin.json").read_text())
    server = plugin["mcpServers"]["skill-retrieval"]
    assert server == {"command": "${CLAUDE_PLUGIN_ROOT}/bin/skill-retrieve", "args": ["mcp", "claude-code"]}


@pytest.mark.parametrize("runner,deferred", [("claude-code", True), ("codex", False)])
def test_tokens_counts_the_tool_definitions(cli, tmp_path, runner, deferred):
    """They ride on every request: ``tokens --runner`` prices them (Claude
    Code lists deferred MCP tools by name until the model loads one)."""
    from retriever.runners import mcp_server
    home = _home(tmp_path)
    folder = home / (".claude/skills" if runner == "claude-code" else ".agents/skills")
    make_skill(folder, "pdf-merge", {"name": "pdf-merge", "description": "Merge PDF files"})
    c = json.loads(cli("tokens", "--runner", runner, "--format", "json").stdout)
    want = len("mcp__skill-retrieval__search_skills\nmcp__skill-retrieval__read_skill\n") if deferred \
        else len(mcp_server.tools_json())
    assert c["mcp_tools"] == want
    assert "MCP server's tool definitions" in cli("tokens", "--runner", runner).stdout


def test_a_project_install_registers_in_the_projects_own_files(cli, tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    for runner in ("claude-code", "codex", "gemini", "opencode", "cline"):
        assert_clean(cli("install", runner, "--project", proj))
    servers = json.loads((proj / ".mcp.json").read_text())["mcpServers"]
    assert servers["skill-retrieval"]["args"][-2:] == ["mcp", "claude-code"]
    allow = json.loads((proj / ".claude" / "settings.json").read_text())["permissions"]["allow"]
    assert allow == ["mcp__skill-retrieval"]
    assert "skill-retrieval" in _servers("codex", proj / ".codex" / "config.toml")
    assert "skill-retrieval" in _servers("opencode", proj / "opencode.json")
    # Cline has no project MCP file: nothing is written where it never looks.
    assert not list(proj.rglob("*mcp_settings*")) and not (_home(tmp_path) / ".cline" / "data").exists()
    for runner in ("claude-code", "codex", "gemini", "opencode", "cline"):
        assert_clean(cli("uninstall", runner, "--project", proj))
    assert sorted(p.name for p in proj.rglob("*")) == []
