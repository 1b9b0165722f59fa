"""The one answer pipeline: a message in, the skills to inject out.

The command line, every runner's hook and the Hermes plugin all call
``answer``.  It opens the index (building it when it is missing, damaged,
stale or for other roots: the reason is decided once, the build runs once,
the file is loaded once), ranks within what the caller can show (``keep``:
visibility comes before the cut), applies the optional LLM rerank and cuts
to the number injected.

A request is a plain dict; every key is optional:
  roots        skill folders (default: the default roots, or the roots an
               explicit ``index`` names in its header)
  index        index file (default: the per-user cache path for the roots)
  platform     Hermes platform (default $HERMES_PLATFORM)
  only_hermes  default roots cut to what a Hermes session loads (its shell
               hook, its plugin)
  hermes_home  the Hermes home whose config.yaml applies (default
               $HERMES_HOME, else ~/.hermes): the plugin passes Hermes' own
  k            -k, already validated (settings.k_value)
  fresh        check the skills for changes before answering
  quiet        no stderr (hooks, the plugin)
  wait         None: build in this process; seconds: build in a detached
               child and wait that long (hooks, which a runner may kill)
  label        who asks, for log lines ("hook codex")
  keep         predicate on result dicts: what the caller can show
  rerank       force the LLM rerank (else SKILL_RETRIEVAL_RERANK decides)
  session_id   for the rerank's A/B log
  decide       False: the plain ranking, as SKILL_RETRIEVAL_DECIDE=off
               (the session eval's Hit@k; the MCP server: the agent asked)
  context      the session's context (``session.contextualize``): it
               moves the ranking of a short turn, and receives the
               ranking's ``first`` and the message's ``own`` terms

Work that outlives the answer (a first build under a hook's deadline, the
freshness check) runs in a detached child: ``background`` holds that, and
is imported only when such work is due.

Hot path: built-in modules, ``locate``, ``settings``, ``store`` and the
query path; the build path is imported only when a build is needed, the
semantic tier's package only when the tier is not turned off.
"""

import posix
import sys

from retriever import locate, settings

# ``store`` is imported where it is used: with the semantic tier on, the
# question goes out to the warm helper (``answer``) before the client pays
# for importing it (about 0.3 ms), so the helper starts that much earlier.


def warn(msg):
    """One line on stderr, prefixed with the program name."""
    sys.stderr.write("skill-retrieve: %s\n" % msg)


def index_path(req):
    """The index file a request reads: ``index`` made absolute, else the
    per-user cache path for its roots, platform and scope."""
    if req.get("index"):
        return locate.abspath(req["index"])
    roots = list(req.get("roots") or ())
    # Naming a folder once must reach the next query at once, not after
    # the next freshness check: the default index is keyed by them too.
    from retriever import userroots
    return locate.default_index_path(roots, platform_of(req), req.get("only_hermes", False),
                                     req.get("hermes_home"), () if roots else userroots.remembered())


def platform_of(req):
    """The request's Hermes platform, else $HERMES_PLATFORM, else None."""
    return req.get("platform") or locate.env("HERMES_PLATFORM") or None


# --------------------------------------------------------------- the index


def covers(header, roots):
    """True when an index with ``header`` was built for exactly ``roots``
    (any index covers "no roots given": its header names its own)."""
    if not roots:
        return True
    want = set(locate.root_key(r) for r in roots)
    return bool(header["explicit"]) and want == set(locate.root_key(r) for r in header["roots"])


def roots_named_in(path, header=None):
    """The explicit roots an index file names, even a damaged one whose
    header still reads; [] otherwise.  ``header``: one already read (a
    loaded index's, or the one a failed load attached to its error), so
    the header is not read twice."""
    from retriever import store
    if header is None:
        try:
            header, f = store.read_header(path)
            f.close()
        except store.IndexError_:
            return []
    # Whole root dicts: a runner's naming rules (runners/skillsets.py) are
    # part of its roots.
    return list(header.get("roots", ())) if header.get("explicit") else []


