"""The one record of what install changed, and its two operations.

Every installer (the hook's, names-only's, the MCP server's, the plugins',
Hermes') changes a user's file with ``change`` and takes its change out
again with ``undo``; both run ``fileutil.update`` (under the installers'
lock, the bytes read backed up, the file replaced only if it still holds
them) and keep this record, ``<state>/changes.json``, one key shape::

    {"<real path>": {"created": [folders made for it, deepest first],
                     "changes": {"<entry>": {"after": sha256 of the text written,
                                             "backup": the file before it, or null,
                                             "made": [containers it added], ...}}}}

``created`` is there only when install created the file (nothing was there
before).  An entry is named by what changed the file: the runner for the
hook and a plugin file (``claude-code``), ``listing <runner>`` for
names-only (the keys or lines added), ``mcp <runner>`` (and ``mcp <runner>
allow``) for the MCP server, ``hermes`` for Hermes' config.yaml.

An older version kept three records (``created.json``, ``installed.json``,
``listing.json``): they are read as this one until the first write, which
saves this one and only then removes them (``OLD``).

Cold path: install, uninstall, doctor, status, tokens and ``sync``; never
the prompt hook.
"""

import contextlib
import json
import os

from retriever import fileutil

NAME = "changes.json"
# The records an older version kept (``_migrated`` reads them as one).
OLD = ("created.json", "installed.json", "listing.json")


# ------------------------------------------------------------- the file


def _path(name=NAME):
    return os.path.join(fileutil.state_dir(), name)


def _read(name):
    # (the record as a dict, or {}; one line naming the problem, or None).
    path = _path(name)
    try:
        text = fileutil.read_text(path)
        data = json.loads(text) if text is not None else {}
    except fileutil.Unreadable as exc:
        return {}, str(exc)
    except ValueError as exc:
        return {}, "%s is not valid JSON (%s)" % (path, exc)
    if not isinstance(data, dict):
        return {}, "%s does not hold a JSON object" % path
    return data, None


def problems():
    """One line per record of ours that is damaged (not a file, unreadable,
    not UTF-8, not a JSON object): this one, and an older version's not
    migrated yet.  For doctor: a damaged record reads as empty, so what
    install did looks like the user's own doing."""
    names = (NAME,) + tuple(n for n in OLD if os.path.lexists(_path(n)))
    return [p for p in (_read(n)[1] for n in names) if p]


def load():
    """The record (a dict, see the module's docstring): ``changes.json``,
    or, before this version's first write, the older version's three
    records read as one.  Parts of the wrong type read as nothing."""
    if os.path.lexists(_path()) or not any(os.path.lexists(_path(n)) for n in OLD):
        data = _read(NAME)[0]
    else:
        data = _migrated()
    return {p: f for p, f in data.items() if isinstance(f, dict)}


def _save(data):
    # Under the installers' lock (every writer holds it): this record,
    # atomically, then the older version's records, now in it.
    from retriever import locate
    data = {p: f for p, f in data.items() if _changes(f) or isinstance(f.get("created"), list)}
    fileutil.write_atomic(_path(), json.dumps(data, indent=1, sort_keys=True) + "\n", 0o600)
    for name in OLD:
        if not os.path.lexists(_path(name)):
            continue
        problem = _read(name)[1]
        if problem:  # it read as empty before too: what it held is lost, as then
            locate.log("install record: %s; not migrated into %s, removed" % (problem, _path()))
        try:
            os.unlink(_path(name))
        except OSError as exc:  # a folder in its place: left (doctor names it)
            locate.log("install record: %s not removed after migrating it (%s)" % (_path(name), exc))


def _migrated():
    # The older version's records as one: created.json {file: [folders]},
    # installed.json {file: {runner: rec}}, listing.json {"<runner> <file>":
    # rec}.  A damaged one reads as nothing, as it did before (``_save``
    # says so in the log, once, as it removes it).
    data = {}

    def at(path):
        return data.setdefault(os.path.realpath(path), {})

    for path, folders in _read("created.json")[0].items():
        if isinstance(folders, list):  # keyed as note_created keys it
            data.setdefault(path, {})["created"] = folders
    for path, recs in _read("installed.json")[0].items():
        for runner, rec in (recs.items() if isinstance(recs, dict) else ()):
            if isinstance(rec, dict):
                at(path).setdefault("changes", {})[runner] = rec
    for key, rec in _read("listing.json")[0].items():
        runner, _, path = key.partition(" ")
        if isinstance(rec, dict) and rec and path:
            rec = {k: v for k, v in rec.items() if k != "created"}  # kept in created.json too, long ago
            at(path).setdefault("changes", {})["listing " + runner] = rec
    return data


# -------------------------------------------------------------- entries


