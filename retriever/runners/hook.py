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

Hot path: runs under ``python -I -S`` right after ``retriever.entry``, so it
imports only built-in modules and the query path (no json, re, os).
"""

import posix
import sys

from retriever import locate

RUNNERS = ("claude-code", "codex", "gemini", "cline", "hermes")
# Claude Code and Hermes cut anything over 10,000 characters down to a
# preview; stay strictly below that for every runner.
MAX_OUTPUT = 10000
_MAX_ANCESTORS = 40
DEFAULT_BUILD_WAIT = 3.0


# ---------------------------------------------------------------- payload


def prompt_of(runner, payload):
    """The user's prompt in ``payload`` (a parsed stdin dict), as str.

    Raises ValueError naming the missing field when the payload does not
    carry one where ``runner`` puts it.
    """
    if runner == "cline":
        ups = payload.get("userPromptSubmit")
        if not isinstance(ups, dict) or "prompt" not in ups:
            raise ValueError("payload has no userPromptSubmit.prompt")
        value = ups["prompt"]
    elif runner == "hermes":
        extra = payload.get("extra")
        if not isinstance(extra, dict) or "user_message" not in extra:
            raise ValueError("payload has no extra.user_message")
        value = extra["user_message"]
    else:
        if "prompt" not in payload:
            raise ValueError("payload has no prompt")
        value = payload["prompt"]
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


def _dir_key(path):
    # Folders are deduplicated by inode so a symlinked alias (say
    # ~/.agents/skills -> ~/.claude/skills) is indexed once; the index
    # header lists deduplicated roots and must match what we ask for.
    try:
        st = posix.stat(path)
    except OSError:
        return None
    if (st.st_mode & 0o170000) != 0o040000:
        return None
    return (st.st_dev, st.st_ino)


def _existing(paths):
    """The paths that are folders, in order, without aliases of one folder."""
    seen = set()
    out = []
    for p in paths:
        if not p:
            continue
        p = locate.abspath(p)
        key = _dir_key(p)
        if key is None or key in seen:
            continue
        seen.add(key)
        out.append(p)
    return out


def _exists(path):
    try:
        posix.stat(path)
        return True
    except OSError:
        return False


def project_dirs(cwd):
    """``cwd`` and its parents up to the repository root (the first folder
    holding ``.git``), nearest first; just ``[cwd]`` outside a repository.

    Claude Code and Codex read project skills from each of these.
    """
    if not cwd:
        return []
    cwd = locate.abspath(cwd)
    chain = []
    d = cwd
    for _ in range(_MAX_ANCESTORS):
        chain.append(d)
        if _exists(d + "/.git"):
            return chain
        if d == "/":
            break
        d = d.rsplit("/", 1)[0] or "/"
    return [cwd]


def _payload_cwd(payload, env_name=None):
    cwd = payload.get("cwd")
    if isinstance(cwd, str) and cwd.startswith("/"):
        return cwd
    if env_name and locate.env(env_name):
        return locate.env(env_name)
    return posix.getcwd()


def _claude_config_dir():
    return locate.abspath(locate.env("CLAUDE_CONFIG_DIR") or "~/.claude")


def _read_json(path):
    # Small settings files only; a missing or broken file counts as empty.
    try:
        fd = posix.open(path, posix.O_RDONLY)
    except OSError:
        return None
    try:
        chunks = []
        while True:
            b = posix.read(fd, 1 << 16)
            if not b:
                break
            chunks.append(b)
    finally:
        posix.close(fd)
    from retriever import jsonlite
    try:
        return jsonlite.loads(b"".join(chunks).decode("utf-8", "replace"))
    except ValueError:
        return None


def claude_plugin_skill_dirs(config_dir, projects=()):
    """``<installPath>/skills`` of each installed, not disabled Claude Code
    plugin (``installed_plugins.json``, v1 or v2 layout); project-scoped
    installs count only inside their project."""
    data = _read_json(config_dir + "/plugins/installed_plugins.json")
    plugins = data.get("plugins") if isinstance(data, dict) else None
    if not isinstance(plugins, dict):
        return []
    settings = _read_json(config_dir + "/settings.json")
    enabled = settings.get("enabledPlugins") if isinstance(settings, dict) else None
    if not isinstance(enabled, dict):
        enabled = {}
    out = []
    for key, entries in plugins.items():
        if enabled.get(key) is False:
            continue
        for e in entries if isinstance(entries, list) else [entries]:
            if not isinstance(e, dict) or not isinstance(e.get("installPath"), str):
                continue
            proj = e.get("projectPath")
            if isinstance(proj, str) and proj and locate.abspath(proj) not in projects:
                continue
            out.append(e["installPath"] + "/skills")
    return out


def roots_for(runner, payload):
    """The skill folders ``runner`` reads for this payload, existing ones
    only, in precedence order (earlier wins a name clash).  Hermes returns
    ``[]``: the default roots, which include Hermes' own config rules."""
    home = locate.home()
    if runner == "claude-code":
        cfg = _claude_config_dir()
        projects = project_dirs(_payload_cwd(payload, "CLAUDE_PROJECT_DIR"))
        started = locate.env("CLAUDE_PROJECT_DIR")
        if started and locate.abspath(started) not in projects:
            projects.append(locate.abspath(started))
        paths = [cfg + "/skills"]
        paths += [d + "/.claude/skills" for d in projects]
        paths += claude_plugin_skill_dirs(cfg, projects)
        paths += [d + "/.agents/skills" for d in projects]
        paths.append(home + "/.agents/skills")
    elif runner == "codex":
        projects = project_dirs(_payload_cwd(payload))
        paths = [d + "/.agents/skills" for d in projects]
        paths.append(home + "/.agents/skills")
        paths.append(locate.abspath(locate.env("CODEX_HOME") or "~/.codex") + "/skills")
        paths.append("/etc/codex/skills")
    elif runner == "gemini":
        projects = [_payload_cwd(payload, "GEMINI_PROJECT_DIR")]
        started = locate.env("GEMINI_PROJECT_DIR")
        if started and started not in projects:
            projects.append(started)
        paths = []
        for d in projects:
            paths += [d + "/.agents/skills", d + "/.gemini/skills"]
        paths += [home + "/.agents/skills", home + "/.gemini/skills"]
    elif runner == "cline":
        ws = payload.get("workspaceRoots")
        projects = []
        for w in ws if isinstance(ws, list) else []:
            if isinstance(w, dict):
                w = w.get("path") or w.get("fsPath")
            if isinstance(w, str) and w.startswith("/"):
                projects.append(w)
        paths = []
        for d in projects:
            paths += [d + "/.cline/skills", d + "/.clinerules/skills", d + "/.claude/skills"]
        paths.append(home + "/.cline/skills")
    else:
        return []
    return _existing(paths)


