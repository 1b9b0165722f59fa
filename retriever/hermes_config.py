"""Read the parts of Hermes' config.yaml that decide which skills exist.

Build path only (PyYAML).  A missing file is an empty config; an unreadable
or invalid one is reported once and treated as empty, never raised.
"""

import os


def config_path(hermes_home):
    """Path of Hermes' config.yaml under ``hermes_home``."""
    return os.path.join(hermes_home, "config.yaml")


def load(hermes_home, warn=None):
    """Return the parsed config.yaml as a dict ({} when absent or invalid)."""
    path = config_path(hermes_home)
    try:
        with open(path, encoding="utf-8-sig") as f:
            text = f.read()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        if warn:
            warn("%s: cannot read (%s)" % (path, exc.strerror or exc))
        return {}
    try:
        import yaml
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
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
