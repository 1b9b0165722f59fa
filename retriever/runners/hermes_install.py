"""``skill-retrieve install hermes``: link the plugin into Hermes and enable it.

``install`` symlinks ``hermes_plugin/`` to ``$HERMES_HOME/plugins/skill-retrieval``
(or copies it, ``mode="copy"``) and adds ``skill-retrieval`` to
``plugins.enabled`` in ``$HERMES_HOME/config.yaml`` (taking it out of
``plugins.disabled``, which would override that).  ``uninstall`` undoes
both.  Both are idempotent and refuse, before touching anything, when
config.yaml is not valid YAML.

config.yaml is edited as text, at the smallest span that does the job, so
comments, key order and formatting survive; the edit is checked by parsing
the result, and when a layout is too unusual to edit safely the file is
re-dumped with every key kept (comments are then lost, and the message
says so).  The original goes to ``config.yaml.bak-<timestamp>`` before any
change.  Cold path: PyYAML is fine here.
"""

import copy
import os
import shutil

from retriever import fileutil
from retriever.runners import record

PLUGIN_NAME = "skill-retrieval"
ROOT_HINT = "retriever_root.txt"  # same name as hermes_plugin.ROOT_HINT


class HermesInstallError(fileutil.Refused):
    """Install or uninstall of the Hermes plugin refused (``fileutil.Refused``)."""


# ------------------------------------------------------------------ paths

def repo_root():
    """The folder holding ``retriever/`` and ``hermes_plugin/``."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))


def plugin_source():
    """The plugin folder to link; raises when its files are missing."""
    src = os.path.join(repo_root(), "hermes_plugin")
    for f in ("plugin.yaml", "__init__.py"):
        if not os.path.isfile(os.path.join(src, f)):
            raise HermesInstallError("plugin files not found (%s missing); install from a checkout of "
                                     "skill-retrieval" % os.path.join(src, f))
    return src


def _is_our_copy(path):
    return os.path.isfile(os.path.join(path, ROOT_HINT))


def _is_our_link(path):
    """True when the link ``path`` is one install made: it points at a
    ``hermes_plugin`` folder (a checkout, perhaps since moved or deleted)
    or at a plugin whose plugin.yaml names skill-retrieval.  A link of the
    user's to something else is never removed."""
    target = os.readlink(path).rstrip("/")
    if os.path.basename(target) == "hermes_plugin":
        return True
    from retriever.fileutil import NotAFile, read_bytes
    try:
        raw = read_bytes(os.path.join(path, "plugin.yaml")) or b""
    except (OSError, NotAFile):
        return False
    return any(line.strip() in (b"name: " + PLUGIN_NAME.encode(), b'name: "%s"' % PLUGIN_NAME.encode())
               for line in raw.splitlines())


# ------------------------------------------------------------------ YAML text

def _yaml():
    import yaml
    return yaml


def read_config(path):
    """``(text, data)`` of config.yaml; ``("", {})`` when absent.
    Raises HermesInstallError when it is unreadable, invalid or not a mapping."""
    from retriever.fileutil import NotAFile, read_bytes
    try:
        raw = read_bytes(path)
        text = "" if raw is None else raw.decode("utf-8-sig")
    except NotAFile as exc:
        raise HermesInstallError(str(exc))
    except OSError as exc:
        raise HermesInstallError("cannot read %s (%s)" % (path, exc.strerror or exc))
    except UnicodeDecodeError:
        raise HermesInstallError("%s is not UTF-8 text; fix it first, nothing was changed" % path)
    if raw is None:
        return "", {}
    return text, parse_config(text, path)


def parse_config(text, path):
    """The mapping in config.yaml's ``text``; HermesInstallError when it is
    invalid or not a mapping."""
    yaml = _yaml()
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = " at line %d" % (where.line + 1) if where is not None else ""
        raise HermesInstallError("%s is not valid YAML%s (%s); fix it first, nothing was changed"
                                 % (path, at, getattr(exc, "problem", None) or "parse error"))
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise HermesInstallError("%s is not a YAML mapping; fix it first, nothing was changed" % path)
    return data


def _get(mapping, key):
    """``(key node, value node)`` for ``key`` in a MappingNode (last wins, as
    in PyYAML), or None."""
    found = None
    for k, v in mapping.value:
        if getattr(k, "value", None) == key and k.tag.endswith(":str"):
            found = (k, v)
    return found


def _line_start(text, i):
    return text.rfind("\n", 0, i) + 1


