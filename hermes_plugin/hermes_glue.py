"""Where the plugin touches Hermes beyond ``ctx``: its home, its prompt
builder, its skill-change signal and the tools its skills index was built with.

Every Hermes module is looked up at call time (``visibility.hermes_module``),
so the plugin imports and its tests run without Hermes.  Functions that
wrap a Hermes attribute keep one wrapper per attribute, shared by every
loaded copy of this plugin (a directory plugin and a pip entry point, or a
forced rediscovery): each copy adds its listener under its own key.
"""

import functools
import sys

from retriever.visibility import hermes_module

LISTENERS = "_skill_retrieval_listeners"


def hermes_home():
    """Hermes' home folder, as Hermes resolves it (profiles included)."""
    hc = hermes_module("hermes_constants")
    get = getattr(hc, "get_hermes_home", None)
    if get is not None:
        try:
            return str(get())
        except Exception:
            pass
    from retriever import locate
    return locate.hermes_home()


def has_prompt_builder():
    """True when Hermes' prompt builder (``agent.prompt_builder``, which
    writes ``<available_skills>``) is importable."""
    pb = hermes_module("agent.prompt_builder")
    return callable(getattr(pb, "build_skills_system_prompt", None))


def valid_hooks():
    """Hermes' hook names, or an empty set when unknown."""
    plugins = hermes_module("hermes_cli.plugins")
    return set(getattr(plugins, "VALID_HOOKS", ()) or ())


def _listeners_of(module, attr, make_wrapper):
    """The listener dict of the wrapper installed on ``module.attr``
    (installing it on first use), or None when the attribute is missing."""
    fn = getattr(module, attr, None) if module is not None else None
    if not callable(fn):
        return None
    listeners = getattr(fn, LISTENERS, None)
    if listeners is None:
        listeners = {}
        wrapper = make_wrapper(fn, listeners)
        setattr(wrapper, LISTENERS, listeners)
        setattr(module, attr, wrapper)
    return listeners


def _after_call(fn, listeners):
    @functools.wraps(fn)
    def clear_skills_system_prompt_cache(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        finally:
            for cb in list(listeners.values()):
                try:
                    cb()
                except Exception:
                    pass
    return clear_skills_system_prompt_cache


def watch_skill_changes(key, on_change):
    """Call ``on_change()`` after every ``clear_skills_system_prompt_cache``.

    Hermes 0.19.0 calls it (with ``clear_snapshot=True``) after
    ``skill_manage`` create/patch/delete, hub install/uninstall/toggle, the
    web UI and learning mutations, each importing it from
    ``agent.prompt_builder`` at call time, so replacing the module attribute
    reaches them all.  Returns False when the prompt builder is not found.
    """
    pb = hermes_module("agent.prompt_builder")
    listeners = _listeners_of(pb, "clear_skills_system_prompt_cache", _after_call)
    if listeners is None:
        return False
    listeners[key] = on_change
    return True


def _observe(fn, listeners):
    @functools.wraps(fn)
    def build_skills_system_prompt(*args, **kwargs):
        result = fn(*args, **kwargs)
        try:
            tools = kwargs.get("available_tools", args[0] if args else None)
            toolsets = kwargs.get("available_toolsets", args[1] if len(args) > 1 else None)
            for cb in list(listeners.values()):
                cb(tools, toolsets, result)
        except Exception:
            pass
        return result
    return build_skills_system_prompt


def observe_index_builds(key, on_build):
    """Call ``on_build(tools, toolsets, text)`` whenever Hermes builds its
    skills index, with the tools and toolsets that decide which conditional
    skills it shows.  0.19.0 calls ``run_agent.build_skills_system_prompt``,
    newer releases ``agent.prompt_builder``'s; both names get the same
    wrapper.  Returns False when the builder is not found.
    """
    pb = hermes_module("agent.prompt_builder")
    original = getattr(pb, "build_skills_system_prompt", None)
    listeners = _listeners_of(pb, "build_skills_system_prompt", _observe)
    if listeners is None:
        return False
    listeners[key] = on_build
    ra = sys.modules.get("run_agent")  # patched only if already imported: it is heavy
    if ra is not None:
        current = getattr(ra, "build_skills_system_prompt", None)
        if current is original and original is not None:
            ra.build_skills_system_prompt = pb.build_skills_system_prompt
        elif callable(current):
            more = _listeners_of(ra, "build_skills_system_prompt", _observe)
            if more is not None:
                more[key] = on_build
    return True
