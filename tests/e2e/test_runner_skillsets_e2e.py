"""Each runner's own skill set, inside the real CLIs (versions pinned in the
Makefile), against the mock model API on 127.0.0.1.

* Claude Code, on the pinned and the newest version: a project skill, a
  parent-folder skill, a skill of a really installed plugin and a
  ``disable-model-invocation`` skill; the hook injects the first three
  under the names Claude Code itself lists them by, and never the last.
* Claude Code installs this repository as a plugin (``claude plugin
  marketplace add`` + ``claude plugin install``) from a copy without a
  ``.venv``: the plugin's own hook injects the block.
* Gemini CLI (``BeforeAgent``) and Cline (the SDK plugin ``install cline``
  writes), each with a control run without the hook.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from retriever.runners import install

from .runners import (CLAUDE_VERSIONS, REPO_ROOT, claude_plugin, run_claude, run_cline, run_gemini,
                      write_claude_settings, write_gemini_settings)
from .test_claude_codex_e2e import (BIN, HEADING, PROMPT, diag, expected_block, holds, make_library, model_bodies,
                                    skr_env, strings)

ZEBRA = "groom the zebra herd before the show"


def _skill(root: Path, folder: str, name: str, desc: str, extra: str = "") -> None:
    d = root / folder
    d.mkdir(parents=True, exist_ok=True)
    (d / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {desc}\n{extra}---\n# {folder}\n")


def _market(root: Path) -> Path:
    """A local marketplace with one plugin, ``zoo``, holding one skill."""
    (root / ".claude-plugin").mkdir(parents=True)
    (root / ".claude-plugin" / "marketplace.json").write_text(json.dumps(
        {"name": "zoo-market", "owner": {"name": "tests"},
         "plugins": [{"name": "zoo", "source": "./plugins/zoo"}]}))
    plug = root / "plugins" / "zoo"
    (plug / ".claude-plugin").mkdir(parents=True)
    (plug / ".claude-plugin" / "plugin.json").write_text(json.dumps({"name": "zoo", "version": "1.0.0"}))
    _skill(plug / "skills", "zebra-plugin", "fm-plugin", "Groom the zebra herd for the show, from a plugin.")
    return root


def _listed(bodies) -> str:
    """All request text, for Claude Code's own skill listing."""
    return "\n".join(s for b in bodies for s in strings(b))


def _injected(bodies) -> set:
    """The skill names in the retrieved block(s) the request carries."""
    names = set()
    for text in strings(bodies):
        if HEADING in text:
            block = text[text.index(HEADING):]
            names |= set(re.findall(r"^- \*\*([^*]+)\*\*", block, re.M))
    return names


@pytest.mark.parametrize("version", CLAUDE_VERSIONS)
def test_claude_code_injects_its_own_skill_set_under_its_names(mock_llm, tmp_path, version):
    home = tmp_path / "home"
    repo = tmp_path / "repo"
    proj = repo / "app"
    (repo / ".git").mkdir(parents=True)
    proj.mkdir()
    _skill(proj / ".claude" / "skills", "zebra-project", "fm-project", "Groom the zebra herd for the show, in this project.")
    _skill(repo / ".claude" / "skills", "zebra-parent", "fm-parent", "Groom the zebra herd for the show, from the parent folder.")
    _skill(proj / ".claude" / "skills", "zebra-manual", "fm-manual", "Groom the zebra herd for the show, by hand only.",
           "disable-model-invocation: true\n")
    for args in (["marketplace", "add", str(_market(tmp_path / "market"))], ["install", "zoo@zoo-market"]):
        cp = claude_plugin(args, home, mock_llm, proj, version)
        assert cp.returncode == 0, cp
    settings = write_claude_settings(tmp_path / "settings.json",
                                     [install.hook_command("claude-code")], timeout=30)
    # every skill matches the prompt equally: none may be cut by the score
    # floor, nor by the decision (in a library of three copies of one skill,
    # every word of the prompt is in every skill, so no word says more for
    # one than another, and BM25's evidence is nil): the skill sets and
    # their names are what this test is about.
    cp, reqs = run_claude(ZEBRA, settings, mock_llm, home=home, cwd=proj, version=version,
                          extra_env={"SKILL_RETRIEVAL_REVALIDATE": "off", "SKILL_RETRIEVAL_MIN_SCORE_RATIO": "0",
                                     "SKILL_RETRIEVAL_DECIDE": "off"},
                          timeout=90)
    bodies = model_bodies(mock_llm, reqs)
    text = _listed(bodies)
    assert _injected(bodies) == {"zebra-project", "zebra-parent", "zoo:zebra-plugin"}, diag(cp, home)
    # Claude Code lists the same skills under the same names, and hides the manual one too.
    for name in ("zebra-project", "zebra-parent", "zoo:zebra-plugin"):
        assert "- %s" % name in text, name
    assert "zebra-manual" not in text and "fm-manual" not in text


