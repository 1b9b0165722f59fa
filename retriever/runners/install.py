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
from retriever.runners import record
# The one refusal of every installer (a file it leaves unchanged, and why).
from retriever.fileutil import Refused
from retriever.runners.registry import NAMES as RUNNERS, RUNNERS as RECORDS


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


def warm_command(command, runner):
    """The session-start command beside the prompt hook ``command``: the
    same interpreter and script, ``warm RUNNER`` instead of ``hook RUNNER``."""
    head, sep, tail = command.rpartition(" hook %s" % runner)
    return head + " warm %s" % runner + tail if sep else command


def is_warm(command, runner):
    """True when ``command`` is our session-start hook for ``runner``."""
    return (isinstance(command, str) and ("skill-retrieve" in command or "retriever/__main__.py" in command)
            and (" warm %s" % runner) in command)


# ---------------------------------------------------------------- targets


def kind(runner):
    """How ``runner`` is registered: "json", "script" or "hermes"."""
    return RECORDS[runner]["install"]["kind"]


def settings_path(runner, project=None, env=None):
    """The file ``runner`` reads its hooks from (user level, or the
    project's with ``project``)."""
    env = os.environ if env is None else env
    how = RECORDS[runner]["install"]
    if project:
        return os.path.join(os.path.abspath(os.path.expanduser(project)), how["project"])
    user = how["user"]
    home = env.get("HOME") or os.path.expanduser("~")
    base = (env.get(user["env"]) if user["env"] else "") or user["folder"].replace("~", home, 1)
    return os.path.join(base, user["name"])


def handler(runner, command):
    """Our hook handler object for a JSON-configured runner."""
    rec = RECORDS[runner]
    h = {"type": "command", "command": command, "timeout": rec["timeout"][0]}
    h.update(rec["install"]["keys"])
    return h


def start_handler(runner, command):
    """Our session-start handler (``warm``) beside the prompt hook
    ``command``, for a runner whose record names a ``start`` event."""
    h = handler(runner, warm_command(command, runner))
    if "name" in h:  # Gemini lists hooks by name: two of ours must differ
        h.update(name=h["name"] + "-warm", description="Start the semantic helper when a session starts")
    return h


def script(runner, command):
    """The file a script-registered runner runs or loads (Cline: an
    executable named UserPromptSubmit; OpenCode: a JS plugin)."""
    argv = json.dumps(shlex.split(command))
    return RECORDS[runner]["install"]["template"].format(command=command, argv=argv)


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


def _groups(data, event, path, create, made=None, tag="event"):
    # hooks[event], made (and named in ``made``, the list as ``tag``) when
    # missing and ``create``.
    hooks = data.get("hooks")
    if hooks is None:
        if not create:
            return None
        hooks = data["hooks"] = {}
        if made is not None:
            made.append("hooks")
    if not isinstance(hooks, dict):
        raise Refused("%s: \"hooks\" is not an object; left unchanged" % path)
    groups = hooks.get(event)
    if groups is None:
        if not create:
            return None
        groups = hooks[event] = []
        if made is not None:
            made.append(tag)
    if not isinstance(groups, list):
        raise Refused("%s: \"hooks.%s\" is not a list; left unchanged" % (path, event))
    return groups


def _our_slots(groups, runner, ours=is_ours):
    # (group index, handler index) of every handler of ours (``ours``:
    # is_ours for the prompt hook, is_warm for the session-start one).
    out = []
    for gi, g in enumerate(groups):
        hs = g.get("hooks") if isinstance(g, dict) else None
        if isinstance(hs, list):
            for hi, h in enumerate(hs):
                if isinstance(h, dict) and ours(h.get("command"), runner):
                    out.append((gi, hi))
    return out


def our_commands(data, runner, event=None, ours=is_ours):
    """The commands of our handlers in the parsed settings ``data``, in
    order: the prompt hook's, or with ``event`` and ``ours`` (``is_warm``)
    the session-start hook's.  [] when there is no such list, or a part is
    of the wrong type (doctor reads files install would refuse)."""
    hooks = data.get("hooks") if isinstance(data, dict) else None
    groups = hooks.get(event or RECORDS[runner]["event"]) if isinstance(hooks, dict) else None
    if not isinstance(groups, list):
        return []
    return [groups[gi]["hooks"][hi]["command"] for gi, hi in _our_slots(groups, runner, ours)]


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


class Edited(Refused):
    """Our entry (or a plugin file of ours, ``listing``) was changed by the
    user; install keeps it (``--force`` replaces it).  The message names
    the difference in one line."""


