"""Prompt hooks: a runner's stdin JSON in, that runner's JSON out.

``skill-retrieve hook RUNNER`` is registered as a per-prompt hook in Claude
Code, Codex, Gemini CLI, Cline or Hermes.  It reads the hook payload, takes
the user's prompt from where that runner puts it, picks the skill folders
that runner reads (unless ``--root`` is given), ranks them and prints the
retrieved block in the runner's output shape.

Fail open, always: a hook that errs or exits non-zero can block or clutter
the user's prompt, so ``run`` never raises, always returns 0, never writes
to stderr (Gemini shows stderr to the user when stdout is empty; only an
unknown runner name, a registration mistake, is reported there) and on any
error prints only what the runner requires (nothing, ``{}`` for Gemini,
``{"cancel": false}`` for Cline), logging one line via ``locate.log``.

Hot path: runs under ``python -I -S`` right after ``retriever.cli.entry``, so it
imports only built-in modules and the query path (no json, re, os).
"""

import sys

from retriever import locate
from retriever.service import read_stdin, write_out
from retriever.runners.registry import NAMES as RUNNERS, get as runner_record


# ---------------------------------------------------------------- payload


def prompt_of(runner, payload):
    """The user's prompt in ``payload`` (a parsed stdin dict), as str.

    Raises ValueError naming the missing field when the payload does not
    carry one where ``runner`` puts it.
    """
    keys = runner_record(runner)["prompt"]
    value = payload
    for n, key in enumerate(keys):
        if not isinstance(value, dict) or key not in value:
            raise ValueError("payload has no %s" % ".".join(keys[:n + 1]))
        value = value[key]
    return message_text(value)


def message_text(value):
    """The words of a message: a str, or the text of its content parts
    ({"type": "text", "text": ...}, as Hermes sends); images and other
    parts carry no words to rank.  Raises ValueError for other types."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        value = [value]
    if isinstance(value, list):
        out = []
        for part in value:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str) \
                    and part.get("type", "text") in ("text", "input_text"):
                out.append(part["text"])
        return "\n".join(out)
    raise ValueError("prompt is a %s, not text" % type(value).__name__)


# ------------------------------------------------------------------ roots


def roots_for(runner, payload):
    """The runner's skill set for this payload: root dicts of existing
    folders, precedence order, with the runner's naming rules (see
    ``retriever.runners.skillsets``).  Hermes returns ``[]``: the default
    roots, which include Hermes' own config rules."""
    from retriever.runners.skillsets import skill_set
    return skill_set(runner, payload)


# ----------------------------------------------------------------- output


def envelope(runner, block):
    """The runner's output for ``block`` (a retrieved-skills text), as one
    line.  An empty block gives what the runner needs when there is nothing
    to add.  Non-ASCII text is written as UTF-8, not ``\\u`` escapes, so
    the output's length is the length the runner's cap counts."""
    if not block:
        return empty_output(runner)
    return runner_record(runner)["output"] % _json_str(block)


def _json_str(text):
    """``text`` as a JSON string literal, non-ASCII kept."""
    try:
        from _json import encode_basestring
    except ImportError:  # pragma: no cover - other interpreters
        import json
        return json.dumps(text, ensure_ascii=False)
    return encode_basestring(text)


def empty_output(runner):
    """What to print when nothing is relevant or something failed."""
    return runner_record(runner)["empty"]


def fitted(runner, results):
    """``(output, n)``: the runner's output for the longest prefix of
    ``results`` whose output stays under the runner's cap (whole skills
    are dropped, never cut mid-line), and the number of skills in it; the
    empty output and 0 when not even one fits."""
    from retriever.render import text_block
    rec = runner_record(runner)
    cap, load = rec["cap"], rec.get("load")
    if results:
        out = envelope(runner, text_block(results, load))
        if len(out) < cap:
            return out, len(results)  # the usual case: everything fits, one rendering
    lo, hi = 0, len(results)
    best = empty_output(runner), 0
    while lo < hi:  # the length grows with the prefix: bisect on it
        mid = (lo + hi + 1) // 2
        out = envelope(runner, text_block(results[:mid], load))
        if len(out) < cap:
            best = out, mid
            lo = mid
        else:
            hi = mid - 1
    return best


