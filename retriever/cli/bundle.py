"""The executable's module bundle: the code of every module a query or a
hook imports, in one file the executable opens at start-up.

Why: the interpreter spends about 0.1 ms per imported module finding,
stat-ing, opening and reading its ``.pyc``, whatever the module's size.
A query imports eleven of this package's modules and a hook sixteen, so
small modules with one job each would cost a whole millisecond of a
per-prompt process that answers in three.  ``bin/skill-retrieve`` (and
``retriever/__main__.py``) open this one file instead and serve those
modules from it, as CPython's frozen modules and PyOxidizer's in-memory
importer do; every other module imports the normal way.

Only what a process imports is read (one ``pread`` per module): reading
the whole file cost a query 0.2 ms of page faults for the hook's and the
semantic client's modules it never runs.  The code is compiled as
``python -OO`` compiles it, without docstrings, which nothing on these
paths reads (tests/test_architecture.py keeps them free of ``assert`` and
``__doc__``): unmarshalling costs by the object, in a process this short.

Safety is a ``.pyc``'s, made stricter: each entry records its source
file's size and modification time in nanoseconds, and a module whose
source no longer matches is imported from its source; so is a module
whose code cannot be read back (a damaged file).  After answering, a
process that imported any bundled module the normal way (no bundle yet,
a source edited, a new interpreter) writes a fresh bundle beside the
``.pyc`` files, atomically (``bundler.py``); where those cannot be
written (a read-only install, ``python -B``) nothing is written and
imports stay normal.

The file is ``retriever/__pycache__/skill-retrieve.<cache tag>.bundle``:
a 4-byte little-endian length, the ``marshal`` of ``(magic, boot code,
{module: entry})`` in that many bytes, then each module's code.  The
executable runs the boot code (this module's own code, so one file holds
the whole start-up mechanism) and calls ``install``.  Nothing happens at
import.
"""

import sys

# The modules a query, a hook (every runner) and the semantic tier's client
# import, in no particular order (tests/test_architecture.py holds the
# query and hook sets to this list).  Anything else imports normally.
HOT = (
    "retriever", "retriever.cli", "retriever.cli.entry", "retriever.cli.bundle",
    "retriever.locate", "retriever.settings", "retriever.service", "retriever.store",
    "retriever.query", "retriever.decide", "retriever.analyze", "retriever.tokenize", "retriever.render",
    "retriever.message", "retriever.userroots",
    "retriever.runners", "retriever.runners.registry", "retriever.runners.hook",
    "retriever.runners.skillsets", "retriever.visibility", "retriever.jsonlite", "retriever.session",
    "retriever.usage", "retriever.learn",
    "retriever.semantic", "retriever.semantic.client", "retriever.semantic.fuse",
)
MAX_HEAD = 1 << 20  # a longer table is damage, not a bundle

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

    fd = -1  # the bundle file, open for the life of the process
    base = 0  # where the code starts in it
    modules = {}  # name -> (source, is package, mtime_ns, size, offset, length, .pyc path)
    spec = None  # importlib's ModuleSpec class
    damaged = False  # a module's code could not be read back

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        e = cls.modules.get(name)
        if e is None or not _unchanged(e):
            return None  # edited since: its source is the truth
        spec = cls.spec(name, cls, origin=e[0], is_package=e[1])
        if e[1]:
            spec.submodule_search_locations = [e[0].rsplit("/", 1)[0]]
        spec.has_location = True
        spec.cached = e[6]  # spares importlib deriving it from the source path
        return spec

    @staticmethod
    def create_module(spec):
        return None  # the default module object

    @classmethod
    def exec_module(cls, module):
        import marshal
        import posix
        e = cls.modules[module.__name__]
        try:
            code = marshal.loads(posix.pread(cls.fd, e[5], cls.base + e[4]))
            if type(code) is not type(_unchanged.__code__):
                raise ValueError("not code")
        except (OSError, ValueError, EOFError, TypeError):
            cls.damaged = True  # the source is the truth, and the bundle is written again
            with open(e[0], "rb") as f:
                code = compile(f.read(), e[0], "exec", dont_inherit=True)
        exec(code, module.__dict__)


def install(entries, fd):
    """Serve the modules of ``entries`` (``{name: (source, is package,
    mtime_ns, size, offset of its code after the table, length, .pyc
    path)}``) from ``fd``, the bundle file positioned just after its
    table, while their sources are unchanged; the others import normally.
    Called by the executable, before its first import of this package."""
    import posix
    from _frozen_importlib import ModuleSpec
    base = posix.lseek(fd, 0, 1)
    if posix.fstat(fd).st_size != base + sum(e[5] for e in entries.values()):
        return  # cut short or grown: not the file the table describes
    _Finder.fd, _Finder.base, _Finder.modules, _Finder.spec = fd, base, entries, ModuleSpec
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
    the bundle is missing, out of date, damaged or lacks a module it
    should hold."""
    if _Finder.damaged:
        return True
    for name in HOT:
        m = sys.modules.get(name)
        if m is not None and getattr(m, "__loader__", None) is not _Finder:
            return True
    return False

