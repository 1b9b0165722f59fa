"""The plugin at run time: one index in memory, the two callbacks, freshness.

State is one plain dict per registration (``new_state``).  The index is
loaded once (built first if needed) by a background thread started at
registration; the first turn waits for it only if it is not ready yet.
After that a turn reads ``state["idx"]`` and never touches the disk: skill
changes are picked up by a background refresh, started by Hermes' own
signal (``on_skill_lifecycle``, or a wrapper around
``clear_skills_system_prompt_cache``) and by the core freshness check
(``service.open_index`` with ``fresh``), run at most every
``SKILL_RETRIEVAL_REVALIDATE`` seconds (default 2; ``off`` disables it).

Callbacks never raise into Hermes: a failure means no injection, one
warning in Hermes' log (once per distinct message) and one line in the
skill-retrieval log.
"""

import logging
import threading
import time

from retriever import compact, visibility

from . import hermes_glue

LOGGER_NAME = "hermes_cli.plugins.skill_retrieval"
log = logging.getLogger(LOGGER_NAME)
RETRY_AFTER = 30.0  # seconds before a failed index load is tried again
MAX_SESSIONS = 256  # remembered sessions (tools, block names); oldest dropped


def compact_enabled():
    """False when ``SKILL_RETRIEVAL_COMPACT`` is 0/false/no/off."""
    from retriever import settings
    return settings.get("SKILL_RETRIEVAL_COMPACT", warn=log.warning)


def revalidate_interval():
    """Seconds between freshness checks, or None when turned off."""
    from retriever import settings
    return settings.get("SKILL_RETRIEVAL_REVALIDATE", warn=log.warning)


def new_state(roots=None, index_path=None, interval="env"):
    """Fresh plugin state.  ``roots=None`` means what a Hermes session can
    load (its skill folders and enabled plugins' skills, under Hermes' home,
    with its config.yaml), ``index_path=None`` the default cache path for
    those roots, ``interval`` the freshness-check period (None: off)."""
    return {
        "roots": list(roots) if roots is not None else None,
        "index_path": index_path,
        "interval": revalidate_interval() if interval == "env" else interval,
        "idx": None, "path": None, "signature": None,
        "load_lock": threading.Lock(),  # one load or rebuild at a time
        "mu": threading.Lock(),         # guards the refresher fields and "sessions"
        "pending": None, "refresher": None,
        "relearn": None, "learner": None,  # the fold of what was learnt (``relearn``)
        "last_check": 0.0, "failed_at": None,
        "builds": {},    # thread id -> (tools, toolsets, names) of the last index build
        "sessions": {},  # session id -> {"tools": (tools, toolsets), "names": set}
        "memory": {},    # what each session was given and loaded (retriever.session)
        "warned": set(),
        "semantic": _semantic_provider(),
    }


def _semantic_provider():
    # The semantic tier in process: the model loads in a background thread
    # from registration on; until it (and the vectors) are ready a turn is
    # BM25 only, never waiting.
    try:
        from retriever import semantic
        if not semantic.enabled():
            return None
        from retriever.semantic import inproc
        return inproc.Provider(lambda m: log.info("Skill retrieval semantic tier: %s", m))
    except Exception:
        return None


# ------------------------------------------------------------------ logging

def warn_once(state, message):
    """A warning in Hermes' log (once per message) and the retrieval log."""
    if message in state["warned"]:
        return
    state["warned"].add(message)
    try:
        log.warning(message)
    except Exception:
        pass
    try:
        from retriever import locate
        locate.log("hermes plugin: " + message)
    except Exception:
        pass


# ------------------------------------------------------------------ the index

