"""Cline's plugin: part of the hook's delivery, not of names-only (Cline
lists skills by name on its own).  Where it is, install, uninstall and
status (``retriever.runners.listing`` has the table of runners).

The Cline CLI runs UserPromptSubmit hook files detached and never reads
them (the VS Code extension does: install keeps writing that file), but
an SDK plugin's beforeRun may return appendContext, which becomes a
<hook_context> message the model sees on the run's first request
(measured on the CLI 3.0.65).  The plugin asks the same hook.
"""

import json
import os
import shlex

from retriever.runners import changes

NAME = "cline"
LISTING = False  # written even with --no-compact: it delivers the hook's block

CLINE_PLUGIN = "skill-retrieval.js"
CLINE_MARK = "skill-retrieve plugin cline"
CLINE_TEMPLATE = """\
// skill-retrieve plugin cline: add the skills relevant to each task's prompt.
// Written by `skill-retrieve install cline`; `skill-retrieve uninstall cline` removes it.
// The Cline CLI never reads a UserPromptSubmit hook's output; a plugin's
// beforeRun appendContext reaches the model.
import { spawn, spawnSync } from "node:child_process";
const ARGV = %(argv)s;
let root = "";
function warm(ws) {
  // Loaded as a task starts: warm the semantic helper for the first prompt.
  try {
    const w = spawn(ARGV[0], ARGV.slice(1, -2).concat(["warm", "cline"]),
      { stdio: ["pipe", "ignore", "ignore"], detached: true });
    w.on("error", () => {});
    w.stdin.on("error", () => {});
    w.stdin.end(JSON.stringify({ cwd: ws, workspaceRoots: [ws] }));
    w.unref();
  } catch (e) { /* fail open: the first prompt starts the helper */ }
}
function promptOf(messages) {
  for (let i = (messages || []).length - 1; i >= 0; i--) {
    const m = messages[i];
    if (!m || m.role !== "user") continue;
    const parts = typeof m.content === "string" ? [{ type: "text", text: m.content }] : (m.content || []);
    const text = parts.filter((p) => p && p.type === "text" && typeof p.text === "string")
      .map((p) => p.text).join("\\n");
    const inner = /<user_input[^>]*>([\\s\\S]*?)<\\/user_input>/.exec(text);
    return inner ? inner[1] : text;
  }
  return "";
}
export default {
  name: "skill-retrieval",
  manifest: { capabilities: ["hooks"] },
  setup(api, ctx) {
    root = (ctx && ctx.workspaceInfo && ctx.workspaceInfo.rootPath) || "";
    warm(root || process.cwd());
  },
  hooks: {
    beforeRun: async ({ snapshot }) => {
      try {
        const prompt = promptOf(snapshot && snapshot.messages);
        if (!prompt.trim()) return undefined;
        const ws = root || process.cwd();
        const r = spawnSync(ARGV[0], ARGV.slice(1), {
          input: JSON.stringify({ hookName: "UserPromptSubmit", workspaceRoots: [ws], cwd: ws,
                                  userPromptSubmit: { prompt } }),
          encoding: "utf8", timeout: 5000 });
        const out = r.status === 0 && r.stdout.trim() ? JSON.parse(r.stdout) : {};
        return out.contextModification ? { appendContext: out.contextModification } : undefined;
      } catch (e) { return undefined; /* fail open: the task runs as it is */ }
    },
  },
};
"""


def target(project=None):
    """Where the Cline plugin goes: ``$CLINE_DIR/plugins`` (``~/.cline``), or
    the project's ``.cline/plugins``."""
    if project:
        return os.path.join(os.path.abspath(os.path.expanduser(project)), ".cline", "plugins", CLINE_PLUGIN)
    base = os.environ.get("CLINE_DIR") or os.path.join(os.environ.get("HOME") or os.path.expanduser("~"), ".cline")
    return os.path.join(base, "plugins", CLINE_PLUGIN)


def cline_plugin(command):
    """The plugin's source for the hook ``command``."""
    return CLINE_TEMPLATE % {"argv": json.dumps(shlex.split(command))}


def install(project, out, dry_run, force=False):
    """The plugin written for the hook's command (an edited copy kept
    unless ``force``)."""
    from retriever.runners import install as inst
    return changes.plugin_install(NAME, target(project), cline_plugin(inst.hook_command(NAME)), CLINE_MARK, out,
                                  dry_run, force, ("cline: plugin already in %s\n",
                                                   "cline: plugin %s (the Cline CLI reads the hook's context through it)\n"))


def uninstall(project, out, dry_run):
    """The plugin deleted, unless edited since install."""
    return changes.plugin_uninstall(NAME, target(project), CLINE_MARK, out, dry_run,
                                    "cline: removed the plugin %s\n")


def status(out, text, path, cwd):
    """Doctor's view of the plugin (``listing.status`` has the keys of
    ``out``)."""
    ok = bool(text) and CLINE_MARK in text
    out.update(state="native", note="the Cline CLI gets the block through this plugin" if ok else
               "no plugin: the Cline CLI never reads the hook file (skill-retrieve install cline)")
    return out


# ------------------------------------------------------------- MCP server
# Where ``mcp_config`` registers our MCP server for this runner.

MCP_SHAPE = "plain"  # {"command", "args"} under "mcpServers"
MCP_PROJECT = None  # Cline has no project MCP settings


def mcp_file(env, home):
    """The file Cline reads its MCP servers from: ``$CLINE_MCP_SETTINGS_PATH``,
    else under ``$CLINE_DATA_DIR`` or ``$CLINE_DIR/data`` (``~/.cline/data``)."""
    if env.get("CLINE_MCP_SETTINGS_PATH", "").strip():
        return os.path.abspath(os.path.expanduser(env["CLINE_MCP_SETTINGS_PATH"].strip()))
    data = env.get("CLINE_DATA_DIR", "").strip() or os.path.join(changes.under(env, home, "CLINE_DIR", "~/.cline"), "data")
    return os.path.join(os.path.abspath(os.path.expanduser(data)), "settings", "cline_mcp_settings.json")
