"""The executable's hot path: one query per process.

``bin/skill-retrieve`` runs this under ``python -I -S``.  The common forms
(``[query] [--root DIR]... [--index FILE] [-k N] [--format text|json]
[WORDS...]`` and ``hook RUNNER``) are parsed by hand, so neither argparse nor
``re`` is imported; anything else (``--help``, ``build``, ``install`` ...) is
handed to the full CLI in ``retriever.cli``.  Imports here are limited to
what answering needs; the build path is imported only when the index must
be (re)built.
"""

import posix
import sys

from retriever import locate, store

DEFAULT_TOP_K = 6
REVALIDATE_DEFAULT = 2.0  # seconds between background freshness checks
_SUBCOMMANDS_COLD = ("build", "explain", "install", "uninstall", "doctor", "tokens",
                     "rerank-report", "help", "eval")


class Usage(Exception):
    """A usage error: exit 2 with a one-line message."""


def warn(msg):
    """One line on stderr, prefixed with the program name."""
    sys.stderr.write("skill-retrieve: %s\n" % msg)


def env_int(name, default, low=1, high=1000, raw=None, warn_fn=None):
    """An integer setting from the environment (or ``raw``); warns through
    ``warn_fn`` (default: stderr) and falls back on anything that is not a
    whole number in range."""
    raw = (locate.env(name) if raw is None else raw).strip()
    if not raw:
        return default
    try:
        v = int(raw)
        if low <= v <= high:
            return v
    except ValueError:
        pass
    (warn_fn or warn)("ignoring %s=%r (expected a whole number from %d to %d); using %d"
                      % (name, raw[:40], low, high, default))
    return default


def env_float(name, default, low=0.0):
    """A non-negative number setting from the environment (warns on junk)."""
    raw = locate.env(name).strip()
    if not raw:
        return default
    try:
        v = float(raw)
        if v >= low and v == v and v != float("inf"):
            return v
    except ValueError:
        pass
    warn("ignoring %s=%r (expected a number >= %g); using %g" % (name, raw, low, default))
    return default


def limits(k_flag=None):
    """``(top_k, inject_k)`` from the environment, ``-k`` overriding the
    number printed.  inject_k never exceeds top_k."""
    top_k = env_int("SKILL_RETRIEVAL_TOP_K", DEFAULT_TOP_K)
    inject_k = env_int("SKILL_RETRIEVAL_INJECT_K", top_k)
    if k_flag is not None:
        inject_k = k_flag
        top_k = max(top_k, k_flag)
    return top_k, min(inject_k, top_k)


def parse_fast(argv):
    """Parse the query form of the command line by hand.

    Returns an options dict, or None when the full CLI should handle argv.
    Raises Usage for malformed values of the flags it knows.
    """
    opts = {"roots": [], "index": None, "k": None, "format": "text", "platform": None,
            "fresh": False, "words": [], "hook": None, "rerank": False}
    args = list(argv)
    if args and args[0] in _SUBCOMMANDS_COLD:
        return None
    if args and args[0] == "query":
        args.pop(0)
    elif args and args[0] == "hook":
        if len(args) < 2 or args[1].startswith("-"):
            return None
        opts["hook"] = args[1]
        args = args[2:]
    i = 0
    words_only = False
    while i < len(args):
        a = args[i]
        if words_only or not a.startswith("-") or a == "-":
            opts["words"].append(a)
            i += 1
            continue
        if a == "--":
            words_only = True
            i += 1
            continue
        name, eq, val = a.partition("=")
        if name in ("--root", "--index", "-k", "--k", "--format", "--platform"):
            if not eq:
                if i + 1 >= len(args):
                    raise Usage("%s needs a value" % name)
                val = args[i + 1]
                i += 1
            i += 1
            if name == "--root":
                opts["roots"].append(val)
            elif name == "--index":
                opts["index"] = val
            elif name == "--platform":
                opts["platform"] = val
            elif name == "--format":
                if val not in ("text", "json"):
                    raise Usage("--format must be text or json, not %r" % val)
                opts["format"] = val
            else:
                try:
                    k = int(val)
                except ValueError:
                    k = -1
                if not 1 <= k <= 1000:
                    raise Usage("-k must be a whole number from 1 to 1000, not %r" % val)
                opts["k"] = k
        elif a.startswith("-k") and a[2:].isdigit():
            opts["k"] = int(a[2:])
            i += 1
        elif a == "--fresh":
            opts["fresh"] = True
            i += 1
        elif a == "--rerank":
            opts["rerank"] = True
            i += 1
        else:
            return None  # --help, --version, unknown flags: the full CLI explains
    return opts


