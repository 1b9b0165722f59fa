"""Both halves of the job in the real CLIs (issue 30): after
``skill-retrieve install RUNNER`` the runner lists the user's skills by name
only, the hook still adds the relevant ones, and a skill listed by name can
still be loaded through the runner's own skill tool.

Each runner has a run with the product installed and a control without it.
The mock answers the first model request with a call to the runner's skill
tool (Claude Code's ``Skill``, Gemini CLI's ``activate_skill``, Codex's
shell reading the SKILL.md it lists by path), so the next request carries
the skill's body: the test finds it there.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from .mockserver import MockLLM
from .runners import (CLAUDE_VERSIONS, require_claude, require_codex, require_gemini, require_opencode, run_claude,
                      run_codex, run_gemini, run_opencode, write_codex_config, write_gemini_settings,
                      write_opencode_config)
from .test_claude_codex_e2e import BIN, HEADING, diag, skr_env

PROMPT = "pull the text out of my scanned pdf invoice"
# Each description carries a marker: a marker in the request is that
# description.  pdf-extract is the one the hook retrieves for PROMPT.
SKILLS = {
    "pdf-extract": "Extract text and tables from PDF files, including scanned PDFs via OCR. DESC-PDF",
    "k8s-certs": "Rotate Kubernetes TLS certificates and kubeconfig credentials. DESC-K8S",
    "zebra-care": "Groom and feed the zebra herd before the show. DESC-ZEBRA",
}
LOADED = "zebra-care"  # listed by name only, loaded through the skill tool
BODY = "BODY-OF-ZEBRA-CARE: brush the stripes"
NOT_RETRIEVED = ("DESC-K8S", "DESC-ZEBRA")


def make_library(root: Path) -> Path:
    for name, desc in SKILLS.items():
        d = root / name
        d.mkdir(parents=True, exist_ok=True)
        body = BODY if name == LOADED else "# %s" % name
        (d / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {desc}\n---\n{body}\n")
    return root


def install(runner: str, home: Path, **extra) -> subprocess.CompletedProcess:
    cp = subprocess.run([str(BIN), "install", runner], capture_output=True, text=True,
                        env=skr_env(home, **extra), cwd=str(home), timeout=60)
    assert cp.returncode == 0 and not cp.stderr, cp
    return cp


def first_and_rest(mock, reqs):
    bodies = [json.dumps(r["body"], ensure_ascii=False) for r in mock.model_requests(reqs)]
    assert bodies, "no model request"
    return bodies[0], bodies[1:]


def check(first: str, rest: list, installed: bool, where: str) -> None:
    """The three promises, or their absence in the control."""
    if installed:
        for marker in NOT_RETRIEVED:
            assert marker not in first, "%s: a covered skill's description is still listed\n%s" % (marker, where)
        assert HEADING in first and "DESC-PDF" in first, "no retrieved block\n" + where
    else:
        for marker in NOT_RETRIEVED:
            assert marker in first, "control: %s not listed\n%s" % (marker, where)
        assert HEADING not in first, where
    assert any(BODY in b for b in rest), "the skill's body never came back\n" + where


# ----------------------------------------------------------------- Claude Code


@pytest.mark.parametrize("installed", [True, False], ids=["installed", "control"])
@pytest.mark.parametrize("version", CLAUDE_VERSIONS)
def test_claude_code_lists_names_only_and_loads_by_name(tmp_path, version, installed):
    require_claude(version)
    home = tmp_path / "home"
    make_library(home / ".claude" / "skills")
    if installed:
        install("claude-code", home)
    with MockLLM(tool_call={"name": "Skill", "args": {"skill": LOADED}}) as mock:
        cp, reqs = run_claude(PROMPT, None, mock, home=home, cwd=tmp_path / "project", version=version,
                              extra_env={"SKILL_RETRIEVAL_REVALIDATE": "off"}, timeout=90)
        first, rest = first_and_rest(mock, reqs)
    check(first, rest, installed, diag(cp, home))
    assert "- %s" % LOADED in first  # the name stays listed


def test_claude_code_names_a_skill_added_later_from_the_next_session(tmp_path):
    """The session-start hook adds the entry for a new skill; Claude Code
    reads it from the next session on, no re-install."""
    require_claude(CLAUDE_VERSIONS[-1])
    home = tmp_path / "home"
    make_library(home / ".claude" / "skills")
    install("claude-code", home)
    late = home / ".claude" / "skills" / "late-skill"
    late.mkdir()
    (late / "SKILL.md").write_text("---\nname: late-skill\ndescription: Added after install. DESC-LATE\n---\nx\n")
    seen = []
    with MockLLM() as mock:
        for _ in range(2):
            cp, reqs = run_claude("hello", None, mock, home=home, cwd=tmp_path / "project",
                                  version=CLAUDE_VERSIONS[-1], timeout=90,
                                  extra_env={"SKILL_RETRIEVAL_REVALIDATE": "off"})
            seen.append(first_and_rest(mock, reqs)[0])
    assert "DESC-LATE" in seen[0] and "DESC-LATE" not in seen[1], diag(cp, home)
    assert "- late-skill" in seen[1]
    overrides = json.loads((home / ".claude" / "settings.json").read_text())["skillOverrides"]
    assert overrides["late-skill"] == "name-only"


# ----------------------------------------------------------------------- Codex


@pytest.mark.parametrize("installed", [True, False], ids=["installed", "control"])
def test_codex_lists_names_only_and_loads_by_path(tmp_path, installed):
    require_codex()
    home = tmp_path / "home"
    codex_home = tmp_path / "codex-home"
    library = make_library(home / ".agents" / "skills")
    call = {"name": "exec_command", "args": {"cmd": "cat %s/%s/SKILL.md" % (library, LOADED)}}
    with MockLLM(tool_call=call) as mock:
        write_codex_config(codex_home, mock.port)
        if installed:
            install("codex", home, CODEX_HOME=codex_home)
        cp, reqs = run_codex(PROMPT, codex_home, mock, cwd=tmp_path / "project", home=home, timeout=90,
                             write_config=False, extra_env={"SKILL_RETRIEVAL_REVALIDATE": "off"})
        first, rest = first_and_rest(mock, reqs)
    check(first, rest, installed, diag(cp, home))
    assert "- %s: (file: " % LOADED in first if installed else "- %s: Groom" % LOADED in first
    # the "under development" warning is silenced
    assert "Under-development features" not in cp.stderr, cp.stderr[-2000:]


# ----------------------------------------------------------------- Gemini CLI


@pytest.mark.parametrize("installed", [True, False], ids=["installed", "control"])
def test_gemini_cli_lists_names_only_and_activates_by_name(tmp_path, installed):
    require_gemini()
    home = tmp_path / "home"
    make_library(home / ".gemini" / "skills")
    write_gemini_settings(home)
    if installed:
        install("gemini", home)
    # --yolo: Gemini CLI offers activate_skill in a headless run only when
    # tool calls need no confirmation.
    with MockLLM(tool_call={"name": "activate_skill", "args": {"name": LOADED}}) as mock:
        cp, reqs = run_gemini(PROMPT, home, mock, tmp_path / "project", timeout=120, extra_args=["--yolo"],
                              extra_env={"SKILL_RETRIEVAL_REVALIDATE": "off"})
        first, rest = first_and_rest(mock, reqs)
    check(first, rest, installed, diag(cp, home))
    assert "'%s'" % LOADED in first  # named in the activate_skill tool


# ------------------------------------------------------------------- OpenCode


@pytest.mark.parametrize("installed", [True, False], ids=["installed", "control"])
def test_opencode_lists_names_only_and_loads_by_name(tmp_path, installed):
    require_opencode()
    home = tmp_path / "home"
    make_library(home / ".config" / "opencode" / "skills")
    if installed:
        install("opencode", home)
    with MockLLM(tool_call={"name": "skill", "args": {"name": LOADED}}) as mock:
        write_opencode_config(home, mock.port)
        cp, reqs = run_opencode(PROMPT, home, mock, tmp_path / "project", timeout=120,
                                extra_env={"SKILL_RETRIEVAL_REVALIDATE": "off"})
        # the title request (no tools) is not the turn
        turn = [r for r in reqs if r.get("method") == "POST" and isinstance(r.get("body"), dict)
                and r["body"].get("tools")]
        first, rest = first_and_rest(mock, turn)
    check(first, rest, installed, diag(cp, home))
    assert "<name>%s</name>" % LOADED in first
