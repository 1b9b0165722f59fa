"""The full command line: help, every subcommand, argparse.

The query form has a hand-written fast path in ``retriever.cli.entry``;
this module parses the same grammar for ``--help`` and for the other
subcommands.  Each subcommand lives in its own module (the table in
``retriever.cli``), exposing ``add_arguments(parser)`` and
``run(args) -> exit code``, and only the module of the subcommand that
runs is imported: ``build`` does not load doctor, install or the rerank.
"""

import argparse
import sys

from retriever import settings
from retriever.cli import SUBCOMMANDS

PROG = "skill-retrieve"

DESCRIPTION = """\
Rank a skill library for one message with BM25 and print the few relevant
skills, or nothing when none is relevant.

  echo "rotate my k8s certs" | skill-retrieve
  skill-retrieve --root ~/skills --format json fix a flaky test
  skill-retrieve build --root ~/skills
"""

EPILOG = settings.help_text() + """

-k is a maximum: the decision (SKILL_RETRIEVAL_DECIDE above) returns fewer
skills when fewer fit, often one, and none for small talk.

exit status: 0 on success (also when nothing matched), 2 on a usage error.
"""


def k_type(raw):
    """argparse ``type`` for -k: the one rule, ``settings.k_value``."""
    try:
        return settings.k_value(raw)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _add_scope(p):
    p.add_argument("--root", action="append", default=[], metavar="DIR",
                   help="skill folder to index (repeatable); default: the agents' skill folders")
    p.add_argument("--index", metavar="FILE", help="index file (default: per-user cache, keyed by roots)")
    p.add_argument("--platform", metavar="NAME",
                   help="Hermes platform for skills.platform_disabled (default $HERMES_PLATFORM)")


def _add_query_args(p):
    _add_scope(p)
    from retriever.runners.registry import NAMES
    p.add_argument("--runner", metavar="RUNNER",
                   help="rank the skill set this runner's hook ranks from here (%s): its folders and "
                        "its names" % ", ".join(NAMES))
    p.add_argument("-k", type=k_type, metavar="N",
                   help="most skills printed (default $SKILL_RETRIEVAL_INJECT_K or 6); fewer come back "
                        "when fewer match well")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="text: the block injected into prompts; json: one object for pipes")
    p.add_argument("--fresh", action="store_true",
                   help="check the skills for changes before answering (slower; rebuilds if stale)")
    p.add_argument("--rerank", action="store_true",
                   help="rerank the shortlist with the LLM reranker (as SKILL_RETRIEVAL_RERANK=jev; "
                        "costs a network round trip)")
    p.add_argument("words", nargs="*", metavar="WORDS", help="the query; read from stdin when absent")


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        # One line, exit 2: the contract other tools rely on.  The help
        # named is the subcommand's (its prog), where its flags are listed.
        sys.stderr.write("%s: error: %s (see %s --help)\n" % (PROG, message, self.prog))
        sys.exit(2)

    def _check_value(self, action, value):
        # argparse's own message lists the choices; a near miss ("claud-code",
        # "gemini-cli") also gets the one it most likely meant.
        if action.choices is not None and value not in action.choices:
            from retriever.suggest import did_you_mean
            raise argparse.ArgumentError(action, "invalid choice: %r%s (choose from %s)" % (
                value, did_you_mean(value, action.choices), ", ".join(repr(str(c)) for c in action.choices)))
        super()._check_value(action, value)

    def unknown_options(self, bad):
        """Exit 2 naming the options in ``bad`` that this parser does not
        know, with the flag a single one most likely meant."""
        from retriever.suggest import did_you_mean
        known = [s for a in self._actions for s in a.option_strings if s.startswith("--")]
        if self.prog == PROG + " query":
            known += ["--help", "--version"]  # a query is the bare command: its flags are these too
        hint = did_you_mean(bad[0].partition("=")[0], known, quote=False) if len(bad) == 1 else ""
        self.error("unrecognized option%s: %s%s" % ("s" if len(bad) > 1 else "", " ".join(bad), hint))


def make_parser(command=None):
    """The argparse parser.  Every subcommand is listed; only ``command``'s
    module is imported to add its arguments (all of them when None)."""
    parser = _Parser(prog=PROG, description=DESCRIPTION, epilog=EPILOG,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    from retriever import __version__
    parser.add_argument("-V", "--version", action="version", version="%(prog)s " + __version__)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, (mod, help_) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_[0].upper() + help_[1:] + ".")
        if name == "query":
            _add_query_args(p)
        elif name == "build":
            _add_scope(p)
            p.add_argument("--profile", choices=("default", "seed"), default="default",
                           help="scoring profile (seed: the original name+description design, for comparison)")
            p.add_argument("--quiet", "-q", action="store_true", help="do not list problem files")
            p.add_argument("--verbose", "-v", action="store_true",
                           help="list every problem file (default: the first few of each kind)")
        else:
            p.set_defaults(_module=mod)
            if command is not None and name != command:
                continue
            try:
                module = __import__(mod, fromlist=["add_arguments"])
                module.add_arguments(p)
            except (ImportError, AttributeError):
                p.set_defaults(_missing=True)
    return parser


def _subparser(parser, command):
    # The parser of ``command`` (it knows that subcommand's flags), else
    # the top one.
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            return action.choices[command]
    return parser


