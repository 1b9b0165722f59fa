"""OpenCode: where its files are, install, uninstall, status and the
listing's cost (``retriever.runners.listing`` has the table of runners).

Names only: a plugin of ours (``skill-retrieval-listing.js``) whose
``experimental.chat.system.transform`` drops the ``<description>`` and
``<location>`` of every skill the system prompt lists (the skill tool
loads by name).  It must edit the array in place: OpenCode keeps its
own reference to it.
"""

import os

from retriever.runners import changes, skillsets

NAME = "opencode"
LISTING = True


def roots(cwd):
    """``(folders the switch reaches, [])``: every folder of its set."""
    return changes.folders(skillsets.opencode, cwd), []


OPENCODE_PLUGIN = "skill-retrieval-listing.js"
OPENCODE_MARK = "skill-retrieve listing opencode"
OPENCODE_SOURCE = """\
// skill-retrieve listing opencode: list skills by name only.
// Written by `skill-retrieve install opencode`; `skill-retrieve uninstall opencode` removes it.
// OpenCode lists every skill with its description in the system prompt on
// every turn; the skill-retrieval hook injects the few relevant ones per
// message, so the list keeps the names only (the skill tool loads a skill
// by its name; the location, an absolute path, costs more than the name).
const DESC = /\\n?[ \\t]*<(description|location)>[\\s\\S]*?<\\/\\1>/g;
const SKILL = /<skill>[\\s\\S]*?<\\/skill>/g;
// OpenCode's own skills keep their descriptions: the hook never injects them.
const BUILTIN = /<location>[^<]*built-in[^<]*<\\/location>/;
export const SkillRetrievalListing = async () => ({
  "experimental.chat.system.transform": async (input, output) => {
    try {
      // In place: OpenCode keeps its own reference to this array.
      const sys = output.system;
      for (let i = 0; i < sys.length; i++) {
        if (typeof sys[i] === "string" && sys[i].includes("<available_skills>"))
          sys[i] = sys[i].replace(/<available_skills>[\\s\\S]*?<\\/available_skills>/g,
            (block) => block.replace(SKILL, (one) => (BUILTIN.test(one) ? one : one.replace(DESC, ""))));
      }
    } catch (e) { /* fail open: the prompt goes as it is */ }
  },
});
"""


def target(project=None):
    """Our names-only plugin, beside the hook's plugin."""
    from retriever.runners import install
    return os.path.join(os.path.dirname(install.settings_path(NAME, project)), OPENCODE_PLUGIN)


def install(project, out, dry_run, force=False):
    """Our names-only plugin written (an edited copy kept unless ``force``)."""
    return changes.plugin_install(NAME, target(project), OPENCODE_SOURCE, OPENCODE_MARK, out, dry_run, force,
                                  ("opencode: names-only plugin already in %s\n",
                                   "opencode: skills listed by name only (plugin %s)\n"))


def uninstall(project, out, dry_run):
    """Our names-only plugin deleted, unless edited since install."""
    return changes.plugin_uninstall(NAME, target(project), OPENCODE_MARK, out, dry_run,
                                    "opencode: removed the names-only plugin %s\n")


def status(out, text, path, cwd):
    """Doctor's view of our names-only plugin (``listing.status`` has the
    keys of ``out``)."""
    if text and OPENCODE_MARK in text:
        out["state"] = "on"
        out["covered"] = len(changes.covered(*roots(cwd))[0])
    return out


# ------------------------------------------------------------ listing cost


def cost(recs, other_recs, window):
    """The listing's characters, rebuilt the way OpenCode writes it
    (``listing.listing_cost``); it has no budget."""
    entry = "  <skill>\n    <name>%s</name>\n    <description>%s</description>\n    <location>file://%s</location>\n  </skill>\n"
    stock = sum(len(entry % (r["name"], r["description"], os.path.join(r["path"], "SKILL.md"))) for r in recs)
    named = sum(len(entry % (r["name"], "", os.path.join(r["path"], "SKILL.md"))) - len("    <description></description>\n")
                for r in recs)
    return {"stock": stock, "unbudgeted": stock, "names_only": named, "budget": None}


# ------------------------------------------------------------- MCP server
# Where ``mcp_config`` registers our MCP server for this runner.

MCP_SHAPE = "local"  # {"type": "local", "command": [...], "enabled"} under "mcp"
MCP_PROJECT = "opencode.json"


def mcp_file(env, home):
    """The file OpenCode reads its user-level MCP servers from."""
    return os.path.join(changes.under(env, home, "OPENCODE_CONFIG_DIR", "~/.config/opencode"), "opencode.json")