def why_rebuild(idx, req, roots, platform):
    """Why the loaded index cannot answer ``req`` as it is (None: it can),
    and the scope to rebuild it with: ``(reason, roots, only_hermes)``."""
    hdr = idx["header"]
    only_hermes = req.get("only_hermes", False)
    if (hdr.get("platform") or "") != (platform or ""):
        # platform_disabled differs per platform: an index shared across
        # platforms must not answer with another platform's skill set.
        return ("was built for platform %r" % (hdr.get("platform") or ""),
                roots or roots_named_in(req["_path"], hdr), only_hermes or hdr.get("only_hermes", False))
    if not covers(hdr, roots):
        return "was built for other roots", roots, only_hermes
    if req.get("fresh"):
        locate.enable_site()
        from retriever import build
        stale, _ = build.is_stale(hdr)
        if stale:
            return ("was stale", list(hdr["roots"]) if hdr["explicit"] else roots,
                    hdr.get("only_hermes", False))
    return None


def rebuild(path, roots, platform, reason, quiet=False, only_hermes=False, hermes_home=None):
    """Build the index at ``path`` now, saying why on stderr (its first
    half before the build, which can take seconds) unless quiet.  Returns
    the loaded index when it could not be written (a read-only or unusable
    cache: answered from memory, with one warning), else None: load the
    file."""
    from retriever import store
    locate.enable_site()
    from retriever import build
    import time
    t0 = time.perf_counter()
    scope = build.resolve(roots or None, platform, hermes_home, warn=None, only_hermes=only_hermes)
    memory = {}
    store.write_target(path)  # a path that is not ours is refused before any notice
    if not quiet:
        for folder in scope["missing"]:
            warn("warning: %s: %s" % (folder, locate.not_a_folder(folder)))
        # One line whose first half comes before the build, which can take
        # seconds: a first query over a large library is not silent.
        sys.stderr.write("skill-retrieve: index %s %s; building it first ..." % (path, reason))
        sys.stderr.flush()
    try:
        header, problems = build.build(scope, path, memory=memory)
    except BaseException:
        if not quiet:
            sys.stderr.write(" failed\n")
        raise
    if not memory:
        from retriever import background
        background.touch_stamp(path)
    if not quiet:
        from retriever.render import plural
        if memory:
            sys.stderr.write(" cannot write index (%s); answering from an index built in memory "
                             "(%s, %.2fs)\n" % (memory["error"], plural(header["n_docs"], "skill"),
                                                 time.perf_counter() - t0))
        else:
            sys.stderr.write(" rebuilt it (%s, %s with problems, %.2fs)\n"
                             % (plural(header["n_docs"], "skill"), plural(len(problems), "file"),
                                time.perf_counter() - t0))
    if not header["n_docs"]:
        # The next query finds this (empty) index and answers nothing
        # without building again: ``answer`` repeats this to a terminal.
        note_no_skills(scope["roots"], quiet, scope["explicit"])
    return memory.get("idx")


_NOTED = []  # the note below was printed by this process


def no_skills(roots, explicit):
    """The line saying ``roots`` (root dicts: the ones that exist) hold no
    skill: the folders named (``--root``; ``build`` says it too), or the
    default ones, with how to name yours."""
    where = ", ".join(r["path"] for r in roots)
    if explicit:
        return "no skills found; looked for SKILL.md files below %s" % where
    return ("no skills in the default folders (%s); name yours once with `skill-retrieve roots add DIR` "
            "or SKILL_RETRIEVAL_ROOTS" % (where or "none of them exists"))


def note_no_skills(roots, quiet=False, explicit=False):
    """Say ``no_skills``: on stderr, or in the log when ``quiet`` (hooks,
    the plugin)."""
    msg = no_skills(roots, explicit)
    if quiet:
        locate.log(msg)
    else:
        warn(msg)
        _NOTED.append(1)


def open_index(req):
    """Load the index for ``req``, building it first when needed (in this
    process).  Returns ``(idx, path)``."""
    from retriever import store
    path = req["_path"] = req.get("_path") or index_path(req)
    platform = platform_of(req)
    roots = list(req.get("roots") or ())
    quiet = req.get("quiet", False)
    try:
        idx = store.load(path)
    except store.IndexError_ as exc:
        reason = "missing" if str(exc) == "missing" else "was unusable (%s)" % exc
        named = roots or roots_named_in(path, getattr(exc, "header", None))
        idx = rebuild(path, named, platform, reason, quiet, req.get("only_hermes", False), req.get("hermes_home"))
        return idx or store.load(path), path
    why = why_rebuild(idx, req, roots, platform)
    if why is None:
        return idx, path
    reason, roots, only_hermes = why
    idx = rebuild(path, roots, platform, reason, quiet, only_hermes, req.get("hermes_home"))
    return idx or store.load(path), path