# ----------------------------------------------------------------- output


def envelope(runner, block):
    """The runner's JSON for ``block`` (a retrieved-skills text), as one line.

    An empty block gives what the runner needs when there is nothing to
    add: ``""`` (print nothing), or ``{}`` / ``{"cancel": false}`` for the
    runners that require JSON on every run.  Non-ASCII text is written as
    UTF-8, not ``\\u`` escapes, so the output's length is the length the
    runner's cap counts.
    """
    if not block:
        return empty_output(runner)
    s = _json_str(block)
    if runner in ("claude-code", "codex"):
        # Codex validates against a strict schema: no other keys.
        return '{"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": %s}}\n' % s
    if runner == "gemini":
        return '{"hookSpecificOutput": {"hookEventName": "BeforeAgent", "additionalContext": %s}}\n' % s
    if runner == "cline":
        return '{"cancel": false, "contextModification": %s}\n' % s
    return '{"context": %s}\n' % s


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
    if runner == "cline":
        return '{"cancel": false}\n'  # Cline requires valid JSON on every run
    if runner == "gemini":
        return "{}\n"  # empty stdout would make Gemini read stderr instead
    return ""


def fit(runner, results):
    """The runner's output for the longest prefix of ``results`` whose
    output stays under MAX_OUTPUT characters (whole skills are dropped,
    never cut mid-line); the empty output when not even one fits."""
    from retriever.render import text_block
    lo, hi = 0, len(results)
    best = empty_output(runner)
    while lo < hi:  # the length grows with the prefix: bisect on it
        mid = (lo + hi + 1) // 2
        out = envelope(runner, text_block(results[:mid]))
        if len(out) < MAX_OUTPUT:
            best = out
            lo = mid
        else:
            hi = mid - 1
    return best


# ----------------------------------------------------------------- answer