def _file(data, path):
    return data.get(os.path.realpath(path)) or {}


def _changes(f):
    # A file's entries: a dict, {} when missing or of the wrong type.
    changes = f.get("changes")
    return {k: v for k, v in changes.items() if isinstance(v, dict)} if isinstance(changes, dict) else {}


def entry(path, name, data=None):
    """What the change named ``name`` recorded of ``path`` (a dict), or
    None; ``data``: the record, loaded already."""
    return _changes(_file(load() if data is None else data, path)).get(name) or None


def entries():
    """``{real path: {entry name: record}}`` of every file install changed."""
    return {p: _changes(f) for p, f in load().items() if _changes(f)}


def set_entry(path, name, rec):
    """Record ``rec`` as what the change ``name`` did to ``path`` (None or
    {}: drop it).  Under the installers' lock."""
    data = load()
    _set(data, path, name, rec)
    _save(data)


def _set(data, path, name, rec):
    # set_entry on the record ``data``, loaded already.
    f = data.setdefault(os.path.realpath(path), {})
    changes = f["changes"] = _changes(f)
    if rec:
        changes[name] = rec
    else:
        changes.pop(name, None)


def forget(path, *names, created=False):
    """Drop the entries ``names`` of ``path`` (``created``: and the record
    of having created it, as ``forget_created``), in one write of the
    record, none when nothing was there; whether anything was.  Under the
    installers' lock."""
    data = load()
    if drop(data, path, names, created):
        _save(data)
        return True
    return False


def drop(data, path, names, created=False):
    """``forget`` on the record ``data`` (``change``'s ``book`` gets it),
    which the caller saves; whether anything was dropped."""
    there = [n for n in names if entry(path, n, data) is not None]
    for n in there:
        _set(data, path, n, None)
    uncreated = created and _uncreate(data, path)[1]
    return bool(there or uncreated)


def note(path, name, raw, new, saved, made=None, fresh=False, **fields):
    """Record the change ``name`` just made to ``path``: ``raw`` the bytes
    it found, ``new`` the text it wrote, ``saved`` their backup, ``made``
    the containers it added (kept with an earlier change's), and
    ``fields``.  A change over our own untouched write keeps the first
    change's backup (the file before any of ours); over a file changed
    since, the byte-exact undo is off (that backup no longer says what to
    go back to).  ``fresh``: the earlier entry is no guide (its change was
    taken out by hand), and this one starts anew."""
    prev = None if fresh else entry(path, name)
    rec = dict(fields)
    if made is not None:
        rec["made"] = sorted(set((prev or {}).get("made") or ()) | set(made))
    rec["backup"] = prev.get("backup") if prev and as_installed(prev, raw) else None if prev else saved
    rec["after"] = fileutil.digest(new)
    set_entry(path, name, rec)


def as_installed(rec, data):
    """Whether ``data`` (the bytes or text a file holds now) is what the
    change of ``rec`` wrote (its ``after``): True or False; None when there
    is no digest (no record, or an older version's), and the caller does
    what it did before digests were kept.  The one test of "edited since
    install" for every installer."""
    after = rec.get("after") if isinstance(rec, dict) else None
    if not after:
        return None
    return data is not None and fileutil.digest(data) == after


def backup_before(rec, raw):
    """The bytes a file held before the change of ``rec``, when it still
    holds what that change wrote (``raw``), so undo puts them back byte for
    byte; else None.  Raises OSError or NotAFile when that backup cannot
    be read (the caller edits the file instead)."""
    if raw is None or not isinstance(rec, dict) or not rec.get("backup") or not as_installed(rec, raw):
        return None
    return fileutil.read_bytes(rec["backup"])


def created_folders(path):
    """The folders made for ``path`` when install created it (for a
    symlink: its target), else None.  A path is recorded as given
    (``note_created``: a file's target, Hermes' plugin link itself); for
    a link that is there now only its target's record counts (the link
    was there before install, whatever an older key says)."""
    return _created(load(), path)


def _created(data, path):
    # created_folders on the record ``data``, loaded already.
    for key in (os.path.realpath(path),) + (() if os.path.islink(path) else (os.path.abspath(path),)):
        folders = data.get(key, {}).get("created")
        if isinstance(folders, list):
            return list(folders)
    return None


def note_created(path, folders):
    """Record that ``path`` (and ``folders``) did not exist before install."""
    data = load()
    data.setdefault(os.path.abspath(path), {})["created"] = list(folders)
    _save(data)


def forget_created(path):
    """Drop the record of having created ``path`` (at its target and as
    given); returns ``created_folders(path)``, None when install did not
    create it."""
    data = load()
    folders, dropped = _uncreate(data, path)
    if dropped:
        _save(data)
    return folders


