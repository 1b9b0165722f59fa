"""``skill-retrieve install|uninstall RUNNER``: register the prompt hook.

Each runner keeps its hooks in its own settings file.  Install merges one
entry (ours) into it and leaves everything else alone; uninstall removes
only ours.  Both are idempotent, back the file up before changing it, and
refuse to touch a file they cannot parse.

Our entry is recognised by its command: it names ``skill-retrieve`` (or
``retriever/__main__.py``) and ``hook <runner>``.  The command runs an
absolute interpreter path with ``-I -S`` straight on the entry script: no
version-manager shim (a pyenv shim costs more than 100 ms per prompt) and
no extra shell.  In a checkout the entry script is ``bin/skill-retrieve``;
a pip, pipx or uv install has no ``bin/`` folder beside the package, so
there it is the package's ``__main__.py``.

Cold path: imports freely.
"""

import json
import os
import shlex
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(REPO, "bin", "skill-retrieve")
MAIN = os.path.join(REPO, "retriever", "__main__.py")

from retriever import fileutil
from retriever.fileutil import ReadOnly, backup, refuse_read_only, write_atomic
from retriever.runners.registry import NAMES as RUNNERS, RUNNERS as RECORDS


class Refused(Exception):
    """The settings file cannot be changed safely; the message says why."""


# ------------------------------------------------------------- interpreter


def is_shim(path):
    """True for a version-manager shim (pyenv, asdf, mise: a ``/shims/``
    folder, or a script standing in for the interpreter binary)."""
    real = os.path.realpath(path)
    if "/shims/" in path or "/shims/" in real:
        return True
    try:
        with open(real, "rb") as f:
            return f.read(2) == b"#!"
    except OSError:
        return True


def interpreter(env=None):
    """The absolute interpreter path to register.

    Order: ``$SKILL_RETRIEVAL_PYTHON``, the repository's ``.venv`` (kept as
    is: a venv's python links to a real binary, and the venv's
    site-packages are needed when the index must be rebuilt), the running
    interpreter; shims are skipped.  Falls back to the real file behind the
    running interpreter.
    """
    env = os.environ if env is None else env
    cands = [env.get("SKILL_RETRIEVAL_PYTHON"), os.path.join(REPO, ".venv", "bin", "python3"),
             sys.executable]
    for c in cands:
        if c and os.path.isabs(c) and os.path.isfile(c) and os.access(c, os.X_OK) and not is_shim(c):
            return c
    return os.path.realpath(sys.executable)


def entry_script():
    """The script an installed hook runs: ``bin/skill-retrieve`` in a
    checkout (editable installs included), else the package's
    ``__main__.py`` (a pip, pipx or uv install)."""
    return BIN if os.path.isfile(BIN) else MAIN


def hook_command(runner, python=None):
    """The command line a runner should run (shell-quoted)."""
    py = python or interpreter()
    return "%s -I -S %s hook %s" % (shlex.quote(py), shlex.quote(entry_script()), runner)


def is_ours(command, runner):
    """True when ``command`` is our hook for ``runner``."""
    return (isinstance(command, str) and ("skill-retrieve" in command or "retriever/__main__.py" in command)
            and (" hook %s" % runner) in command)


# ---------------------------------------------------------------- targets


def kind(runner):
    """How ``runner`` is registered: "json", "script" or "hermes"."""
    return RECORDS[runner]["install"][0]


def settings_path(runner, project=None, env=None):
    """The file ``runner`` reads its hooks from (user level, or the
    project's with ``project``)."""
    env = os.environ if env is None else env
    how = RECORDS[runner]["install"]
    if project:
        return os.path.join(os.path.abspath(os.path.expanduser(project)), how[2])
    env_name, folder, name = how[1]
    home = env.get("HOME") or os.path.expanduser("~")
    base = (env.get(env_name) if env_name else "") or folder.replace("~", home, 1)
    return os.path.join(base, name)


def handler(runner, command):
    """Our hook handler object for a JSON-configured runner."""
    rec = RECORDS[runner]
    h = {"type": "command", "command": command, "timeout": rec["timeout"][0]}
    h.update(rec["install"][3])
    return h


def script(runner, command):
    """The file a script-registered runner runs or loads (Cline: an
    executable named UserPromptSubmit; OpenCode: a JS plugin)."""
    argv = json.dumps(shlex.split(command))
    return RECORDS[runner]["install"][3].format(command=command, argv=argv)


# ------------------------------------------------------------ JSON merging


def parse_settings(text, path):
    """The settings object in ``text`` ({} for an empty file); Refused
    when it is not a JSON object."""
    if not text.strip():
        return {}
    try:
        data = json.loads(text, parse_float=_finite, parse_constant=_no_constant)
    except _NonFinite as exc:
        raise Refused("%s holds %s, a number JSON cannot represent once read (it would be written "
                      "back as Infinity or NaN); fix it - left unchanged" % (path, exc))
    except ValueError as exc:
        raise Refused("%s is not valid JSON (%s); fix it or add the hook by hand - left unchanged"
                      % (path, exc))
    if not isinstance(data, dict):
        raise Refused("%s does not hold a JSON object; left unchanged" % path)
    return data


