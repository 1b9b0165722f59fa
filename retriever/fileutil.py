"""Writing a user's files safely: backups and atomic replacement.

The installers change files that belong to the user (a runner's settings,
Hermes' config.yaml); these are the only ways they write them.  Cold path.
"""

import os
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


def backup(path):
    """Copy ``path`` to ``<state>/backups/<path with / as %>.bak-YYYYmmdd-HHMMSS``
    (never overwriting an earlier backup), mode 0600.  Backups never go
    beside the file: a runner that runs every file in its hooks folder
    (Cline) would run a backup too.  Returns the backup's path."""
    import shutil
    folder = os.path.join(state_dir(), "backups")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = os.path.join(folder, backup_name(path))
    dest = "%s.bak-%s" % (base, stamp)
    n = 1
    while os.path.exists(dest):
        dest = "%s.bak-%s-%d" % (base, stamp, n)
        n += 1
    shutil.copyfile(path, dest)
    os.chmod(dest, 0o600)
    return dest


class ReadOnly(Exception):
    """The file exists and its owner may not write it: left unchanged."""


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


def _created_file():
    return os.path.join(state_dir(), "created.json")


def created():
    """``{file: [folders]}``: the files install created (none was there
    before) and the folders it made for them, deepest first."""
    import json
    try:
        with open(_created_file(), encoding="utf-8") as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def note_created(path, folders):
    """Record that ``path`` (and ``folders``) did not exist before install."""
    import json
    data = created()
    data[os.path.abspath(path)] = list(folders)
    write_atomic(_created_file(), json.dumps(data, indent=1) + "\n", 0o600)


def forget_created(path):
    """Drop the record of ``path``; returns the folders recorded with it,
    or None when install did not create it."""
    import json
    data = created()
    folders = data.pop(os.path.abspath(path), None)
    if folders is not None:
        write_atomic(_created_file(), json.dumps(data, indent=1) + "\n", 0o600)
    return folders


def missing_parents(path):
    """The folders above ``path`` that do not exist yet, deepest first."""
    out = []
    d = os.path.dirname(os.path.abspath(path))
    while d and d != "/" and not os.path.exists(d):
        out.append(d)
        d = os.path.dirname(d)
    return out


def write_atomic(path, text, mode=None):
    """Write ``text`` via a temp file and rename, keeping the old file's
    permissions (or ``mode`` for a new file).  A symlinked file (dotfiles)
    is written at its target, so the link and what it points to survive."""
    if os.path.islink(path):
        path = os.path.realpath(path)
    d = os.path.dirname(path)
    os.makedirs(d, exist_ok=True)
    try:
        mode = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o644 if mode is None else mode
    tmp = "%s.tmp-%d" % (path, os.getpid())
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