def pristine_command(command, runner, verb="hook"):
    """True when ``command`` is exactly what some install of ours wrote: an
    absolute interpreter, ``-I -S``, our entry script, ``hook RUNNER`` (or
    ``verb RUNNER``: ``warm``) and nothing else (the paths change when the
    checkout or venv moves)."""
    try:
        argv = shlex.split(command)
    except (ValueError, AttributeError):
        return False
    return (len(argv) == 6 and argv[1:3] == ["-I", "-S"] and argv[4:] == [verb, runner]
            and os.path.isabs(argv[0]) and os.path.isabs(argv[3])
            and argv[3].endswith(("/bin/skill-retrieve", "/retriever/__main__.py"))
            and command == "%s -I -S %s %s %s" % (shlex.quote(argv[0]), shlex.quote(argv[3]), verb, runner))


def edits(entry, runner, wanted):
    """The user's changes to our handler ``entry``, for one line ("" when
    it is as some install wrote it): extra arguments, other keys."""
    cmd = entry.get("command")
    out = []
    if not pristine_command(cmd, runner):
        try:
            argv = shlex.split(cmd)
            tail = argv[argv.index("hook") + 2:]
            base = shlex.join(argv[:argv.index("hook") + 2])
        except ValueError:
            tail, base = None, None
        if tail and pristine_command(base, runner):
            out.append("arguments added: %s" % shlex.join(tail))
        else:
            out.append("command %s" % cmd)
    for k in sorted(set(entry) | set(wanted), key=str):
        if k != "command" and entry.get(k, _ABSENT) != wanted.get(k, _ABSENT):
            got = entry.get(k, _ABSENT)
            out.append("%s %s (default %s)" % (k, "absent" if got is _ABSENT else json.dumps(got),
                                               json.dumps(wanted[k]) if k in wanted else "absent"))
    return "; ".join(out)


_ABSENT = object()


def merge(data, runner, entry, path="settings", force=False, made=None):
    """Put ``entry`` into ``data`` (in place) as the only handler of ours.

    An existing handler of ours is replaced where it stands, duplicates
    removed, when each is as an install wrote it (only its paths may
    differ).  One the user changed (arguments, timeout, keys) is kept:
    Edited names the change, unless ``force``.  Returns True when ``data``
    changed; ``made`` gets "hooks" and "event" for the containers added.
    """
    event = RECORDS[runner]["event"]
    groups = _groups(data, event, path, create=True, made=made)
    slots = _our_slots(groups, runner)
    warmed = _merge_start(data, runner, entry, path, made)
    if len(slots) == 1 and groups[slots[0][0]]["hooks"][slots[0][1]] == entry:
        return warmed
    if not force:
        for gi, hi in slots:
            diff = edits(groups[gi]["hooks"][hi], runner, entry)
            if diff:
                raise Edited(diff)
    if slots:
        gi, hi = slots[0]
        groups[gi]["hooks"][hi] = entry
        _drop(groups, slots, keep_first=True)
    else:
        groups.append({"hooks": [entry]})
    return True


def _merge_start(data, runner, entry, path, made):
    # Our session-start handler beside the prompt hook ``entry`` (runners
    # with a ``start`` event): added, or put back to what install writes
    # where it stands.  One the user pointed elsewhere (it no longer runs
    # the prompt hook's script) is theirs: left as it is.  True on a change.
    event = RECORDS[runner].get("start")
    if not event:
        return False
    want = start_handler(runner, entry["command"])
    groups = _groups(data, event, path, create=True, made=made, tag="start")
    slots = _our_slots(groups, runner, is_warm)
    if not slots:
        groups.append({"hooks": [want]})
        return True
    gi, hi = slots[0]
    if groups[gi]["hooks"][hi] == want and len(slots) == 1:
        return False
    if not pristine_command(groups[gi]["hooks"][hi].get("command"), runner, "warm"):
        return False
    groups[gi]["hooks"][hi] = want
    _drop(groups, slots, keep_first=True)
    return True