def ready(req):
    """The index for ``req`` if it loads and covers its roots, else None
    (the checks ``open_index`` makes before deciding to rebuild)."""
    from retriever import store
    try:
        idx = store.load(req["_path"])
    except store.IndexError_:
        return None
    return idx if covers(idx["header"], list(req.get("roots") or ())) else None


def open_detached(req):
    """The index for ``req``, built by a detached child when it is not
    ready, waiting for it up to ``req["wait"]`` seconds; None when it is
    not ready in time (that prompt gets nothing; the next finds it).

    A large library takes longer to index than a runner waits for a hook,
    and a runner kills a hook that overruns: built in the hook process
    itself, the index would never get written and every prompt would time
    out.  The child is in its own session, so it survives that kill."""
    import time
    req["_path"] = req.get("_path") or index_path(req)
    idx = ready(req)
    if idx is not None:
        return idx
    from retriever import background as bg
    label = req.get("label") or "query"
    path = req["_path"]
    lock_file = bg.lock_path(path)
    holder = bg.lock(lock_file)
    deadline = time.monotonic() + req["wait"]
    if holder in (bg.CANNOT, bg.FOREIGN):
        # No build of ours can be under way where no lock can be taken (a
        # read-only or unusable cache, a name held by a file not ours):
        # never wait on it; answer as the plain query does, from an index
        # built here (in memory when the file cannot be written).
        locate.log("%s: cannot take the build lock %s; building index %s in this process"
                   % (label, lock_file, path))
        return open_index(dict(req, quiet=True))[0]
    if holder:  # another prompt's build is under way: wait for it instead
        while time.monotonic() < deadline:
            idx = ready(req)
            if idx is not None:
                return idx
            time.sleep(0.05)
        locate.log("%s: index %s is still being built in the background (pid %d); "
                   "this prompt gets no skills" % (label, path, holder))
        return None

    def body():
        try:
            from retriever import render
            t0 = time.perf_counter()
            idx, _ = open_index(dict(req, quiet=True))
            locate.log("%s: built index %s (%s from %s, %.2fs)"
                       % (label, path, render.plural(idx["header"]["n_docs"], "skill"),
                          render.plural(len(idx["header"]["roots"]), "folder"), time.perf_counter() - t0))
            return True
        except BaseException as exc:
            locate.log("%s: building index %s failed: %s: %s" % (label, path, type(exc).__name__, exc))
            return False
        finally:
            bg.unlink(lock_file)

    pid = bg.detach(body)
    if not pid:
        bg.unlink(lock_file)
        raise OSError("cannot start a background build")
    bg.write_pid(lock_file, pid)
    while True:
        done, status = posix.waitpid(pid, posix.WNOHANG)
        if done:
            # A failed build was logged by the child; answer nothing.
            return ready(req) if posix.waitstatus_to_exitcode(status) == 0 else None
        if time.monotonic() >= deadline:
            locate.log("%s: index %s is still being built in the background; "
                       "this prompt gets no skills" % (label, path))
            return None
        time.sleep(0.01)


# --------------------------------------------------------------- answering


