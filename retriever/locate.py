"""Where things live (the index, its stamp, the log, the venv's
site-packages), computed without importing ``os``.

The default index sits in the per-user cache, keyed by the roots it covers
(and the Hermes platform, which changes the disabled set), so different
skill sets never overwrite each other.  Used by the query path, so it leans
on the built-in ``posix`` module only.
"""

import posix


def env(name, default=""):
    """An environment variable as str (posix.environ has bytes keys)."""
    v = posix.environ.get(name.encode())
    return v.decode("utf-8", "surrogateescape") if v is not None else default


def home():
    """The user's home folder."""
    h = env("HOME")
    if h:
        return h
    import os
    return os.path.expanduser("~")


def abspath(p):
    """Absolute form of ``p``, ``~`` expanded, without touching the disk."""
    if p.startswith("~"):
        p = home() + p[1:]
    if not p.startswith("/"):
        p = posix.getcwd() + "/" + p
    while len(p) > 1 and p.endswith("/"):
        p = p[:-1]
    return p


def isdir(p):
    """True if ``p`` is a folder (following links)."""
    try:
        return (posix.stat(p).st_mode & 0o170000) == 0o040000
    except OSError:
        return False


def not_a_folder(p):
    """Why ``p`` cannot be a skill folder ("no such folder", "a file, not a
    folder ..."), or None when it is a folder (following links).  A file
    is named as one: "no such folder" for a path that exists sends the
    user looking for a typo that is not there."""
    try:
        mode = posix.stat(p).st_mode
    except OSError:
        return "no such folder"
    if (mode & 0o170000) == 0o040000:
        return None
    return "a file, not a folder (give the folder that holds your skill folders)"


def read_bytes(path):
    """The whole of a small regular file, or None when it cannot be read.
    Opened without blocking and only read when it is a regular file: a
    FIFO or a folder put where a settings file goes must not hang or crash
    every query and hook (they treat it as absent)."""
    try:
        fd = posix.open(path, posix.O_RDONLY | posix.O_NONBLOCK | posix.O_CLOEXEC)
    except OSError:
        return None
    try:
        if posix.fstat(fd).st_mode & 0o170000 != 0o100000:
            return None
        chunks = []
        while True:
            b = posix.read(fd, 1 << 16)
            if not b:
                break
            chunks.append(b)
    except OSError:
        return None
    finally:
        posix.close(fd)
    return b"".join(chunks)


def cache_dir():
    """``$XDG_CACHE_HOME/skill-retrieval``, else ``~/.cache/skill-retrieval``."""
    base = env("XDG_CACHE_HOME") or home() + "/.cache"
    return abspath(base) + "/skill-retrieval"


def hermes_home(environ=None):
    """``$HERMES_HOME`` or ``~/.hermes``, absolute; from ``environ`` (a
    str mapping) when given, else from the process environment."""
    raw = environ.get("HERMES_HOME") if environ is not None else env("HERMES_HOME")
    return abspath(raw or "~/.hermes")


def in_project(root):
    """True when the root dict ``root`` is a skills folder found inside a
    project (``<project>/.claude/skills``, ``.agents/skills`` ...: what a
    cloned repository ships), not one the user declared: its source says
    "project" (runners/skillsets.py, discover.default_roots)."""
    return "project" in (root.get("source") or "")


def root_key(root):
    """A root's identity: its absolute path, plus its naming and hiding
    rules when it has any (a runner's skill set, see runners/skillsets.py).
    ``root`` is a path or a root dict; a plain folder keys as its path, so
    the rules never change the key of an ordinary ``--root``."""
    if not isinstance(root, dict):
        return abspath(root)
    key = abspath(root["path"])
    naming, hide, prefix = root.get("naming") or "", bool(root.get("hide_manual")), root.get("prefix") or ""
    depth, require = root.get("max_depth"), ",".join(root.get("require") or ())
    if naming or hide or depth is not None or require:
        key += "\1naming=%s\1prefix=%s\1hide=%d\1depth=%s\1require=%s" % (naming, prefix, hide, depth, require)
    return key


