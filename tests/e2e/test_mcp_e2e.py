"""The MCP server inside the real Claude Code and Codex (issue 39).

``skill-retrieve install RUNNER`` registers the server; the mock model API
answers the first model request with a call to ``search_skills`` (Claude
Code defers MCP tools behind ToolSearch, so it loads the tool first, as a
model does) and the test finds the server's answer, naming the expected
skill and its path, in the request that follows.  ``claude mcp list``
shows the server connected.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from .mockserver import MockLLM, body_text, is_model_request
from .test_claude_codex_e2e import make_library  # pdf-extract, k8s-certs, git-bisect
from .runners import (CLAUDE_VERSIONS, REPO_ROOT, claude_bin, claude_env, require_claude, require_codex,
                      require_cline, require_gemini, require_opencode, run_claude, run_cline, run_codex,
                      run_gemini, run_opencode,
                      run_process, write_codex_config, write_gemini_settings, write_opencode_config)

BIN = REPO_ROOT / "bin" / "skill-retrieve"
QUERY = "pull the text out of a scanned pdf"
CLAUDE_TOOL = "mcp__skill-retrieval__search_skills"


def install(runner: str, home: Path, **extra) -> None:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LC_ALL": "C.UTF-8",
           "SKILL_RETRIEVAL_REVALIDATE": "off", "SKILL_RETRIEVAL_SEMANTIC": "off"}
    env.update({k: str(v) for k, v in extra.items()})
    cp = subprocess.run([str(BIN), "install", runner], capture_output=True, text=True, env=env, timeout=120)
    assert cp.returncode == 0, cp
    assert "%s: MCP server registered" % runner in cp.stdout, cp.stdout


def tool_answer(requests: list[dict]) -> str:
    """The model requests' bodies after the first, as one text."""
    bodies = [body_text(r) for r in requests if is_model_request(r)]
    assert len(bodies) >= 2, "the runner never came back with the tool's result"
    return "\n".join(bodies[1:])


def check(after: str, library: Path, where: str) -> None:
    assert "- pdf-extract: Extract text and tables from PDF files" in after, where
    assert str(library / "pdf-extract") in after, where
    assert "k8s-certs" not in after.split("- pdf-extract:")[1][:400], where


@pytest.mark.parametrize("version", CLAUDE_VERSIONS)
def test_claude_code_calls_search_skills_and_gets_the_skill(tmp_path, version):
    require_claude(version)
    home = tmp_path / "home"
    library = make_library(home / ".claude" / "skills")
    install("claude-code", home)
    with MockLLM() as mock:
        mock.tool_calls = [{"name": "ToolSearch", "args": {"query": "select:" + CLAUDE_TOOL, "max_results": 1}},
                           {"name": CLAUDE_TOOL, "id": "toolu_mock02", "args": {"query": QUERY}}]
        cp, reqs = run_claude("find me a skill", None, mock, home=home, cwd=tmp_path / "project", version=version,
                              timeout=120, extra_env={"SKILL_RETRIEVAL_REVALIDATE": "off"})
    check(tool_answer(reqs), library, "claude %s: %s %s" % (version, cp.stdout[-1500:], cp.stderr[-1500:]))


def test_claude_mcp_list_shows_the_server_connected(tmp_path):
    version = CLAUDE_VERSIONS[-1]
    require_claude(version)
    home = tmp_path / "home"
    make_library(home / ".claude" / "skills")
    install("claude-code", home)
    (tmp_path / "project").mkdir()
    with MockLLM() as mock:
        cp = run_process([str(claude_bin(version)), "mcp", "list"], claude_env(home, mock), tmp_path / "project", 90)
    line = [l for l in cp.stdout.splitlines() if l.startswith("skill-retrieval:")]
    assert line and "mcp claude-code" in line[0] and "Connected" in line[0], cp.stdout + cp.stderr