def answer(text, req, idx=None):
    """The skills to inject for ``text`` under request ``req`` (see the
    module docstring).  Returns ``(results, index path)``; the path is None
    when no index was ready (a hook whose first build is still running)
    or when the caller passed its own ``idx`` (the plugin's, in memory)."""
    top_k, inject_k = settings.limits(req.get("k"))
    keep = req.get("keep")
    path = None
    provider = req.get("semantic", "client")
    if idx is None and provider == "client" and settings.get("SKILL_RETRIEVAL_SEMANTIC"):
        # Ask the warm helper now, before loading the index: it encodes
        # the text and scans the vectors while this process loads and runs
        # BM25 (a stdlib socket).  Turned off, the tier is not imported.
        from retriever import semantic
        if semantic.installed():
            req["_path"] = index_path(req)  # worked out once: the open below reuses it
            provider = semantic.early(req["_path"], text)
            req["_semantic"] = True  # asked: BM25 alone then means the tier was not ready
        else:
            provider = None
    if idx is None:
        if req.get("wait") is not None and not req.get("fresh"):
            idx = open_detached(req)
            if idx is None:
                return [], None
        else:
            idx, _ = open_index(req)
            if not idx["header"]["n_docs"] and not req.get("quiet") and not _NOTED and posix.isatty(2):
                # An empty index answers nothing: a person at a terminal
                # hears why on every query (else "nothing relevant" is
                # what it looks like), a script only when it is built.
                note_no_skills(idx["header"]["roots"], explicit=idx["header"]["explicit"])
        path = req["_path"]
    # The folders searched, with their sources: a hook marks the skills
    # its runner cannot load by name (render.unlisted).
    req["searched"], req["_n_docs"] = idx["header"]["roots"], idx["header"]["n_docs"]
    if path or req.get("_path"):  # a caller with its own idx (the plugin) names its file
        with_learnt(idx, path or req["_path"], req)
    # The one ranking point: BM25, fused with the semantic tier when it is
    # on and answers (req["semantic"]: a provider, None for BM25 only;
    # absent: the warm helper).  req["tiers"] says which answered.
    try:
        # A caller with its own idx (the plugin) names its file in _path,
        # so the semantic tier can find that index's vectors.
        results = rank(idx, path or req.get("_path"), text, top_k, req, keep, provider)
    except (IndexError, ValueError, EOFError, TypeError) as exc:
        from retriever import store
        if path is None or req.get("wait") is not None:
            if path is not None and isinstance(exc, store.Damaged):
                maybe_revalidate(path)  # its whole-file check rebuilds it
            raise
        # The header checked out but a section is damaged (bad records or
        # offsets): rebuild once and answer from the new file.
        idx = rebuild(path, list(req.get("roots") or ()) or roots_named_in(path, idx["header"]), platform_of(req),
                      "was corrupt (%s)" % type(exc).__name__, req.get("quiet", False),
                      req.get("only_hermes", False), req.get("hermes_home"))
        results = rank(idx or store.load(path), path, text, top_k, req, keep, provider)
    if req.get("tiers") == ["bm25"] and "semantic" not in req:
        req["bm25_why"] = bm25_reason(provider)
    return shortlist(text, results, inject_k, req.get("rerank", False), req.get("session_id"),
                     None if req.get("quiet") else warn), path


def with_learnt(idx, index_path, req):
    """Put the user's learnt table for the index at ``index_path``
    (``retriever.learn``) in ``idx["learnt"]``: read again when its file
    changed (one stat a prompt, so a long-lived caller such as the Hermes
    plugin sees each new fold), ``learn`` imported only when a table
    exists; None while learning is off.  A table folded for an earlier
    build of the index sets ``req["_relearn"]``: the caller folds again."""
    if not settings.get("SKILL_RETRIEVAL_LEARN"):
        if idx.get("learnt") is not None:
            idx["learnt"] = None  # an assignment: another thread may be reading it
        return
    try:
        st = posix.stat(locate.learnt_path(index_path))
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
    except OSError:
        key = None
    if "learnt" in idx and idx.get("_learnt_key") == key:
        return
    idx["_learnt_key"] = key
    if key is None:
        idx["learnt"] = None
        return
    from retriever import learn
    idx["learnt"] = learn.load(index_path)
    req["_relearn"] = idx["learnt"] is False


def bm25_reason(provider):
    """Why the warm helper's tier did not answer, in a few words, for an
    answer by BM25 alone; ``provider`` is what ``answer`` asked: None (the
    extra is not installed), "client" (the setting is off), or the
    helper's client, whose ``status`` says what it heard."""
    if not settings.get("SKILL_RETRIEVAL_SEMANTIC"):
        return "turned off (SKILL_RETRIEVAL_SEMANTIC=off)"
    status = getattr(provider, "status", None)
    if status is None:
        return "the semantic extra is not installed"
    if status == "no helper":
        return "helper loading (none was running: this prompt started it)"
    if status.startswith("pending"):
        return "helper loading (%s)" % (status[len("pending"):].strip() or "pending")
    return "helper did not answer (%s)" % status


def rank(idx, path, text, k, req, keep, provider):
    """BM25, fused with the semantic tier when ``provider`` answers (see
    ``retriever.semantic.rank``).  With the tier turned off, or no
    provider, the tier's package is not even imported.  The tiers that
    answered go to ``req["tiers"]``."""
    if provider == "client" and not settings.get("SKILL_RETRIEVAL_SEMANTIC"):
        provider = None
    decide = req.get("decide", True) and settings.get("SKILL_RETRIEVAL_DECIDE")
    if provider is None:
        from retriever import query
        req["tiers"] = ["bm25"]
        return query.search(idx, text, k, keep=keep, decide=decide, context=req.get("context"))
    from retriever import semantic
    return semantic.rank(idx, path, text, k, req, keep, provider, decide, req.get("context"))


