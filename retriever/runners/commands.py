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
    """``install`` or ``uninstall`` (from ``args.command``); returns the exit
    code.  An uninstall that leaves no runner installed stops the semantic
    helper; ``uninstall --all [--purge]`` goes through every runner."""
    command = getattr(args, "command", None) or "install"
    if command == "uninstall":
        if getattr(args, "all", False) == bool(args.runner):
            sys.stderr.write("skill-retrieve: error: uninstall takes a RUNNER or --all (see skill-retrieve "
                             "uninstall --help)\n")
            return 2
        if getattr(args, "purge", False) and not args.all:
            sys.stderr.write("skill-retrieve: error: --purge goes with --all (see skill-retrieve uninstall --help)\n")
            return 2
        if args.all:
            return uninstall_all(args)
    code = run_one(args)
    if command == "uninstall" and code == 0 and not args.dry_run:
        stop_helper_if_unused(sys.stdout)
    return code


def uninstall_all(args):
    """``uninstall --all [--purge]``: every runner's install (Hermes' only
    without --project), then, with --purge and only when each uninstall
    succeeded, what ``purge_list`` names.  The exit code: the first
    failure's, else 0."""
    import argparse
    from retriever.runners.registry import NAMES
    code = 0
    for runner in NAMES:
        if runner == "hermes" and args.project:
            continue  # Hermes has no project install
        one = argparse.Namespace(**dict(vars(args), runner=runner, all=False))
        code = code or run_one(one)
    if args.dry_run:
        if args.purge:
            sys.stdout.write("".join("would delete %s (%s)\n" % p for p in purge_list()))
        return code
    stop_helper_if_unused(sys.stdout)
    if args.purge:
        if code:
            sys.stderr.write("skill-retrieve: not purging: an uninstall above failed, and its backup is "
                             "kept in %s\n" % _state_dir())
            return code
        purge(sys.stdout)
    return code


def _state_dir():
    from retriever import fileutil
    return fileutil.state_dir()


def installs_left():
    """The runners that still have an install of ours: a recorded install
    whose file is still there (``record.entries``), or the Hermes plugin
    in its place."""
    import os
    from retriever import locate
    from retriever.runners import hermes_install, record
    left = set()
    for path, recs in record.entries().items():
        if os.path.lexists(path):
            left.update(name for name in recs if not name.startswith("listing "))
    if os.path.lexists(os.path.join(locate.hermes_home(), "plugins", hermes_install.PLUGIN_NAME)):
        left.add("hermes")
    return left


def stop_helper_if_unused(out):
    """Stop the semantic tier's warm helper when no runner is installed any
    more: nothing would ask it again, and it holds about 200 MB until its
    idle timeout.  A query starts it again when one is needed."""
    if installs_left():
        return
    try:
        from retriever.semantic import client
        if client.stop_helper(timeout=2.0):
            out.write("no runner has skill-retrieve installed now: stopped the semantic helper\n")
    except Exception:  # best effort: the helper exits when idle anyway
        pass


def purge_list():
    """``[(path, what)]`` that ``uninstall --all --purge`` deletes, the ones
    that exist: the cache (indexes, vectors, log, usage record), the state folder
    (backups, install records) and the roots file."""
    import os
    from retriever import fileutil, locate, userroots
    found = [(locate.cache_dir(), "indexes, vectors, the log and the usage record"),
             (fileutil.state_dir(), "install backups and records"),
             (userroots.path(), "the skill folders you named")]
    return [(p, what) for p, what in found if os.path.lexists(p)]


def purge(out):
    """Delete what ``purge_list`` names, listing it first; the roots file's
    folder goes too when nothing else is in it."""
    import os
    import shutil
    for path, what in purge_list():
        out.write("deleting %s (%s)\n" % (path, what))
    for path, _ in purge_list():
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.remove(path)
            try:
                os.rmdir(os.path.dirname(path))
            except OSError:
                pass


def run_one(args):
    """``install`` or ``uninstall`` of ``args.runner``; the exit code."""
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
    except (OSError, fileutil.Refused) as exc:  # the lock itself: no state folder, or held
        sys.stderr.write("skill-retrieve: %s: %s\n" % (command, exc))
        return 1
