"""``skill-retrieve roots [add|remove DIR...]``: the folders used beside
the default roots, named once (see ``retriever.userroots``)."""

import os
import sys

from retriever import locate, userroots


def add_arguments(parser):
    """Arguments of ``skill-retrieve roots``."""
    parser.add_argument("action", nargs="?", choices=("list", "add", "remove"), default="list",
                        help="list (the default), add or remove folders in %s" % _home(userroots.path()))
    parser.add_argument("dirs", nargs="*", metavar="DIR", help="skill folders to add or remove")


def _home(p):
    h = os.path.expanduser("~")
    return "~" + p[len(h):] if p.startswith(h + "/") else p


def _state(p):
    # What a listed folder is now, when it is no folder, in the words
    # query and build use (locate.not_a_folder): "missing" for a file
    # would send the user looking for it.
    why = locate.not_a_folder(p)
    if why is None:
        return ""
    return "  missing" if why == "no such folder" else "  " + why.split(" (")[0]


def run(args):
    """List, add or remove remembered folders; returns the exit code."""
    out = sys.stdout
    if args.action == "list":
        if args.dirs:
            sys.stderr.write("skill-retrieve: roots: list takes no folders (did you mean roots add?)\n")
            return 2
        env, file = userroots.from_env(), userroots.from_file()
        problem = userroots.problem()
        if problem:
            sys.stderr.write("skill-retrieve: warning: %s; no folders are read from it\n" % problem)
        for p in env:
            out.write("%s  (SKILL_RETRIEVAL_ROOTS)%s\n" % (p, _state(p)))
        for p in file:
            out.write("%s  (%s)%s\n" % (p, _home(userroots.path()), _state(p)))
        if not env and not file:
            out.write("no folders named; add yours with: skill-retrieve roots add DIR\n")
        return 0
    if not args.dirs:
        sys.stderr.write("skill-retrieve: roots %s needs at least one folder\n" % args.action)
        return 2
    from retriever import fileutil
    try:
        return _change(args, out)
    except (OSError, fileutil.Refused) as exc:  # read-only, locked, no state folder
        sys.stderr.write("skill-retrieve: roots %s: %s\n" % (args.action, exc))
        return 1


def _change(args, out):
    # roots add|remove DIR...: the exit code.
    if args.action == "remove":
        gone = userroots.remove(args.dirs)
        for p in gone:
            out.write("removed %s\n" % p)
        if len(gone) < len(args.dirs):
            out.write("not in %s: %s\n" % (_home(userroots.path()), ", ".join(
                d for d in args.dirs if os.path.abspath(os.path.expanduser(d)) not in gone)))
        return 0
    bad = ["%s: %s" % (d, why) for d in args.dirs for why in [locate.not_a_folder(os.path.expanduser(d))] if why]
    if bad:
        # A usage error: nothing is added, not even the good ones.
        sys.stderr.write("skill-retrieve: roots add: %s\n" % ", ".join(bad))
        return 2
    new = userroots.add(args.dirs)
    from retriever import discover
    for p in new:
        out.write("added %s\n" % p)
        if not discover.holds_skills(p):
            out.flush()  # the warning follows its "added" line
            # Most often the wrong folder (its parent, a clone's root).
            sys.stderr.write("skill-retrieve: warning: %s holds no SKILL.md yet (skills live at %s/<name>/SKILL.md)\n"
                             % (p, p))
    _nested(new, sys.stderr)
    if len(new) < len(args.dirs):
        out.write("already there: %s\n" % ", ".join(
            d for d in args.dirs if os.path.abspath(os.path.expanduser(d)) not in new))
    out.write("plain queries, hooks and the Hermes plugin now use them beside the default folders\n" if new
              else "nothing added\n")
    return 0


def _nested(new, err):
    """Warn about each folder in ``new`` that lies inside, or holds,
    another named folder: a skill is indexed once, under the first, so
    doctor would list the inner one with 0 skills and no reason."""
    others = userroots.remembered()
    for p in new:
        for q in others:
            if q == p:
                continue
            if p.startswith(q.rstrip("/") + "/"):
                err.write("skill-retrieve: warning: %s is inside %s, already named: its skills are found "
                          "there (to drop it: skill-retrieve roots remove %s)\n" % (p, q, p))
            elif q.startswith(p.rstrip("/") + "/"):
                err.write("skill-retrieve: warning: %s holds %s, already named: its skills are found twice "
                          "(to drop the inner one: skill-retrieve roots remove %s)\n" % (p, q, q))