class _NonFinite(ValueError):
    pass


def _finite(literal):
    # Python reads 1e999 as inf, which json.dumps writes as the non-JSON
    # token Infinity: a settings file must never come back unparseable.
    v = float(literal)
    if v != v or v in (float("inf"), float("-inf")):
        raise _NonFinite(literal[:40])
    return v


def _no_constant(name):
    raise _NonFinite(name)


def _groups(data, event, path, create):
    hooks = data.get("hooks")
    if hooks is None:
        if not create:
            return None
        hooks = data["hooks"] = {}
    if not isinstance(hooks, dict):
        raise Refused("%s: \"hooks\" is not an object; left unchanged" % path)
    groups = hooks.get(event)
    if groups is None:
        if not create:
            return None
        groups = hooks[event] = []
    if not isinstance(groups, list):
        raise Refused("%s: \"hooks.%s\" is not a list; left unchanged" % (path, event))
    return groups


def _our_slots(groups, runner):
    # (group index, handler index) of every handler of ours.
    out = []
    for gi, g in enumerate(groups):
        hs = g.get("hooks") if isinstance(g, dict) else None
        if isinstance(hs, list):
            for hi, h in enumerate(hs):
                if isinstance(h, dict) and is_ours(h.get("command"), runner):
                    out.append((gi, hi))
    return out


def _drop(groups, slots, keep_first=False):
    # Remove our handlers (last first, so indexes stay valid), then any
    # group we emptied.
    emptied = set()
    for gi, hi in sorted(slots[1:] if keep_first else slots, reverse=True):
        del groups[gi]["hooks"][hi]
        if not groups[gi]["hooks"]:
            emptied.add(gi)
    for gi in sorted(emptied, reverse=True):
        del groups[gi]


def merge(data, runner, entry, path="settings"):
    """Put ``entry`` into ``data`` (in place) as the only handler of ours.

    An existing handler of ours is replaced where it stands; duplicates are
    removed.  Returns True when ``data`` changed.
    """
    event = RECORDS[runner]["event"]
    groups = _groups(data, event, path, create=True)
    slots = _our_slots(groups, runner)
    if len(slots) == 1 and groups[slots[0][0]]["hooks"][slots[0][1]] == entry:
        return False
    if slots:
        gi, hi = slots[0]
        groups[gi]["hooks"][hi] = entry
        _drop(groups, slots, keep_first=True)
    else:
        groups.append({"hooks": [entry]})
    return True


def unmerge(data, runner, path="settings"):
    """Remove our handlers from ``data`` (in place), and the group, event
    list and hooks object they leave empty.  Returns True when it changed."""
    event = RECORDS[runner]["event"]
    groups = _groups(data, event, path, create=False)
    if groups is None:
        return False
    slots = _our_slots(groups, runner)
    if not slots:
        return False
    _drop(groups, slots)
    if not groups:
        del data["hooks"][event]
        if not data["hooks"]:
            del data["hooks"]
    return True


def dump_settings(data):
    """Settings as written: two-space indent, UTF-8, final newline."""
    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


# ---------------------------------------------------------------- files


def _read(path):
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise Refused("%s is not UTF-8 text; left unchanged" % path)


# ------------------------------------------------------------ operations


def plan_install(runner, path, command):
    """``(new text or None when unchanged, old text or None, mode)`` for
    installing into ``path``; raises Refused."""
    old = _read(path)
    if kind(runner) == "script":
        new = script(runner, command)
        if old is not None and not is_ours(old, runner):
            raise Refused("%s exists and is not skill-retrieve's hook; "
                          "left unchanged - add this line to it: %s" % (path, command))
        return (None if old == new else new), old, RECORDS[runner]["install"][4]
    data = parse_settings(old or "", path)
    changed = merge(data, runner, handler(runner, command), path)
    return (dump_settings(data) if changed or old is None else None), old, 0o644


def plan_uninstall(runner, path):
    """``(new text, "" to delete the file, or None when nothing to do; old text)``."""
    old = _read(path)
    if old is None:
        return None, None
    if kind(runner) == "script":
        return ("" if is_ours(old, runner) else None), old
    data = parse_settings(old, path)
    return (dump_settings(data) if unmerge(data, runner, path) else None), old


def install(runner, project=None, dry_run=False, out=sys.stdout, command=None):
    """Register the hook; returns the exit code."""
    path = settings_path(runner, project)
    command = command or hook_command(runner)
    new, old, mode = plan_install(runner, path, command)
    if new is None:
        out.write("%s: already installed in %s\n" % (runner, path))
        return 0
    if dry_run:
        out.write("would write %s:\n%s" % (path, new))
        return 0
    refuse_read_only(path)
    if old is not None:
        out.write("backed up %s to %s\n" % (path, backup(path)))
    else:
        made = fileutil.missing_parents(path)
    write_atomic(path, new, mode)
    if old is None:
        # Uninstall restores what was there: nothing.
        fileutil.note_created(path, made)
    if mode & 0o111:
        os.chmod(path, os.stat(path).st_mode | 0o111)
    out.write("installed the %s hook in %s\n  command: %s\n" % (runner, path, command))
    out.write("  %s\n" % RECORDS[runner]["note"])
    _warm(runner, project, out)
    return 0