def unmerge(data, runner, path="settings", keep=()):
    """Remove our handlers from ``data`` (in place): the prompt hook, and
    the session-start one where the runner has it; then the group, event
    list and hooks object they leave empty, except those in ``keep``
    ("hooks", "event", "start": there before install).  Returns True when
    it changed."""
    changed = False
    for event, ours, tag in ((RECORDS[runner]["event"], is_ours, "event"),
                             (RECORDS[runner].get("start"), is_warm, "start")):
        groups = _groups(data, event, path, create=False) if event else None
        slots = _our_slots(groups, runner, ours) if groups else []
        if not slots:
            continue
        changed = True
        _drop(groups, slots)
        if not groups and tag not in keep:
            del data["hooks"][event]
    if changed and "hooks" in data and not data["hooks"] and "hooks" not in keep:
        del data["hooks"]
    return changed


def dump_settings(data):
    """Settings as written: two-space indent, UTF-8, final newline."""
    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


# ---------------------------------------------------------------- files


def decode_text(raw, path, keep_bom=False):
    """The text of a user's file whose bytes ``raw`` were read from
    ``path`` (None: no file): strict UTF-8, a BOM dropped (a JSON reader
    would choke on it) unless ``keep_bom`` (a line edit gives back every
    other byte); Refused for bytes that are not UTF-8."""
    if raw is None:
        return None
    try:
        return raw.decode("utf-8" if keep_bom else "utf-8-sig")
    except UnicodeDecodeError:
        raise Refused("%s is not UTF-8 text; left unchanged" % path)


def _read(path):
    return decode_text(fileutil.read_bytes(path), path)  # NotAFile for a FIFO, a folder ...


def script_edits(text, runner):
    """"" when ``text`` is our script as some install wrote it (only the
    command's paths may differ), else what the user changed, in words."""
    for line in text.splitlines():
        for lead in ("exec ", "// command: "):
            if line.startswith(lead):
                cmd = line[len(lead):]
                if pristine_command(cmd, runner) and script(runner, cmd) == text:
                    return ""
    return "the file's text differs from the one install writes"


# ------------------------------------------------------------ operations


def plan_install(runner, path, command, force=False, old=None, made=None):
    """``(new text or None when unchanged, mode)`` for installing into
    ``path`` holding ``old`` (text; None: no file); raises Refused, or
    Edited when our entry there was changed by the user (not ``force``).
    ``made`` gets the containers the merge adds (see ``merge``)."""
    if kind(runner) == "script":
        new = script(runner, command)
        if old is not None and not is_ours(old, runner):
            raise Refused("%s exists and is not skill-retrieve's hook; "
                          "left unchanged - add this line to it: %s" % (path, command))
        if old is not None and old != new and not force:
            diff = script_edits(old, runner)
            if diff:
                raise Edited(diff)
        return (None if old == new else new), RECORDS[runner]["install"]["mode"]
    data = parse_settings(old or "", path)
    changed = merge(data, runner, handler(runner, command), path, force, made)
    return (dump_settings(data) if changed or old is None else None), 0o644


def plan_uninstall(runner, path, old, keep=()):
    """The new text for ``path`` holding ``old`` once our hook is out: ""
    when the file was ours alone, None when there is nothing to do.
    ``keep``: containers to keep even if emptied (see ``unmerge``)."""
    if old is None:
        return None
    if kind(runner) == "script":
        if not is_ours(old, runner):
            return None
        if not script_edits(old, runner):
            return ""  # as some install wrote it: ours alone
        return _script_without_ours(runner, path, old)
    data = parse_settings(old, path)
    return dump_settings(data) if unmerge(data, runner, path, keep) else None


def _script_without_ours(runner, path, text):
    # A script holding our command that is not as install wrote it: the
    # user's own (they added the line install asked them to add) or ours
    # with their lines in it.  It is theirs now: only our lines go (the
    # command, bare or after ``exec``, and the template's comment lines);
    # "" when nothing else but the #! line and blank lines is left.
    # Refused when the command is not a line of its own (a JS plugin).
    notes = {l.strip() for l in script(runner, "\0").splitlines()
             if l.startswith(("# ", "// ")) and "\0" not in l}  # the template's comment lines
    keep, dropped = [], False
    for line in text.splitlines(True):
        bare = line.strip()
        if pristine_command(bare[len("exec "):].lstrip() if bare.startswith("exec ") else bare, runner):
            dropped = True
        elif bare not in notes:
            keep.append(line)
    if not dropped:
        raise Refused("%s holds skill-retrieve's %s hook but was changed since install; left in place - "
                      "take the hook out of it yourself" % (path, runner))
    rest = "".join(keep)
    return "" if all(not l.strip() or l.startswith("#!") for l in keep) else rest


