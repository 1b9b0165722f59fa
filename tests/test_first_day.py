"""Issue 41, a user's first day: what the injected block names must be
loadable in the runner that gets it, ``tokens`` says what its figures
rest on, and the command line says what a silent answer means.

Every test runs the real executable (``cli``) in a temporary HOME.
"""

import json
import os

import pytest

from conftest import make_skill
from test_hooks import payload as _payload

ARXIV = {"name": "arxiv", "description": "Search and download arxiv papers by their id or title."}
PDF = {"name": "pdf-extract", "description": "Extract text and tables from PDF files, including scanned PDFs."}

# Where each runner reads the user's own skills (runners/skillsets.py;
# Hermes: $HERMES_HOME/skills).
OWN = {"claude-code": ".claude/skills", "codex": ".codex/skills", "gemini": ".gemini/skills",
       "cline": ".cline/skills", "opencode": ".config/opencode/skills", "hermes": ".hermes/skills"}


def payload(runner, prompt, cwd):
    """What ``runner`` sends its hook (OpenCode: what our plugin sends)."""
    if runner == "opencode":
        return {"prompt": prompt, "cwd": cwd, "session_id": "s-" + prompt}
    return _payload(runner, prompt, cwd=cwd)


def block_of(proc):
    """The injected text of a hook's output, whatever the runner's shape."""
    assert proc.returncode == 0 and proc.stderr == "" and proc.stdout, proc
    doc = json.loads(proc.stdout)
    return (doc.get("hookSpecificOutput") or {}).get("additionalContext") or doc.get("context") \
        or doc.get("contextModification")


# -------------------------------------------------------- defect 1: loadable


@pytest.mark.parametrize("runner", list(OWN))
def test_a_named_folders_skill_comes_with_its_path_and_the_runners_own_by_name(runner, cli, tmp_path):
    home = tmp_path / "home"
    mine = make_skill(home / "myskills", "arxiv", ARXIV)
    make_skill(home / OWN[runner], "pdf-extract", PDF)
    assert cli("roots", "add", home / "myskills").returncode == 0
    project = tmp_path / "project"
    project.mkdir()

    foreign = block_of(cli("hook", runner, input=json.dumps(payload(runner, "download the arxiv paper 2101.00001",
                                                                    cwd=str(project)))))
    line = [l for l in foreign.splitlines() if l.startswith("- **arxiv**")]
    assert line and str(mine / "SKILL.md") in line[0], foreign
    assert "read that file" in foreign.splitlines()[1]

    own = block_of(cli("hook", runner, input=json.dumps(payload(runner, "extract the text from my pdf files",
                                                                cwd=str(project)))))
    assert "- **pdf-extract** (pdf-extract): " in own and "SKILL.md path" not in own, own


def test_a_named_folder_the_runner_reads_itself_is_named_not_pathed(cli, tmp_path):
    # ~/.agents/skills is Codex's own folder but not Claude Code's: naming
    # it with `roots add` changes nothing for Codex.
    home = tmp_path / "home"
    folder = make_skill(home / ".agents/skills", "arxiv", ARXIV)
    assert cli("roots", "add", home / ".agents/skills").returncode == 0
    ask = json.dumps(payload("codex", "download the arxiv paper 2101.00001", cwd=str(tmp_path)))
    codex = block_of(cli("hook", "codex", input=ask))
    assert "- **arxiv** (arxiv): " in codex, codex
    claude = block_of(cli("hook", "claude-code", input=ask))
    assert str(folder / "SKILL.md") in claude, claude


def test_the_hermes_plugin_gives_a_named_folders_skill_its_path(tmp_path, monkeypatch):
    from retriever import render
    home = tmp_path / "home"
    mine = make_skill(home / "myskills", "arxiv", ARXIV)
    (home / ".hermes" / "skills").mkdir(parents=True)
    monkeypatch.setenv("SKILL_RETRIEVAL_ROOTS", str(home / "myskills"))
    monkeypatch.setenv("HERMES_HOME", str(home / ".hermes"))
    from hermes_plugin import runtime
    state = runtime.new_state(index_path=str(tmp_path / "plugin.skr"))
    results = runtime.retrieve(state, "download the arxiv paper 2101.00001")
    assert results and results[0].get("read") == str(mine / "SKILL.md")
    assert str(mine / "SKILL.md") in render.text_block(results, "with skill_view(name)")