def run_build(args):
    """``skill-retrieve build``: index the roots and report problems."""
    from retriever import background, build, locate, progress, service
    # Same default as the query path, so build prepares the index queries use.
    platform = args.platform or locate.env("HERMES_PLATFORM") or None
    scope = build.resolve(args.root or None, platform, warn=build.stderr_warn)
    path = service.index_path({"index": args.index, "roots": args.root, "platform": platform})
    for folder in scope["missing"]:
        sys.stderr.write("skill-retrieve: warning: %s: %s\n" % (folder, locate.not_a_folder(folder)))
    if args.root and len(scope["missing"]) == len(scope["roots"]):
        # A typo must not look like an empty library.
        sys.stderr.write("skill-retrieve: error: none of the --root folders exists; nothing built\n")
        return 1
    if not scope["roots"]:
        sys.stderr.write("skill-retrieve: warning: no skill folders found%s\n"
                         % ("" if args.root else " (looked in ~/.hermes/skills, ~/.claude/skills, "
                            ".agents/skills; name yours with: skill-retrieve roots add DIR)"))
    from retriever import semantic
    prog = progress.reporter(quiet=args.quiet)
    try:
        header, problems = build.build(scope, path, args.profile,
                                       warn=None if args.quiet else progress.warner(prog, build.stderr_warn),
                                       verbose=args.verbose, progress=prog)
    finally:
        if prog is not None:
            prog.done()
    background.touch_stamp(path)
    _hint_remember(args)
    from retriever.render import plural
    counts = header["counts"]
    shadowed = sum(c["shadowed"] for c in counts.values())
    disabled = sum(c["disabled"] for c in counts.values())
    if not header["n_docs"]:
        # "0 skills ... 0 problems" read like a healthy empty library; most
        # often the folder is the wrong one.
        said = (service.no_skills(scope["roots"], True) if scope["roots"]
                else "no skills found; no skill folder exists (see above)")
        sys.stdout.write("built %s: %s%s\n" % (
            path, said, "; %s (see above)" % plural(len(problems), "problem") if problems else ""))
        semantic.build_vectors(path)  # an empty vector file; no model to load
        return 0
    sys.stdout.write("built %s: %s from %s, %d disabled, %d shadowed, %s, %.2fs%s\n"
                     % (path, plural(header["n_docs"], "skill"), plural(len(scope["roots"]), "root"),
                        disabled, shadowed, plural(len(problems), "problem"), header["build_seconds"],
                        ", %s unchanged" % plural(header["reused"], "file") if header.get("reused") else ""))
    semantic.build_vectors(path, sys.stdout.write)
    return 0


def _hint_remember(args):
    # --root is not remembered: say, once per build, how to make it so.
    if not args.root or args.index:
        return
    import os
    from retriever import userroots
    have = set(userroots.remembered(existing=False))
    todo = [r for r in args.root if os.path.abspath(os.path.expanduser(r)) not in have
            and os.path.isdir(os.path.expanduser(r))]
    if todo:
        import shlex
        from retriever.cli import self_command
        sys.stderr.write("skill-retrieve: note: plain queries and hooks do not use --root; to make %s a default: "
                         "%s roots add %s\n" % ("it" if len(todo) == 1 else "them", self_command(),
                                                 " ".join(shlex.quote(r) for r in todo)))


def run_query(args):
    """``skill-retrieve query`` through argparse (same behaviour as the fast path)."""
    from retriever import render, service
    from retriever.service import write_out
    opts = {"roots": args.root, "index": args.index, "k": args.k, "platform": args.platform,
            "fresh": args.fresh, "rerank": args.rerank, "runner": args.runner}
    refused = service.refuse_roots(args.root)
    if refused:
        return refused
    if args.runner and not args.root:
        from retriever.runners import skillsets
        try:
            skillsets.scope_request(opts)
        except ValueError as exc:
            sys.stderr.write("skill-retrieve: error: %s\n" % exc)
            return 2
    text = service.query_text(args.words)
    results, path = service.answer(text, opts)
    out = render.json_doc(text, results, opts.get("tiers")) if args.format == "json" else render.text_block(results)
    write_out(out)
    service.tell_terminal(text, results, opts)
    service.maybe_revalidate(path)
    return 0


def main(argv=None):
    """Run the full CLI; returns the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    from retriever.cli import word_query
    if not argv or argv[0] not in SUBCOMMANDS and argv[0] not in ("-h", "--help", "-V", "--version") \
            or word_query(argv):
        argv = ["query"] + argv
    parser = make_parser(argv[0] if argv[0] in SUBCOMMANDS else "")
    args, extra = parser.parse_known_args(argv)
    if extra:
        # Words after an unknown option are query words, not bad arguments:
        # name only the options ("frobnicate --nope hello world").
        bad = [a for a in extra if a.startswith("-") and a != "-"]
        if bad:
            _subparser(parser, args.command).unknown_options(bad)
        if not hasattr(args, "words"):
            parser.error("unrecognized arguments: %s" % " ".join(extra))
        args.words += extra
    try:
        if args.command == "query":
            return run_query(args)
        if args.command == "build":
            return run_build(args)
        if getattr(args, "_missing", False):
            sys.stderr.write("skill-retrieve: %s is not available in this installation\n" % args.command)
            return 2
        module = __import__(args._module, fromlist=["run"])
        return module.run(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:
        from retriever import store
        if isinstance(exc, store.UnsafeTarget):
            sys.stderr.write("skill-retrieve: error: %s\n" % exc)
            return 2
        sys.stderr.write("skill-retrieve: error: %s: %s\n" % (type(exc).__name__, exc))
        return 1
