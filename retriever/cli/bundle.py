"""The executable's module bundle: the code of every module a query or a
hook imports, in one file the executable reads at start-up.

Why: the interpreter spends about 0.1 ms per imported module finding,
stat-ing, opening and reading its ``.pyc``, whatever the module's size.
A query imports eleven of this package's modules and a hook sixteen, so
small modules with one job each would cost a whole millisecond of a
per-prompt process that answers in three.  ``bin/skill-retrieve`` (and
``retriever/__main__.py``) read this one file instead and serve those
modules from memory, as CPython's frozen modules and PyOxidizer's
in-memory importer do; every other module imports the normal way.

Safety is a ``.pyc``'s, made stricter: each entry records its source
file's size and modification time in nanoseconds, and a module whose
source no longer matches is imported from its source.  After answering,
a process that imported any bundled module the normal way (no bundle yet,
a source edited, a new interpreter) writes a fresh bundle beside the
``.pyc`` files, atomically; where those cannot be written (a read-only
install, ``python -B``) nothing is written and imports stay normal.

The file is ``retriever/__pycache__/skill-retrieve.<cache tag>.bundle``:
``marshal`` of ``(magic, boot code, {module: entry})``.  The executable
runs the boot code (this module's own code, so one file holds the whole
mechanism) and calls ``install``.  Nothing happens at import.
"""

import sys

# The modules a query, a hook (every runner) and the semantic tier's client
# import, in no particular order (tests/test_architecture.py holds the
# query and hook sets to this list).  Anything else imports normally.
HOT = (
    "retriever", "retriever.cli", "retriever.cli.entry", "retriever.cli.bundle",
    "retriever.locate", "retriever.settings", "retriever.service", "retriever.store",
    "retriever.query", "retriever.analyze", "retriever.tokenize", "retriever.render",
    "retriever.message", "retriever.userroots",
    "retriever.runners", "retriever.runners.registry", "retriever.runners.hook",
    "retriever.runners.skillsets", "retriever.visibility", "retriever.jsonlite",
    "retriever.semantic", "retriever.semantic.client", "retriever.semantic.fuse",
)
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


# ------------------------------------------------------------- start-up


def _unchanged(entry):
    """True when the source of a bundle entry still has the size and
    modification time the entry recorded."""
    import posix
    try:
        st = posix.stat(entry[0])
    except OSError:
        return False
    return st.st_mtime_ns == entry[2] and st.st_size == entry[3]


class _Finder:
    """A meta path finder and loader serving the bundle's fresh modules."""

    data = b""
    modules = {}  # name -> (source, is package, mtime_ns, size, offset from the end, length)
    spec = None  # importlib's ModuleSpec class

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        e = cls.modules.get(name)
        if e is None or not _unchanged(e):
            return None  # edited since: its source is the truth
        spec = cls.spec(name, cls, origin=e[0], is_package=e[1])
        if e[1]:
            spec.submodule_search_locations = [e[0].rsplit("/", 1)[0]]
        spec.has_location = True
        return spec

    @staticmethod
    def create_module(spec):
        return None  # the default module object

    @classmethod
    def exec_module(cls, module):
        import marshal
        e = cls.modules[module.__name__]
        start = len(cls.data) - e[4]
        exec(marshal.loads(memoryview(cls.data)[start:start + e[5]]), module.__dict__)


def install(entries, data):
    """Serve the modules of ``entries`` (``{name: (source, is package,
    mtime_ns, size, offset of its code from the end of data, length)}``)
    from ``data``, the bundle file's bytes, while their sources are
    unchanged; the others import normally.  Called by the executable,
    before its first import of this package."""
    from _frozen_importlib import ModuleSpec
    _Finder.data, _Finder.modules, _Finder.spec = data, entries, ModuleSpec
    if _Finder.find_spec(__name__) is None:
        return  # this mechanism itself changed: serve nothing, the next write replaces it
    sys.meta_path.insert(0, _Finder)
    # The executable asks ``stale`` after answering; this code registers
    # as the module, so that question imports nothing.
    mod = type(sys)(__name__)
    mod.__dict__.update((k, v) for k, v in globals().items() if not k.startswith("__"))
    mod.__file__, mod.__loader__ = entries[__name__][0], _Finder
    sys.modules[__name__] = mod


# ------------------------------------------------------------ after answering


def stale():
    """True when this process imported a bundled module from its source:
    the bundle is missing, out of date or lacks a module it should hold."""
    for name in HOT:
        m = sys.modules.get(name)
        if m is not None and getattr(m, "__loader__", None) is not _Finder:
            return True
    return False


def refresh(root):
    """Write a fresh bundle for the package under ``root`` if ``stale``
    (see the module docstring); quiet and harmless when the folder cannot
    be written.  Never raises."""
    try:
        if stale() and not sys.dont_write_bytecode:
            write(root)
    except Exception:  # a bundle is an optimisation, never a failure
        pass


def state(root):
    """The bundle of the package under ``root``, for ``doctor``: ``(state,
    path)``, the state one of ``fresh``; ``stale`` (a module changed since
    it was written: the next query writes it again); ``missing`` (the next
    query writes it); ``unwritable`` (no bundle, and none can be written
    here: every query imports its modules one by one)."""
    import marshal
    import os
    target = path(root)
    try:
        with open(target, "rb") as f:
            _, _, table = marshal.loads(f.read())
        for name in HOT:
            if _source(root, name) is None:
                continue
            e = table.get(name)
            if e is None or not _unchanged(e):
                return "stale", target
        return "fresh", target
    except (OSError, ValueError, EOFError, TypeError):
        pass
    folder = target.rsplit("/", 1)[0]
    writable = os.access(folder, os.W_OK) if os.path.isdir(folder) else \
        not os.path.exists(folder) and os.access(root + "/retriever", os.W_OK)
    return ("missing" if writable and not sys.dont_write_bytecode else "unwritable"), target


def write(root):
    """Compile every ``HOT`` module under ``root`` and write the bundle,
    atomically (a temporary file renamed over it).  Returns its path, or
    None when the cache folder cannot be written (checked first: a
    read-only install pays for no compiling)."""
    import marshal
    import posix
    from _frozen_importlib_external import MAGIC_NUMBER
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
            stats, codes = {}, []
            for name in HOT:
                found = _source(root, name)
                if found is None:
                    continue
                src, pkg = found
                with open(src, "rb") as sf:
                    st = posix.fstat(sf.fileno())
                    code = compile(sf.read(), src, "exec", dont_inherit=True)
                stats[name] = (src, pkg, st.st_mtime_ns, st.st_size)
                codes.append((name, marshal.dumps(code)))
            if __name__ not in stats:
                raise OSError("%s is not among the sources" % __name__)
            # The code follows the table; offsets count from the file's
            # end, so the table's own length does not matter (marshal
            # ignores what follows the object it reads).
            table, end = {}, sum(len(c) for _, c in codes)
            for name, c in codes:
                table[name] = stats[name] + (end, len(c))
                end -= len(c)
            with open(stats[__name__][0], "rb") as sf:
                boot = compile(sf.read(), stats[__name__][0], "exec", dont_inherit=True)
            f.write(marshal.dumps((MAGIC_NUMBER, boot, table)))
            for _, c in codes:
                f.write(c)
        posix.rename(tmp, target)
    except BaseException:
        try:
            posix.unlink(tmp)
        except OSError:
            pass
        raise
    return target
