"""Hermes Agent plugin ``skill-retrieval``.

Phase 1 (``llm_request`` middleware): the ``<available_skills>`` block of
every outgoing request keeps skill names only.  Phase 2 (``pre_llm_call``
hook): the few skills relevant to the user's message, found by the BM25
index in ``retriever``, are appended to that message.

Loaded by Hermes from ``$HERMES_HOME/plugins/skill-retrieval`` (usually a
symlink to this folder, see ``skill-retrieve install hermes``) or through
the ``hermes_agent.plugins`` entry point.  Importing this package does
nothing; ``register(ctx)`` does the work, in ``runtime``.
"""

import os
import sys

# A copied (not linked) plugin folder names the checkout it came from here.
ROOT_HINT = "retriever_root.txt"


def _ensure_retriever():
    """Make ``retriever`` importable.  Hermes imports a linked plugin by
    its link path and runs its own interpreter, so the project root is
    found from this file's real path (or the hint a copy carries) and put
    at the end of ``sys.path``, where it shadows nothing."""
    try:
        import retriever  # noqa: F401
        return
    except ImportError:
        pass
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.path.dirname(os.path.dirname(os.path.realpath(__file__)))]
    try:
        with open(os.path.join(here, ROOT_HINT), encoding="utf-8") as f:
            candidates.append(f.read().strip())
    except OSError:
        pass
    for root in candidates:
        if root and os.path.isfile(os.path.join(root, "retriever", "__init__.py")):
            if root not in sys.path:
                sys.path.append(root)
            return


def register(ctx):
    """Hermes' entry point: register the hook and the middleware.  Never
    raises; a failure is logged and the plugin stays inert."""
    try:
        _ensure_retriever()
        from . import runtime
        runtime.register(ctx, key=__name__)
    except Exception as exc:
        import logging
        logging.getLogger("hermes_cli.plugins.skill_retrieval").warning(
            "Skill retrieval plugin failed to register (%s: %s); no skills will be injected",
            type(exc).__name__, exc)
        try:
            from retriever import locate
            locate.log("hermes plugin: register failed: %s: %s" % (type(exc).__name__, exc))
        except Exception:
            pass
