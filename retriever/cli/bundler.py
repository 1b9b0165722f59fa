"""Writes the executable's module bundle (``bundle.py`` says what it is
and why) and tells ``doctor`` whether it is fresh.  Imported only when a
bundle is missing or out of date, and by ``doctor``."""

import sys

from retriever.cli.bundle import HOT, MAX_HEAD, _unchanged, stale

_NAME = "skill-retrieve.%s.bundle"


def path(root):
    """The bundle file of the package under ``root`` (the folder holding
    ``retriever``), for this interpreter."""
    return "%s/retriever/__pycache__/%s" % (root, _NAME % sys.implementation.cache_tag)


def _source(root, name):
    # (source file, is a package) of module ``name``, or None.
    import posix
    base = root + "/" + name.replace(".", "/")
    for src, pkg in ((base + "/__init__.py", True), (base + ".py", False)):
        try:
            posix.stat(src)
        except OSError:
            continue
        return src, pkg
    return None


def read_table(target):
    """The table of the bundle file ``target``: ``{module: entry}``
    (``bundle.install`` describes an entry).  Raises OSError, ValueError
    or EOFError when it cannot be read."""
    import marshal
    with open(target, "rb") as f:
        n = int.from_bytes(f.read(4), "little")
        if not 0 < n <= MAX_HEAD:
            raise ValueError("%s: not a module bundle" % target)
        _, _, table = marshal.loads(f.read(n))
    return table


def state(root):
    """The bundle of the package under ``root``, for ``doctor``: ``(state,
    path)``, the state one of ``fresh``; ``stale`` (a module changed since
    it was written, or the file is damaged or another version's: the next
    query writes it again); ``missing`` (the next query writes it);
    ``unwritable`` (no bundle, and none can be written here: every query
    imports its modules one by one)."""
    import os
    target = path(root)
    try:
        table = read_table(target)
        for name in HOT:
            if _source(root, name) is None:
                continue
            e = table.get(name)
            if e is None or not _unchanged(e):
                return "stale", target
        return "fresh", target
    except OSError:
        pass
    except (ValueError, EOFError, TypeError, IndexError):
        return "stale", target
    folder = target.rsplit("/", 1)[0]
    writable = os.access(folder, os.W_OK) if os.path.isdir(folder) else \
        not os.path.exists(folder) and os.access(root + "/retriever", os.W_OK)
    # Not this process's sys.dont_write_bytecode: the queries that write the
    # bundle run under -I, which ignores PYTHONDONTWRITEBYTECODE (a console
    # script running doctor honours it).
    return ("missing" if writable else "unwritable"), target


def _compile(src):
    # As ``python -OO`` compiles (bundle.py says why).
    with open(src, "rb") as f:
        return compile(f.read(), src, "exec", dont_inherit=True, optimize=2)


def write(root):
    """Compile every ``HOT`` module under ``root`` and write the bundle,
    atomically (a temporary file renamed over it).  Returns its path, or
    None when the cache folder cannot be written (checked first: a
    read-only install pays for no compiling)."""
    import marshal
    import posix
    from _frozen_importlib_external import MAGIC_NUMBER, cache_from_source
    target = path(root)
    tmp = "%s.%d.tmp" % (target, posix.getpid())
    try:
        posix.mkdir(target.rsplit("/", 1)[0], 0o755)
    except OSError:
        pass
    try:
        fd = posix.open(tmp, posix.O_WRONLY | posix.O_CREAT | posix.O_EXCL, 0o644)
    except OSError:
        return None
    try:
        with open(fd, "wb") as f:
            table, codes, offset, boot = {}, [], 0, None
            for name in HOT:
                found = _source(root, name)
                if found is None:
                    continue
                src, pkg = found
                st = posix.stat(src)  # before reading: an edit meanwhile makes the entry stale, not wrong
                code = _compile(src)
                if name == "retriever.cli.bundle":
                    boot = code
                c = marshal.dumps(code)
                table[name] = (src, pkg, st.st_mtime_ns, st.st_size, offset, len(c), cache_from_source(src))
                codes.append(c)
                offset += len(c)
            if boot is None:
                raise OSError("retriever/cli/bundle.py is not among the sources")
            head = marshal.dumps((MAGIC_NUMBER, boot, table))
            f.write(len(head).to_bytes(4, "little"))
            f.write(head)
            for c in codes:
                f.write(c)
        posix.rename(tmp, target)
    except BaseException:
        try:
            posix.unlink(tmp)
        except OSError:
            pass
        raise
    return target


def refresh(root):
    """Write a fresh bundle for the package under ``root`` if
    ``bundle.stale``; quiet and harmless when the folder cannot be
    written.  Never raises."""
    try:
        if stale() and not sys.dont_write_bytecode:
            write(root)
    except Exception:  # a bundle is an optimisation, never a failure
        pass