def _line_after(text, i):
    """Index just past the end of the line holding ``i``."""
    nl = text.find("\n", i)
    return len(text) if nl < 0 else nl + 1


def _is_null(node):
    return node.tag.endswith(":null")


def _add_to_seq_text(text, key, node, name):
    yaml = _yaml()
    if _is_null(node):  # "enabled:" or "enabled: null"
        s, e = node.start_mark.index, node.end_mark.index
        if s == e:
            return text[:key.end_mark.index] + ": [%s]" % name + text[_skip_colon(text, key.end_mark.index):]
        return text[:s] + "[%s]" % name + text[e:]
    if not isinstance(node, yaml.SequenceNode):
        return None
    if node.flow_style:
        close = text.rfind("]", node.start_mark.index, node.end_mark.index)
        if close < 0:
            return None
        inner = text[node.start_mark.index + 1:close]
        at = node.start_mark.index + 1 + len(inner.rstrip())
        sep = ", " if inner.strip() else ""
        if inner.rstrip().endswith(","):
            sep = " "
        return text[:at] + sep + name + text[at:]
    if not node.value:
        return None
    first = node.value[0].start_mark.index
    ls = _line_start(text, first)
    dash = text.find("-", ls, first)
    if dash < 0:
        return None
    pos = _line_after(text, node.value[-1].end_mark.index - 1 if node.value[-1].end_mark.index > 0 else 0)
    prefix = "" if pos == 0 or text[pos - 1] == "\n" else "\n"
    return text[:pos] + prefix + " " * (dash - ls) + "- " + name + "\n" + text[pos:]


def _skip_colon(text, i):
    """Past the ``:`` that follows a key ending at ``i``."""
    j = text.find(":", i)
    return i if j < 0 else j + 1


def _remove_from_seq_text(text, key, node, name):
    yaml = _yaml()
    if _is_null(node):
        return text
    if not isinstance(node, yaml.SequenceNode):
        return None
    keep = [n for n in node.value if not (isinstance(n, yaml.ScalarNode) and n.value == name)]
    if len(keep) == len(node.value):
        return text
    if node.flow_style or not keep:
        items = ", ".join(text[n.start_mark.index:n.end_mark.index] for n in keep)
        if node.flow_style:
            return text[:node.start_mark.index] + "[" + items + "]" + text[node.end_mark.index:]
        # A block list losing its last item becomes "[]" on the key's line.
        spans = [(_line_start(text, n.start_mark.index), _line_after(text, n.end_mark.index - 1))
                 for n in node.value]
        out = text
        for s, e in reversed(spans):
            out = out[:s] + out[e:]
        colon = _skip_colon(out, key.end_mark.index)
        return out[:colon] + " []" + out[colon:]
    out = text
    for n in reversed(node.value):
        if n in keep:
            continue
        s = _line_start(out, n.start_mark.index)
        e = _line_after(out, max(n.end_mark.index - 1, n.start_mark.index))
        out = out[:s] + out[e:]
    return out


def _edit_text(text, name, enable):
    """The config text with ``name`` added to (``enable``) or removed from
    ``plugins.enabled``, and removed from ``plugins.disabled`` when
    enabling; None when the layout is not one edited in place."""
    yaml = _yaml()
    root = yaml.compose(text)
    if root is None:
        return (text + ("" if not text or text.endswith("\n") else "\n")
                + "plugins:\n  enabled:\n  - %s\n" % name) if enable else text
    if not isinstance(root, yaml.MappingNode):
        return None
    found = _get(root, "plugins")
    if found is None:
        if not enable:
            return text
        if root.flow_style:
            return None
        return text + ("" if text.endswith("\n") else "\n") + "plugins:\n  enabled:\n  - %s\n" % name
    pval = found[1]
    if not isinstance(pval, yaml.MappingNode) or pval.flow_style or not pval.value:
        return None if enable else (text if _is_null(pval) else None)
    # (position, edit) pairs, applied back to front so earlier offsets stay valid.
    ops = []
    got = _get(pval, "enabled")
    if got is None:
        if not enable:
            return text
        k0 = pval.value[0][0]
        at = _line_start(text, k0.start_mark.index)
        ind = text[at:k0.start_mark.index]
        if ind.strip():
            return None
        ops.append((at, lambda t: t[:at] + ind + "enabled:\n" + ind + "- " + name + "\n" + t[at:]))
    else:
        k, v = got
        edit = _add_to_seq_text if enable else _remove_from_seq_text
        ops.append((k.start_mark.index, lambda t: edit(t, k, v, name)))
    dis = _get(pval, "disabled") if enable else None
    if dis is not None:
        dk, dv = dis
        ops.append((dk.start_mark.index, lambda t: _remove_from_seq_text(t, dk, dv, name)))
    out = text
    for _, op in sorted(ops, key=lambda o: -o[0]):
        out = op(out)
        if out is None:
            return None
    return out


