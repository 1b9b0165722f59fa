"""Work that outlives the answer: detached children, the build lock and
the freshness stamp.

The query path forks a detached child to check freshness after it has
answered, and a hook whose index is not ready builds it in one (see
``service``).  The child is in its own session with stdio on /dev/null:
a runner kills a hook that overruns and never waits for our children, so
the child survives the kill and the runner sees EOF at once.

Imported only when such work is due, so a query that finds its stamp
young never loads it.
"""

import posix
import sys

from retriever import locate, settings


def revalidate_detached(path):
    """Fork a detached child that rebuilds the index at ``path`` if its
    skills changed or it is damaged, unless another builder of it holds
    its lock.  The stamp records the check at once.  A file not ours
    holding the lock's name is ignored: it stops no check (the check
    runs without the lock)."""
    touch_stamp(path)
    lock_file = lock_path(path)
    holder = lock(lock_file)
    if holder == FOREIGN:
        lock_file = None
    elif holder:
        return  # a revalidator or a hook's build of this index is under way

    def body():
        try:
            locate.enable_site()
            background_revalidate(path)
        finally:
            if lock_file:
                unlink(lock_file)
        return True

    pid = detach(body)
    if lock_file is None:
        return
    if pid:
        write_pid(lock_file, pid)
    else:
        unlink(lock_file)


def background_revalidate(index_path):
    """Body of the detached child the query path forks: revalidate, log
    any rebuild, never print (stdout and stderr are /dev/null here)."""
    import time
    try:
        t0 = time.perf_counter()
        from retriever.build import revalidate
        reason = revalidate(index_path)
        took = time.perf_counter() - t0
        if reason:
            locate.log("rebuilt %s in background (%s, %.2fs)" % (index_path, reason, took))
        else:
            back_off(index_path, took)
    except Exception as exc:  # a background check must never surface
        locate.log("background revalidation of %s failed: %s: %s" % (index_path, type(exc).__name__, exc))


def back_off(index_path, took):
    """Space checks out on large libraries: a check that took ``took``
    seconds is not repeated for 20 times that (8 ms at 300 skills changes
    nothing; 0.5 s at 20,000 skills means at most one check per 10 s).  The
    query path reads only the stamp's mtime, so the stamp is dated ahead."""
    if locate.env("SKILL_RETRIEVAL_REVALIDATE").strip():
        return  # an explicit interval is the user's call
    stamp = locate.stamp_path(index_path)
    import time
    delay = 20.0 * took - settings.TABLE["SKILL_RETRIEVAL_REVALIDATE"][1]
    if delay > 0:
        try:
            t = time.time() + delay
            posix.utime(stamp, (t, t))
        except OSError:
            pass



def detach(body):
    """Run ``body()`` in a detached child; returns its pid to the parent
    (0 when fork failed).  The child never returns: it exits 0 when
    ``body`` returned true, 1 otherwise (exceptions included)."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        pass
    try:
        pid = posix.fork()
    except OSError:
        return 0
    if pid:
        return pid
    code = 1
    try:
        posix.setsid()
        fd = posix.open("/dev/null", posix.O_RDWR)
        for n in (0, 1, 2):
            posix.dup2(fd, n)
        code = 0 if body() else 1
    except BaseException:
        pass
    posix._exit(code)


# A lock older than this is taken over even if its holder lives: a build
# that overruns (far above a 100,000-skill build) must not block the next.
LOCK_STALE_AFTER = 600.0
BEING_TAKEN = -1  # lock(): another process created it and is writing its pid this instant
CANNOT = -2  # lock(): it cannot be taken here (the folder cannot be written)
FOREIGN = -3  # lock(): a file this user did not make holds its name (never read, never removed)


def lock_path(index_path):
    """The build lock of the index at ``index_path`` (``locate.side_path``:
    never in a folder where someone else could plant one)."""
    return locate.side_path(index_path, ".building")


def lock(path):
    """Take the lock file at ``path``: 0 when taken, else the pid of the
    live process holding it, BEING_TAKEN (its pid is being written this
    instant), CANNOT (the folder cannot be written: nothing could be
    built there anyway) or FOREIGN (the name is held by a file this user
    did not make).  The folder is created first, so the first two prompts of a
    new cache do not both build.  A lock whose holder is gone, or older
    than LOCK_STALE_AFTER, is taken over; so is one holding the pid of
    another user's process (ours died, and its pid was reused)."""
    try:
        _makedirs(path.rsplit("/", 1)[0])
    except OSError:
        return CANNOT
    for _ in range(3):
        try:
            fd = posix.open(path, posix.O_WRONLY | posix.O_CREAT | posix.O_EXCL | posix.O_NOFOLLOW, 0o600)
        except FileExistsError:
            try:
                if not locate.own_file(posix.lstat(path)):
                    return FOREIGN  # planted, or a link: never read, never removed
            except OSError:
                continue  # gone meanwhile
            pid = read_pid(path)
            held = age(path)
            if held > LOCK_STALE_AFTER:
                unlink(path)
                continue
            if pid:
                try:
                    posix.kill(pid, 0)
                    return pid
                except ProcessLookupError:
                    pass
                except PermissionError:
                    pass  # another user's process: not the build that wrote this lock
            elif held < 5.0:
                return BEING_TAKEN
            unlink(path)
            continue
        except OSError:
            return CANNOT
        try:
            posix.write(fd, b"%d\n" % posix.getpid())
        finally:
            posix.close(fd)
        return 0
    return BEING_TAKEN


def _makedirs(folder):
    # os.makedirs without importing os (hot path).
    if not folder or locate.isdir(folder):
        return
    _makedirs(folder.rsplit("/", 1)[0])
    try:
        posix.mkdir(folder, 0o700)
    except FileExistsError:
        pass


def read_pid(path):
    """The pid written in a lock file, or 0."""
    try:
        fd = posix.open(path, posix.O_RDONLY | posix.O_NONBLOCK | posix.O_NOFOLLOW)
    except OSError:
        return 0
    try:
        raw = posix.read(fd, 32)
    except OSError:
        raw = b""
    finally:
        posix.close(fd)
    try:
        return int(raw.decode("ascii").strip() or 0)
    except ValueError:
        return 0


def write_pid(path, pid):
    """Record the holder of a lock taken with ``lock``."""
    try:
        fd = posix.open(path, posix.O_WRONLY | posix.O_TRUNC | posix.O_NOFOLLOW)
    except OSError:
        return
    try:
        posix.write(fd, b"%d\n" % pid)
    finally:
        posix.close(fd)


def age(path):
    """Seconds since ``path`` was modified (0 when it is gone)."""
    import time
    try:
        return time.time() - posix.stat(path).st_mtime
    except OSError:
        return 0.0


def unlink(path):
    """Remove ``path`` if it exists."""
    try:
        posix.unlink(path)
    except OSError:
        pass


def touch_stamp(index_path):
    """Record a freshness check now."""
    p = locate.stamp_path(index_path)
    flags = posix.O_WRONLY | posix.O_CREAT | posix.O_NONBLOCK | posix.O_NOFOLLOW
    try:
        # Never follow a link or block on a FIFO someone put at this name.
        try:
            fd = posix.open(p, flags, 0o600)
        except FileNotFoundError:  # a side folder not made yet (locate.side_path)
            _makedirs(p.rsplit("/", 1)[0])
            fd = posix.open(p, flags, 0o600)
        try:
            if locate.own_file(posix.fstat(fd)):
                posix.utime(fd)
        finally:
            posix.close(fd)
    except OSError:
        pass
