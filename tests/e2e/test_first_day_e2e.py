"""Issue 41, defect 1, in the real Claude Code: a skill from a folder
named with ``skill-retrieve roots add`` (one Claude Code does not read)
is injected with its SKILL.md path, and the model can load it by reading
that file.

The mock answers the first request holding the block with a ``Read`` of
the path the block gave (parsed from the request, not known in advance);
Claude Code runs it, and the tool result in the next request holds the
skill's body.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from .mockserver import MockLLM, body_text
from .runners import CLAUDE_VERSIONS, require_claude, run_claude
from .test_claude_codex_e2e import BIN, HEADING, diag, skr_env

PROMPT = "download the arxiv paper 2101.00001 and summarise it"
BODY = "BODY-OF-ARXIV: fetch https://arxiv.org/abs/ID"
# The block's line for a skill Claude Code cannot load by name.
LINE = re.compile(r"- \*\*arxiv\*\* \(arxiv, (/[^)\s]*?/SKILL\.md)\)")


def read_the_path_the_block_gave(body: dict):
    """The Read call's arguments, once a request holds the block's line."""
    m = LINE.search(body_text({"body": body}).replace("\\n", "\n"))
    return {"file_path": m.group(1)} if m else None


def test_claude_code_reads_the_skill_md_the_block_names(tmp_path):
    version = CLAUDE_VERSIONS[-1]
    require_claude(version)
    home = tmp_path / "home"
    skill = home / "myskills" / "arxiv"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: arxiv\ndescription: Search and download arxiv papers "
                                    "by their id or title.\n---\n%s\n" % BODY)
    env = skr_env(home)
    for args in (["roots", "add", str(home / "myskills")], ["install", "claude-code"]):
        cp = subprocess.run([str(BIN), *args], capture_output=True, text=True, env=env, cwd=str(home), timeout=60)
        assert cp.returncode == 0, cp
    # Claude Code asks before reading outside the project; `claude -p`
    # cannot ask and denies it, so the folder is allowed as a user would
    # (--add-dir, or a Read(...) rule in permissions.allow).
    with MockLLM(tool_call={"name": "Read", "args": read_the_path_the_block_gave}) as mock:
        cp, reqs = run_claude(PROMPT, None, mock, home=home, cwd=tmp_path / "project", version=version,
                              extra_args=["--add-dir", str(home / "myskills")],
                              extra_env={"SKILL_RETRIEVAL_REVALIDATE": "off"}, timeout=90)
        bodies = [json.dumps(r["body"], ensure_ascii=False) for r in mock.model_requests(reqs)]
    where = diag(cp, home)
    first = next((b for b in bodies if HEADING in b), None)
    assert first is not None, "no retrieved block\n" + where
    assert str(skill / "SKILL.md") in first, where
    after = bodies[bodies.index(first) + 1:]
    assert any("tool_result" in b and BODY in b for b in after), "the SKILL.md never came back\n" + where