def _field(payload, keys):
    # The value at ``keys`` in the payload, or None.
    value = payload
    for key in keys or ():
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value if keys else None


def session_id_of(runner, payload):
    """The session id in ``payload`` (a non-empty str), or None: where the
    runner record's ``session`` says it is (``session_id`` for most
    runners, ``taskId`` for Cline).  Read here only, so the session
    memory and the rerank's A/B log name the same session."""
    sid = _field(payload, (runner_record(runner).get("session") or {}).get("id"))
    return sid if isinstance(sid, str) and sid else None


def session_memory(runner, payload, sid, ranking=""):
    """The session memory for this prompt (``retriever.session.begin``)
    of session ``sid`` (``session_id_of``), or None when there is none:
    the runner record's ``session`` says where its transcript path and
    conversation are.  ``ranking`` names the tiers that ranked."""
    if sid is None:
        return None
    where = runner_record(runner).get("session") or {}
    from retriever import session
    return session.begin(sid, runner, transcript=_field(payload, where.get("transcript")),
                         history=_field(payload, where.get("history")), agent_id=payload.get("agent_id"),
                         ranking=ranking)


# ----------------------------------------------------------------- answer


def _answer(runner, opts, text, payload, note=None):
    """``(output, index path or None)`` for a parsed payload.  ``note``
    (a dict) receives what the usage record keeps: the skills injected,
    the tiers, the message's terms and the skills the agent loaded."""
    note = {} if note is None else note
    from retriever import service, settings
    roots = list(opts.get("roots") or ())
    # An explicit --index answers from that index (its header names its
    # roots); otherwise the runner's own skill folders decide.
    if not roots and runner != "hermes" and not opts.get("index"):
        roots = roots_for(runner, payload)
        if not roots:
            return empty_output(runner), None  # no skill folders: nothing to build
    platform = opts.get("platform") or locate.env("HERMES_PLATFORM") or None
    keep = None
    if runner == "hermes":
        if platform is None:
            extra = payload.get("extra")
            p = extra.get("platform") if isinstance(extra, dict) else None
            platform = p if isinstance(p, str) and p else None
        # Never suggest what Hermes hides: wrong OS, inactive environment,
        # tool conditions (unknowable from a shell hook, so held back).
        from retriever.visibility import make_view, visible
        view = make_view(platform or "")
        keep = lambda r: visible(r, view)  # noqa: E731
    sid = session_id_of(runner, payload)
    req = {"roots": roots, "index": opts.get("index"), "platform": platform, "k": opts.get("k"),
           "fresh": opts.get("fresh", False), "quiet": True, "rerank": opts.get("rerank", False),
           # Hermes' shell hook suggests only what Hermes can load: its own
           # skill folders (local and skills.external_dirs), not every agent's.
           "only_hermes": runner == "hermes" and not roots,
           "wait": settings.get("SKILL_RETRIEVAL_HOOK_WAIT"), "label": "hook " + runner,
           "keep": keep, "session_id": sid}
    note["sid"] = sid
    out, _, path = answer_in_session(runner, text, req, session_memory(runner, payload, sid), note=note)
    if path is not None:
        # Which tier answered: counted in the usage record (``run``, one
        # append a prompt); doctor's probe names no session, so it is
        # logged here but not recorded.
        note["why"] = req.get("bm25_why") or ""
        note_tier(runner, req.get("bm25_why"))
    return out, path