def _open(state, reason):
    """Load (building if missing, stale or for other roots) and swap in the
    index.  Logs the health line when the index in memory changes."""
    from retriever import service
    with state["load_lock"]:
        t0 = time.perf_counter()
        wall0 = time.time()
        if state["roots"] is not None:
            req = {"roots": state["roots"]}
        else:
            # Hermes' home passed explicitly: its config.yaml (disabled
            # skills, external dirs, enabled plugins) applies whether or
            # not HERMES_HOME is set, and is in the freshness manifest.
            req = {"only_hermes": True, "hermes_home": hermes_glue.hermes_home()}
        idx, path = service.open_index(dict(req, index=state["index_path"], fresh=True, quiet=True))
        ms = (time.perf_counter() - t0) * 1000.0
        hdr = idx["header"]
        state["last_check"] = time.monotonic()
        state["failed_at"] = None
        if state["idx"] is not None and hdr.get("signature") == state["signature"] \
                and path == state["path"]:
            return False
        state["idx"], state["path"], state["signature"] = idx, path, hdr.get("signature")
    rebuilt = hdr.get("built_at", 0) >= wall0 - 1.0
    log.info("BM25 index built: %d docs, %d terms (%s in %.0f ms; %s; %s)",
             hdr.get("n_docs", 0), hdr.get("n_terms", 0),
             "built" if rebuilt else "loaded", ms, reason, path)
    if not hdr.get("n_docs"):
        where = ", ".join(r["path"] for r in hdr.get("roots", ()))
        warn_once(state, "No active skills found for BM25 index (%s); nothing will be injected"
                  % ("none under " + where if where else "no skill folder exists"))
    return True


def ensure_index(state):
    """The index in memory, loading it now if the warm-up has not; None
    after a failure (retried after RETRY_AFTER seconds)."""
    idx = state["idx"]
    if idx is not None:
        return idx
    failed = state["failed_at"]
    if failed is not None and time.monotonic() - failed < RETRY_AFTER:
        return None
    try:
        _open(state, "first use")
    except Exception as exc:
        state["failed_at"] = time.monotonic()
        warn_once(state, "Skill retrieval: index error (%s: %s); no skills are injected until it is fixed"
                  % (type(exc).__name__, exc))
    return state["idx"]


def refresh(state, reason):
    """Reload in the background (coalesced: one refresher thread at a time,
    and a request made while it runs makes it run once more)."""
    _coalesced(state, "pending", "refresher", reason, _refresh_once, "skill-retrieval-refresh")


def _refresh_once(state, reason):
    try:
        _open(state, reason)
    except Exception as exc:
        state["failed_at"] = time.monotonic()
        warn_once(state, "Skill retrieval: index error (%s: %s); %s"
                  % (type(exc).__name__, exc, "keeping the previous index" if state["idx"] is not None
                     else "no skills are injected until it is fixed"))


def relearn(state):
    """Fold the usage record into the learnt table of the index in memory
    (``usage.relearn``) in a background thread, coalesced as ``refresh``
    is: one fold at a time, and a turn that saw loads meanwhile makes it
    run once more.  Folds running side by side could finish out of order
    and leave the table of an older reading of the record."""
    if not state.get("path"):
        return  # no index file of ours: no table to fold into
    _coalesced(state, "relearn", "learner", True, _relearn_once, "skill-retrieval-learn")


def _relearn_once(state, _):
    from retriever import usage
    if state["path"]:
        usage.relearn(state["path"])  # never raises; the next turn reads it (``service.with_learnt``)


def _coalesced(state, job, worker, value, body, name):
    # Run body(state, value) in a thread of its own, one at a time: state[job]
    # holds the latest request (None: none), state[worker] the thread; a
    # request made while it runs makes it run once more.
    with state["mu"]:
        state[job] = value
        if state.get(worker) is not None:
            return
        t = threading.Thread(target=_work, args=(state, job, worker, body), daemon=True, name=name)
        state[worker] = t
    t.start()


def _work(state, job, worker, body):
    while True:
        with state["mu"]:
            value, state[job] = state[job], None
            if value is None:
                state[worker] = None
                return
        body(state, value)


