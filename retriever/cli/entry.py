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
from retriever.service import write_out
from retriever.cli import SUBCOMMANDS, VALUE_FLAGS as _VALUE_FLAGS, WORD_COMMANDS, flag_like_hint, word_query

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
    if args and args[0] in _SUBCOMMANDS_COLD and not word_query(args) \
            and not (args[0] == "mcp" and not _mcp_form(args[1:])):
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


def _mcp_form(rest):
    # True when the words after "mcp" are the server's own (at most one
    # runner name, --root DIR, --help): what install registers.  Anything
    # else ("mcp server auth") is a search for those words, as before the
    # subcommand existed.
    from retriever.runners.registry import NAMES
    runners = 0
    i = 0
    while i < len(rest):
        a = rest[i]
        if a in ("-h", "--help") or a.startswith("--root="):
            i += 1
        elif a == "--root":
            i += 2
        elif a in NAMES and runners == 0:
            runners, i = 1, i + 1
        else:
            return False
    return True



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
                from retriever.suggest import did_you_mean
                raise Usage("--format must be text or json, not %r%s"
                            % (val, did_you_mean(val, ("text", "json"), quote=False)))
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


def mistyped(word, rest=()):
    """The subcommand ``word`` is a typo of, else None (``rest``: the
    arguments after it).

    ``git biuld`` says "did you mean build?", but here a first word that
    is no subcommand starts a query, so only a near miss that no query
    would start with counts: a lowercase word one edit (a letter added,
    dropped or changed, or two neighbours swapped) from a subcommand's
    name, and not a word of its own ("server", "root", "hooks", "jquery":
    the list below) unless the arguments after it are that subcommand's
    ("rots add DIR").  A capitalised word ("Build a react app") is always a
    query.  Costs a few comparisons of lengths for an ordinary query.
    """
    n = len(word)
    if n < 3 or n > 14 or not word.replace("-", "").isalpha() or not word.islower():
        return None
    for name in SUBCOMMANDS:
        if name in WORD_COMMANDS:
            continue  # "list", "state": words, not typos
        # "mcp": every three-letter word ("map", "mvp", "scp") is one edit
        # from it; a guess there would refuse ordinary queries.
        if len(name) > 3 and abs(len(name) - n) <= 1 and _one_edit(word, name):
            if word in {
                # Words (English or technical) one edit from a subcommand:
                # a query may well start with them.
                "jquery", "built", "builds", "buildx", "guild",
                "root", "rots", "robots", "boots", "coots", "foots", "hoots", "loots", "moots", "soots", "toots",
                "roofs", "rooks", "rooms", "roost", "routs", "riots", "rooty", "rootfs", "rootsy",
                "hooks", "book", "cook", "look", "took", "nook", "rook", "hood", "hoof", "hoot", "hoop",
                "honk", "hock", "shook", "hooky", "hooke", "hoon",
                "explains", "installs", "instill", "uninstalls", "doctors", "token", "tokes", "completions",
                "server", "serves", "served", "sever", "verve", "nerve", "serge", "serde", "servo", "kserve",
                "swerve", "sere",
            } and not _takes(name, rest):
                return None
            return name
    return None


def _takes(name, rest):
    # True when the arguments after the first word are ones subcommand
    # ``name`` takes ("rots add DIR", "installs codex"), which no query
    # starts with.
    if not rest:
        return False
    if name == "roots":
        return rest[0] in ("add", "remove", "list")
    if name == "completion":
        return rest[0] in ("bash", "zsh", "fish")
    if name in ("install", "uninstall"):
        from retriever.runners.registry import NAMES
        return rest[0] in NAMES
    return False


def _one_edit(a, b):
    # True when a and b differ by exactly one edit (Damerau: a swap of two
    # neighbours counts as one).
    la, lb = len(a), len(b)
    i = 0
    while i < la and i < lb and a[i] == b[i]:
        i += 1
    if la == lb:
        if i == la:
            return False
        return a[i + 1:] == b[i + 1:] or (
            i + 1 < la and a[i] == b[i + 1] and a[i + 1] == b[i] and a[i + 2:] == b[i + 2:])
    return a[i + 1:] == b[i:] if la > lb else a[i:] == b[i + 1:]


def main(argv=None):
    """Entry point.  Returns the exit code; never prints a traceback for
    bad input."""
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0][:1] != "-" and argv[0] not in SUBCOMMANDS:
        meant = mistyped(argv[0], argv[1:])
        if meant:
            warn("unknown command '%s'; did you mean '%s'? (to search for it: skill-retrieve query %s ...)"
                 % (argv[0], meant, argv[0]))
            return 2
    if argv[:1] == ["warm"] and "-h" not in argv and "--help" not in argv:
        # The session-start hook: only forks, so it is spared argparse.
        from retriever.runners import warm
        return warm.run(argv[1:])
    try:
        opts = parse_fast(argv)
    except Usage as exc:
        # The flags parsed here are the query's, which the top-level help
        # does not list.
        warn("error: %s (%s)" % (exc, flag_like_hint(argv) or "see skill-retrieve query --help"))
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
    if opts["roots"]:
        refused = service.refuse_roots(opts["roots"])
        if refused:
            return refused
    elif opts["runner"]:
        from retriever.runners import skillsets
        try:
            skillsets.scope_request(opts)
        except ValueError as exc:
            warn("error: %s" % exc)
            return 2
    text = service.query_text(opts["words"])
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
    service.tell_terminal(text, results, opts)
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