def _plugin_copy(dest: Path) -> Path:
    """What a clone holds, without .venv, .cache or tests: the plugin as
    Claude Code copies it."""
    for item in (".claude-plugin", "hooks", "bin", "retriever", "LICENSE", "README.md"):
        src = REPO_ROOT / item
        if src.is_dir():
            shutil.copytree(src, dest / item, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / item)
    return dest


@pytest.mark.parametrize("installed", [True, False], ids=["plugin", "no-plugin-control"])
@pytest.mark.parametrize("version", CLAUDE_VERSIONS)
def test_claude_code_plugin_install_injects_the_block(mock_llm, tmp_path, version, installed):
    home = tmp_path / "home"
    library = make_library(home / ".claude" / "skills")
    block = expected_block(library, tmp_path / "scratch", "claude-code")
    proj = tmp_path / "project"
    proj.mkdir()
    if installed:
        clone = _plugin_copy(tmp_path / "clone")
        for args in (["marketplace", "add", str(clone)], ["install", "skill-retrieval@skill-retrieval"]):
            cp = claude_plugin(args, home, mock_llm, proj, version)
            assert cp.returncode == 0, cp
        listed = claude_plugin(["list"], home, mock_llm, proj, version)
        assert "skill-retrieval@skill-retrieval" in listed.stdout, listed
    cp, reqs = run_claude(PROMPT, None, mock_llm, home=home, cwd=proj, version=version,
                          extra_env={"SKILL_RETRIEVAL_REVALIDATE": "off"}, timeout=90)
    bodies = model_bodies(mock_llm, reqs)
    assert bodies, "Claude Code sent no model request\n" + diag(cp, home)
    assert holds(bodies, block) == installed, diag(cp, home)
    # The plugin's SessionStart hook ran `warm claude-code` (issue 38); its
    # detached child logs one line once the index is checked.
    log = home / ".cache" / "skill-retrieval" / "skill-retrieval.log"
    deadline = time.monotonic() + 30
    while installed and time.monotonic() < deadline and "warm claude-code: " not in (
            log.read_text() if log.exists() else ""):
        time.sleep(0.1)
    assert ("warm claude-code: " in (log.read_text() if log.exists() else "")) == installed, diag(cp, home)


# ----------------------------------------------------------------- Gemini CLI


@pytest.mark.parametrize("hooked", [True, False], ids=["hook", "no-hook-control"])
def test_gemini_cli_injects_the_block(mock_llm, tmp_path, hooked):
    home = tmp_path / "home"
    proj = tmp_path / "project"
    library = make_library(proj / ".gemini" / "skills")
    block = expected_block(library, tmp_path / "scratch", "gemini")
    write_gemini_settings(home, [install.hook_command("gemini")] if hooked else [])
    cp, reqs = run_gemini(PROMPT, home, mock_llm, proj, timeout=90,
                          extra_env={"SKILL_RETRIEVAL_REVALIDATE": "off"})
    bodies = model_bodies(mock_llm, reqs)
    assert bodies, "Gemini CLI sent no model request\n" + diag(cp, home)
    assert PROMPT in json.dumps(bodies)
    # 0.61.0 appends the context to the user turn as <hook_context>...</hook_context>
    assert holds(bodies, block) == hooked, diag(cp, home)


# ---------------------------------------------------------------------- Cline


def test_cline_control_reaches_the_mock_without_a_block(mock_llm, tmp_path):
    home = tmp_path / "home"
    proj = tmp_path / "project"
    make_library(proj / ".cline" / "skills")
    cp, reqs = run_cline(PROMPT, home, mock_llm, proj, timeout=90)
    bodies = model_bodies(mock_llm, reqs)
    assert bodies, "Cline sent no model request\n" + diag(cp, home)
    assert PROMPT in json.dumps(bodies) and not holds(bodies, HEADING)


def test_cline_injects_the_block(mock_llm, tmp_path):
    """``install cline`` writes an SDK plugin (``~/.cline/plugins``) whose
    beforeRun asks the hook and returns its block as appendContext: the
    Cline CLI never reads a UserPromptSubmit hook's output, but this
    reaches the model (issue 30; a strict xfail before)."""
    home = tmp_path / "home"
    proj = tmp_path / "project"
    library = make_library(proj / ".cline" / "skills")
    block = expected_block(library, tmp_path / "scratch", "cline")
    cp = subprocess.run([str(BIN), "install", "cline"], capture_output=True, text=True, cwd=str(proj),
                        env=skr_env(home), timeout=60)
    assert cp.returncode == 0, cp
    cp, reqs = run_cline(PROMPT, home, mock_llm, proj, timeout=90,
                         extra_env={"SKILL_RETRIEVAL_REVALIDATE": "off"})
    bodies = model_bodies(mock_llm, reqs)
    assert bodies, "Cline sent no model request\n" + diag(cp, home)
    assert holds(bodies, block), diag(cp, home)