def _wanted(data, name, enable):
    """The config data as it should be after the change."""
    want = copy.deepcopy(data)
    plugins = want.get("plugins")
    if not isinstance(plugins, dict):
        if not enable:
            return want
        plugins = want["plugins"] = {}
    enabled = plugins.get("enabled")
    enabled = list(enabled) if isinstance(enabled, list) else ([] if enabled is None else [enabled])
    if enable:
        if name not in enabled:
            enabled.append(name)
        plugins["enabled"] = enabled
        if isinstance(plugins.get("disabled"), list) and name in plugins["disabled"]:
            plugins["disabled"] = [d for d in plugins["disabled"] if d != name]
    elif "enabled" in plugins and isinstance(plugins["enabled"], list):
        plugins["enabled"] = [e for e in enabled if e != name]
    return want


def set_enabled(config_path, enable, name=PLUGIN_NAME):
    """Add ``name`` to (or remove it from) ``plugins.enabled`` in config.yaml.

    Returns a short description of what happened.  Writes only when
    something changes, after a timestamped backup of the old file, under
    the installers' lock and only if nobody wrote the file meanwhile
    (``record.change``).
    """
    notes = {}
    real = os.path.realpath(config_path)

    def change(raw, rec=None):
        try:
            text = "" if raw is None else raw.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise HermesInstallError("%s is not UTF-8 text; fix it first, nothing was changed" % config_path)
        data = parse_config(text, config_path)
        want = notes["want"] = _wanted(data, name, enable)
        if want == data:
            return None
        new = _edited(text, want, name, enable)
        notes["note"] = "" if new is not None else " (re-written: comments were not kept)"
        return new or _yaml().safe_dump(want, sort_keys=False, allow_unicode=True, default_flow_style=False)

    def exact(text):
        # The file as it was before install, byte for byte (``record.undo``).
        notes["note"] = ""
        return _restorable(real, text)

    def settle(new):
        if record.created_folders(real) is not None and notes["want"] in ({}, {"plugins": {"enabled": []}}):
            return fileutil.DELETE  # install created the file; nothing else was put in since
        return new

    with fileutil.install_lock():
        if enable:
            raw, new, saved = record.change(config_path, change)
        else:
            raw, new, saved, _ = record.undo(config_path, "hermes", change, exact=exact, settle=settle)
        if new is None:
            return "%s already %s in %s" % (name, "enabled" if enable else "not enabled", config_path)
        if enable:
            # What install wrote, and where the file before it is: uninstall
            # puts that back when nobody changed the file since.  Install
            # writes only when our name is missing, so an earlier entry is
            # no guide (the user took it out by hand): fresh.
            record.note(real, "hermes", raw, new, saved, fresh=True)
        if new is fileutil.DELETE:  # the folders made for it gone too (record.change)
            return "removed %s from %s, which install had created: deleted it" % (name, config_path)
    what = "enabled %s in %s" % (name, config_path) if enable else \
        "removed %s from plugins.enabled in %s" % (name, config_path)
    return what + notes["note"] + ("; backup %s" % saved if saved else "")


def _restorable(real, text):
    # Whether uninstall may put back ``text``, the config before install
    # (the file is what install wrote: install added a ``plugins:``
    # section that removing our name alone would leave behind as
    # ``enabled: []``).  Not when install also took our name out of
    # plugins.disabled: putting that back would undo the user's own
    # choice to enable it, so our name is taken out by an edit instead.
    try:
        text.encode("utf-8")
        plugins = parse_config(text.lstrip("\ufeff"), real).get("plugins")
    except Exception:  # not text, not YAML: edit instead
        return False
    disabled = plugins.get("disabled") if isinstance(plugins, dict) else None
    return not (isinstance(disabled, list) and PLUGIN_NAME in disabled)


def _edited(text, want, name, enable):
    # The smallest text edit, if parsing it gives exactly ``want``.
    yaml = _yaml()
    try:
        new = _edit_text(text, name, enable)
        if new is not None and (yaml.safe_load(new) or {}) != want:
            return None
        return new
    except yaml.YAMLError:
        return None


