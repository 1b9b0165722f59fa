"""How a runner's module changes a file of the user's, and what it
records of the change: one way for every runner in the table
(``retriever.runners.listing``).

Every change is recorded in the one record of what install changed
(``retriever.runners.record``, entry ``listing <runner>``): which keys or
lines install added, so uninstall removes exactly those and leaves the
user's own entries (for the same keys too) alone.  A plugin file of ours
(OpenCode's, Cline's) has the digest of what install wrote recorded
(entry ``<runner>``, as the hook installer does): a copy the user edited
since is neither replaced nor deleted.  Every file is changed by
``record.change`` (under the installers' lock, backed up, replaced only if
it still holds what was read, a file it creates recorded), and a dry run
runs the very same change and writes nothing.

Cold path: imported by install, uninstall, doctor, tokens and ``sync``.
"""

import os

from retriever import fileutil
from retriever.runners import record
# One class for every installer's refusals, and for an edited file of ours.
from retriever.runners.install import Edited, Refused, decode_text

CHARS_PER_TOKEN = 4


class NoReader(Refused):
    """No reader to check an edit with (Codex's TOML needs Python 3.11):
    the edit is not made, and install says how to make it by hand."""


def read_toml(text, path, by_hand):
    """``text`` (of the TOML file ``path``) parsed, to check an edit
    with: NoReader (``by_hand`` says what to add by hand) without
    ``tomllib`` (Python < 3.11), Refused when it is not valid TOML."""
    try:
        import tomllib
    except ImportError:
        raise NoReader("editing %s needs Python 3.11 or newer (tomllib) to check the result; %s" % (path, by_hand))
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise Refused("%s is not valid TOML (%s); left unchanged" % (path, exc))


# ------------------------------------------------------------------ state


def record_of(runner, path):
    """What install added to ``path`` for ``runner``'s names-only (None:
    nothing)."""
    return record.entry(path, "listing " + runner)


def set_record(runner, path, rec):
    """Record ``rec`` as what install added to ``path`` for ``runner``
    (None or {}: nothing).  Called under the installers' lock, after the
    file was written."""
    record.set_entry(path, "listing " + runner, rec)


# ------------------------------------------------------------------ files


def write(path, plan, out, dry_run, wait=None, book=None):
    """Change ``path`` by ``plan(old text or None)``, which returns the new
    text, ``fileutil.DELETE`` or None (leave the file) and may raise
    Refused.  Returns what was written (or, in a dry run, would be).

    ``record.change`` does the writing: under the installers' lock and a
    flock on the file, the bytes read backed up, the file replaced or
    deleted only if it still holds them, ``plan`` run again on another
    program's edit made meanwhile, and a file install creates recorded
    (deleting one removes the folders made for it; ``book``: as
    ``record.change``'s).  A dry run runs ``plan`` the same way and prints
    the outcome instead."""
    _, new, saved = record.change(path, lambda raw: plan(decode_text(raw, path, keep_bom=True)), dry_run=dry_run,
                                  wait=wait, book=book)
    return _told(path, new, saved, out, dry_run)


def _told(path, new, saved, out, dry_run):
    # Say what a write did (its backup) or, in a dry run, would do; ``new``.
    if dry_run and new is not None:
        out.write(fileutil.would(path, new))
    elif saved:
        out.write("backed up %s to %s\n" % (path, saved))
    return new


def forget(runner, path, *more):
    """Uninstall is done with ``path``: no record of what install added
    (the names-only entry, and the entries ``more``), nor of having
    created it, outlives it; one write of the record at most."""
    record.forget(path, "listing " + runner, *more, created=True)


# ------------------------------------------------------- which skills


def folders(skill_set, cwd):
    """The existing folders ``skill_set`` (a ``skillsets`` function) gives
    a hook run in ``cwd``."""
    from retriever.runners import skillsets
    return skillsets.existing(skill_set({"cwd": cwd, "workspaceRoots": [cwd]}))


def covered(roots, uncovered=()):
    """``(names the switch covers, [(name, why)] still listed in full)``:
    the skills in the folders ``roots``, and in each ``(folder, why)`` of
    ``uncovered``."""
    from retriever import skills
    names = sorted({r["name"] for r in skills.collect(roots)[0]}) if roots else []
    by_why = {}
    for root, why in uncovered:
        by_why.setdefault(why, []).append(root)
    full = [(r["name"], why) for why, rs in by_why.items() for r in skills.collect(rs)[0]]
    return names, sorted(full)