def _uncreate(data, path):
    # forget_created on the record ``data``, loaded already, which the
    # caller saves: (the folders made for ``path`` or None, whether
    # anything was dropped).
    folders = _created(data, path)
    keys = [k for k in {os.path.realpath(path), os.path.abspath(path)} if "created" in data.get(k, {})]
    for k in keys:
        del data[k]["created"]
    return folders, bool(keys)


def needed_backups(data=None):
    """The backups an entry names (file names): uninstall restores from
    them, so ``fileutil.prune_backups`` keeps them.  ``data``: the record,
    loaded already."""
    data = load() if data is None else data
    return {os.path.basename(r["backup"]) for recs in (_changes(f) for f in data.values()) for r in recs.values()
            if isinstance(r, dict) and isinstance(r.get("backup"), str)}


# ----------------------------------------------------------- operations


def change(path, plan, dry_run=False, wait=None, data=None, book=None):
    """Apply ``plan(raw bytes or None)`` (the new text, ``fileutil.DELETE``
    or None to leave it; it may raise Refused) to ``path`` with
    ``fileutil.update``; returns ``(raw, new, backup)``.  A file this
    creates is recorded with the folders made for it; a file it deletes
    loses that record, and those folders go while empty.  The caller
    records what its change was (``note``, ``set_entry``), or, with
    ``book(data)``, in the record this loaded (``data``: the caller's,
    loaded under the installers' lock), so the file's change costs one
    write of the record.  A dry run runs ``plan`` the same way and
    writes nothing."""
    real = os.path.realpath(path)
    made = []

    def planned(raw):
        made[:] = fileutil.missing_parents(real) if raw is None else []
        return plan(raw)

    if dry_run:
        return fileutil.update(path, planned, wait=wait, dry_run=True)
    with fileutil.install_lock(wait):
        # Plans only read the record, and every writer holds the lock: this
        # copy stays current through the update.
        data = load() if data is None else data
        raw, new, saved = fileutil.update(path, planned, wait=wait, needed=needed_backups(data))
        if new is None:
            return raw, new, saved
        folders, dirty = None, book is not None
        if new is fileutil.DELETE:
            folders, dropped = _uncreate(data, path)
            dirty = dirty or dropped
        elif raw is None:
            data.setdefault(real, {})["created"] = list(made)  # as note_created
            dirty = True
        if book is not None:
            book(data)
        if dirty:
            _save(data)
        fileutil.remove_folders(folders)
    return raw, new, saved


def undo(path, name, unplan, dry_run=False, exact=None, settle=None, unreadable=None, wait=None, disown=False):
    """Take out of ``path`` what the change ``name`` did, keeping the
    user's own edits; returns ``(raw, new, backup, rec)``.

    ``unplan(raw, rec)`` (``rec`` None when nothing is recorded) gives the
    file without the change: text, None (nothing to take out) or DELETE.
    When the file still holds what the change wrote and its backup can be
    read, the backup's bytes come back instead, byte for byte (``exact``,
    given the backup's text, may say no; False: never); a backup that
    cannot be read is no reason to stop (``unreadable(exc, rec)`` hears
    of it).  Else ``settle(new)`` has the last word (a file install
    created and nothing else is in: DELETE).  Once the file is written,
    the entry is forgotten (``disown``: and, when the file is kept, the
    record of having created it: whoever put the rest in owns it now), in
    the one write of the record the change makes."""
    state = {}

    def plan(raw):
        rec = state["rec"] = entry(path, name, data)
        new = unplan(raw, rec)
        if new is None:
            return None
        if exact is not False and new is not fileutil.DELETE:
            try:
                before = backup_before(rec, raw)
            except (OSError, fileutil.Refused) as exc:
                before = None
                if unreadable is not None:
                    unreadable(exc, rec)
            text = None if before is None else before.decode("utf-8", "surrogateescape")
            if text is not None and (exact is None or exact(text)):
                return text
        return new if settle is None else settle(new)

    with locked(dry_run, wait):
        data = load()  # once: for the plan and for the bookkeeping (``change``)
        raw, new, saved = change(path, plan, dry_run=dry_run, wait=wait, data=data,
                                 book=lambda d: drop(d, path, (name,), disown))
    return raw, new, saved, state.get("rec")


def created_and(path, empty):
    """A ``settle`` for ``undo``: DELETE when install created ``path`` and
    ``empty(new)`` finds nothing else in what is left, else ``new``."""
    return lambda new: fileutil.DELETE if empty(new) and created_folders(path) is not None else new


def locked(dry_run, wait=None):
    """The installers' lock, held by install and uninstall from reading
    the record to saving it; a dry run writes nothing and takes none."""
    return contextlib.nullcontext() if dry_run else fileutil.install_lock(wait)