def _restorable(runner, path, text):
    # Whether uninstall may put back ``text``, the backup of the file
    # before install (``record.undo`` found the file as install wrote it):
    # only when it holds no hook of ours.
    try:
        text.encode("utf-8")
        groups = _groups(parse_settings(text.lstrip("\ufeff"), path), RECORDS[runner]["event"], path,
                         create=False)
    except (UnicodeEncodeError, Refused):
        return False
    return not (groups and _our_slots(groups, runner))


def _kept(runner, path, diff, out):
    # The user's edited entry stays; refuse only when it can no longer run.
    old = _read(path)
    cmd = _our_command(runner, old) if old is not None else None
    try:
        argv = shlex.split(cmd) if cmd else []
    except ValueError:
        argv = []
    gone = [a for a in argv[:1] + argv[3:4] if os.path.isabs(a) and not os.path.exists(a)]
    if gone:
        sys.stderr.write("skill-retrieve: %s: the %s hook was edited (%s) and runs %s, which no longer "
                         "exists; left unchanged - fix it, or run `skill-retrieve install %s --force` to "
                         "replace it with the default\n" % (path, runner, diff, gone[0], runner))
        return 1
    out.write("%s: kept your edited hook in %s (%s); `skill-retrieve install %s --force` replaces it "
              "with the default\n" % (runner, path, diff, runner))
    return 0


def _our_command(runner, text):
    if kind(runner) == "script":
        for line in text.splitlines():
            for lead in ("exec ", "// command: "):
                if line.startswith(lead) and is_ours(line, runner):
                    return line[len(lead):]
        return None
    try:
        cmds = our_commands(parse_settings(text, "settings"), runner)
    except Refused:
        return None
    return cmds[0] if cmds else None


def install(runner, project=None, dry_run=False, out=sys.stdout, command=None, force=False):
    """Register the hook; returns the exit code.

    The settings file is merged under the installers' lock and replaced
    only if nobody wrote it meanwhile (``record.change``).  A file that
    did not exist is recorded as created (at the link's target when the
    path is a dotfiles symlink), so uninstall can take it away again.
    """
    path = settings_path(runner, project)
    command = command or hook_command(runner)
    real = os.path.realpath(path)
    mode = 0o644
    keys = []

    def change(raw):
        nonlocal mode
        del keys[:]
        new, mode = plan_install(runner, path, command, force, decode_text(raw, path), keys)
        return new

    if dry_run:  # the real run's change, written nowhere
        try:
            _, new, _ = record.change(path, change, dry_run=True)
        except Edited as exc:
            return _kept(runner, path, str(exc), out)
        out.write("%s: already installed in %s\n" % (runner, path) if new is None else fileutil.would(path, new))
        return 0
    with fileutil.install_lock():
        try:
            raw, new, saved = record.change(path, change)
        except Edited as exc:
            return _kept(runner, path, str(exc), out)
        if new is None:
            out.write("%s: already installed in %s\n" % (runner, path))
            return 0
        _note(runner, real, raw, new, saved, keys, command)
        if mode & 0o111:
            os.chmod(real, os.stat(real).st_mode | 0o111)
    if saved:
        out.write("backed up %s to %s\n" % (path, saved))
    out.write("installed the %s hook in %s\n  command: %s\n" % (runner, path, command))
    if RECORDS[runner].get("start"):
        out.write("  on %s: %s  (starts the semantic helper)\n" % (RECORDS[runner]["start"],
                                                                warm_command(command, runner)))
    out.write("  %s\n" % RECORDS[runner]["note"])
    _warm(runner, project, out)
    return 0


def _note(runner, real, raw, new, saved, keys, command):
    # What uninstall needs to restore: the keys added, the text written and
    # the file before; and the digest of the command registered, the one
    # hook command doctor will run from that file.  A re-install over our
    # own untouched write keeps the first install's record; over a file
    # changed since, the byte-exact restore is off (the backup no longer
    # says what to go back to); over a file without our hook, the old
    # record is dropped.
    # Our hook gone (taken out by hand): this install starts afresh.
    fresh = raw is None or _our_command(runner, decode_text(raw, real)) is None
    record.note(real, runner, raw, new, saved, made=keys, fresh=fresh, command=fileutil.digest(command))