def undo(runner, path, unedit, out, dry_run, said):
    """Take out of ``path`` what install added for ``runner``
    (``record.undo``): ``unedit(text, record)`` gives the new text, None
    (nothing to take out) or ``fileutil.DELETE``; then the record is
    forgotten and ``said`` (%s: the path) says so.  Nothing recorded:
    nothing to do.  Returns 0."""
    if not record_of(runner, path):
        return 0
    _, new, saved, _ = record.undo(path, "listing " + runner, lambda raw, rec: None if raw is None else
                                   unedit(decode_text(raw, path, keep_bom=True), rec or {}), dry_run, exact=False,
                                   disown=True)
    _told(path, new, saved, out, dry_run)
    if not dry_run:
        if new is None:  # not written, so not forgotten by undo
            forget(runner, path)
        out.write(said % path)
    return 0


# ---------------------------------------------------------- plugin files


def plugin_install(runner, path, source, mark, out, dry_run, force, said):
    """Write our plugin file ``source`` at ``path``, and say so: ``said``
    is the line for a plugin already there and the one for a plugin
    written (each with %s for the path).  Returns 0.

    A file there without our ``mark`` is someone else's: Refused.  One
    with it is ours as some install wrote it (replaced, backed up) unless
    it differs from the digest install recorded of its own write: then the
    user edited it, and it stays ("kept", one line saying how to take ours)
    unless ``force``.  No digest (an older version's install): ours, as
    before digests were kept.  The digest of what is written is recorded
    (``record.set_entry``), the hook installer's record and rule."""
    real = os.path.realpath(path)

    def plan(old):
        if old == source:
            return None
        if old is not None and mark not in old:
            raise Refused("%s exists and is not skill-retrieve's; left unchanged" % path)
        if old is not None and not force and record.as_installed(record.entry(real, runner), old) is False:
            raise Edited(path)
        return source

    try:
        new = write(path, plan, out, dry_run)
    except Edited:
        out.write("%s: kept %s: it was edited since install; `skill-retrieve install %s --force` "
                  "replaces it with ours\n" % (runner, path, runner))
        return 0
    if not dry_run and (new is not None or record.entry(real, runner) is None):
        # Also when it was there already: a copy an older version wrote
        # without a digest is guarded from now on.
        record.set_entry(real, runner, {"after": fileutil.digest(source)})
    if new is None:
        out.write(said[0] % path)
    elif not dry_run:
        out.write(said[1] % path)
    return 0


def plugin_uninstall(runner, path, mark, out, dry_run, said):
    """Delete our plugin file as install wrote it, and say so with the line
    ``said`` (%s: the path); one edited since install is left, with one
    line saying so.  Returns 0.  The records of it go with it (an older
    version kept a names-only entry for it too); an edited copy keeps its
    digest, so a later install leaves it too."""
    real = os.path.realpath(path)

    def plan(old):
        if old is None or mark not in old:
            return None
        if record.as_installed(record.entry(real, runner), old) is False:
            raise Edited(path)
        return fileutil.DELETE

    names = ("listing " + runner, runner)
    try:
        # Its records go in the write of the record the deletion makes.
        gone = write(path, plan, out, dry_run, book=lambda data: record.drop(data, path, names, True)) is not None
    except Edited:
        out.write("%s: left %s in place: it was edited since install; delete it yourself if you "
                  "no longer want it\n" % (runner, path))
        return 0
    if not dry_run and not gone:
        forget(runner, path, runner)
    if gone and not dry_run:
        out.write(said % path)
    return 0


def under(env, home, var, default):
    """The folder the variable ``var`` of ``env`` names, else ``default``
    (``~`` for ``home``), absolute."""
    return os.path.abspath(os.path.expanduser(env.get(var) or default.replace("~", home, 1)))


def number(value, default, kind=(int, float)):
    """A positive number of the right kind from settings, else the
    default: a string or a list there must not make the estimate crash."""
    ok = isinstance(value, kind) and not isinstance(value, bool) and value > 0
    return value if ok else default