def read_stdin():
    """All of stdin as text; undecodable bytes are replaced, not fatal."""
    try:
        data = sys.stdin.buffer.read()
    except (AttributeError, OSError, ValueError):
        return ""
    return data.decode("utf-8", "replace")


def _enable_site():
    # Under -S the venv's site-packages (PyYAML) are not importable; the
    # build path needs them, the query path does not.
    if sys.flags.no_site and "site" not in sys.modules:
        try:
            import site
            site.main()
        except Exception:
            pass


def rebuild(index_path, roots, platform, reason, quiet=False, only_hermes=False):
    """Build the index now (it is missing, corrupt, stale or for other roots)."""
    _enable_site()
    from retriever import build
    import time
    t0 = time.perf_counter()
    scope = build.resolve(roots or None, platform, warn=None, only_hermes=only_hermes)
    header, problems = build.build(scope, index_path)
    touch_stamp(index_path)
    if not quiet:
        for folder in scope["missing"]:
            warn("warning: %s: no such folder" % folder)
        warn("index %s %s; rebuilt it (%d skills, %d files with problems, %.2fs)"
             % (index_path, reason, header["n_docs"], len(problems), time.perf_counter() - t0))


def open_index(roots=(), index_path=None, platform=None, fresh=False, quiet=False, only_hermes=False):
    """Load the index for ``roots`` (or the default roots), building it
    first when needed.  Returns ``(idx, index_path)``."""
    if platform is None:
        platform = locate.env("HERMES_PLATFORM") or None
    roots = list(roots)
    if index_path is None:
        index_path = locate.default_index_path(roots, platform, only_hermes)
    else:
        index_path = locate.abspath(index_path)
    try:
        idx = store.load(index_path)
    except store.IndexError_ as exc:
        reason = "missing" if str(exc) == "missing" else "was unusable (%s)" % exc
        if not roots:
            roots = _roots_named_in(index_path)
        rebuild(index_path, roots, platform, reason, quiet, only_hermes)
        return store.load(index_path), index_path
    hdr = idx["header"]
    if (hdr.get("platform") or "") != (platform or ""):
        # platform_disabled differs per platform: an --index shared across
        # platforms must not answer with another platform's skill set.
        rebuild(index_path, roots or _roots_named_in(index_path), platform,
                "was built for platform %r" % (hdr.get("platform") or ""), quiet,
                only_hermes or hdr.get("only_hermes", False))
        return store.load(index_path), index_path
    if not covers(hdr, roots):
        rebuild(index_path, roots, platform, "was built for other roots", quiet)
        return store.load(index_path), index_path
    if fresh:
        _enable_site()
        from retriever import build
        stale, _ = build.is_stale(hdr)
        if stale:
            rebuild(index_path, [r["path"] for r in hdr["roots"]] if hdr["explicit"] else roots,
                    platform, "was stale", quiet, hdr.get("only_hermes", False))
            return store.load(index_path), index_path
    return idx, index_path


def covers(header, roots):
    """True when an index with ``header`` was built for exactly ``roots``
    (any index covers "no roots given": its header names its own)."""
    if not roots:
        return True
    want = set(locate.abspath(r) for r in roots)
    return bool(header["explicit"]) and want == set(r["path"] for r in header["roots"])


def _roots_named_in(index_path):
    # A truncated file may still have a readable header naming its roots.
    try:
        header, f = store.read_header(index_path)
        f.close()
    except store.IndexError_:
        return []
    return [r["path"] for r in header.get("roots", ())] if header.get("explicit") else []


def stamp_path(index_path):
    """The file whose mtime records the last freshness check."""
    return index_path + ".checked"


def touch_stamp(index_path):
    """Record a freshness check now."""
    p = stamp_path(index_path)
    try:
        fd = posix.open(p, posix.O_WRONLY | posix.O_CREAT, 0o600)
        posix.close(fd)
        posix.utime(p)
    except OSError:
        pass


