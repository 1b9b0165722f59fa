"""The executable's front door: argv in, exit code out.

``bin/skill-retrieve`` runs this under ``python -I -S``.  The common forms
(``[query] [--root DIR]... [--index FILE] [-k N] [--format text|json]
[WORDS...]`` and ``hook RUNNER``) are parsed by hand, so neither argparse nor
``re`` is imported; anything else (``--help``, ``build``, ``install`` ...) is
handed to the full CLI in ``retriever.cli.commands``.  The answer itself
comes from ``retriever.service``, the one pipeline every front end uses.
"""

import sys

from retriever import locate, service, settings
from retriever.service import read_stdin, write_out
from retriever.cli import SUBCOMMANDS

# Subcommands the fast path hands to argparse: all but the two it parses.
_SUBCOMMANDS_COLD = tuple(n for n in SUBCOMMANDS if n not in ("query", "hook"))


class Usage(Exception):
    """A usage error: exit 2 with a one-line message."""


def warn(msg):
    """One line on stderr, prefixed with the program name."""
    sys.stderr.write("skill-retrieve: %s\n" % msg)


def parse_fast(argv):
    """Parse the query form of the command line by hand.

    Returns an options dict, or None when the full CLI should handle argv.
    Raises Usage for malformed values of the flags it knows.  A command line
    starting with ``hook`` never raises and never goes to the full CLI
    (whose usage errors exit 2, which blocks the prompt), except for
    ``--help``: its problems travel in ``opts["error"]`` and the hook
    answers empty.
    """
    opts = {"roots": [], "index": None, "k": None, "format": "text", "platform": None,
            "fresh": False, "words": [], "hook": None, "rerank": False, "runner": None}
    args = list(argv)
    if args and args[0] in _SUBCOMMANDS_COLD:
        return None
    hook = bool(args) and args[0] == "hook"
    if hook:
        if "-h" in args or "--help" in args:
            return None  # the full CLI prints the hook's help
        args.pop(0)
    elif args and args[0] == "query":
        args.pop(0)
    if not _parse_args(args, opts, hook):
        return None  # --help, --version, unknown flags: the full CLI explains
    if hook:
        # The runner is the first word wherever the flags are.
        words = opts["words"]
        opts["hook"], opts["words"] = (words[0] if words else ""), []
        if len(words) > 1 and "error" not in opts:
            opts["error"] = "bad hook command line: unexpected arguments %s" % " ".join(words[1:])
    return opts


_VALUE_FLAGS = ("--root", "--index", "-k", "--k", "--format", "--platform", "--runner")


def _parse_args(args, opts, hook):
    # Fills opts from args; False when the full CLI should take over.  For
    # a hook, a bad flag is noted in opts["error"] and parsing goes on, so
    # the runner named after it still gets its own empty answer.
    i = 0
    words_only = [False]
    while i < len(args):
        try:
            nxt = _parse_one(args, i, opts, hook, words_only)
        except Usage as exc:
            if not hook:
                raise
            opts.setdefault("error", "bad hook command line: %s" % exc)
            nxt = i + (2 if args[i] in _VALUE_FLAGS else 1)  # skip a bad flag's value too
        if nxt is None:
            return False
        i = nxt
    return True


def _parse_one(args, i, opts, hook, words_only):
    # Consumes the argument at i (and its value); returns the next index,
    # or None for a flag only the full CLI knows.
    a = args[i]
    if words_only[0] or not a.startswith("-") or a == "-":
        opts["words"].append(a)
        return i + 1
    if a == "--":
        words_only[0] = True
        return i + 1
    name, eq, val = a.partition("=")
    if name in _VALUE_FLAGS:
        if not eq:
            if i + 1 >= len(args):
                raise Usage("%s needs a value" % name)
            val = args[i + 1]
            i += 1
        if name == "--root":
            opts["roots"].append(val)
        elif name == "--index":
            opts["index"] = val
        elif name == "--platform":
            opts["platform"] = val
        elif name == "--runner":
            opts["runner"] = val
        elif name == "--format":
            if val not in ("text", "json"):
                raise Usage("--format must be text or json, not %r" % val)
            opts["format"] = val
        else:
            opts["k"] = _k(val)
    elif a.startswith("-k") and a[2:].lstrip("-").isdigit():
        opts["k"] = _k(a[2:])
    elif a == "--fresh":
        opts["fresh"] = True
    elif a == "--rerank":
        opts["rerank"] = True
    elif hook:
        raise Usage("unknown option %s" % a)
    else:
        return None
    return i + 1


def _k(raw):
    try:
        return settings.k_value(raw)
    except ValueError as exc:
        raise Usage(str(exc)) from None


def main(argv=None):
    """Entry point.  Returns the exit code; never prints a traceback for
    bad input."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        opts = parse_fast(argv)
    except Usage as exc:
        warn("error: %s (see skill-retrieve --help)" % exc)
        return 2
    if opts is None:
        locate.enable_site()
        from retriever.cli import commands
        return commands.main(argv)
    if opts["hook"] is not None:
        # A hook must never block the prompt (exit 2 does, in Claude Code
        # and Codex): whatever happens, exit 0 with the runner's output.
        try:
            from retriever.runners import hook as hookio
            return hookio.run(opts["hook"], opts)
        except BaseException as exc:
            locate.log("hook %s: %s: %s" % (opts["hook"], type(exc).__name__, exc))
            return 0
    if opts["runner"] and not opts["roots"]:
        from retriever.runners import skillsets
        try:
            skillsets.scope_request(opts)
        except ValueError as exc:
            warn("error: %s" % exc)
            return 2
    text = " ".join(opts["words"]) if opts["words"] else read_stdin()
    try:
        results, path = service.answer(text, opts)
    except Exception as exc:  # never a traceback for the user
        from retriever import store
        if isinstance(exc, store.UnsafeTarget):  # --index names a file that is not ours
            warn("error: %s" % exc)
            return 2
        warn("error: %s: %s" % (type(exc).__name__, exc))
        locate.log("query failed: %s: %s" % (type(exc).__name__, exc))
        return 1
    from retriever import render
    if opts["format"] == "json":
        out = render.json_doc(text, results, opts.get("tiers"))
    else:
        out = render.text_block(results)
    write_out(out)
    service.maybe_revalidate(path)
    return 0


def run_process(bundle_root=None):
    """Run ``main`` as the whole process (``bin/skill-retrieve``,
    ``python -m retriever``): flush, then exit without interpreter teardown:
    nothing is left to clean up, and freeing the index and caches costs
    more than the query on large libraries.  ``bundle_root``: the folder
    holding the package whose module bundle the executable read (or found
    missing), refreshed after answering when out of date."""
    import posix
    try:
        code = main()
        sys.stdout.flush()
    except KeyboardInterrupt:
        code = 0 if sys.argv[1:2] == ["hook"] else 130  # a hook never blocks the prompt
    except BrokenPipeError:
        code = 0
    if bundle_root is not None:
        # The answer is out; a no-op once the bundle is fresh.
        bundle = sys.modules.get("retriever.cli.bundle")
        if bundle is None or bundle.stale():
            from retriever.cli import bundler
            bundler.refresh(bundle_root)
    posix._exit(code if isinstance(code, int) else 1)


def console_main():
    """``skill-retrieve`` console script installed by pip (not startup-tuned:
    the hooks it installs run ``retriever/__main__.py`` under ``-I -S``)."""
    code = main()
    sys.stdout.flush()
    raise SystemExit(code)