def _answer(runner, opts, text, payload):
    """``(output, index path or None)`` for a parsed payload."""
    from retriever.cli import entry
    from retriever.query import search
    roots = list(opts.get("roots") or ())
    # An explicit --index answers from that index (its header names its
    # roots); otherwise the runner's own skill folders decide.
    if not roots and runner != "hermes" and not opts.get("index"):
        roots = roots_for(runner, payload)
        if not roots:
            return empty_output(runner), None  # no skill folders: nothing to build
    platform = opts.get("platform") or locate.env("HERMES_PLATFORM") or None
    if platform is None and runner == "hermes":
        extra = payload.get("extra")
        p = extra.get("platform") if isinstance(extra, dict) else None
        platform = p if isinstance(p, str) and p else None
    # Hermes' shell hook suggests only what Hermes can load: its own skill
    # folders (local and skills.external_dirs), not every agent's.
    only_hermes = runner == "hermes" and not roots
    index_path = opts.get("index")
    index_path = locate.abspath(index_path) if index_path else \
        locate.default_index_path(roots, platform, only_hermes)
    top_k, inject_k = entry.limits(opts.get("k"))
    if opts.get("fresh"):
        idx, index_path = entry.open_index(roots, index_path, platform, True, quiet=True,
                                           only_hermes=only_hermes)
    else:
        idx = _ready(roots, index_path)
        if idx is None:
            if not _build_detached(runner, roots, index_path, platform, only_hermes):
                return empty_output(runner), None
            idx = _ready(roots, index_path)
            if idx is None:
                raise ValueError("index %s unusable right after building it" % index_path)
    session = payload.get("session_id") if isinstance(payload.get("session_id"), str) else None
    results = search(idx, text, top_k)
    if runner == "hermes":
        # Never suggest what Hermes hides: wrong OS, inactive environment,
        # tool conditions (unknowable from a shell hook, so held back).
        from retriever.visibility import make_view, visible
        view = make_view(platform or "")
        results = [r for r in results if visible(r, view)]
    results = entry.shortlist(text, results, inject_k, opts.get("rerank", False), session)
    return fit(runner, results), index_path


def _ready(roots, index_path):
    """The index at ``index_path`` if it loads and covers ``roots`` (the
    checks ``entry.open_index`` makes before deciding to rebuild), else None."""
    from retriever import store
    from retriever.cli.entry import covers
    try:
        idx = store.load(index_path)
    except store.IndexError_:
        return None
    return idx if covers(idx["header"], roots) else None


# -------------------------------------------------------------- cold build


def build_wait():
    """Seconds a hook waits for a cold index build (SKILL_RETRIEVAL_HOOK_WAIT,
    default 3: under the 5 s timeout ``install`` registers)."""
    raw = locate.env("SKILL_RETRIEVAL_HOOK_WAIT").strip()
    try:
        v = float(raw) if raw else DEFAULT_BUILD_WAIT
    except ValueError:
        v = DEFAULT_BUILD_WAIT
    return v if 0 <= v < 600 else DEFAULT_BUILD_WAIT


def _build_detached(runner, roots, index_path, platform, only_hermes=False):
    """Build the index in a detached child and wait for it up to
    ``build_wait()`` seconds.  Returns True when it finished in time.

    A large library takes longer to index than a runner waits for a hook,
    and a runner kills a hook that overruns: built in the hook process
    itself, the index would never get written and every prompt would time
    out.  The child is in its own session, so it survives that kill and the
    next prompt finds the index.  It logs the outcome itself.
    """
    import time
    from retriever.cli import entry
    lock = index_path + ".building"
    holder = _lock(lock)
    if holder:  # another prompt's build is under way: wait for it instead
        deadline = time.monotonic() + build_wait()
        while time.monotonic() < deadline:
            if _ready(roots, index_path) is not None:
                return True
            time.sleep(0.05)
        locate.log("hook %s: index %s is still being built in the background (pid %d); "
                   "this prompt gets no skills" % (runner, index_path, holder))
        return False
    try:
        sys.stdout.flush()
    except Exception:
        pass
    try:
        pid = posix.fork()
    except BaseException:
        _unlink(lock)
        raise
    if pid == 0:
        code = 1
        try:
            posix.setsid()
            fd = posix.open("/dev/null", posix.O_RDWR)
            for n in (0, 1, 2):
                posix.dup2(fd, n)
            t0 = time.perf_counter()
            idx, _ = entry.open_index(roots, index_path, platform, quiet=True, only_hermes=only_hermes)
            locate.log("hook %s: built index %s (%d skills from %d folder(s), %.2fs)"
                       % (runner, index_path, idx["header"]["n_docs"], len(idx["header"]["roots"]),
                          time.perf_counter() - t0))
            code = 0
        except BaseException as exc:
            try:
                locate.log("hook %s: building index %s failed: %s: %s"
                           % (runner, index_path, type(exc).__name__, exc))
            except BaseException:
                pass
        _unlink(lock)
        posix._exit(code)
    _write_pid(lock, pid)
    deadline = time.monotonic() + build_wait()
    while True:
        done, status = posix.waitpid(pid, posix.WNOHANG)
        if done:
            # A failed build was logged by the child; answer nothing.
            return posix.waitstatus_to_exitcode(status) == 0
        if time.monotonic() >= deadline:
            locate.log("hook %s: index %s is still being built in the background; "
                       "this prompt gets no skills" % (runner, index_path))
            return False
        time.sleep(0.01)