def wait_idle(state, timeout=30.0):
    """Wait for a running refresh and fold to finish (tests, benchmarks)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with state["mu"]:
            busy = [t for t in (state["refresher"], state["learner"]) if t is not None]
        if not busy:
            return True
        busy[0].join(max(0.0, deadline - time.monotonic()))
    return False


def maybe_check(state):
    """Start the rate-limited freshness check if it is due."""
    interval = state["interval"]
    if interval is None or state["refresher"] is not None:
        return
    now = time.monotonic()
    if now - state["last_check"] >= interval:
        state["last_check"] = now
        refresh(state, "freshness check")


# ------------------------------------------------------------------ sessions

def _remember(state, session_id, key, value):
    with state["mu"]:  # gateway turns run in several threads
        sessions = state["sessions"]
        entry = sessions.get(session_id)
        if entry is None:
            if len(sessions) >= MAX_SESSIONS:
                sessions.pop(next(iter(sessions)), None)
            entry = sessions[session_id] = {}
        entry[key] = value


def on_index_build(state, tools, toolsets, text):
    """Hermes just built a skills index in this thread: keep what decided
    it, for this thread's next turn."""
    state["builds"][threading.get_ident()] = (
        None if tools is None else frozenset(tools),
        None if toolsets is None else frozenset(toolsets),
        compact.block_names(text))


def claim_build(state, session_id):
    """Credit an index build seen in this thread to ``session_id``: Hermes
    builds (or restores) the system prompt, then runs ``pre_llm_call``, in
    the same thread, so a build seen since the last turn is this session's."""
    build = state["builds"].pop(threading.get_ident(), None)
    if build is not None:
        _remember(state, session_id, "tools", build[:2])
        if build[2] is not None:
            _remember(state, session_id, "names", build[2])


def turn_view(state, session_id, platform):
    """The visibility view for this turn of ``session_id``."""
    known = state["sessions"].get(session_id) or {}
    tools = known.get("tools")
    return visibility.make_view(platform, tools is not None,
                                tools[0] if tools else None, tools[1] if tools else None,
                                known.get("names"))


# ------------------------------------------------------------------ callbacks

def message_text(user_message):
    """The text of a user message: a str, or a list of content parts."""
    from retriever.runners.hook import message_text as text_of
    try:
        return text_of(user_message)
    except ValueError:
        return ""


def retrieve(state, text, session_id="", platform="", history=None):
    """The results injected for ``text``: the same ranking as
    ``skill-retrieve`` (top_k searched, inject_k kept), minus what Hermes
    hides from this session.  With a ``session_id``, also minus what the
    session was given in its last turns or has loaded (``history``: the
    conversation Hermes passes), and this turn's results are remembered:
    the prompt hooks' own session path (``hook.answer_in_session``)."""
    idx = ensure_index(state)
    if idx is None:
        return []
    view = turn_view(state, session_id, platform)
    # Ranked within what Hermes shows this session, so a hidden skill never
    # takes a place, sets the floor or silences a visible match; the
    # optional LLM rerank sees only those too.
    req = {"keep": lambda r: visibility.visible(r, view), "session_id": session_id or None, "quiet": True,
           "semantic": state.get("semantic"), "_path": state["path"]}
    memo = None
    if session_id:
        # Kept in memory: this process lives as long as Hermes does.  The
        # conversation is read outside the lock (its cost is this turn's
        # alone, never a wait for another session's turn), and on every
        # turn, silent ones too: the usage record counts loads.
        from retriever import session
        loads = session.history_loads(history) if isinstance(history, list) else None
        with state["mu"]:  # gateway turns run in several threads
            memo = session.begin(session_id, "hermes", store=state["memory"], loads=loads)
    from retriever.runners import hook
    note = {}
    _, results, _ = hook.answer_in_session(None, text, req, memo, idx=idx, note=note, lock=state["mu"])
    if memo is not None:
        from retriever import usage
        usage.note("hermes", session_id, text, results, note["tier"], note["loaded"], note["terms"])
        if (note["loaded"] or idx.get("learnt") is False) and usage.learning():
            # As a hook does after a turn that saw loads (or whose index
            # was rebuilt since the table was folded), off the turn.
            relearn(state)
    return results


