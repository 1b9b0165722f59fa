"""Read the parts of Hermes' config.yaml that decide which skills exist.

Build path only (PyYAML).  A missing file is an empty config; an unreadable
or invalid one is reported once and treated as empty, never raised.
"""

import os


def config_path(hermes_home):
    """Path of Hermes' config.yaml under ``hermes_home``."""
    return os.path.join(hermes_home, "config.yaml")


def _parse_yaml(text):
    # Bounded like a skill's frontmatter: an alias bomb in config.yaml
    # must not hang every build (issue 15).
    from retriever.frontmatter import load_yaml
    return load_yaml(text, max_chars=1 << 22)


def load(hermes_home, warn=None):
    """Return the parsed config.yaml as a dict ({} when absent or invalid)."""
    from retriever import fileutil
    path = config_path(hermes_home)
    try:
        # Never blocks on a FIFO; a folder, a link loop or non-UTF-8 bytes
        # are one warning naming the file.
        text = fileutil.read_text(path)
    except fileutil.Unreadable as exc:
        if warn:
            warn("%s; ignoring it" % exc)
        return {}
    if text is None:
        return {}
    try:
        data = _parse_yaml(text)
    except Exception as exc:
        if warn:
            warn("%s: invalid YAML (%s); ignoring it" % (path, str(exc).split("\n")[0][:120]))
        return {}
    if data is None:
        return {}
    if not isinstance(data, dict):
        if warn:
            warn("%s: not a mapping; ignoring it" % path)
        return {}
    return data


def _string_list(value):
    """A list, a single string, or a JSON-array string, as a list of names
    (order kept, blanks and repeats dropped)."""
    if value is None:
        return []
    if isinstance(value, str):
        s = value.strip()
        if s.startswith("["):
            try:
                import json
                parsed = json.loads(s)
            except ValueError:
                parsed = None
            if isinstance(parsed, list):
                return _string_list(parsed)
        return [s] if s else []
    if not isinstance(value, (list, tuple, set)):
        value = [value]
    out = []
    for v in value:
        v = "" if v is None else str(v).strip()
        if v and v not in out:
            out.append(v)
    return out


def _skills_section(cfg):
    skills = cfg.get("skills")
    return skills if isinstance(skills, dict) else {}


def disabled_names(cfg, platform=None):
    """``skills.disabled`` plus ``skills.platform_disabled.<platform>``."""
    skills = _skills_section(cfg)
    names = set(_string_list(skills.get("disabled")))
    if platform:
        per = skills.get("platform_disabled")
        if isinstance(per, dict):
            names.update(_string_list(per.get(platform)))
    return names


def external_dirs(cfg, hermes_home):
    """``skills.external_dirs`` with ``~`` and ``${VAR}`` expanded; relative
    paths resolve against HERMES_HOME."""
    out = []
    for d in _string_list(_skills_section(cfg).get("external_dirs")):
        d = os.path.expandvars(os.path.expanduser(d))
        if not os.path.isabs(d):
            d = os.path.join(hermes_home, d)
        out.append(os.path.normpath(d))
    return out


def _plugin_manifest(plugin_dir):
    """A user plugin's ``plugin.yaml`` (or ``plugin.yml``) as a dict ({} when
    absent or unreadable)."""
    for fname in ("plugin.yaml", "plugin.yml"):
        try:
            with open(os.path.join(plugin_dir, fname), encoding="utf-8-sig") as f:
                text = f.read()
        except OSError:
            continue
        try:
            data = _parse_yaml(text)
        except Exception:
            return {}
        return data if isinstance(data, dict) else {}
    return {}


def plugin_skill_dirs(cfg, hermes_home, env=None):
    """``[(skills folder, plugin name, enabled)]`` for each user plugin
    under ``$HERMES_HOME/plugins`` that bundles a ``skills/`` folder.

    The name is the manifest ``name`` (Hermes registers a plugin's skills
    as ``<manifest name>:<skill>``), else the folder.  Enabled follows
    Hermes 0.19.0's loader: the folder or the name is in
    ``plugins.enabled`` and in neither form in ``plugins.disabled``; plugins
    of a kind Hermes never calls ``register`` on (``exclusive``,
    ``model-provider``) and every plugin under ``HERMES_SAFE_MODE`` are not.
    """
    env = os.environ if env is None else env
    plugins = os.path.join(hermes_home, "plugins")
    try:
        keys = sorted(os.listdir(plugins))
    except OSError:
        return []
    section = cfg.get("plugins") if isinstance(cfg.get("plugins"), dict) else {}
    enabled = set(_string_list(section.get("enabled"))) if isinstance(section.get("enabled"), list) else set()
    disabled = set(_string_list(section.get("disabled"))) if isinstance(section.get("disabled"), list) else set()
    safe_mode = str(env.get("HERMES_SAFE_MODE", "")).strip().lower() in ("1", "true", "yes", "on")
    out = []
    for key in keys:
        skills = os.path.join(plugins, key, "skills")
        if not os.path.isdir(skills):
            continue
        manifest = _plugin_manifest(os.path.join(plugins, key))
        name = str(manifest.get("name") or key).strip() or key
        on = (not safe_mode and (key in enabled or name in enabled)
              and key not in disabled and name not in disabled
              and manifest.get("kind") not in ("exclusive", "model-provider"))
        out.append((skills, name, on))
    return out
