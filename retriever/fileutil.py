"""Writing a user's files safely: backups, atomic replacement, a lock.

The installers change files that belong to the user (a runner's settings,
Hermes' config.yaml); these are the only ways they write them.  ``update``
is the one read-modify-write: under the installers' lock, backed up, and
replaced only if the file still holds what was read (another program may
rewrite it meanwhile: its change is merged, never lost).  Cold path.
"""

import contextlib
import os
import sys
import threading
import time


def state_dir(env=None):
    """Our own state folder: ``$XDG_STATE_HOME/skill-retrieval``, else
    ``~/.local/state/skill-retrieval``."""
    env = os.environ if env is None else env
    base = env.get("XDG_STATE_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"),
                                                      ".local", "state")
    return os.path.join(os.path.abspath(os.path.expanduser(base)), "skill-retrieval")


def backup_name(path):
    """The backup file name stem for ``path``: its absolute path with
    ``/`` written as ``%``, so a backup says where it came from."""
    return os.path.abspath(path).lstrip("/").replace("/", "%")


BACKUPS_KEPT = 5  # per file, besides the ones an install record names


def backup(path, data, needed=()):
    """Save ``data``, the bytes read from ``path`` (not the file as it is
    now: another program may have written it since), to
    ``<state>/backups/<path with / as %>.bak-YYYYmmdd-HHMMSS`` (never
    overwriting an earlier backup), mode 0600.  Backups never go beside the
    file: a runner that runs every file in its hooks folder (Cline) would
    run a backup too.  Only the last BACKUPS_KEPT of a file are kept, and
    those in ``needed`` (``prune_backups``).  Returns the backup's path."""
    folder = os.path.join(state_dir(), "backups")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = os.path.join(folder, backup_name(path))
    dest = "%s.bak-%s" % (base, stamp)
    # Past the highest number taken this second: a name freed by pruning
    # is not taken again, so names keep the order backups were made in.
    head = os.path.basename(dest) + "-"
    n = 1 + max([int(f[len(head):]) for f in os.listdir(folder)
                 if f.startswith(head) and f[len(head):].isdigit()] or [0])
    if n > 1:
        dest = "%s-%d" % (dest, n - 1)
    # Written whole under a temp name, then linked to its name (which
    # fails on a name taken, as O_EXCL did): a writer killed midway leaves
    # a temp file the next backup sweeps, never a truncated backup that
    # uninstall would restore.
    from retriever import locate
    locate.remove_dead_temps(base + ".bak")
    tmp = "%s.bak.tmp-%d-%d" % (base, os.getpid(), threading.get_ident())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        while True:
            try:
                os.link(tmp, dest)
                break
            except FileExistsError:
                dest = "%s.bak-%s-%d" % (base, stamp, n)
                n += 1
    finally:
        os.unlink(tmp)
    prune_backups(path, needed=needed)
    return dest


def _backup_order(name, stem):
    # "<stem>YYYYmmdd-HHMMSS[-N]" in the order they were made (the name
    # alone would put "-10" before "-2").
    parts = name[len(stem):].split("-") + ["", "", ""]
    return (parts[0], parts[1], int(parts[2]) if parts[2].isdigit() else 0, name)


def prune_backups(path, keep=BACKUPS_KEPT, needed=()):
    """Delete the backups of ``path`` but the last ``keep``, and but the
    ones named in ``needed`` (file names: those the install record names,
    which uninstall restores from).  Never raises: a backup left is only
    space."""
    folder = os.path.join(state_dir(), "backups")
    stem = backup_name(path) + ".bak-"
    try:
        names = sorted((f for f in os.listdir(folder) if f.startswith(stem)), key=lambda f: _backup_order(f, stem))
    except OSError:
        return
    for f in names[:max(0, len(names) - keep)]:
        if f not in needed:
            try:
                os.unlink(os.path.join(folder, f))
            except OSError:
                pass


class Refused(Exception):
    """The one refusal of every installer: the file was left unchanged;
    the message says why, in one line, and ``hint`` (also in the message,
    after " - ", when given apart) what the user can do.  Its subclasses
    only name the cause; callers catch this class."""

    def __init__(self, message="", hint=None):
        super().__init__("%s - %s" % (message, hint) if hint else message)
        self.hint = hint if hint else (str(message).split(" - ", 1)[1] if " - " in str(message) else None)




class ReadOnly(Refused):
    """The file exists and its owner may not write it: left unchanged."""


