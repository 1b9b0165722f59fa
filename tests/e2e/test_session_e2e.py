"""Session memory inside the real Claude Code CLI (pinned npm version),
against the mock model API: the hook gets Claude Code's session id and
transcript path, and reads the transcript Claude Code itself writes.

The mock answers a prompt holding LOADSKILL with a call of Claude Code's
Skill tool for ``pdf-extract``, so the agent loads that skill the way it
does for a user; every other request gets "OK".
"""

from __future__ import annotations

import json
import uuid

from retriever.runners import install

from .runners import run_claude, run_codex, write_claude_settings, write_codex_hooks
from .test_claude_codex_e2e import PROMPT, diag, make_library, model_bodies


def _turn(mock, settings, home, project, prompt, *session_args):
    """One prompt; ``(pdf-extract offered on this turn, process)``.  A
    resumed session's requests repeat the earlier turns' context, so the
    turn's own offer is read from the hook's output (stream-json events)."""
    cp, reqs = run_claude(prompt, settings, mock, home=home, cwd=project, timeout=90,
                          output_format="stream-json",
                          extra_env={"SKILL_RETRIEVAL_REVALIDATE": "off"}, extra_args=session_args)
    bodies = model_bodies(mock, reqs)
    assert cp.returncode == 0 and bodies, diag(cp, home)
    outs = []
    for line in cp.stdout.splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if ev.get("type") == "system" and ev.get("subtype") == "hook_response":
            outs.append(ev.get("stdout") or ev.get("output") or "")
    assert len(outs) == 1, diag(cp, home)
    offered = "- **pdf-extract**" in outs[0]
    if offered:  # and it reached the model
        assert "- **pdf-extract**" in json.dumps(bodies[-1]), diag(cp, home)
    return offered, cp


def test_claude_code_does_not_offer_again_what_the_session_holds(mock_llm, tmp_path):
    home = tmp_path / "home"
    project = tmp_path / "project"
    project.mkdir()
    make_library(home / ".claude" / "skills")  # the skills Claude Code and the hook both see
    settings = write_claude_settings(tmp_path / "settings.json", [install.hook_command("claude-code")], timeout=30)
    mock_llm.scripted_call = {"marker": "LOADSKILL", "name": "Skill", "input": {"skill": "pdf-extract"}}

    # Session a: the agent loads pdf-extract with the Skill tool on its own.
    a = str(uuid.uuid4())
    offered, cp = _turn(mock_llm, settings, home, project, "LOADSKILL say hello", "--session-id", a)
    assert not offered, diag(cp, home)
    transcript = next((home / ".claude" / "projects").rglob(a + ".jsonl")).read_text()
    assert '"name":"Skill"' in transcript.replace(" ", ""), transcript[-2000:]
    # Next prompt of session a: the skill is in the transcript, not offered again.
    offered, cp = _turn(mock_llm, settings, home, project, PROMPT, "--resume", a)
    assert not offered, diag(cp, home)

    # Session b (control): the same prompt gets the skill...
    b = str(uuid.uuid4())
    offered, cp = _turn(mock_llm, settings, home, project, PROMPT, "--session-id", b)
    assert offered, diag(cp, home)
    # ...and not on the turn after, which asks the same.
    offered, cp = _turn(mock_llm, settings, home, project, PROMPT, "--resume", b)
    assert not offered, diag(cp, home)


def test_codex_does_not_offer_again_what_the_agent_read(mock_llm, tmp_path):
    """Codex reads a skill with its shell tool; its rollout file (the hook's
    transcript_path) holds the exec_command call."""
    home = tmp_path / "home"
    project = tmp_path / "project"
    codex_home = tmp_path / "codex"
    make_library(home / ".agents" / "skills")
    skill_md = home / ".agents" / "skills" / "pdf-extract" / "SKILL.md"
    write_codex_hooks(codex_home, [install.hook_command("codex")], timeout=30)
    mock_llm.scripted_call = {"marker": "LOADSKILL", "name": "exec_command", "input": {"cmd": "cat %s" % skill_md}}
    env = {"SKILL_RETRIEVAL_REVALIDATE": "off", "SKILL_RETRIEVAL_SEMANTIC": "off"}

    def turn(prompt, *args):
        cp, reqs = run_codex(prompt, codex_home, mock_llm, project, home=home, extra_env=env,
                             extra_args=args, timeout=90)
        bodies = model_bodies(mock_llm, reqs)
        assert cp.returncode == 0 and bodies, diag(cp, home)
        return "- **pdf-extract**" in json.dumps(bodies), cp

    offered, cp = turn("LOADSKILL say hello")
    assert not offered, diag(cp, home)
    (rollout,) = (codex_home / "sessions").rglob("rollout-*.jsonl")
    assert '"name":"exec_command"' in rollout.read_text() and str(skill_md) in rollout.read_text()
    session_id = json.loads(rollout.read_text().splitlines()[0])["payload"]["id"]
    offered, cp = turn(PROMPT, "resume", session_id)  # the same session: read already
    assert not offered, diag(cp, home)
    offered, cp = turn(PROMPT)  # a new session (control)
    assert offered, diag(cp, home)