def make_pre_llm_call(state):
    """The ``pre_llm_call`` hook: ``{"context": BLOCK}`` or None."""
    def pre_llm_call(user_message=None, session_id="", platform="", conversation_history=None, **_):
        try:
            claim_build(state, session_id or "")
            text = message_text(user_message)
            if not text.strip():
                return None
            from retriever import render
            from retriever.runners import registry
            block = render.text_block(retrieve(state, text, session_id or "", platform or "",
                                               conversation_history),
                                      registry.RUNNERS["hermes"]["load"])
            maybe_check(state)
            return {"context": block} if block else None
        except Exception as exc:
            warn_once(state, "Skill retrieval: pre_llm_call failed (%s: %s); nothing injected"
                      % (type(exc).__name__, exc))
            return None
    return pre_llm_call


def make_llm_request(state):
    """The ``llm_request`` middleware: the names-only skills index."""
    def llm_request(request=None, session_id="", **_):
        try:
            sid = session_id or ""
            if "names" not in (state["sessions"].get(sid) or {}):
                names = compact.block_names(compact.request_system_text(request))
                if names is not None:
                    _remember(state, sid, "names", names)
            new = compact.rewrite_request(request)
            if new is None:
                return None
            return {"request": new, "name": "skill-retrieval",
                    "reason": "skills index reduced to names"}
        except Exception as exc:
            warn_once(state, "Skill retrieval: llm_request middleware failed (%s: %s); request sent as is"
                      % (type(exc).__name__, exc))
            return None
    return llm_request


def register(ctx, key="skill-retrieval"):
    """Wire the plugin into Hermes through ``ctx``; returns the state.

    ``key`` names this copy's listeners on the shared Hermes wrappers.
    An invalid setting is reported here, in Hermes' log, and once per process.
    """
    from retriever import settings
    state = new_state()
    ctx.register_hook("pre_llm_call", make_pre_llm_call(state))
    # Compaction rewrites the block Hermes' prompt builder writes; without
    # that builder there is no known block to rewrite.  Said once, here.
    compact_on = compact_enabled()
    has_builder = hermes_glue.has_prompt_builder()
    if not has_builder:
        warn_once(state, "Cannot locate prompt_builder%s (agent.prompt_builder); skill changes are seen "
                  "by the on-disk freshness check only, and skills with tool conditions are not offered"
                  % (" — compaction skipped" if compact_on else ""))
        compact_on = False
    if compact_on:
        add = getattr(ctx, "register_middleware", None)
        try:
            if add is None:
                raise AttributeError("this Hermes has no register_middleware")
            add("llm_request", make_llm_request(state))
        except Exception as exc:
            compact_on = False
            warn_once(state, "Skill retrieval: cannot register the llm_request middleware (%s); "
                      "the skills index keeps its descriptions" % exc)

    def on_change(*_a, **_k):
        refresh(state, "skills changed in Hermes")

    signals = []
    if "on_skill_lifecycle" in hermes_glue.valid_hooks():
        ctx.register_hook("on_skill_lifecycle", on_change)
        signals.append("on_skill_lifecycle")
    if hermes_glue.watch_skill_changes(key, on_change):
        signals.append("clear_skills_system_prompt_cache")
    observed = hermes_glue.observe_index_builds(
        key, lambda tools, toolsets, text: on_index_build(state, tools, toolsets, text))
    if has_builder and (not observed or not signals):
        warn_once(state, "Skill retrieval: Hermes' prompt builder has no %s; skill changes are seen by "
                  "the on-disk freshness check only, and skills with tool conditions are offered only "
                  "once the index block has been seen"
                  % ("build_skills_system_prompt" if not observed else "clear_skills_system_prompt_cache"))
    refresh(state, "startup")  # warm up off the first turn's path
    top_k, inject_k = settings.limits(warn=log.warning)
    settings.get("SKILL_RETRIEVAL_DECIDE", warn=log.warning)  # a bad value is said here, in Hermes' log, once
    # The first part is the original plugin's line (v0.7.0), which users grep for.
    log.info("Skill retrieval plugin registered (top_k=%d, compact=%s) inject_k=%d, signals=%s",
             top_k, "true" if compact_on else "false", inject_k, ",".join(signals) or "none")
    return state