def answer_in_session(runner, text, req, memo, idx=None, note=None, lock=None):
    """``(output, injected results, index path or None)`` for one prompt
    of a session: ``service.answer`` for ``req`` (on ``idx`` when given),
    then, with a session memory ``memo`` (``session_memory``; None: no
    session), what the session already holds taken out and what this turn
    injects remembered.  The hook's path, the Hermes plugin's
    (``hermes_plugin.runtime.retrieve``) and the session eval's
    (eval/sessions.py), so all measure the same thing.

    ``runner`` None: the caller renders (the plugin), so nothing is cut
    to a cap and the output is None.  ``lock`` (a context manager, e.g.
    a ``threading.Lock``) is held around each use of ``memo``, not
    around the ranking: the plugin's gateway turns run in several
    threads and share one session store."""
    from retriever import service
    lock = _Unlocked() if lock is None else lock
    if memo is not None:
        # The earlier prompts' terms rank a short or referring turn.
        from retriever import session as memory
        with lock:
            memory.contextualize(req, memo)
    results, path = service.answer(text, req, idx=idx)
    from retriever.render import unlisted
    results = unlisted(results, req.get("searched"))
    tier = "+".join(req.get("tiers") or ())
    if note is not None:
        # The terms the ranking read (``query.parse``, in the session's
        # context): what the usage record keeps for learning.
        note.update(tier=tier, terms=(req.get("context") or {}).get("terms"), relearn=req.get("_relearn"))
    if memo is None:
        out, n = _fit(runner, results)
        if note is not None:
            note["injected"] = results[:n]
        return out, results[:n], path
    # What the session already holds is taken out after the decision,
    # and what this turn injects (and its terms) remembered for the next.
    with lock:
        memo["ranking"] = tier
        held = set(memo["entry"]["l"]) if note is not None else None  # loads seen before this prompt
        results = memory.filter(memo, results, text)
        out, n = _fit(runner, results)
        if note is not None:
            from retriever import usage
            note["injected"], note["loaded"] = results[:n], usage.loads_since(memo, held)
        memory.record(memo, results[:n])
    return out, results[:n], path


def _fit(runner, results):
    # ``fitted``, or every result and no output when the caller renders.
    return (None, len(results)) if runner is None else fitted(runner, results)


class _Unlocked:
    # ``answer_in_session``'s lock when none is given (no contextlib on
    # the hook's import path).
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# ------------------------------------------------- which tier answered

def note_tier(runner, why):
    """An answer by BM25 alone (``why``: ``service.bm25_reason``) gets one
    line in the log; which tier answered each prompt of a session is
    counted in the usage record (``usage.tier_tally``).  Never raises."""
    if why:
        # Turned off, every prompt says so: that routine line does not
        # create the cache folder (no ``os`` import on the hot path).
        locate.log("hook %s: answered by BM25 alone: %s" % (runner, why), make=not why.startswith("turned off"))


# -------------------------------------------------------------------- run