class NotAFile(Refused):
    """The path names a FIFO, a folder, a device or a socket, not a file:
    reading a FIFO would wait forever, so it is never opened."""


def _kind(mode):
    # What a path that is not a regular file is, in words.
    import stat
    return ("a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else
            "a socket" if stat.S_ISSOCK(mode) else "a device")


class InTheWay(Refused):
    """A file (a FIFO, a symlink loop) stands where a folder above the
    path should be, so the path cannot be there: left unchanged."""


def in_the_way(path):
    """One line naming what stands where a folder above ``path`` should be
    ("~/Documents/Cline/Hooks is a file, not a folder: ... cannot be in
    it"), else None.  Asked only once opening ``path`` failed (ENOTDIR,
    ELOOP): "cannot read .../Hooks/UserPromptSubmit (Not a directory)"
    named a file that is not there, not the one in the way."""
    import errno
    import stat
    d = os.path.dirname(os.path.abspath(path))
    while d != "/":
        if os.path.lexists(d):
            if os.path.isdir(d):
                return None
            try:
                mode = os.stat(d).st_mode
                what = "a file" if stat.S_ISREG(mode) else _kind(mode)
            except OSError as exc:
                what = "a symlink loop" if exc.errno == errno.ELOOP else "a broken link"
            return "%s is %s, not a folder: %s cannot be in it" % (d, what, path)
        d = os.path.dirname(d)
    return None


def refuse_special(path):
    """NotAFile when ``path`` exists (through links) and is not a regular
    file; InTheWay when a file stands where a folder above it should be."""
    import stat
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except OSError:
        blocked = in_the_way(path)
        if blocked:
            raise InTheWay("%s; left unchanged - move it away, then try again" % blocked) from None
        raise
    if not stat.S_ISREG(mode):
        raise NotAFile("%s is %s, not a file; left unchanged" % (path, _kind(mode)))


def refuse_read_only(path):
    """ReadOnly when ``path`` exists without write permission for its owner
    (a 0444 settings file is someone's decision, root or not)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    if not mode & 0o200:
        raise ReadOnly("%s is read-only (mode %o); left unchanged - make it writable (chmod u+w) "
                       "to change it" % (path, mode & 0o7777))


def remove_folders(folders):
    """Remove ``folders`` (deepest first) while they are empty: one that
    is not is someone else's now, and so are the ones above it."""
    for d in folders or ():
        try:
            os.rmdir(d)
        except OSError:
            break


def digest(data):
    """sha256 hex of ``data`` (bytes or text as UTF-8)."""
    import hashlib
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


def missing_parents(path):
    """The folders above ``path`` that do not exist yet, deepest first."""
    out = []
    d = os.path.dirname(os.path.abspath(path))
    while d and d != "/" and not os.path.exists(d):
        out.append(d)
        d = os.path.dirname(d)
    return out


