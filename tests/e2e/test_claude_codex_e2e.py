"""The prompt hook inside the real Claude Code and Codex CLIs (pinned npm
versions, see ``runners.py``), against the mock model API on 127.0.0.1.

Each positive test asserts that a model request the mock received holds the
exact block ``skill-retrieve`` prints for the same library and prompt, which
names the expected skill; each control asserts the block is absent.  Two
tests register the hook with ``skill-retrieve install`` and let the hook
find the skills from the payload's ``cwd``, as a user's set-up would.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from retriever import render
from retriever.runners import install, registry

from .runners import CLAUDE_VERSIONS, REPO_ROOT, run_claude, run_codex, write_claude_settings, write_codex_hooks

BIN = REPO_ROOT / "bin" / "skill-retrieve"
PROMPT = "pull the text out of my scanned pdf invoice"
HEADING = "## Retrieved Skills"
SKILLS = {
    "pdf-extract": "Extract text and tables from PDF files, including scanned PDFs via OCR.",
    "k8s-certs": "Rotate Kubernetes TLS certificates and kubeconfig credentials.",
    "git-bisect": "Find the commit that introduced a regression with git bisect.",
}


def make_library(root: Path) -> Path:
    for name, desc in SKILLS.items():
        d = root / name
        d.mkdir(parents=True, exist_ok=True)
        (d / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {desc}\n---\n# {name}\n")
    return root


def skr_env(home: Path, **extra) -> dict:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LC_ALL": "C.UTF-8",
           "SKILL_RETRIEVAL_REVALIDATE": "off", "SKILL_RETRIEVAL_SEMANTIC": "off"}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def expected_block(library: Path, scratch: Path, runner: str = "") -> str:
    """What ``skill-retrieve`` itself answers for PROMPT (its own cache),
    its guidance line naming ``runner``'s way to load a skill."""
    scratch.mkdir(parents=True, exist_ok=True)
    cp = subprocess.run([str(BIN), "--root", str(library), PROMPT], capture_output=True, text=True,
                        env=skr_env(scratch, XDG_CACHE_HOME=scratch / "cache"), timeout=60)
    assert cp.returncode == 0 and cp.stdout.startswith(HEADING), cp
    assert "- **pdf-extract** (pdf-extract):" in cp.stdout
    load = registry.RUNNERS[runner]["load"] if runner else None
    return cp.stdout.replace(render.guidance(), render.guidance(load)).strip()


def installed_command(runner: str, home: Path, **extra) -> str:
    """Run ``skill-retrieve install RUNNER`` on a temp home; return the
    command it registered."""
    cp = subprocess.run([str(BIN), "install", runner], capture_output=True, text=True,
                        env=skr_env(home, **extra), timeout=60)
    assert cp.returncode == 0, cp
    path = (Path(extra["CODEX_HOME"]) / "hooks.json" if runner == "codex"
            else home / ".claude" / "settings.json")
    (group,) = json.loads(path.read_text())["hooks"]["UserPromptSubmit"]
    (handler,) = group["hooks"]
    assert handler["timeout"] == 5
    return handler["command"]


def strings(obj):
    """Every string inside a parsed JSON value."""
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from strings(v)


def model_bodies(mock, reqs) -> list:
    """Bodies of the requests that asked the model for a reply."""
    return [r["body"] for r in mock.model_requests(reqs)]


def holds(bodies, text) -> bool:
    return any(text in s for b in bodies for s in strings(b))


def diag(cp, home: Path) -> str:
    log = home / ".cache" / "skill-retrieval" / "skill-retrieval.log"
    log_text = log.read_text() if log.exists() else "(no hook log)"
    return (f"rc={cp.returncode}\nstdout:\n{cp.stdout[-1500:]}\nstderr:\n{cp.stderr[-1500:]}\n"
            f"hook log:\n{log_text[-1500:]}")


# ----------------------------------------------------------------- Claude Code


@pytest.mark.parametrize("bare", [False, True], ids=["hook", "bare-control"])
@pytest.mark.parametrize("version", CLAUDE_VERSIONS)
def test_claude_code_injects_the_block(mock_llm, tmp_path, bare, version):
    library = make_library(tmp_path / "skills")
    block = expected_block(library, tmp_path / "scratch", "claude-code")
    command = f"{install.hook_command('claude-code')} --root {shlex.quote(str(library))}"
    settings = write_claude_settings(tmp_path / "settings.json", [command], timeout=30)
    home = tmp_path / "home"
    cp, reqs = run_claude(PROMPT, settings, mock_llm, home=home, cwd=tmp_path / "project", bare=bare,
                          extra_env={"SKILL_RETRIEVAL_REVALIDATE": "off"}, timeout=90, version=version)
    bodies = model_bodies(mock_llm, reqs)
    assert bodies, "Claude Code sent no model request\n" + diag(cp, home)
    if bare:
        assert not holds(bodies, HEADING), diag(cp, home)
    else:
        assert holds(bodies, block), diag(cp, home)
        assert PROMPT in json.dumps(bodies)


def test_claude_code_installed_hook_finds_project_skills(mock_llm, tmp_path):
    home = tmp_path / "home"
    project = tmp_path / "project"
    make_library(project / ".claude" / "skills")
    block = expected_block(project / ".claude" / "skills", tmp_path / "scratch", "claude-code")
    installed_command("claude-code", home)
    # no --settings: Claude Code reads the user settings the installer wrote;
    # the hook takes the project from the payload's cwd.  Background
    # revalidation stays on, as for a user.
    cp, reqs = run_claude(PROMPT, None, mock_llm, home=home, cwd=project, timeout=90)
    assert holds(model_bodies(mock_llm, reqs), block), diag(cp, home)


# ----------------------------------------------------------------------- Codex


@pytest.mark.parametrize("trust", [True, False], ids=["trusted", "untrusted-control"])
def test_codex_injects_the_block(mock_llm, tmp_path, trust):
    library = make_library(tmp_path / "skills")
    block = expected_block(library, tmp_path / "scratch", "codex")
    command = f"{install.hook_command('codex')} --root {shlex.quote(str(library))}"
    codex_home = tmp_path / "codex-home"
    write_codex_hooks(codex_home, [command], timeout=30)
    home = tmp_path / "home"
    cp, reqs = run_codex(PROMPT, codex_home, mock_llm, cwd=tmp_path / "project", trust_hooks=trust,
                         home=home, extra_env={"SKILL_RETRIEVAL_REVALIDATE": "off"}, timeout=90)
    bodies = model_bodies(mock_llm, reqs)
    assert bodies, "Codex sent no model request\n" + diag(cp, home)
    if trust:
        assert holds(bodies, block), diag(cp, home)
    else:
        assert not holds(bodies, HEADING), diag(cp, home)


def test_codex_installed_hook_finds_repo_skills(mock_llm, tmp_path):
    home = tmp_path / "home"
    codex_home = tmp_path / "codex-home"
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    make_library(repo / ".agents" / "skills")
    block = expected_block(repo / ".agents" / "skills", tmp_path / "scratch", "codex")
    installed_command("codex", home, CODEX_HOME=codex_home)
    # run from a sub-folder: Codex reads .agents/skills up to the git root
    cp, reqs = run_codex(PROMPT, codex_home, mock_llm, cwd=repo / "src", home=home, timeout=90)
    assert holds(model_bodies(mock_llm, reqs), block), diag(cp, home)