def uninstall(runner, project=None, dry_run=False, out=sys.stdout):
    """Remove our hook; returns the exit code."""
    path = settings_path(runner, project)
    new, old = plan_uninstall(runner, path)
    if new is None:
        if kind(runner) == "script" and old is not None:
            out.write("%s is not skill-retrieve's hook; left unchanged\n" % path)
        else:
            out.write("%s: no skill-retrieve hook in %s; nothing to remove\n" % (runner, path))
        return 0
    if dry_run:
        out.write("would remove the %s hook from %s\n" % (runner, path)
                  + ("" if new == "" else "new content:\n" + new))
        return 0
    refuse_read_only(path)
    out.write("backed up %s to %s\n" % (path, backup(path)))
    made = fileutil.forget_created(path)
    if new == "" or (made is not None and parse_settings(new, path) == {}):
        # Ours alone, or a file install created and nothing else was put
        # in since: uninstall leaves what was there before, nothing.
        os.unlink(path)
        for d in made or ():
            try:
                os.rmdir(d)
            except OSError:
                break  # not empty: someone else uses it
        out.write("removed the %s hook: deleted %s (install had created it)\n" % (runner, path)
                  if made is not None else "removed the %s hook: deleted %s\n" % (runner, path))
        return 0
    write_atomic(path, new)
    out.write("removed the %s hook from %s\n" % (runner, path))
    return 0


def _warm(runner, project, out):
    # Build the index the hook will open now, so the first prompt does not
    # pay for it under the runner's timeout.  Never fails the install.
    try:
        from retriever import service
        from retriever.runners import hook as hookio
        cwd = os.path.abspath(project) if project else os.path.expanduser("~")
        payload = {"cwd": cwd, "workspaceRoots": [cwd]}
        roots = hookio.roots_for(runner, payload)
        if not roots:
            out.write("  no skill folders yet for %s; the index is built on first use\n" % runner)
            return
        idx, path = service.open_index({"roots": roots, "quiet": True})
        from retriever.render import plural
        out.write("  indexed %s from %s\n" % (plural(idx["header"]["n_docs"], "skill"),
                                               ", ".join(r["path"] for r in roots)))
    except Exception as exc:
        out.write("  (index not built now: %s: %s; it is built on first use)\n" % (type(exc).__name__, exc))


def _hermes(command, dry_run, out):
    # Hermes gets the Python plugin, installed by retriever.hermes_install
    # (a message back on success, HermesInstallError on refusal).
    try:
        from retriever.runners import hermes_install
    except ImportError:
        sys.stderr.write("skill-retrieve: Hermes support (retriever/hermes_install.py) is not available "
                         "in this installation\n")
        return 1
    from retriever import locate
    home = locate.hermes_home()
    if dry_run:
        out.write("would %s the Hermes plugin in %s\n" % (command, home))
        return 0
    try:
        msg = (hermes_install.install if command == "install" else hermes_install.uninstall)(home)
    except (hermes_install.HermesInstallError, Refused, ReadOnly) as exc:
        sys.stderr.write("skill-retrieve: %s\n" % exc)
        return 1
    if isinstance(msg, int):
        return msg
    if msg:
        out.write("%s\n" % msg)
    return 0


# -------------------------------------------------------------------- CLI


def add_arguments(parser):
    """Arguments shared by ``install`` and ``uninstall``."""
    parser.add_argument("runner", choices=RUNNERS, metavar="RUNNER",
                        help="one of: " + ", ".join(RUNNERS))
    parser.add_argument("--project", metavar="DIR",
                        help="use the project's settings file instead of the user's")
    parser.add_argument("--dry-run", action="store_true", help="show what would change; write nothing")


def run(args):
    """``install`` or ``uninstall`` (from ``args.command``); returns the exit code."""
    command = getattr(args, "command", None) or "install"
    runner = args.runner
    if kind(runner) == "hermes":
        if args.project:
            sys.stderr.write("skill-retrieve: --project does not apply to Hermes (it uses $HERMES_HOME)\n")
            return 2
        return _hermes(command, args.dry_run, sys.stdout)
    try:
        if command == "uninstall":
            return uninstall(runner, args.project, args.dry_run)
        return install(runner, args.project, args.dry_run)
    except (Refused, ReadOnly) as exc:
        sys.stderr.write("skill-retrieve: %s\n" % exc)
        return 1
    except OSError as exc:
        sys.stderr.write("skill-retrieve: cannot update %s: %s\n"
                         % (exc.filename or "the settings file", exc.strerror or exc))
        return 1
