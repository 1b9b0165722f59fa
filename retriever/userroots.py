"""Skill folders the user named once, used beside the default roots.

Two places name them, read in this order:
  SKILL_RETRIEVAL_ROOTS   folders separated by ``:`` (``os.pathsep``)
  the roots file          ``$XDG_CONFIG_HOME/skill-retrieval/roots``, one
                          folder per line, ``#`` comments; written by
                          ``skill-retrieve roots add|remove``

``remembered`` is the one function every front end goes through: the
default roots of the command line (``discover.default_roots``), the key of
the default index (``service.index_path``), each runner's hook
(``runners.hook.roots_for``) and the Hermes plugin.  Without it, a
``build --root ~/skills`` was forgotten by the next plain query, which then
printed nothing and said nothing.

Hot path: read on every query over the default roots, so built-in modules,
``locate`` and ``settings`` only.
"""

from retriever import locate, settings

SEP = ":"  # os.pathsep on every POSIX system; the query path does not import os


def path():
    """The roots file: ``$XDG_CONFIG_HOME/skill-retrieval/roots``, else
    ``~/.config/skill-retrieval/roots``."""
    base = locate.env("XDG_CONFIG_HOME") or locate.home() + "/.config"
    return locate.abspath(base) + "/skill-retrieval/roots"


def from_env():
    """The folders in SKILL_RETRIEVAL_ROOTS, absolute, in order."""
    raw = settings.get("SKILL_RETRIEVAL_ROOTS")
    return [locate.abspath(p.strip()) for p in raw.split(SEP) if p.strip()]


def problem():
    """One line naming the roots file when it is there but cannot be read
    (a FIFO, a folder, a symlink loop), else None.  Queries and hooks read
    such a file as empty, silently (``from_file``); ``doctor`` and ``roots
    list`` say why.  Cold path: the import is the caller's only."""
    from retriever import fileutil
    try:
        fileutil.read_text(path(), errors="replace")
    except fileutil.Unreadable as exc:
        return str(exc)
    return None


def from_file(file=None):
    """The folders in the roots file, absolute, in order ([] without one)."""
    raw = locate.read_bytes(file or path())
    out = []
    for line in (raw or b"").decode("utf-8", "surrogateescape").splitlines():
        line = line.strip()
        # No folder name holds a NUL byte (and stat raises ValueError on one).
        if line and not line.startswith("#") and "\0" not in line:
            out.append(locate.abspath(line))
    return out


def remembered(existing=True):
    """Every remembered folder, environment first, without repeats; only
    the ones that are folders now unless ``existing`` is false."""
    seen = set()
    out = []
    for p in from_env() + from_file():
        if p in seen or (existing and not locate.isdir(p)):
            continue
        seen.add(p)
        out.append(p)
    return out


# ---------------------------------------------------------- changing the file
#
# The file says "Edit freely": add and remove change only the lines they
# add or drop, and keep every other byte (comments, entries commented out
# for now, blank lines, ``~/x`` spelling, bytes that are not UTF-8).  They
# write through ``fileutil.update``: under the installers' lock, backed up,
# replaced atomically.

_HEADER = ("# Skill folders skill-retrieve uses beside the default ones, one per line.\n"
           "# Edit freely, or use: skill-retrieve roots add|remove DIR\n")


def _entry(line):
    # The folder a line of the file names (absolute), or None.
    line = line.strip()
    return locate.abspath(line) if line and not line.startswith("#") else None


def _edit(edit):
    # Run ``edit(text)`` (the file as text, None when there is none) on
    # the roots file; it returns the new text or None to leave it alone.
    from retriever import fileutil

    def change(raw):
        return edit(None if raw is None else raw.decode("utf-8", "surrogateescape"))
    fileutil.update(path(), change)


def _norm(folder):
    import os
    return os.path.abspath(os.path.expanduser(folder))


def add(folders):
    """Append ``folders`` (made absolute) to the roots file, one line each,
    leaving its other lines as they are; returns the ones that were not
    there yet."""
    new = []

    def edit(text):
        have = {_entry(line) for line in (text or "").splitlines()}
        new[:] = [f for f in dict.fromkeys(_norm(f) for f in folders) if f not in have]
        if not new:
            return None
        if text is None:
            text = _HEADER
        elif text and not text.endswith(("\n", "\r")):
            text += "\n"  # the last line had no end: the new one starts its own
        return text + "".join(f + "\n" for f in new)
    _edit(edit)
    return new


def remove(folders):
    """Drop the lines naming ``folders`` from the roots file, leaving the
    others as they are; returns the folders removed."""
    gone = set(_norm(f) for f in folders)
    removed = []

    def edit(text):
        lines = (text or "").splitlines(True)
        kept = [line for line in lines if _entry(line) not in gone]
        removed[:] = [_entry(line) for line in lines if _entry(line) in gone]
        return "".join(kept) if removed else None
    _edit(edit)
    return list(dict.fromkeys(removed))