def uninstall(runner, project=None, dry_run=False, out=sys.stdout):
    """Remove our hook; returns the exit code.

    A file install created (and nothing else was put in since) is deleted
    with the folders made for it; a symlinked file is changed at its
    target, and the link itself is never removed.
    """
    path = settings_path(runner, project)
    real = os.path.realpath(path)
    linked = os.path.islink(path)
    state = {}

    def unplan(raw, rec):
        old = decode_text(raw, path)
        # Containers install did not add stay, even empty (no record: an
        # older install; the emptied ones go, as they always did).
        keep = () if rec is None else tuple(k for k in ("hooks", "event", "start")
                                            if k not in (rec.get("made") or ()))
        new = plan_uninstall(runner, path, old, keep)
        state.clear()
        state.update(old=old, new=new)
        return new

    def unreadable(exc, rec):
        # No reason to stop: the hook is taken out as without a backup.
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not a regular file"
        state["backup"] = ("%s: restoring %s byte for byte needs the backup %s, which cannot be read (%s); "
                           "the hook is taken out of it instead\n" % (runner, path, rec["backup"], why))

    def settle(new):
        made = state["made"] = record.created_folders(path)
        if new == "" and linked and made is None:
            raise Refused("%s links to %s, which holds only skill-retrieve's hook and was there "
                          "before install; left both in place - delete them yourself" % (path, real))
        if new == "" or (made is not None and kind(runner) == "json" and parse_settings(new, path) == {}):
            # Ours alone, or a file install created and nothing else was put
            # in since: uninstall leaves what was there before, nothing.
            return fileutil.DELETE
        return new

    exact = (lambda text: _restorable(runner, path, text)) if kind(runner) == "json" else False
    with record.locked(dry_run):
        # The real run's change (byte-exact restore, a created file
        # deleted, containers kept); a dry run writes it nowhere.
        # disown: a file kept loses the record of having been created too:
        # whoever put the rest in it owns it now.
        _, new, saved, _ = record.undo(path, runner, unplan, dry_run, exact, settle, unreadable, disown=True)
        out.write(state.get("backup", ""))
        if new is not None and dry_run:
            out.write("would remove the %s hook from %s\n%s" % (runner, path, fileutil.would(path, new)))
            return 0
        if new is not None:
            return _uninstalled(runner, path, real, new, saved, state.get("made"), out)
    if kind(runner) == "script" and state.get("old") is not None:
        out.write("%s is not skill-retrieve's hook; left unchanged\n" % path)
    else:
        out.write("%s: no skill-retrieve hook in %s; nothing to remove\n" % (runner, path))
    return 0


def _uninstalled(runner, path, real, new, saved, made, out):
    # After uninstall's write (``record.undo`` forgot its entry and the
    # created record): say what happened (``made``: the folders made for
    # a file install created).
    if saved:  # none when the bytes were this command's own (fileutil.update)
        out.write("backed up %s to %s\n" % (path, saved))
    if new is fileutil.DELETE:  # and the folders made for it gone with it (record.change)
        shown = path if real == os.path.abspath(path) else "%s (the target of %s)" % (real, path)
        out.write("removed the %s hook: deleted %s (install had created it)\n" % (runner, shown)
                  if made is not None else "removed the %s hook: deleted %s\n" % (runner, shown))
        return 0
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
        out.write("would %s the Hermes plugin in %s%s\n" % (
            command, home, " (creating it: no Hermes home is there yet)"
            if command == "install" and not os.path.isdir(home) else ""))
        return 0
    try:
        msg = (hermes_install.install if command == "install" else hermes_install.uninstall)(home)
    except Refused as exc:
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
    last = parser.prog.split()[-1]
    parser.add_argument("runner", choices=RUNNERS, metavar="RUNNER", nargs="?" if last == "uninstall" else None,
                        help="one of: " + ", ".join(RUNNERS))
    if last == "uninstall":
        parser.add_argument("--all", action="store_true", help="uninstall from every runner")
        parser.add_argument("--purge", action="store_true",
                            help="with --all: then delete the index cache and log, the backups and records, "
                                 "and the roots file, after listing them")
    parser.add_argument("--project", metavar="DIR",
                        help="use the project's settings file instead of the user's")
    parser.add_argument("--dry-run", action="store_true", help="show what would change; write nothing")
    if parser.prog.split()[-1] == "install":
        parser.add_argument("--force", action="store_true",
                            help="replace a hook entry or plugin file of ours you edited with the default")


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
        return install(runner, args.project, args.dry_run, force=getattr(args, "force", False))
    except Refused as exc:
        sys.stderr.write("skill-retrieve: %s\n" % exc)
        return 1
    except OSError as exc:
        sys.stderr.write("skill-retrieve: cannot update %s: %s\n"
                         % (exc.filename or "the settings file", exc.strerror or exc))
        return 1
