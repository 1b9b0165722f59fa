"""Never suggest a skill that Hermes hides from the session.

Hermes offers a skill in ``<available_skills>`` only if (agent/prompt_builder.py,
agent/skill_utils.py): its name and folder are not disabled (``skills.disabled``
plus ``skills.platform_disabled.<platform>``), its ``platforms:`` match the OS,
its ``environments:`` are active, and its ``metadata.hermes`` conditions pass
for the session's tools and toolsets (``requires_*`` present, ``fallback_for_*``
absent).  Each search result carries those fields as ``vis`` (from the index).

The rules are asked of Hermes' own functions at call time when Hermes is
importable.  The fallbacks mirror Hermes 0.19.0 for when it is not (unit
tests, benchmarks), and lean towards hiding where the answer is unknown.
"""

import importlib
import sys

CONDITION_KEYS = ("fallback_for_toolsets", "requires_toolsets",
                  "fallback_for_tools", "requires_tools")
_OS_MAP = {"macos": "darwin", "linux": "linux", "windows": "win32"}
_KNOWN_ENVIRONMENTS = frozenset(("kanban", "docker", "s6"))
_MISSING = set()


def hermes_module(name):
    """The Hermes module ``name`` if importable, else None.

    Already-imported modules (and test fakes in ``sys.modules``) are found
    without an import; a failed import is not retried, so a process without
    Hermes pays for the miss once.
    """
    mod = sys.modules.get(name)
    if mod is not None or name in _MISSING:
        return mod
    try:
        return importlib.import_module(name)
    except Exception:
        _MISSING.add(name)
        return None


def session_platform(platform=""):
    """The platform Hermes filters the index by: its own hint
    (``HERMES_PLATFORM``, ``HERMES_SESSION_PLATFORM``, the gateway
    session), else the ``platform`` the hook was given."""
    pb = hermes_module("agent.prompt_builder")
    hint = getattr(pb, "_current_session_platform_hint", None)
    if hint is not None:
        try:
            value = hint()
            if value:
                return str(value)
        except Exception:
            pass
    return platform or ""


def make_view(platform="", tools_known=False, tools=None, toolsets=None, names=None):
    """What decides visibility for one turn, as a plain dict.

    ``tools_known``: the tools and toolsets Hermes built this session's
    index with are known (``tools``/``toolsets``; both None means Hermes
    filtered nothing).  ``names``: the skill names the session's
    ``<available_skills>`` block lists, or None when unseen.  The disabled
    set is read now, through Hermes (which re-reads config.yaml when it
    changes), for the session's platform.
    """
    su = hermes_module("agent.skill_utils")
    disabled = set()
    get_disabled = getattr(su, "get_disabled_skill_names", None)
    if get_disabled is not None:
        try:
            disabled = set(get_disabled(session_platform(platform) or None))
        except Exception:
            disabled = set()
    return {"disabled": disabled, "tools_known": bool(tools_known),
            "tools": tools, "toolsets": toolsets, "names": names,
            "su": su, "pb": hermes_module("agent.prompt_builder"),
            "plugin_skill": _plugin_skill_lookup()}


def _plugin_skill_lookup():
    """Hermes' registry of plugin skills (``find_plugin_skill(name)``), when
    Hermes runs in this process (never imported for it): a plugin skill is
    loadable only once its plugin registered it."""
    plugins = sys.modules.get("hermes_cli.plugins")
    get = getattr(plugins, "get_plugin_manager", None)
    if get is None:
        return None
    try:
        find = getattr(get(), "find_plugin_skill", None)
    except Exception:
        return None
    return find if callable(find) else None


def _os_ok(platforms, view):
    fn = getattr(view["su"], "skill_matches_platform_list", None)
    if fn is not None:
        try:
            return bool(fn(list(platforms)))
        except Exception:
            pass
    for p in platforms:
        mapped = _OS_MAP.get(str(p).lower().strip(), str(p).lower().strip())
        if sys.platform.startswith(mapped):
            return True
    return False


def _environment_ok(environments, view):
    fn = getattr(view["su"], "skill_matches_environment", None)
    if fn is not None:
        try:
            return bool(fn({"environments": list(environments)}))
        except Exception:
            pass
    # Without Hermes the active environments are unknown: an unknown tag
    # shows the skill (as in Hermes), a known one hides it.
    return any(str(e).lower().strip() not in _KNOWN_ENVIRONMENTS for e in environments)


def _conditions_ok(conditions, view):
    tools, toolsets = view["tools"], view["toolsets"]
    fn = getattr(view["pb"], "_skill_should_show", None)
    if fn is not None:
        try:
            return bool(fn(conditions, tools, toolsets))
        except Exception:
            pass
    if tools is None and toolsets is None:
        return True
    tools = tools or set()
    toolsets = toolsets or set()
    if any(t in toolsets for t in conditions["fallback_for_toolsets"]) or \
            any(t in tools for t in conditions["fallback_for_tools"]):
        return False
    return all(t in toolsets for t in conditions["requires_toolsets"]) and \
        all(t in tools for t in conditions["requires_tools"])


def _registered(name, view):
    find = view.get("plugin_skill")
    if find is None:
        return True  # no registry to ask: the enabled plugins' skills stand
    try:
        return find(name) is not None
    except Exception:
        return True


def visible(result, view):
    """True if Hermes would offer the skill of ``result`` in this session."""
    name = result["name"]
    path = result.get("path") or ""
    folder = path.rstrip("/").rsplit("/", 1)[-1]
    disabled = view["disabled"]
    # A plugin's skill ("<plugin>:<skill>") is never in the index; Hermes
    # serves it through skill_view, once registered, with the OS gate alone.
    plugin_skill = ":" in name
    if name in disabled or (folder in disabled and not plugin_skill):
        return False
    if plugin_skill and not _registered(name, view):
        return False
    vis = result.get("vis")
    if not vis:
        return True
    if vis.get("platforms") and not _os_ok(vis["platforms"], view):
        return False
    if plugin_skill:
        return True
    if vis.get("environments") and not _environment_ok(vis["environments"], view):
        return False
    conditions = {k: list(vis.get(k) or ()) for k in CONDITION_KEYS}
    if any(conditions.values()):
        if view["tools_known"]:
            return _conditions_ok(conditions, view)
        # Tools unknown: trust only the block Hermes actually sent.
        names = view["names"]
        return names is not None and name in names
    return True