def spec_key(roots, platform, only_hermes=False, hermes_dir=None, remembered=()):
    """A short stable key for a root list (or the default roots, with the
    folders the user named, ``remembered``), and for the Hermes config the
    build applies (``hermes_dir``, else ``$HERMES_HOME``): the same roots
    with and without it are two indexes; one skill set, one key."""
    if roots:
        parts = ["roots"] + [root_key(r) for r in roots]
        if hermes_dir or env("HERMES_HOME"):
            parts.append("config=" + abspath(hermes_dir or hermes_home()))
    elif only_hermes:
        parts = ["hermes", abspath(hermes_dir or hermes_home())]
    else:
        # The inputs default_roots() reads; folders that may or may not
        # exist are keyed only when they do, so running from a different
        # project folder does not create a new index for nothing.
        parts = ["default", abspath(hermes_dir or hermes_home()), home()]
        proj = env("CLAUDE_PROJECT_DIR")
        if proj and isdir(proj + "/.claude/skills"):
            parts.append("claude-project=" + abspath(proj))
        cwd = posix.getcwd()
        if isdir(cwd + "/.agents/skills"):
            parts.append("agents-project=" + cwd)
    if not roots:
        parts += ["remembered=" + r for r in remembered]
    parts.append("platform=" + (platform or ""))
    return fnv64("\0".join(parts))


def default_index_path(roots, platform, only_hermes=False, hermes_dir=None, remembered=()):
    """The cache path of the index for these roots."""
    return "%s/index-%s.skr" % (cache_dir(), spec_key(roots, platform, only_hermes, hermes_dir, remembered))


def fnv64(s):
    """A short stable key for ``s``: its 64-bit FNV-1a hash as 16 hex digits."""
    h = 0xCBF29CE484222325
    for b in s.encode("utf-8", "surrogateescape"):
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def stamp_path(index_path):
    """The file whose mtime records the last freshness check of an index."""
    return side_path(index_path, ".checked")


# ------------------------------------------------ files the product made
#
# The product removes or trusts only what it made, in places only the user
# controls (docs/hostile-input.md): the side files of an index (its reuse
# store, build lock, freshness stamp, verified memo, vectors, temp files)
# and the warm helper's socket and FIFOs.  Before one is read or removed:
# the right file type, owned by the user, not writable by others, in a
# folder the user owns that others cannot write.


def private_dir(folder):
    """True when ``folder`` is a folder of this user that neither its
    group nor others can write (following links: ``~/.cache`` may be one)."""
    try:
        st = posix.stat(folder or "/")
    except OSError:
        return False
    return (st.st_mode & 0o170000) == 0o040000 and st.st_uid == posix.getuid() and not st.st_mode & 0o022


def remove_dead_temps(path, tag=".tmp-"):
    """Remove the temp files ``<path><tag><pid>[-...]`` that a writer left
    when it was killed before its rename (session memory, the installers'
    writes): regular files of this user whose pid is no live process.  A
    live pid's (its own, or a reused one's) stays for its writer.  Only in
    a folder nobody else can write (``private_dir``), so no name can be
    swapped under us.  Never raises."""
    folder, _, name = path.rpartition("/")
    folder = folder or "/"
    if not private_dir(folder):
        return
    head = name + tag
    try:
        names = [n for n in posix.listdir(folder) if n.startswith(head)]
    except OSError:
        return
    for n in names:
        pid = n[len(head):].split("-", 1)[0]
        if not pid.isdigit():
            continue
        try:
            posix.kill(int(pid), 0)
            continue  # alive
        except ProcessLookupError:
            pass
        except (OSError, OverflowError):
            continue  # alive and another user's (EPERM), or no pid at all
        try:
            st = posix.lstat(folder + "/" + n)
            if (st.st_mode & 0o170000) == 0o100000 and st.st_uid == posix.getuid():
                posix.unlink(folder + "/" + n)
        except OSError:
            pass


