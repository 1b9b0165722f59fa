"""Writing a user's files safely: backups and atomic replacement.

The installers change files that belong to the user (a runner's settings,
Hermes' config.yaml); these are the only ways they write them.  Cold path.
"""

import os
import time


def backup(path):
    """Copy ``path`` to ``path.bak-YYYYmmdd-HHMMSS`` (never overwriting an
    earlier backup).  Returns the backup's path."""
    import shutil
    stamp = time.strftime("%Y%m%d-%H%M%S")
    dest = "%s.bak-%s" % (path, stamp)
    n = 1
    while os.path.exists(dest):
        dest = "%s.bak-%s-%d" % (path, stamp, n)
        n += 1
    shutil.copy2(path, dest)
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