def test_codex_calls_search_skills_and_gets_the_skill(tmp_path):
    require_codex()
    home = tmp_path / "home"
    codex_home = tmp_path / "codex-home"
    library = make_library(home / ".agents" / "skills")
    with MockLLM() as mock:
        # Codex offers an MCP server's tools as one "namespace" tool group.
        mock.tool_calls = [{"name": "search_skills", "namespace": "mcp__skill_retrieval", "args": {"query": QUERY}}]
        write_codex_config(codex_home, mock.port)
        install("codex", home, CODEX_HOME=codex_home)
        # Codex starts MCP servers with a short list of variables of its
        # own: this test's settings (no semantic helper) go in the table.
        config = codex_home / "config.toml"
        text = config.read_text()
        assert text.endswith('"mcp", "codex"]\n'), text
        config.write_text(text + 'env = { SKILL_RETRIEVAL_SEMANTIC = "off", SKILL_RETRIEVAL_REVALIDATE = "off" }\n')
        cp, reqs = run_codex("find me a skill", codex_home, mock, cwd=tmp_path / "project", home=home,
                             timeout=120, write_config=False, extra_env={"SKILL_RETRIEVAL_REVALIDATE": "off"})
    first = [r for r in reqs if is_model_request(r)][0]
    assert "mcp__skill_retrieval" in json.dumps(first["body"].get("tools")), "codex did not offer the server"
    check(tool_answer(reqs), library, "codex: %s %s" % (cp.stdout[-1500:], cp.stderr[-1500:]))


def test_gemini_cli_calls_search_skills_and_gets_the_skill(tmp_path):
    require_gemini()
    home = tmp_path / "home"
    library = make_library(home / ".gemini" / "skills")
    write_gemini_settings(home)
    install("gemini", home)
    with MockLLM() as mock:
        mock.tool_calls = [{"name": "mcp_skill-retrieval_search_skills", "args": {"query": QUERY}}]
        # --yolo: gemini -p runs no tool that would ask (the names-only tests do the same)
        cp, reqs = run_gemini("find me a skill", home, mock, tmp_path / "project", timeout=120, extra_args=["--yolo"],
                              extra_env={"SKILL_RETRIEVAL_SEMANTIC": "off", "SKILL_RETRIEVAL_REVALIDATE": "off"})
    check(tool_answer(reqs), library, "gemini: %s %s" % (cp.stdout[-1500:], cp.stderr[-1500:]))


def test_opencode_calls_search_skills_and_gets_the_skill(tmp_path):
    require_opencode()
    home = tmp_path / "home"
    library = make_library(home / ".config" / "opencode" / "skills")
    with MockLLM() as mock:
        write_opencode_config(home, mock.port)
        install("opencode", home)  # merged into the config just written
        mock.tool_calls = [{"name": "skill-retrieval_search_skills", "args": {"query": QUERY}}]
        cp, reqs = run_opencode("find me a skill", home, mock, tmp_path / "project", timeout=120,
                                extra_env={"SKILL_RETRIEVAL_SEMANTIC": "off", "SKILL_RETRIEVAL_REVALIDATE": "off"})
    turn = [r for r in reqs if is_model_request(r) and isinstance(r.get("body"), dict) and r["body"].get("tools")]
    check(tool_answer(turn), library, "opencode: %s %s" % (cp.stdout[-1500:], cp.stderr[-1500:]))


def test_cline_calls_search_skills_and_gets_the_skill(tmp_path):
    require_cline()
    home = tmp_path / "home"
    library = make_library(home / ".cline" / "skills")
    install("cline", home)
    with MockLLM() as mock:
        mock.tool_calls = [{"name": "skill-retrieval__search_skills", "args": {"query": QUERY}}]
        cp, reqs = run_cline("find me a skill for pdf files", home, mock, tmp_path / "project", timeout=120,
                             extra_env={"SKILL_RETRIEVAL_SEMANTIC": "off", "SKILL_RETRIEVAL_REVALIDATE": "off"})
    check(tool_answer(reqs), library, "cline: %s %s" % (cp.stdout[-1500:], cp.stderr[-1500:]))