def side_path(index_path, suffix):
    """Where the side file ``suffix`` (".reuse", ".building", ...) of the
    index at ``index_path`` lives: beside it when its folder is private
    (``private_dir``), else in the cache's ``side`` folder under a name
    keyed by the index path.  An index in a shared folder such as /tmp
    then keeps its side files where nobody else can plant or hold one."""
    folder, _, name = index_path.rpartition("/")
    if private_dir(folder) or not _exists(folder or "/"):
        # A folder not made yet is made private, by the write of the index.
        return index_path + suffix
    return "%s/side/%s-%s%s" % (cache_dir(), fnv64(index_path), name[:64], suffix)


def _exists(path):
    try:
        posix.stat(path)
        return True
    except FileNotFoundError:
        return False
    except OSError:
        return True  # there, or unusable: not a folder we will make


def own_file(st):
    """True when the ``stat`` result ``st`` is a regular file of this user
    that neither its group nor others can write."""
    return (st.st_mode & 0o170000) == 0o100000 and st.st_uid == posix.getuid() and not st.st_mode & 0o022


def open_own(path):
    """A read-only fd for the side file ``path`` when it is ``own_file``
    in a ``private_dir``, else -1 (missing, planted or foreign: ignored).
    Never follows a link or blocks on a FIFO; the checks are made on the
    file opened, so a swap after them changes nothing."""
    if not private_dir(path.rpartition("/")[0]):
        return -1
    try:
        fd = posix.open(path, posix.O_RDONLY | posix.O_NONBLOCK | posix.O_NOFOLLOW | posix.O_CLOEXEC)
    except OSError:
        return -1
    try:
        if own_file(posix.fstat(fd)):
            return fd
    except OSError:
        pass
    posix.close(fd)
    return -1


def enable_site():
    """Make the venv's site-packages (PyYAML) importable: under -S they
    are not, and the build path needs them while the query path does not.

    Every ``.pth`` file runs as usual but this package's own editable-install
    hook (``pip install -e .``, as ``make demo`` does): this process already
    has its package first on ``sys.path``, and that hook's finder imports
    pathlib, urllib and importlib.util, 15 ms of every build, background
    freshness check and cold command."""
    import sys
    if sys.flags.no_site and "site" not in sys.modules:
        try:
            import site
            addpackage = site.addpackage

            def skip_own_editable_hook(sitedir, name, known_paths):
                if name.startswith("__editable__.skill_retrieval-"):
                    return known_paths
                return addpackage(sitedir, name, known_paths)

            site.addpackage = skip_own_editable_hook
            try:
                site.main()
            finally:
                site.addpackage = addpackage
        except Exception:
            pass


def learnt_path(index_path):
    """The user's learnt table of the index at ``index_path``
    (``retriever.learn``), in the cache folder: here so the query path can
    look for it without importing ``learn``."""
    return cache_dir() + "/learnt-" + fnv64(index_path)


def log_path():
    """The one log file for hook errors and background rebuilds."""
    return cache_dir() + "/skill-retrieval.log"


def log(line, make=True):
    """Append one timestamped line to the log; never raises.  ``make``:
    create the cache folder when missing (False: a hook's routine line
    does not pay for importing ``os``; no folder, no line)."""
    try:
        import time
        d = cache_dir()
        if not isdir(d):
            if not make:
                return
            import os
            os.makedirs(d, mode=0o700, exist_ok=True)
        # Never waits: a FIFO with no reader fails the open (ENXIO) rather
        # than hold a failing hook, and only a regular file is written.
        fd = posix.open(log_path(), posix.O_WRONLY | posix.O_APPEND | posix.O_CREAT | posix.O_NONBLOCK
                        | posix.O_CLOEXEC, 0o600)
        try:
            if posix.fstat(fd).st_mode & 0o170000 != 0o100000:
                return
            msg = "%s pid=%d %s\n" % (time.strftime("%Y-%m-%dT%H:%M:%S"), posix.getpid(),
                                       " ".join(str(line).split()))
            posix.write(fd, msg.encode("utf-8", "replace"))
        finally:
            posix.close(fd)
    except Exception:
        pass
