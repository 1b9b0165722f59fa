"""``skill-retrieve install|uninstall RUNNER``: both halves of the job.

Install registers the prompt hook (``retriever.runners.install``), then
makes the runner list the skills by name only (``retriever.runners.listing``;
``--no-compact`` skips that half), then registers the MCP server
(``retriever.runners.mcp_config``; ``--no-mcp`` skips it).  Uninstall takes the names-only
entries out first, so what is left is the hook alone, which the hook's
uninstall removes (with the file, when install created it).

Cold path: imports freely.
"""

import sys

from retriever.runners import install, listing


def add_arguments(parser):
    """The hook installer's arguments, plus ``--no-compact``."""
    install.add_arguments(parser)
    if parser.prog.endswith("uninstall"):
        return  # uninstall removes whatever install added
    parser.add_argument("--no-compact", action="store_true",
                        help="install the hook alone: leave the runner listing every skill's description "
                             "(by default Claude Code, Codex, Gemini CLI and OpenCode list the skills by name "
                             "only, and the hook adds the relevant ones; docs/runners.md)")
    parser.add_argument("--no-mcp", action="store_true",
                        help="do not register the MCP server (search_skills, read_skill) in the runner's MCP "
                             "settings (docs/mcp.md)")


def run(args):
    """``install`` or ``uninstall`` (from ``args.command``); returns the exit code."""
    command = getattr(args, "command", None) or "install"
    project = getattr(args, "project", None)
    if project:
        import os
        from retriever import locate
        why = locate.not_a_folder(os.path.expanduser(project))
        if why:
            # A typo must not grow a new folder tree holding a settings file
            # that no runner ever reads.
            sys.stderr.write("skill-retrieve: error: --project %s: %s (give the project's own folder)\n"
                             % (project, why.split(" (")[0]))
            return 2
    if install.kind(args.runner) == "hermes":
        code = install.run(args)  # the Hermes plugin does both halves itself
        if code == 0 and command == "install" and getattr(args, "no_compact", False):
            print("  Hermes: the plugin lists skills by name only unless SKILL_RETRIEVAL_COMPACT=0 "
                  "is set in its environment (--no-compact does not change the plugin)")
        return code
    from retriever import fileutil
    # Both halves under the installers' lock (re-entrant): no install or
    # uninstall of ours interleaves with them.  A dry run writes nothing
    # and takes no lock; each half plans on what the other would leave.
    try:
        with fileutil.planning() if args.dry_run else fileutil.install_lock():
            if command == "uninstall":
                # The listing first, so the hook's file is back as install
                # left it (restored byte for byte); a refused file is named once.
                # The MCP server entry first: install added it last.
                from retriever.runners import mcp_config
                code = mcp_config.uninstall(args.runner, args.project, args.dry_run)
                code = code or listing.uninstall(args.runner, args.project, args.dry_run)
                return code or install.run(args)
            code = install.run(args)
            if code == 0:
                code = listing.install(args.runner, args.project, args.dry_run,
                                       compact=not getattr(args, "no_compact", False),
                                       force=getattr(args, "force", False))
            if code == 0 and not getattr(args, "no_mcp", False):
                from retriever.runners import mcp_config
                code = mcp_config.install(args.runner, args.project, args.dry_run,
                                          force=getattr(args, "force", False))
            return code
    except (OSError, fileutil.Unchanged) as exc:  # the lock itself: no state folder, or held
        sys.stderr.write("skill-retrieve: %s: %s\n" % (command, exc))
        return 1
