"""Gemini CLI: where its files are, install, uninstall, status and the
listing's cost (``retriever.runners.listing`` has the table of runners).

Names only: ``GEMINI_PROMPT_AGENTSKILLS=0`` in ``~/.gemini/.env`` drops
the ``<available_skills>`` section; the names stay in the
``activate_skill`` tool.  Global.
"""

import os
import re

from retriever import fileutil
from retriever.runners import changes, record, skillsets

NAME = "gemini"
LISTING = True


def roots(cwd):
    """``(folders the switch reaches, [])``: every folder of its set."""
    return changes.folders(skillsets.gemini, cwd), []


GEMINI_VAR = "GEMINI_PROMPT_AGENTSKILLS"
GEMINI_LINE = GEMINI_VAR + "=0"
_ENV_LINE = re.compile(r"^\s*(?:export\s+)?%s\s*=\s*(.*?)\s*$" % GEMINI_VAR)


def target(project=None):
    """The .env file Gemini CLI reads (the user's, or the project's)."""
    base = os.path.join(os.path.abspath(os.path.expanduser(project)), ".gemini") if project \
        else os.path.join(os.environ.get("HOME") or os.path.expanduser("~"), ".gemini")
    return os.path.join(base, ".env")


def gemini_value(text):
    """The value ``text`` (a .env file) gives GEMINI_PROMPT_AGENTSKILLS, or None."""
    for line in (text or "").splitlines():
        m = _ENV_LINE.match(line)
        if m:
            return m.group(1).strip("'\"")
    return None


def install(project, out, dry_run, force=False):
    """Names-only on: our line in .env, unless the user set the variable."""
    path = target(project)
    rec = {}

    def plan(old):
        if gemini_value(old) is not None:
            return None  # the user's own setting, whatever its value
        text = old or ""
        rec["newline"] = bool(text) and not text.endswith("\n")
        return text + ("\n" if rec["newline"] else "") + GEMINI_LINE + "\n"

    if changes.write(path, plan, out, dry_run) is None:
        out.write("gemini: %s already set in %s; left as it is\n" % (GEMINI_VAR, path))
        return 0
    if dry_run:
        return 0
    changes.set_record(NAME, path, rec)
    out.write("gemini: skills listed by name only (%s in %s)\n" % (GEMINI_LINE, path))
    return 0


def uninstall(project, out, dry_run):
    """Our line out of .env."""
    path = target(project)

    def unedit(old, rec):
        lines = old.splitlines(True)
        for i in range(len(lines) - 1, -1, -1):
            if lines[i].rstrip("\r\n") == GEMINI_LINE:
                del lines[i]
                if rec.get("newline") and i == len(lines) and lines and lines[-1].endswith("\n"):
                    lines[-1] = lines[-1][:-1]
                break
        new = "".join(lines)
        if new == old:
            return None
        if not new and record.created_folders(path) is not None:
            return fileutil.DELETE  # install created it; nothing else was put in since
        return new

    return changes.undo(NAME, path, unedit, out, dry_run, "gemini: removed %s from %%s\n" % GEMINI_LINE)


def status(out, text, path, cwd):
    """Doctor's view of names-only in ``text``, the file at ``path``
    (``listing.status`` has the keys of ``out``)."""
    runner = NAME
    names = changes.covered(*roots(cwd))[0]
    value = gemini_value(text)
    if value is not None and value.strip().lower() in ("0", "false"):
        out["state"] = "on" if changes.record_of(runner, path) else "user"
        out["covered"] = len(names)
        out["note"] = ("read from %s unless the project (or a folder above it) has its own .env"
                       % path)
    return out


# ------------------------------------------------------------ listing cost


def cost(recs, other_recs, window):
    """The listing's characters, rebuilt the way Gemini CLI writes it
    (``listing.listing_cost``); it has no budget."""
    entry = "  <skill>\n    <name>%s</name>\n    <description>%s</description>\n    <location>%s</location>\n  </skill>\n"
    section = sum(len(entry % (r["name"], r["description"], os.path.join(r["path"], "SKILL.md"))) for r in recs)
    tool = sum(len("'%s', " % r["name"]) + len('"%s", ' % r["name"]) for r in recs)
    return {"stock": section + tool, "unbudgeted": section + tool, "names_only": tool, "budget": None}


# ------------------------------------------------------------- MCP server
# Where ``mcp_config`` registers our MCP server for this runner.

MCP_SHAPE = "plain"  # {"command", "args"} under "mcpServers"
MCP_PROJECT = ".gemini/settings.json"


def mcp_file(env, home):
    """The file Gemini CLI reads its user-level MCP servers from."""
    return os.path.join(home, ".gemini", "settings.json")