def maybe_revalidate(index_path):
    """After answering, fork a detached child that rebuilds the index if the
    skills changed, at most once per SKILL_RETRIEVAL_REVALIDATE seconds.

    The answer never waits for it: the parent returns at once, and the
    child's stdout and stderr are /dev/null so hook runners see EOF.
    """
    raw = locate.env("SKILL_RETRIEVAL_REVALIDATE").strip().lower()
    if raw in ("off", "never", "false", "no"):
        return
    interval = env_float("SKILL_RETRIEVAL_REVALIDATE", REVALIDATE_DEFAULT) if raw else REVALIDATE_DEFAULT
    import time
    try:
        age = time.time() - posix.stat(stamp_path(index_path)).st_mtime
    except OSError:
        age = float("inf")
    if age < interval:
        return
    touch_stamp(index_path)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        pass
    try:
        pid = posix.fork()
    except OSError:
        return
    if pid:
        return
    # Child: detach and go quiet before doing anything slow.
    try:
        posix.setsid()
        fd = posix.open("/dev/null", posix.O_RDWR)
        for n in (0, 1, 2):
            posix.dup2(fd, n)
        _enable_site()
        from retriever.build import background_revalidate
        background_revalidate(index_path)
    except BaseException:
        pass
    posix._exit(0)


def answer(text, opts):
    """Results for ``text`` under parsed ``opts``; returns (results, index path)."""
    from retriever.query import search
    top_k, inject_k = limits(opts.get("k"))
    idx, path = open_index(opts.get("roots") or (), opts.get("index"), opts.get("platform"),
                           opts.get("fresh", False), opts.get("quiet", False))
    try:
        results = search(idx, text, top_k)
    except (IndexError, ValueError, EOFError, TypeError) as exc:
        # The header checked out but a section is damaged (bad records or
        # offsets): rebuild once and answer from the new file.
        platform = opts.get("platform") or locate.env("HERMES_PLATFORM") or None
        rebuild(path, opts.get("roots") or _roots_named_in(path), platform,
                "was corrupt (%s)" % type(exc).__name__, opts.get("quiet", False))
        results = search(store.load(path), text, top_k)
    return shortlist(text, results, inject_k, opts.get("rerank", False)), path


def shortlist(text, results, inject_k, rerank=False, session_id=None):
    """Cut the ranked ``results`` to what is injected, after the optional
    LLM rerank (``--rerank`` or SKILL_RETRIEVAL_RERANK).  The rerank module,
    and the HTTP client with it, is imported only when asked for."""
    if rerank or locate.env("SKILL_RETRIEVAL_RERANK").strip():
        from retriever import rerank as rr
        results = rr.maybe_rerank(text, results, session_id=session_id, inject_k=inject_k, force=bool(rerank))
    return results[:inject_k]


def main(argv=None):
    """Entry point.  Returns the exit code; never prints a traceback for
    bad input."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        opts = parse_fast(argv)
    except Usage as exc:
        if argv[:1] == ["hook"]:
            # A hook must never block the prompt (exit 2 does, in Claude
            # Code and Codex): a bad registered command answers empty.
            from retriever.runners import hook as hookio
            return hookio.run(argv[1] if len(argv) > 1 else "", {"error": "bad hook command line: %s" % exc})
        warn("error: %s (see skill-retrieve --help)" % exc)
        return 2
    if opts is None:
        _enable_site()
        from retriever.cli import commands as cli
        return cli.main(argv)
    if opts["hook"]:
        from retriever.runners import hook as hookio
        return hookio.run(opts["hook"], opts)
    text = " ".join(opts["words"]) if opts["words"] else read_stdin()
    try:
        results, path = answer(text, opts)
    except Exception as exc:  # never a traceback for the user
        warn("error: %s: %s" % (type(exc).__name__, exc))
        locate.log("query failed: %s: %s" % (type(exc).__name__, exc))
        return 1
    from retriever import render
    if opts["format"] == "json":
        out = render.json_doc(text, results)
    else:
        out = render.text_block(results)
    write_out(out)
    maybe_revalidate(path)
    return 0


def write_out(text):
    """Write UTF-8 to stdout whatever the locale says, and flush."""
    if text:
        try:
            sys.stdout.buffer.write(text.encode("utf-8", "replace"))
        except AttributeError:  # a replaced sys.stdout (tests, embedding)
            sys.stdout.write(text)
    sys.stdout.flush()


def console_main():
    """``skill-retrieve`` console script installed by pip (not startup-tuned:
    hooks should call bin/skill-retrieve with an absolute interpreter)."""
    code = main()
    sys.stdout.flush()
    raise SystemExit(code)