def tell_terminal(text, results, req):
    """At a terminal (stderr is a tty), one line each when the answer
    needs one: BM25 alone answered because the semantic tier was asked
    and not ready (the same query can answer otherwise a moment later),
    and nothing fitted (an empty stdout says nothing by itself).  Hooks
    (``quiet``) and pipes hear nothing."""
    if req.get("quiet") or not posix.isatty(2):
        return
    if req.get("_semantic") and req.get("tiers") == ["bm25"]:
        warn("the semantic tier was not ready (its helper starts on first use and embeds new skills "
             "in the background): BM25 alone answered this")
    if not results and req.get("_n_docs"):  # (an empty library is said by note_no_skills)
        words = " ".join(text.split())
        shown = "'%s'" % words if words and len(words) <= 80 and "'" not in words else "WORDS"
        warn("no skill fitted this message; to see why: skill-retrieve explain %s" % shown)


def shortlist(text, results, inject_k, rerank=False, session_id=None, warn=None):
    """Cut the ranked ``results`` to what is injected, after the optional
    LLM rerank (``rerank`` or SKILL_RETRIEVAL_RERANK).  The rerank module,
    and the HTTP client with it, is imported only when asked for.  ``warn``
    also gets a bad SKILL_RETRIEVAL_RERANK value (the log always does)."""
    if rerank or locate.env("SKILL_RETRIEVAL_RERANK").strip():
        from retriever import rerank as rr
        results = rr.maybe_rerank(text, results, session_id=session_id, inject_k=inject_k, force=bool(rerank),
                                  warn=warn)
    return results[:inject_k]


def maybe_revalidate(path):
    """After answering, fork a detached child that rebuilds the index if the
    skills changed or it is damaged, at most once per
    SKILL_RETRIEVAL_REVALIDATE seconds and never while another builder of
    this index holds its lock.  The answer never waits for it; a young
    stamp costs one ``stat`` and no import."""
    interval = settings.get("SKILL_RETRIEVAL_REVALIDATE")
    if interval is None:
        return
    import time
    try:
        st = posix.stat(locate.stamp_path(path))
        # A stamp this user did not make (planted, dated ahead) says nothing.
        age = time.time() - st.st_mtime if st.st_uid == posix.getuid() else float("inf")
    except OSError:
        age = float("inf")
    if age < interval:
        return
    from retriever import background
    background.revalidate_detached(path)


# ------------------------------------------------------------ text in, out


def check_roots(roots):
    """The usage error for ``--root`` folders of which none exists, else
    None.  A query over them would find nothing and cache an empty index
    for a typo; ``build`` refuses them too."""
    why = [(r, locate.not_a_folder(locate.abspath(r))) for r in roots]
    bad = ["%s: %s" % (r, w) for r, w in why if w]
    if not bad or len(bad) < len(roots):
        return None
    return "%s; nothing searched" % bad[0] if len(bad) == 1 else \
        "none of the --root folders exists (%s); nothing searched" % ", ".join(bad)


def refuse_roots(roots):
    """2 (the usage error's exit code) after one line on stderr when
    ``check_roots`` refuses ``roots``, else None: query, explain, doctor
    and tokens say it alike (build warns per folder and exits 1)."""
    bad = check_roots(roots) if roots else None
    if bad:
        warn("error: %s" % bad)
        return 2
    return None


def query_text(words):
    """The query: ``words`` joined, else all of stdin.  A person at a
    terminal who typed no words gets a hint first, not a silent wait."""
    if words:
        return " ".join(words)
    if posix.isatty(0):
        warn("reading the message from stdin; end it with Ctrl-D "
             "(or: skill-retrieve WORDS...; skill-retrieve --help)")
    return read_stdin()


def read_stdin():
    """All of stdin as text; undecodable bytes are replaced, not fatal."""
    try:
        data = sys.stdin.buffer.read()
    except (AttributeError, OSError, ValueError):
        return ""
    return data.decode("utf-8", "replace")


def write_out(text):
    """Write UTF-8 to stdout whatever the locale says, and flush."""
    if text:
        try:
            sys.stdout.buffer.write(text.encode("utf-8", "replace"))
        except AttributeError:  # a replaced sys.stdout (tests, embedding)
            sys.stdout.write(text)
    sys.stdout.flush()


