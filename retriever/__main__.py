"""The executable for installs without ``bin/`` (``pip install .``, pipx,
``uv tool install .``): ``python -m retriever ...``, or, as installed
hooks run it, ``PYTHON -I -S .../site-packages/retriever/__main__.py``.

Run by path under ``-S``, the interpreter skips site-packages (as
``bin/skill-retrieve`` does: every ``.pth`` file would load per prompt), so
the folder holding the package goes first on ``sys.path``.  Python before
3.11 (or without ``-I``) also puts this folder there, where
``retriever/tokenize.py`` would shadow the standard library's: it is
replaced.
"""

import sys

if __name__ == "__main__":
    import posix
    _here = __file__ if __file__.startswith("/") else posix.getcwd() + "/" + __file__
    _here = _here.rsplit("/", 1)[0]
    if sys.path and sys.path[0].rstrip("/") == _here:
        sys.path[0] = _here.rsplit("/", 1)[0]
    elif __spec__ is None:  # run by path, not with -m (which found the package already)
        sys.path.insert(0, _here.rsplit("/", 1)[0])
    # The modules a query needs, from one file, as bin/skill-retrieve
    # reads them (retriever/cli/bundle.py says why and how it stays fresh);
    # not under -m, which imported the package already.
    _root = _here.rsplit("/", 1)[0] if __spec__ is None else None
    if _root is not None:
        try:
            import marshal
            _fd = posix.open("%s/__pycache__/skill-retrieve.%s.bundle" % (_here, sys.implementation.cache_tag), posix.O_RDONLY)
            _n = int.from_bytes(posix.read(_fd, 4), "little")
            _magic, _boot, _mods = marshal.loads(posix.read(_fd, _n if 0 < _n <= 1 << 20 else 0))
            if _magic == sys.modules["_frozen_importlib_external"].MAGIC_NUMBER:
                _g = {"__name__": "retriever.cli.bundle"}
                exec(_boot, _g)
                _g["install"](_mods, _fd)
        except Exception:
            pass
    from retriever.cli.entry import run_process
    run_process(_root)
