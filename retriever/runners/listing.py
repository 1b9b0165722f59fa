"""Names only: the other half of the job, in every runner; and the table
of the runners' modules.

The prompt hook adds the few relevant skills to each turn; names-only
makes the runner stop listing every skill's description on every turn,
so the user pays for the names plus the retrieved block instead of the
whole catalogue.  Each runner has its own switch, chosen by measuring the
pinned CLIs against the loopback mock (docs/runners.md has the figures),
in its own module: ``claude_code``, ``codex``, ``gemini``, ``opencode``;
``cline`` writes Cline's plugin, which delivers the hook's block.  Each
has the same functions:

  target(project)      the file it changes (the user's, or the project's)
  install(project, out, dry_run, force), uninstall(project, out, dry_run)
  status(out, text, path, cwd)   doctor's view of that file
  roots(cwd)           (folders names-only covers, [(folder, why)] it does not)
  mcp_file(env, home), MCP_PROJECT, MCP_SHAPE   where and how ``mcp_config``
                       registers our MCP server
  cost(recs, other_recs, window)   the listing's size (not Cline)

``MODULES`` maps a runner's name to its module: adding a runner is a
module plus a line there.  ``changes`` is how each module changes a file
of the user's and records it.

Cold path: imports freely (``sync`` runs once per session, not per prompt).
"""

import json
import os
import sys

from retriever import fileutil
from retriever.runners import changes, claude_code, cline, codex, gemini, opencode, record
from retriever.runners.install import Refused

MODULES = {
    "claude-code": claude_code,
    "codex": codex,
    "gemini": gemini,
    "opencode": opencode,
    "cline": cline,
}
# The runners with a names-only switch (Cline has only the plugin).
RUNNERS = tuple(name for name, mod in MODULES.items() if mod.LISTING)


def covered(runner, cwd=None):
    """``(names the switch covers, [(name, reason)] still listed in full)``
    for the skills ``runner`` reads from ``cwd``."""
    return changes.covered(*MODULES[runner].roots(cwd or os.getcwd()))


def target(runner, project=None):
    """The file the names-only switch of ``runner`` lives in (Cline: its plugin)."""
    return MODULES[runner].target(project)


def install(runner, project=None, dry_run=False, out=sys.stdout, compact=True, force=False):
    """Turn names-only on for ``runner`` (unless not ``compact``), and
    write Cline's plugin; returns the exit code (1 and one line on stderr
    when a file cannot be changed safely).  A plugin file of ours the user
    edited since install is kept (exit 0, one line), as the hook installer
    keeps an edited hook, unless ``force``."""
    mod = MODULES.get(runner)
    if mod is None or (mod.LISTING and not compact):
        return 0
    try:
        with record.locked(dry_run):
            return mod.install(project, out, dry_run, force)
    except changes.NoReader as exc:
        # Not an error of the user's files: the hook works, the listing
        # stays as it was, and the line says how to finish by hand.
        out.write("%s: names only not set: %s\n" % (runner, exc))
        return 0
    except (Refused, OSError) as exc:
        if not mod.LISTING:
            sys.stderr.write("skill-retrieve: Cline plugin not written: %s\n" % exc)
        else:
            sys.stderr.write("skill-retrieve: names-only not set for %s: %s (the hook is installed; "
                             "--no-compact skips this step)\n" % (runner, exc))
        return 1


def uninstall(runner, project=None, dry_run=False, out=sys.stdout):
    """Remove what ``install`` added for ``runner``; returns the exit code.
    A dry run runs the same changes and prints what they would write."""
    mod = MODULES.get(runner)
    if mod is None:
        return 0
    try:
        with record.locked(dry_run):
            return mod.uninstall(project, out, dry_run)
    except (Refused, OSError) as exc:
        if not mod.LISTING:
            sys.stderr.write("skill-retrieve: Cline plugin left in place: %s\n" % exc)
        else:
            sys.stderr.write("skill-retrieve: names-only entries of %s left in place: %s\n" % (runner, exc))
        return 1


def status(runner, cwd=None, project=None):
    """For doctor: ``{"state": "on"|"off"|"user"|"broken"|"empty", "file",
    "covered", "full": [(name, reason)], "note"}`` ("empty": Claude Code has
    no skill of its own for the switch to cover; "native": Cline's plugin)."""
    mod = MODULES[runner]
    path = mod.target(project)
    out = {"runner": runner, "file": path, "state": "off", "covered": 0, "full": [], "note": ""}
    try:
        # Every runner's file is read here, the one way (never blocks, one
        # line naming the file when it cannot be read).
        text = fileutil.read_text(path)
    except fileutil.Unreadable as exc:
        out.update(state="broken", note=str(exc))
        return out
    return mod.status(out, text, path, cwd)


def sync(runner, payload, project=None):
    """Names-only entries for the skills that appeared since install
    (``claude_code.sync``; the other runners' switches cover every skill).
    Returns the names added."""
    if runner != claude_code.NAME:
        return []
    return claude_code.sync(payload, project)


# ------------------------------------------------------- `sync` subcommand


def add_arguments(parser):
    """Arguments of ``skill-retrieve sync`` (run by a session-start hook)."""
    parser.description = ("Bring a runner's names-only entries in step with its skills: a skill added "
                          "since install is listed by name only too. Reads the hook payload on stdin; "
                          "silent, always exits 0.")
    parser.add_argument("runner", choices=RUNNERS, metavar="RUNNER", help="one of: " + ", ".join(RUNNERS))
    parser.add_argument("--project", metavar="DIR", help="the project's settings file instead of the user's")


def run(args):
    """``skill-retrieve sync RUNNER``: fail open, silent, exit 0."""
    from retriever import locate
    try:
        raw = sys.stdin.read() if not sys.stdin.isatty() else ""
        payload = json.loads(raw) if raw.strip() else {}
        added = sync(args.runner, payload if isinstance(payload, dict) else {}, args.project)
        if added:
            locate.log("sync %s: names-only for %d new skills: %s" % (args.runner, len(added), ", ".join(added[:10])))
    except BaseException as exc:  # a session-start hook must never get in the way
        try:
            locate.log("sync %s: %s: %s" % (getattr(args, "runner", "?"), type(exc).__name__, exc))
        except BaseException:
            pass
    return 0


def listing_cost(runner, cwd=None, window=None):
    """``{"runner", "skills", "stock", "unbudgeted", "names_only", "budget",
    "in_full"}`` in characters: the runner's skill listing for the user's
    skills (from ``cwd``) without names-only (``stock``, after the
    runner's own budget; ``unbudgeted``: before it) and with it, rebuilt
    the way the runner writes and budgets it (checked against the requests
    the pinned CLIs send: docs/runners.md), for ``skill-retrieve tokens --runner``."""
    from retriever import skills
    mod = MODULES[runner]
    roots, others = mod.roots(cwd or os.getcwd())
    recs = skills.collect(roots)[0] if roots else []
    other_recs = skills.collect([r for r, _ in others])[0] if others else []
    cost = mod.cost(recs, other_recs, window)
    cost.update(runner=runner, skills=len(recs) + len(other_recs), in_full=len(other_recs))
    return cost