def write_atomic(path, text, mode=None, expect=False):
    """Write ``text`` via a temp file and rename, keeping the old file's
    permissions (or ``mode`` for a new file).  A symlinked file (dotfiles)
    is written at its target, so the link and what it points to survive.

    With ``expect`` (the bytes read before, None for "absent") the rename
    happens only if the file still holds them; returns False, writing
    nothing, when another program changed it meanwhile."""
    if os.path.islink(path):
        path = os.path.realpath(path)
    d = os.path.dirname(path)
    os.makedirs(d, exist_ok=True)
    try:
        mode = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o644 if mode is None else mode
    # pid and thread: two writers in one process must not share a temp file.
    # Those of writers killed before their rename are swept first.
    from retriever import locate
    locate.remove_dead_temps(path)
    tmp = "%s.tmp-%d-%d" % (path, os.getpid(), threading.get_ident())
    try:
        # surrogateescape: text decoded that way (a user's file holding
        # bytes that are not UTF-8) is written back byte for byte.
        with open(tmp, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        if expect is not False and read_bytes(path) != expect:
            return False
        os.replace(tmp, path)
        return True
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def read_bytes(path):
    """The bytes of ``path`` (through a symlink), None when there is no
    file; NotAFile for a FIFO, folder, device or socket (opened without
    blocking, so a FIFO put there never stalls the installer)."""
    import stat
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        refuse_special(path)
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            refuse_special(path)
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read()
    finally:
        os.close(fd)


class Unreadable(Refused):
    """A file that is there but cannot be read as text: a FIFO, a folder,
    a device or a socket, a symlink loop, no permission, or bytes that are
    not UTF-8.  The message is one line naming the file."""


def read_text(path, errors="strict"):
    """The text of ``path`` (through a symlink), for looking only: None
    when there is no file (a dangling link included); Unreadable, with one
    line naming it, for anything that cannot be read as UTF-8 text
    (``errors="replace"``: any bytes of a regular file will do, for a file
    that may be a program).  Never blocks: a FIFO is refused before it is
    opened for reading.  A BOM is dropped.  The one reader of a runner's
    files and of our records for the read-only commands (doctor, tokens,
    status)."""
    try:
        raw = read_bytes(path)
    except NotAFile:
        try:
            kind = _kind(os.stat(path).st_mode)
        except OSError:
            kind = "not a file"
        raise Unreadable("%s is %s, not a file" % (path, kind)) from None
    except OSError as exc:
        raise Unreadable(in_the_way(path) or "cannot read %s (%s)" % (path, exc.strerror or exc)) from None
    if raw is None:
        return None
    try:
        return raw.decode("utf-8-sig", errors)
    except UnicodeDecodeError as exc:
        raise Unreadable("%s is not UTF-8 text (at byte %d)" % (path, exc.start)) from None


# ---------------------------------------------------- read-modify-write


class Busy(Refused):
    """The file could not be updated: another program kept it locked or
    kept changing it.  The message is one line."""


DELETE = object()  # returned by an ``update`` change: remove the file

_lock_depth = threading.local()
LOCK_WAIT = 15.0  # seconds an installer waits for another one


@contextlib.contextmanager
def install_lock(wait=None):
    """Hold the installers' lock: ``<state>/install.lock``, taken with
    flock.  Every install and uninstall of ours (any runner, any file, any
    process) runs under it, so they never interleave, and the records in
    the state folder stay whole.  Re-entrant within a thread; raises Busy
    after ``wait`` seconds."""
    depth = getattr(_lock_depth, "n", 0)
    if depth:
        _lock_depth.n = depth + 1
        try:
            yield
        finally:
            _lock_depth.n -= 1
        return
    folder = state_dir()
    os.makedirs(folder, mode=0o700, exist_ok=True)
    path = os.path.join(folder, "install.lock")
    # Each open is its own open file description, so the flock excludes
    # other threads of this process too.
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        _flock(fd, LOCK_WAIT if wait is None else wait,
               "another skill-retrieve install or uninstall holds %s; try again when it has finished" % path)
        # What updates write while it is held (one command): not the
        # user's bytes, never backed up (``update``).
        _lock_depth.n, _lock_depth.wrote = 1, {}
        try:
            yield
        finally:
            _lock_depth.n, _lock_depth.wrote = 0, {}
    finally:
        os.close(fd)  # releases the flock


@contextlib.contextmanager
def _file_lock(real, wait):
    # The user's file itself, flocked while it exists: a program that edits
    # it under flock (and re-checks, once it holds the lock, that the path
    # still names the file it locked, as we do) and we take turns.  Best
    # effort: a filesystem without flock is not a reason to refuse.
    deadline = time.monotonic() + wait
    while True:
        try:
            fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            yield
            return
        try:
            _flock(fd, max(0.0, deadline - time.monotonic()),
                   "%s is locked by another program; left unchanged - try again" % real)
            try:
                same = os.fstat(fd).st_ino == os.stat(real).st_ino
            except OSError:
                same = False
        except Busy:
            os.close(fd)
            raise
        except OSError:
            same = True  # no flock here: go on unlocked
        if same:
            break
        os.close(fd)  # replaced while we waited: lock the file there now
    try:
        yield
    finally:
        os.close(fd)


def _flock(fd, wait, busy):
    # An exclusive flock, polled so the wait is bounded; Busy(busy) after it.
    import fcntl
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise Busy(busy) from None
            time.sleep(0.02)


ATTEMPTS = 50


# While a dry run plans (``planning``): files {real path: bytes or None},
# shown {real path: (path as named, text or DELETE)}.
_plans = threading.local()


@contextlib.contextmanager
def planning(out=None):
    """A dry run of several updates: within it, each ``update(...,
    dry_run=True)`` reads what the updates before it would have left
    (install's and uninstall's two halves change one settings file in
    turn), so each shows what the real run will write.  Nothing is written.

    Each file is shown once, as the last update leaves it: ``would`` only
    notes it, and the outermost ``planning`` writes the notes to ``out``
    (default stdout) as it ends, in the order the files were first planned.
    Shown after each half, Claude Code's settings.json appeared twice, the
    first time without the half that came second."""
    outer = getattr(_plans, "files", None)
    if outer is None:
        _plans.files, _plans.shown = {}, {}
    try:
        yield
        if outer is None:
            (out or sys.stdout).write("".join(_would(p, new) for p, new in _plans.shown.values()))
    finally:
        if outer is None:
            _plans.files = _plans.shown = None


def would(path, new):
    """What a dry run says about an ``update`` of ``path`` that returned
    ``new`` (text or DELETE): the text it would write, or the deletion.
    Within ``planning`` it returns "" and ``planning`` says it at the end."""
    shown = getattr(_plans, "shown", None)
    if shown is not None:
        # Keyed by the file itself: the two halves may name it differently.
        real = os.path.realpath(path)
        shown[real] = (shown[real][0] if real in shown else path, new)
        return ""
    return _would(path, new)


def _would(path, new):
    if new is DELETE:
        return "would delete %s\n" % path
    return "would write %s:\n%s" % (path, diff(path, new))


def diff(path, new):
    """``new`` against what ``path`` holds now, as a unified diff (a new
    file: every line added).  A whole settings file said too little:
    the change is what a dry run is asked to show.  A file that cannot be
    read as text shows ``new`` whole, as before."""
    import difflib
    try:
        old = read_text(path)
    except Unreadable:
        return new if new.endswith("\n") else new + "\n"
    out = []
    for line in difflib.unified_diff((old or "").splitlines(True), new.splitlines(True),
                                     path if old is not None else "/dev/null", path):
        # difflib's own marker for a last line without its newline.
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def update(path, change, wait=None, dry_run=False, needed=()):
    """Read-modify-write ``path`` safely; returns ``(old bytes or None,
    what was written: text, DELETE or None when left alone, backup path or
    None)``.

    Under the installers' lock (and a flock on the file), ``change(raw)``
    gets the file's bytes (None when there is none) and returns its new
    text, DELETE, or None to leave it.  The old bytes are backed up, then
    the new text replaces the file only if it still holds the bytes that
    were read (bytes written under the same hold of the installers' lock,
    by this command, are not backed up again); if another program wrote it meanwhile, ``change`` runs again
    on what it wrote, so neither side's edit is lost.  A symlinked file is
    changed at its target; DELETE removes the target, never the link.
    ``change`` may raise to refuse; Busy when the file never held still,
    or when the locks stayed taken for ``wait`` seconds (default
    LOCK_WAIT).

    ``needed``: backups ``prune_backups`` keeps (the install record's).

    ``dry_run``: the same ``change`` runs on the file (or on what an
    earlier update of the same ``planning`` would have left), and nothing
    is written, locked or backed up.
    """
    real = os.path.realpath(path)
    wait = LOCK_WAIT if wait is None else wait
    if dry_run:
        refuse_special(real)
        plans = getattr(_plans, "files", None)
        raw = plans[real] if plans is not None and real in plans else read_bytes(real)
        new = change(raw)
        if plans is not None and new is not None:
            plans[real] = None if new is DELETE else new.encode("utf-8")
        return raw, new, None
    with install_lock(wait):
        for _ in range(ATTEMPTS):
            refuse_special(real)  # before any open: a FIFO would block it
            with _file_lock(real, wait):
                raw = read_bytes(real)
                new = change(raw)
                if new is None:
                    return raw, None, None
                refuse_read_only(real)
                # Only bytes the user had are backed up: not a file this
                # command wrote a moment ago (install's and uninstall's two
                # halves change one settings file in turn, under one lock).
                wrote = _lock_depth.wrote
                saved = backup(path, raw, needed) if raw is not None and raw != wrote.get(real) else None
                if new is DELETE:
                    done = raw is None or _unlink_if(real, raw)
                else:
                    done = write_atomic(real, new, expect=raw)
                if done:
                    if new is DELETE:
                        wrote.pop(real, None)
                    else:
                        wrote[real] = new.encode("utf-8", "surrogateescape")
                    return raw, new, saved
                if saved:
                    os.unlink(saved)
            time.sleep(0.005)
    raise Busy("%s kept changing while it was being updated (another program is writing it); "
               "left unchanged - try again" % path)


def _unlink_if(real, raw):
    # Delete only what was read: a file rewritten meanwhile is someone's.
    if read_bytes(real) != raw:
        return False
    os.unlink(real)
    return True
