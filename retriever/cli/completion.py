"""``skill-retrieve completion bash|zsh|fish``: a shell completion script.

Generated from the argparse definitions (``commands.make_parser``), so a
new subcommand, flag or choice completes without editing a script by
hand.  It completes subcommand names, each one's flags, and the values of
flags and arguments that have a fixed list (runners, ``--format``, roots
actions); anything else falls back to file names.  Printing is all it
does: the user puts the script where the shell reads it (docs/cli.md).
"""

import argparse
import sys

SHELLS = ("bash", "zsh", "fish")
PROG = "skill-retrieve"


def add_arguments(parser):
    """Arguments of ``completion``."""
    parser.add_argument("shell", choices=SHELLS, metavar="SHELL", help="one of: " + ", ".join(SHELLS))


def spec():
    """``(top, commands)``: ``top`` the top-level options, ``commands`` a
    list of ``(name, help, options, positional choices)``; an option is
    ``(flags, help, takes a value, choices or None)``."""
    from retriever.cli import commands
    parser = commands.make_parser()

    def options(p):
        out = []
        for a in p._actions:
            if not a.option_strings or a.help == argparse.SUPPRESS:
                continue
            takes = a.nargs != 0 and not isinstance(a, (argparse._StoreTrueAction, argparse._StoreFalseAction,
                                                          argparse._StoreConstAction, argparse._HelpAction,
                                                          argparse._VersionAction, argparse._CountAction))
            out.append((list(a.option_strings), a.help or "", takes,
                        [str(c) for c in a.choices] if a.choices else None))
        return out

    cmds = []
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            helps = {c.dest: c.help for c in a._choices_actions}
            for name, sub in a.choices.items():
                pos = next((list(map(str, x.choices)) for x in sub._actions
                            if not x.option_strings and x.choices), None)
                cmds.append((name, helps.get(name) or "", options(sub), pos))
    query = next(c for c in cmds if c[0] == "query")
    return options(parser) + query[2], cmds


def _words(opts):
    return " ".join(f for flags, _, _, _ in opts for f in flags)


def bash():
    """The bash script (``complete -F``)."""
    top, cmds = spec()
    lines = ["# bash completion for %s (skill-retrieve completion bash)" % PROG,
             "_skill_retrieve() {",
             '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}" cmd="" i',
             "    for ((i = 1; i < COMP_CWORD; i++)); do",
             '        case "${COMP_WORDS[i]}" in',
             "            %s) cmd=\"${COMP_WORDS[i]}\"; break ;;" % "|".join(c[0] for c in cmds),
             "        esac",
             "    done",
             '    local flags="" words="" values=""',
             '    case "$cmd" in']
    for name, _, opts, pos in cmds + [("", "", top, [c[0] for c in cmds])]:
        lines.append('        %s)' % (name or '""'))
        lines.append('            flags="%s"; words="%s"' % (_words(opts), " ".join(pos or ())))
        flagged = [(flags, choices) for flags, _, _, choices in opts if choices]
        if flagged:
            lines.append('            case "$prev" in')
            for flags, choices in flagged:
                lines.append('                %s) values="%s" ;;' % ("|".join(flags), " ".join(choices)))
            lines.append("            esac")
        lines.append("            ;;")
    lines += ["    esac",
              "    # Flags for a dash, a flag's values after it, else the words",
              "    # (subcommands, runners); none: file names (-o default).",
              '    local opts="$words"',
              '    [[ "$cur" == -* ]] && opts="$flags"',
              '    [ -n "$values" ] && opts="$values"',
              '    COMPREPLY=($(compgen -W "$opts" -- "$cur"))',
              "}",
              "complete -o default -F _skill_retrieve %s" % PROG, ""]
    return "\n".join(lines)


def _zq(text):
    # Text inside a single-quoted _arguments spec: no quote, brackets or
    # colons of its own.
    return text.replace("'", "").replace("[", "(").replace("]", ")").replace(":", ",").replace("\n", " ")


def _zsh_specs(opts, pos):
    out = []
    for flags, help_, takes, choices in opts:
        value = ":%s:(%s)" % ("value", " ".join(choices)) if choices else ":value:_files" if takes else ""
        names = "{%s}" % ",".join(flags) if len(flags) > 1 else flags[0]
        out.append("%s'[%s]%s'" % (names, _zq(help_), value) if len(flags) > 1 else
                   "'%s[%s]%s'" % (names, _zq(help_), value))
    if pos:
        out.append("'1:argument:(%s)'" % " ".join(pos))
    out.append("'*:file:_files'")
    return out


def zsh():
    """The zsh script (``#compdef``, for a folder on ``$fpath``)."""
    top, cmds = spec()
    lines = ["#compdef %s" % PROG, "# zsh completion for %s (skill-retrieve completion zsh)" % PROG,
             "_skill_retrieve() {",
             "    local -a commands",
             "    commands=("]
    lines += ["        '%s:%s'" % (name, _zq(help_)) for name, help_, _, _ in cmds]
    lines += ["    )",
              "    if (( CURRENT == 2 )) && [[ $words[2] != -* ]]; then",
              "        _describe -t commands 'skill-retrieve command' commands",
              "        return",
              "    fi",
              "    case $words[2] in"]
    for name, _, opts, pos in cmds:
        lines.append("        %s)" % name)
        lines.append("            shift words; (( CURRENT-- ))")
        lines.append("            _arguments -s %s ;;" % " ".join(_zsh_specs(opts, pos)))
    lines += ["        *) _arguments -s %s ;;" % " ".join(_zsh_specs(top, None)),
              "    esac",
              "}",
              '_skill_retrieve "$@"', ""]
    return "\n".join(lines)


def _fq(text):
    return "'%s'" % text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", " ")


def _fish_option(cond, flags, help_, takes, choices):
    parts = ["complete -c %s -n %s" % (PROG, _fq(cond))]
    for f in flags:
        parts.append("-l %s" % f[2:] if f.startswith("--") else "-s %s" % f[1:])
    if choices:
        parts.append("-x -a %s" % _fq(" ".join(choices)))
    elif takes:
        parts.append("-r")
    parts.append("-d %s" % _fq(help_))
    return " ".join(parts)


def fish():
    """The fish script (``complete -c``)."""
    top, cmds = spec()
    lines = ["# fish completion for %s (skill-retrieve completion fish)" % PROG]
    for name, help_, _, _ in cmds:
        lines.append("complete -c %s -n __fish_use_subcommand -f -a %s -d %s" % (PROG, name, _fq(help_)))
    for flags, help_, takes, choices in top:
        lines.append(_fish_option("__fish_use_subcommand", flags, help_, takes, choices))
    for name, _, opts, pos in cmds:
        cond = "__fish_seen_subcommand_from %s" % name
        if pos:
            lines.append("complete -c %s -n %s -f -a %s" % (PROG, _fq(cond), _fq(" ".join(pos))))
        for flags, help_, takes, choices in opts:
            lines.append(_fish_option(cond, flags, help_, takes, choices))
    return "\n".join(lines) + "\n"


def run(args):
    """Print the script for ``args.shell``; 0."""
    sys.stdout.write({"bash": bash, "zsh": zsh, "fish": fish}[args.shell]())
    return 0