# ------------------------------------------------------------------ plugin folder

def _place(src, dest, mode):
    if mode not in ("link", "copy"):
        raise HermesInstallError("unknown install mode %r (use link or copy)" % mode)
    if os.path.islink(dest):
        if mode == "link" and os.path.realpath(dest) == os.path.realpath(src):
            return "%s already links to %s" % (dest, src)
        old = os.readlink(dest)
        if not _is_our_link(dest):
            raise HermesInstallError("%s links to %s, which is not a skill-retrieval plugin; move it away "
                                     "first" % (dest, old))
        os.remove(dest)
        replaced = " (replaced a link to %s)" % old
    elif os.path.exists(dest):
        if not _is_our_copy(dest):
            raise HermesInstallError("%s exists and was not made by skill-retrieve; move it away first" % dest)
        shutil.rmtree(dest)
        replaced = " (replaced an earlier copy)"
    else:
        replaced = ""
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    if mode == "link":
        os.symlink(src, dest)
        return "linked %s -> %s%s" % (dest, src, replaced)
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    with open(os.path.join(dest, ROOT_HINT), "w", encoding="utf-8") as f:
        f.write(repo_root() + "\n")
    return "copied %s to %s%s" % (src, dest, replaced)


def _os_errors(fn):
    # A permission or disk problem is a refusal too: one line, no traceback.
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except OSError as exc:
            raise HermesInstallError("cannot update %s (%s)" % (exc.filename or "the Hermes home",
                                                                exc.strerror or exc)) from None
    return wrapper


@_os_errors
def install(hermes_home, mode="link"):
    """Link (or copy) the plugin into ``hermes_home`` and enable it.
    Returns a message; raises HermesInstallError (one line) on refusal."""
    hh = os.path.abspath(os.path.expanduser(str(hermes_home)))
    config = os.path.join(hh, "config.yaml")
    # The plugin, its record and config.yaml in one turn of the installers'
    # lock: another install waits for all three, and one that holds the
    # lock too long stops this one before anything is placed.
    with fileutil.install_lock():
        read_config(config)  # refuse before touching anything
        src = plugin_source()
        dest = os.path.join(hh, "plugins", PLUGIN_NAME)
        made = fileutil.missing_parents(dest)  # plugins/, and the Hermes home on a new machine
        placed = _place(src, dest, mode)
        if made:
            # So uninstall can take them away again (a reinstall makes none
            # and keeps this record).
            record.note_created(dest, made)
        enabled = set_enabled(config, True)
    # Hermes not installed yet: its home is ours to announce, not a quiet
    # side effect (uninstall removes it again while nothing else is in it).
    created = ("created %s (no Hermes home was there: is Hermes installed? HERMES_HOME names another); "
               % hh) if hh in made else ""
    return "%s%s; %s; restart Hermes to load it" % (created, placed, enabled)


@_os_errors
def uninstall(hermes_home):
    """Remove the plugin link (or copy) from ``hermes_home`` and take it out
    of ``plugins.enabled``.  Returns a message; raises HermesInstallError."""
    with fileutil.install_lock():  # as install: the plugin, the records and config.yaml in one turn
        return _uninstall(hermes_home)


def _uninstall(hermes_home):
    hh = os.path.abspath(os.path.expanduser(str(hermes_home)))
    config = os.path.join(hh, "config.yaml")
    read_config(config)
    dest = os.path.join(hh, "plugins", PLUGIN_NAME)
    if os.path.islink(dest) and _is_our_link(dest):
        os.remove(dest)
        removed = "removed the link %s" % dest
    elif os.path.islink(dest):
        removed = "left %s alone (a link to %s, not made by skill-retrieve)" % (dest, os.readlink(dest))
    elif _is_our_copy(dest):
        shutil.rmtree(dest)
        removed = "removed the copy %s" % dest
    elif os.path.exists(dest):
        removed = "left %s alone (not made by skill-retrieve)" % dest
    else:
        removed = "no plugin at %s" % dest
    if os.path.exists(config):
        removed = "%s; %s" % (removed, set_enabled(config, False))
    if not os.path.lexists(dest):
        # The folders install made for the plugin, while empty: after the
        # config install created, so the Hermes home goes too when nothing
        # else is in it.
        fileutil.remove_folders(record.forget_created(dest))
    return removed