def run(runner, opts=None):
    """Answer one hook call: stdin JSON in, ``runner``'s JSON on stdout.

    ``opts`` is the dict from ``retriever.cli.entry.parse_fast`` (roots, index, k,
    platform, fresh).  Called with an argparse namespace instead (the full
    CLI's ``hook`` subcommand), it takes the options from there.  Always
    returns 0.
    """
    if opts is None and not isinstance(runner, str):
        runner, opts = _from_args(runner)
    from retriever import service
    if runner not in RUNNERS:
        msg = ("no hook runner named" if not runner else "unknown hook runner %r" % runner) \
            + " (expected one of: %s)" % ", ".join(RUNNERS)
        service.warn(msg)
        locate.log("hook: " + msg)
        return 0
    import io
    real_stderr = sys.stderr
    sys.stderr = captured = io.StringIO()  # warnings must not reach the runner
    out, path, error, text, note = empty_output(runner), None, None, None, None
    try:
        if opts.get("error"):
            raise ValueError(opts["error"])
        raw = read_stdin()
        if not raw.strip():
            raise ValueError("stdin is empty")
        from retriever import jsonlite
        try:
            payload = jsonlite.loads(raw)
        except ValueError as exc:
            raise ValueError("stdin is not valid JSON (%s)" % exc) from None
        if not isinstance(payload, dict):
            raise ValueError("stdin is a JSON %s, not an object" % type(payload).__name__)
        text = prompt_of(runner, payload)
        if not text.strip():
            raise ValueError("empty prompt")
        note = {}
        out, path = _answer(runner, opts, text, payload, note)
    except BaseException as exc:  # fail open: nothing escapes a hook
        out, note = empty_output(runner), None
        error = "%s: %s" % (type(exc).__name__, exc) if str(exc) else type(exc).__name__
    try:
        write_out(out)
    except BaseException as exc:  # a closed pipe: the runner gave up on us
        locate.log("hook %s: cannot write output: %s: %s" % (runner, type(exc).__name__, exc))
        path = note = None  # nothing reached the runner: no prompt to record
    # Only a session's prompts are recorded: a payload without one is
    # doctor's probe or a hand-run test, not a user's prompt.
    if note is not None and note.get("sid"):
        # After the answer is out: recording never delays or fails a prompt.
        from retriever import usage
        usage.note(runner, note["sid"], text, note.get("injected") or (), note.get("tier"), note.get("loaded"),
                   note.get("terms"), note.get("why"))
        if (note.get("loaded") or note.get("relearn")) and path and usage.learning():
            # New loads, or a rebuilt index: fold the record into what is
            # learnt, in a detached child (the runner waits for this
            # process, not for it).
            from retriever import background
            background.detach(lambda: usage.relearn(path))
    if path:
        # Still captured: the freshness check reads settings too, and a
        # bad value's warning belongs in the log, not on the runner's stderr.
        try:
            service.maybe_revalidate(path)
        except BaseException:
            pass
    sys.stderr = real_stderr
    noise = " ".join(captured.getvalue().split())
    if error:
        locate.log("hook %s: %s%s" % (runner, error, "; stderr: " + noise if noise else ""))
    elif noise:
        locate.log("hook %s: warning: %s" % (runner, noise))
    return 0


# -------------------------------------------------- the full CLI's "hook"


def add_arguments(parser):
    """Arguments of ``skill-retrieve hook`` for ``--help`` and odd forms
    (the usual forms are parsed by ``retriever.cli.entry.parse_fast``)."""
    import argparse
    parser.description = ("Answer a runner's per-prompt hook: read its JSON payload on stdin, "
                          "print the retrieved skills in its JSON shape. Always exits 0.")
    parser.add_argument("runner", nargs="?", metavar="RUNNER",
                        help="one of: " + ", ".join(RUNNERS))
    parser.add_argument("--root", action="append", default=[], metavar="DIR",
                        help="skill folder (repeatable); default: the folders the runner reads")
    parser.add_argument("--index", metavar="FILE", help="index file (default: per-user cache)")
    parser.add_argument("--platform", metavar="NAME", help="Hermes platform for skills.platform_disabled")
    parser.add_argument("-k", metavar="N", help="most skills injected (default $SKILL_RETRIEVAL_INJECT_K "
                        "or 6); fewer, or none, when fewer fit")
    parser.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)


def _from_args(args):
    # Only malformed command lines reach argparse; the hook still answers
    # (with the runner's empty output) and logs what was wrong.
    runner = getattr(args, "runner", None) or ""
    opts = {"roots": list(getattr(args, "root", []) or []), "index": getattr(args, "index", None),
            "platform": getattr(args, "platform", None), "k": None, "fresh": False}
    problems = []
    if not runner:
        problems.append("no runner named")
    k = getattr(args, "k", None)
    if k is not None:
        from retriever import settings
        try:
            opts["k"] = settings.k_value(k)
        except ValueError as exc:
            problems.append(str(exc))
    rest = getattr(args, "rest", None)
    if rest:
        problems.append("unexpected arguments %s" % " ".join(rest))
    if problems:
        opts["error"] = "bad hook command line: " + "; ".join(problems)
    return runner, opts
