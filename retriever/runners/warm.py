"""``skill-retrieve warm RUNNER``: the session-start hook.

Registered on each runner's session-start event (Claude Code, Codex and
Gemini CLI ``SessionStart``, ``registry`` ``start``) and run by the
OpenCode and Cline plugins when they load.  Without it the semantic
tier's helper starts on the first prompt and loads for about 2 s, so the
first prompt of every session after a break is answered by BM25 alone.

The process only forks and exits: a detached child checks the index of
the runner's skill set (building it when stale, as a prompt would), starts
the helper when none answers, and asks it about that index, so the model
and the vectors load while the user types.  The session's start waits
for the interpreter and a fork, nothing more.

Fails open and silent: prints nothing (Claude Code gives a SessionStart
hook's stdout to the model), always exits 0, logs one line when
something goes wrong.
"""

import sys

from retriever import locate

BUILD_WAIT = 120.0  # seconds the child waits for the index (a large library's first build)
HELPER_WAIT = 20.0  # seconds it waits for the helper it started to listen
_ASK = "warm"  # the text of the warming question (its answer is not used)


def run(args):
    """The command: ``args`` is argv after ``warm`` (the fast path) or an
    argparse namespace (``warm --help`` and odd forms).  Reads the
    runner's payload from stdin (its ``cwd`` picks the project's skill
    folders), detaches the child and returns 0 at once."""
    runner = args[0] if isinstance(args, list) and len(args) == 1 else getattr(args, "runner", None)
    try:
        from retriever.runners.registry import RUNNERS
        if runner not in RUNNERS:
            locate.log("warm: bad command line %r (expected: warm RUNNER, one of: %s)"
                       % (" ".join(args) if isinstance(args, list) else runner, ", ".join(RUNNERS)))
            return 0
        raw = ""
        if not sys.stdin.isatty():  # run by hand at a terminal: no payload to wait for
            from retriever.service import read_stdin
            raw = read_stdin()
        from retriever import background
        if not background.detach(lambda: warm(runner, raw)):
            locate.log("warm %s: cannot fork" % runner)
    except BaseException as exc:  # fail open: nothing reaches the runner
        locate.log("warm %s: %s: %s" % (runner, type(exc).__name__, exc))
    return 0


def request_for(runner, payload):
    """The request a prompt hook of ``runner`` would answer ``payload``
    with, as far as the index goes (its roots and platform), or None when
    the runner has no skill folders here."""
    from retriever.runners import hook
    roots = [] if runner == "hermes" else hook.roots_for(runner, payload)
    if not roots and runner != "hermes":
        return None
    return {"roots": roots, "index": None, "platform": locate.env("HERMES_PLATFORM") or None,
            "quiet": True, "only_hermes": runner == "hermes", "label": "warm " + runner}


def warm(runner, raw):
    """The detached child's work (see the module docstring); True when the
    index is ready and, with the tier on, the helper was asked about it."""
    import time
    from retriever import jsonlite, semantic, service, settings
    from retriever.semantic import client
    try:
        payload = jsonlite.loads(raw) if raw.strip() else {}
    except ValueError:
        payload = {}
    tier = bool(settings.get("SKILL_RETRIEVAL_SEMANTIC")) and semantic.installed()
    if tier:
        sock = client.connect(timeout=1.0)
        if sock is None:
            # Started before the index check: the model loads meanwhile.
            client.start_detached(force=True)
        else:
            sock.close()
    req = request_for(runner, payload if isinstance(payload, dict) else {})
    if req is None:
        return True
    req["wait"] = BUILD_WAIT
    idx = service.open_detached(req)
    if idx is not None:
        # Skills edited since the last session: checked as after a prompt
        # (SKILL_RETRIEVAL_REVALIDATE), in a child of its own.
        service.maybe_revalidate(req["_path"])
    if idx is None or not tier or not idx["header"]["n_docs"]:
        locate.log("warm %s: index %s %s%s" % (runner, req["_path"], "not ready" if idx is None else "ready",
                                                "" if tier else " (semantic tier off or not installed)"))
        return idx is not None
    deadline = time.monotonic() + HELPER_WAIT
    while True:
        status = ask(req["_path"])
        if status is not None:
            locate.log("warm %s: asked the semantic helper about %s (%s)" % (runner, req["_path"], status))
            return True
        if time.monotonic() > deadline:
            locate.log("warm %s: no semantic helper answered in %gs" % (runner, HELPER_WAIT))
            return False
        time.sleep(0.02)  # the helper's model load starts with this question: ask soon


def ask(index_path):
    """Ask the helper one question about ``index_path``, so it loads that
    index's vectors (embedding the missing ones) and its model; the first
    line of its reply ("pending" while loading), or None when none answers."""
    from retriever.semantic import client
    sock = client.connect(timeout=2.0)
    if sock is None:
        return None
    try:
        sock.sendall(client.frame(("%s\n%s\n%s" % (client.ASK, index_path, _ASK)).encode("utf-8", "surrogateescape"))
                     + client.candidates_frame([]))
        return client.read_frame(sock).split(b"\n", 1)[0].decode("ascii", "replace")
    except OSError:
        return None
    finally:
        sock.close()


def add_arguments(parser):
    """Arguments of ``skill-retrieve warm`` for ``--help``."""
    parser.description = ("Session-start hook: start the semantic tier's helper and check the index in "
                          "the background, printing nothing. Always exits 0.")
    parser.add_argument("runner", nargs="?", metavar="RUNNER", help="the runner whose skill folders to index")
