"""Front ends a person types: the executable's entry point, the argparse
CLI and its subcommands (explain, doctor, tokens, rerank-report).  They
call the core (``retriever.*``); the core never imports them.

``SUBCOMMANDS`` is the one list of subcommands: the fast path in
``entry`` and the argparse CLI in ``commands`` both read it.  Each
module is imported only when its subcommand runs.
"""

# name -> (module, one-line help)
SUBCOMMANDS = {
    "query": ("retriever.cli.commands", "rank skills for a query (the default subcommand)"),
    "build": ("retriever.cli.commands", "build the index for a set of skill roots"),
    "roots": ("retriever.cli.roots", "list, add or remove the skill folders used beside the default ones"),
    "hook": ("retriever.runners.hook", "answer a runner's prompt hook (stdin JSON in, runner JSON out)"),
    "explain": ("retriever.cli.explain", "show why skills rank where they do"),
    "install": ("retriever.runners.commands", "register the hook or plugin with an agent, and list skills "
                "by name only"),
    "uninstall": ("retriever.runners.commands", "remove what install added"),
    "sync": ("retriever.runners.listing", "keep a runner's names-only listing in step with its skills "
             "(run by a session-start hook)"),
    "warm": ("retriever.runners.warm", "start the semantic helper and check the index in the background "
             "(run by a session-start hook)"),
    "doctor": ("retriever.cli.doctor", "check skill roots, the index and runner set-up"),
    "tokens": ("retriever.cli.tokens", "estimate what retrieval saves per turn"),
    "rerank-report": ("retriever.cli.rerank_report", "summarise the LLM rerank A/B log"),
    "mcp": ("retriever.runners.mcp_server", "serve search_skills and read_skill to an agent over MCP (stdio)"),
    "serve": ("retriever.semantic.helper", "run the semantic tier's warm helper (--stop, --status)"),
    "stats": ("retriever.cli.usage_stats", "how often injected skills were loaded, per runner (the local "
              "usage record; --forget deletes it)"),
    "last": ("retriever.cli.last", "what the last prompts got: time, runner, prompt, skills injected, tier"),
    "completion": ("retriever.cli.completion", "print a shell completion script (bash, zsh or fish)"),
}


# Subcommands named by everyday words: one is the subcommand only when
# what follows is its own arguments (flags, their values, a count), so
# "last week's release notes" stays a query; never guessed as a typo.
WORD_COMMANDS = {"stats": ("--runner", "--days", "--format"), "last": ("--runner", "--format")}


def word_query(argv):
    """True when ``argv`` starts with a WORD_COMMANDS name but goes on
    with words of a query."""
    flags = WORD_COMMANDS.get(argv[0]) if argv else None
    if flags is None:
        return False
    rest, i = argv[1:], 0
    while i < len(rest):
        a = rest[i]
        if a.startswith("-"):
            i += 2 if a in flags else 1
        elif argv[0] == "last" and a.isdigit():
            i += 1
        else:
            return True
    return False


# The query's flags that take a value (the fast path in ``entry`` parses them).
VALUE_FLAGS = ("--root", "--index", "-k", "--k", "--format", "--platform", "--runner")


def flag_like_hint(argv):
    """For a query whose words include one that looks like a flag ("how
    do I use -k in grep"), how to search for it: quoted, or after ``--``;
    else None.  Error path only."""
    argv = list(argv)
    if argv[:1] == ["query"]:
        argv.pop(0)
    start = 0  # the first word of the query: after the flags and their values
    while start < len(argv) and argv[start].startswith("-") and argv[start] != "--":
        start += 2 if argv[start] in VALUE_FLAGS else 1
    words = argv[start:]
    if "--" in argv or sum(1 for a in words if not a.startswith("-")) < 2:
        return None
    import shlex
    return "if those are words of the query, quote them or put -- before them: skill-retrieve %s" \
        % " ".join(shlex.quote(a) for a in argv[:start] + ["--"] + words)


def self_command():
    """How to run this program again on this machine, for the fix lines we
    print: ``skill-retrieve`` when that name on PATH is this program, else
    the absolute path that started this process (``bin/skill-retrieve`` is
    not on PATH after ``make demo``)."""
    import os
    import shlex
    import shutil
    import sys
    argv0 = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if not argv0 or os.path.basename(argv0) not in ("skill-retrieve", "__main__.py"):
        return "skill-retrieve"  # embedded (tests, the plugin): the documented name
    on_path = shutil.which("skill-retrieve")
    if on_path and os.path.realpath(on_path) == os.path.realpath(argv0):
        return "skill-retrieve"
    if argv0.endswith("__main__.py"):
        return "%s %s" % (shlex.quote(sys.executable), shlex.quote(argv0))
    return shlex.quote(argv0)