def _lock(path):
    """Take the build lock at ``path``: 0 when taken, else the pid of the
    live process holding it.  A lock whose holder is gone is taken over."""
    for _ in range(2):
        try:
            fd = posix.open(path, posix.O_WRONLY | posix.O_CREAT | posix.O_EXCL, 0o600)
            posix.close(fd)
            return 0
        except FileExistsError:
            pid = _read_pid(path)
            if pid:
                try:
                    posix.kill(pid, 0)
                    return pid
                except ProcessLookupError:
                    pass
                except PermissionError:
                    return pid
            elif _age(path) < 5.0:
                return -1  # just created; its pid is being written
            _unlink(path)
        except FileNotFoundError:
            # The folder does not exist yet; the build will create it.
            return 0
    return 0


def _read_pid(path):
    try:
        fd = posix.open(path, posix.O_RDONLY)
    except OSError:
        return 0
    try:
        raw = posix.read(fd, 32)
    finally:
        posix.close(fd)
    try:
        return int(raw.decode("ascii").strip() or 0)
    except ValueError:
        return 0


def _write_pid(path, pid):
    try:
        fd = posix.open(path, posix.O_WRONLY | posix.O_TRUNC)
    except OSError:
        return
    try:
        posix.write(fd, b"%d\n" % pid)
    finally:
        posix.close(fd)


def _age(path):
    import time
    try:
        return time.time() - posix.stat(path).st_mtime
    except OSError:
        return 0.0


def _unlink(path):
    try:
        posix.unlink(path)
    except OSError:
        pass


# -------------------------------------------------------------------- run


def run(runner, opts=None):
    """Answer one hook call: stdin JSON in, ``runner``'s JSON on stdout.

    ``opts`` is the dict from ``entry.parse_fast`` (roots, index, k,
    platform, fresh).  Called with an argparse namespace instead (the full
    CLI's ``hook`` subcommand), it takes the options from there.  Always
    returns 0.
    """
    if opts is None and not isinstance(runner, str):
        runner, opts = _from_args(runner)
    from retriever.cli import entry
    if runner not in RUNNERS:
        msg = ("no hook runner named" if not runner else "unknown hook runner %r" % runner) \
            + " (expected one of: %s)" % ", ".join(RUNNERS)
        entry.warn(msg)
        locate.log("hook: " + msg)
        return 0
    import io
    real_stderr = sys.stderr
    sys.stderr = captured = io.StringIO()  # warnings must not reach the runner
    out, path, error = empty_output(runner), None, None
    try:
        if opts.get("error"):
            raise ValueError(opts["error"])
        raw = entry.read_stdin()
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
        out, path = _answer(runner, opts, text, payload)
    except BaseException as exc:  # fail open: nothing escapes a hook
        out = empty_output(runner)
        error = "%s: %s" % (type(exc).__name__, exc) if str(exc) else type(exc).__name__
    finally:
        sys.stderr = real_stderr
    noise = " ".join(captured.getvalue().split())
    if error:
        locate.log("hook %s: %s%s" % (runner, error, "; stderr: " + noise if noise else ""))
    elif noise:
        locate.log("hook %s: warning: %s" % (runner, noise))
    try:
        entry.write_out(out)
    except BaseException as exc:  # a closed pipe: the runner gave up on us
        locate.log("hook %s: cannot write output: %s: %s" % (runner, type(exc).__name__, exc))
        return 0
    if path:
        try:
            entry.maybe_revalidate(path)
        except BaseException:
            pass
    return 0


# -------------------------------------------------- the full CLI's "hook"


def add_arguments(parser):
    """Arguments of ``skill-retrieve hook`` for ``--help`` and odd forms
    (the usual forms are parsed by ``entry.parse_fast``)."""
    import argparse
    parser.description = ("Answer a runner's per-prompt hook: read its JSON payload on stdin, "
                          "print the retrieved skills in its JSON shape. Always exits 0.")
    parser.add_argument("runner", nargs="?", metavar="RUNNER",
                        help="one of: " + ", ".join(RUNNERS))
    parser.add_argument("--root", action="append", default=[], metavar="DIR",
                        help="skill folder (repeatable); default: the folders the runner reads")
    parser.add_argument("--index", metavar="FILE", help="index file (default: per-user cache)")
    parser.add_argument("--platform", metavar="NAME", help="Hermes platform for skills.platform_disabled")
    parser.add_argument("-k", metavar="N", help="number of skills injected")
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
        try:
            opts["k"] = int(k)
            if not 1 <= opts["k"] <= 1000:
                raise ValueError
        except ValueError:
            problems.append("-k must be a whole number from 1 to 1000, not %r" % k)
            opts["k"] = None
    rest = getattr(args, "rest", None)
    if rest:
        problems.append("unexpected arguments %s" % " ".join(rest))
    if problems:
        opts["error"] = "bad hook command line: " + "; ".join(problems)
    return runner, opts
