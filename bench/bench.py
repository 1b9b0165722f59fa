"""Cold-start benchmark: one query per process against the interpreter floor.

``make bench`` (= ``.venv/bin/python bench/bench.py``).  For each library
size (300 and 3,741 real skills; 20,000 and 100,000 made from renamed
copies of them) it builds the index with ``bin/skill-retrieve build``, then
runs, interleaved round by round, the floor (``python -I -S -c pass`` by
the same interpreter) and every variant:

  shipped   bin/skill-retrieve --index FILE QUERY (the packed mmap format)
  hook      bin/skill-retrieve hook claude-code --index FILE, JSON on stdin
  hook-deep the same hook, the fifth prompt of a session with a 512 KiB
            transcript and a full session state (``deep_session``)
  warm      the session-start hook as install registers it (-I -S bin warm
            claude-code, SessionStart JSON on stdin): it prints nothing and
            forks; its budget is floor + 20 ms (issue 38)
  pickle    plain dict index {term: [(doc, weight)]} + docs, pickle, -I -S
  orjson    the same dict with orjson (needs site-packages: -I, site on)
  rebuild   parse every SKILL.md, build, query (300 and 3,741 only)

plus a freshness group (300 and 20,000) with the background revalidation
at its default, an in-process per-turn figure, the build times and the
issue's budgets.  Progress goes to stderr, the table to stdout, the full
data to .cache/bench/last.json.  This is a benchmark, not a test: it
never fails on a missed budget, it reports it.
"""

import argparse
import hashlib
import itertools
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)
sys.path.insert(0, HERE)

import corpus  # noqa: E402
import inproc  # noqa: E402
import measure  # noqa: E402

BIN = os.path.join(REPO, "bin", "skill-retrieve")
PY = sys.executable
MAIN = os.path.join(REPO, "retriever", "__main__.py")
CONSOLE = os.path.join(os.path.dirname(PY), "skill-retrieve")  # pip's console script in this venv
MIB = 1024.0  # ru_maxrss is in KiB

QUERIES = [
    "rotate my kubernetes TLS certificates",
    "write a pytest for this function",
    "用python写一个网页爬虫",
    "my pdf is scanned, pull the text out of it",
    "review this pull request for security issues",
    "set up a GitHub Actions workflow that deploys to AWS",
    "the docker build keeps failing with permission denied",
    "make a bar chart of monthly sales from this csv",
    "why does my React component re-render on every keystroke",
    "translate this README into Japanese and fix the markdown tables",
]

# The budgets: wall - floor (ms) per size, RSS - floor (MiB) per size.
WALL_BUDGET_MS = {300: 5.0, 20000: 15.0, 100000: 30.0}
RSS_BUDGET_MIB = {20000: 10.0}
BUILD_1000_BUDGET_S = 2.0
BASELINE_SIZES = (300, 3741)  # rebuild-per-process beyond this takes seconds per query
INPROC_SIZES = (300, 3741)
FRESHNESS_SIZES = (300, 20000)
# Files whose changes change what a build writes; cached big indexes are keyed by them.
BUILD_SOURCES = ("analyze.py", "build.py", "discover.py", "frontmatter.py", "hermes_config.py",
                 "index.py", "skills.py", "store.py", "tokenize.py")


def log(msg):
    """Progress line on stderr."""
    sys.stderr.write("[bench %s] %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


def source_key():
    """Hash of the build code and corpus version (cache key for big indexes)."""
    h = hashlib.blake2b(corpus.CORPUS_VERSION.encode(), digest_size=6)
    for name in BUILD_SOURCES:
        try:
            with open(os.path.join(REPO, "retriever", name), "rb") as f:
                h.update(name.encode() + b"\0" + f.read())
        except OSError:
            pass
    return h.hexdigest()


def build_index(roots, path, env):
    """``bin/skill-retrieve build``; returns wall seconds, peak RSS and header."""
    argv = [BIN, "build", "-q", "--index", path]
    for r in roots:
        argv += ["--root", r]
    r = measure.run_once(argv, env=env)
    if r["code"] != 0:
        raise SystemExit("build failed (%d): %s" % (r["code"], r["err"].decode("utf-8", "replace")[-2000:]))
    return {"wall_s": r["wall"], "rss_mib": r["rss"] / MIB, "header": read_header(path),
            "stdout": r["out"].decode("utf-8", "replace").strip()}


def read_header(path):
    """The index header (counts, build_seconds) without the big parts."""
    from retriever import store
    header, f = store.read_header(path)
    f.close()
    keep = ("n_docs", "n_terms", "n_postings", "size", "build_seconds", "problems")
    return {k: header.get(k) for k in keep}


def prepare_size(size, cache, skills, env, key, rebuild):
    """Corpus roots and a built index for one size.  Small sizes are rebuilt
    (and timed) every run.  20k and 100k (a 5-minute, 7 GB build at 100k)
    reuse a cached index while the store's format version is unchanged; a
    build-code change since is reported, and ``--rebuild`` refreshes it.
    The comparison formats are exported from the same file, so they agree
    with it whatever code built it."""
    if size == 3741:
        roots = corpus.collections()
    elif size <= 3741:
        roots = [corpus.subset(cache, size, skills, log)]
    else:
        roots = [corpus.copies(cache, size, skills, log)]
    idx_dir = os.path.join(cache, "idx")
    os.makedirs(idx_dir, exist_ok=True)
    from retriever import store
    tag = "%d-f%s-%s" % (size, store.FORMAT_VERSION, corpus.CORPUS_VERSION)
    path = os.path.join(idx_dir, tag + ".skr")
    keyfile = path + ".buildkey"
    for old in os.listdir(idx_dir):  # indexes of another format are dead weight
        if old.startswith("%d-" % size) and not old.startswith(tag):
            os.unlink(os.path.join(idx_dir, old))
    cached = size > 3741 and not rebuild and os.path.exists(path)
    if cached:
        try:
            info = {"wall_s": None, "rss_mib": None, "header": read_header(path), "cached": True}
            with open(keyfile) as f:
                info["build_key"] = f.read().strip()
            info["stale_code"] = info["build_key"] != key
            info["built_at"] = time.strftime("%Y-%m-%d %H:%M", time.localtime(os.path.getmtime(path)))
            # Built before headers named every 64th term: its queries would
            # read the tables whole, as no index built today does.
            cached = "term_heads" in info["header"]
        except Exception:
            cached = False
    if not cached:
        log("building index for %d skills%s" % (size, " (one-off, cached afterwards)" if size > 3741 else ""))
        info = build_index(roots, path, env)
        info.update(cached=False, build_key=key, stale_code=False)
        with open(keyfile, "w") as f:
            f.write(key + "\n")
        log("  built: %d skills, %.1f MB, %.2f s wall, peak RSS %.0f MiB"
            % (info["header"]["n_docs"], info["header"]["size"] / 1e6, info["wall_s"], info["rss_mib"]))
    return roots, path, info


def export_formats(index_path, cache):
    """The pickle and orjson dict files made from ``index_path`` (cached
    beside it, keyed by the index file's mtime)."""
    st = os.stat(index_path)
    stem = os.path.join(cache, "fmt", "%s-%d" % (os.path.basename(index_path), st.st_mtime_ns))
    pkl, oj = stem + ".pickle", stem + ".orjson"
    if not (os.path.exists(pkl) and os.path.exists(oj)):
        os.makedirs(os.path.dirname(stem), exist_ok=True)
        prefix = os.path.basename(index_path).split("-")[0] + "-"
        for old in os.listdir(os.path.dirname(stem)):
            if old.startswith(prefix):
                os.unlink(os.path.join(os.path.dirname(stem), old))
        log("  exporting pickle/orjson dict formats")
        r = measure.run_once([PY, os.path.join(HERE, "formats.py"), "export", index_path, pkl, oj])
        if r["code"] != 0:
            raise SystemExit("export failed: %s" % r["err"].decode("utf-8", "replace")[-2000:])
    return pkl, oj


# Session ids of this run's hook payloads: the pid and start time keep them
# apart from an earlier run's, whose memory the state file in the cache
# keeps for a day.
_SESSIONS = ("bench-%d-%d-%d" % (os.getpid(), int(time.time()), n) for n in itertools.count())


def hook_payload(q):
    """A Claude Code UserPromptSubmit hook payload for prompt ``q``, the
    first prompt of a session of its own: with one shared session, session
    memory (retriever/session.py) held back a skill an earlier run had
    been given, and those runs printed nothing."""
    return json.dumps({"session_id": next(_SESSIONS), "transcript_path": "/tmp/bench-transcript.jsonl",
                       "cwd": REPO, "permission_mode": "default",
                       "hook_event_name": "UserPromptSubmit", "prompt": q}).encode("utf-8")


DEEP_SESSION = "bench-deep-session"
DEEP_TRANSCRIPT_BYTES = 512 * 1024


def deep_session(cache, env):
    """``(payload(q), pre())`` for a prompt deep in a session: the fifth
    prompt of session DEEP_SESSION, whose Claude Code transcript is
    DEEP_TRANSCRIPT_BYTES of JSONL (tool calls, a loaded skill), with a
    full state file (session.MAX_SESSIONS sessions, each with injections,
    loaded skills and three prompts' context terms).  ``pre``, run untimed
    before each run, puts that state file back, so every run is the same
    fifth prompt and not the next one."""
    from retriever import session
    folder = os.path.join(cache, "deep-session")
    os.makedirs(folder, exist_ok=True)
    transcript = os.path.join(folder, "transcript.jsonl")
    lines, size, n = [], 0, 0
    while size < DEEP_TRANSCRIPT_BYTES:
        n += 1
        if n % 40 == 0:
            rec = {"type": "assistant", "message": {"role": "assistant", "content": [
                {"type": "tool_use", "name": "Skill", "input": {"skill": "loaded-skill-%d" % n}}]}}
        else:
            rec = {"type": "assistant", "message": {"role": "assistant", "content": [
                {"type": "text", "text": "step %d: ran the tests, 3 failed in test_orders.py; " % n + "x" * 300}]}}
        line = json.dumps(rec) + "\n"
        lines.append(line)
        size += len(line)
    with open(transcript, "w") as f:
        f.write("".join(lines))
    now = time.time()
    terms = ["kubernetes", "certificate", "rotate", "tls", "cluster", "kubeconfig", "expire", "renew",
             "secret", "ingress", "cert", "manager"]
    sessions = {}
    for i in range(session.MAX_SESSIONS):
        sid = DEEP_SESSION if i == session.MAX_SESSIONS - 1 else "other-%d" % i
        given = [[k, "skills/skill-%d-%d" % (i, k), 3.5, "bm25+semantic"] for k in range(1, 5)]
        sessions[session._key("claude-code", sid, None)] = {
            "t": now, "n": 4, "g": given, "l": ["loaded-skill-%d" % k for k in range(8)], "x": None,
            "p": [[k, terms] for k in range(2, 5)]}
    state = os.path.join(folder, "sessions.json")
    session.save(state, sessions)
    with open(state, "rb") as f:
        data = f.read()
    target = os.path.join(env["XDG_CACHE_HOME"], "skill-retrieval", "sessions.json")

    def pre():
        os.makedirs(os.path.dirname(target), mode=0o700, exist_ok=True)
        tmp = target + ".bench"
        with open(tmp, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o600)
        os.replace(tmp, target)

    def payload(q):
        return json.dumps({"session_id": DEEP_SESSION, "transcript_path": transcript, "cwd": REPO,
                           "permission_mode": "default", "hook_event_name": "UserPromptSubmit",
                           "prompt": q}).encode("utf-8")
    return payload, pre
SESSION_START = json.dumps({"session_id": "bench-start", "cwd": HERE, "hook_event_name": "SessionStart",
                            "source": "startup"}).encode("utf-8")
WARM_BUDGET_MS = 20.0


def hook_argv(index_path, roots, prog=None):
    """The Claude Code hook command (``prog``: how it is started, default
    bin/skill-retrieve through its sh preamble).  The roots are named so
    the hook does not look for ~/.claude/skills (absent here) and the index
    matches."""
    argv = list(prog or [BIN]) + ["hook", "claude-code", "--index", index_path]
    for r in roots:
        argv += ["--root", r]
    return argv


def variants_for(size, roots, index_path, pkl, oj, env):
    """The measured variants of one size, floor first."""
    dq = os.path.join(HERE, "dict_query.py")
    rq = os.path.join(HERE, "rebuild_query.py")
    # The deep session keeps its own cache folder: its transcript's loads
    # teach (and its injections not loaded penalise) the learnt table of
    # this index (retriever.learn), which in a shared folder moved the
    # other rows' answers mid-run ("runs printed nothing where shipped
    # answers", top-1 flipping between bench runs).
    deep_env = dict(env, XDG_CACHE_HOME=env["XDG_CACHE_HOME"] + "-deep")
    deep, deep_pre = deep_session(os.path.dirname(index_path), deep_env)
    vs = [
        {"name": "floor", "label": "floor: python -I -S -c pass",
         "make": lambda q: ([PY, "-I", "-S", "-c", "pass"], None, env)},
        {"name": "shipped", "label": "shipped: bin/skill-retrieve (packed index)",
         "make": lambda q: ([BIN, "--index", index_path, q], None, env)},
    ]
    vs += [
        {"name": "hook", "label": "shipped: hook claude-code (stdin JSON)",
         "make": lambda q: (hook_argv(index_path, roots), hook_payload(q), env)},
        # The command each install route registers (install.hook_command):
        # a checkout runs bin/skill-retrieve, pip/pipx/uv the package's
        # __main__.py (the same file a site-packages install holds).  The
        # console script pip writes is what they would run without it.
        {"name": "hook-deep", "label": "hook, 5th prompt of a session (512 KiB transcript)",
         "make": lambda q: (hook_argv(index_path, roots), deep(q), deep_env), "pre": deep_pre},
        # The bench's HOME has no Claude Code skills, so the child it forks
        # finds nothing to index and exits: the row is the runner's wait.
        {"name": "warm", "label": "session-start hook: warm claude-code",
         "make": lambda q: ([PY, "-I", "-S", BIN, "warm", "claude-code"], SESSION_START, env)},
        {"name": "hook-checkout", "label": "hook as a checkout installs it (-I -S bin)",
         "make": lambda q: (hook_argv(index_path, roots, [PY, "-I", "-S", BIN]), hook_payload(q), env)},
        {"name": "hook-pip", "label": "hook as pip/pipx/uv install it (__main__)",
         "make": lambda q: (hook_argv(index_path, roots, [PY, "-I", "-S", MAIN]), hook_payload(q), env)},
        {"name": "hook-console", "label": "console script hook (site on; not used)",
         "make": lambda q: (hook_argv(index_path, roots, [CONSOLE]), hook_payload(q), env)},
        {"name": "pickle", "label": "pickle dict (-I -S)",
         "make": lambda q: ([PY, "-I", "-S", dq, "pickle", pkl, q], None, env)},
        {"name": "orjson", "label": "orjson dict (-I, site on)",
         "make": lambda q: ([PY, "-I", dq, "orjson", oj, q], None, env)},
    ]
    if size in BASELINE_SIZES:
        vs.append({"name": "rebuild", "label": "rebuild every process (-I, site on)",
                   "make": lambda q: ([PY, "-I", rq] + list(roots) + ["--", q], None, env)})
    # The hook-deep row's transcript shows a load, so each of its runs
    # starts the learning fold in a detached child (usage.relearn), as a
    # user's prompt after a load does; the runner does not wait for it.
    # Left running, it took CPU from whichever row ran next (the hook row
    # read +6.8 ms over the floor in a 7-round run, +2.7 a round before):
    # every row first waits, untimed, until no child of this index is left.
    for v in vs:
        v["pre"] = (lambda before=v.get("pre"): (before and before(), measure.wait_for_background(index_path)))
    return vs


def agreement(size, roots, index_path, pkl, oj, env, with_baseline):
    """Top-1 ids of every query per format, and how many agree with shipped
    (for the hook: how many of its outputs name shipped's top-1 skill)."""
    shipped = []
    for q in QUERIES:
        r = measure.run_once([BIN, "--index", index_path, "--format", "json", q], env=env)
        res = json.loads(r["out"] or b"{}").get("results") or [{}]
        shipped.append(res[0].get("id"))
    stdin = "\n".join(QUERIES).encode("utf-8")
    others = {"pickle": [PY, "-I", "-S", os.path.join(HERE, "dict_query.py"), "pickle", pkl, "--ids"],
              "orjson": [PY, "-I", os.path.join(HERE, "dict_query.py"), "orjson", oj, "--ids"]}
    if with_baseline:
        others["rebuild"] = [PY, "-I", os.path.join(HERE, "rebuild_query.py"), "--ids"] + list(roots) + ["--"]
    out = {"shipped_top1": shipped}
    hits = 0
    for q, top1 in zip(QUERIES, shipped):
        r = measure.run_once(hook_argv(index_path, roots), stdin=hook_payload(q), env=env)
        text = r["out"].decode("utf-8", "replace")
        hits += ("(%s)" % top1) in text if top1 is not None else not text.strip()
    out["hook"] = {"agree": hits, "of": len(QUERIES)}
    for name, argv in others.items():
        r = measure.run_once(argv, stdin=stdin, env=env)
        lines = r["out"].decode("utf-8", "replace").split("\n")
        top1 = [(lines[i].split("\t")[0] or None) if i < len(lines) else None for i in range(len(QUERIES))]
        out[name] = {"agree": sum(a == b for a, b in zip(top1, shipped)), "of": len(QUERIES), "top1": top1}
    return out


def summarise(stats, shipped_top1, floor_name="floor"):
    """Medians and differences against the floor, per variant.  ``unanswered``
    counts runs that printed nothing for a query the shipped path answers
    (an abstention on the other queries is the product working)."""
    fl = stats[floor_name]
    fw = measure.median(fl["wall"]) * 1e3
    fr = measure.median(fl["rss"]) / MIB
    rows = {}
    for name, st in stats.items():
        if not st["wall"]:
            continue
        w = measure.median(st["wall"]) * 1e3
        r = measure.median(st["rss"]) / MIB
        rows[name] = {"runs": len(st["wall"]), "wall_ms": w, "wall_minus_floor_ms": w - fw,
                      "ratio": w / fw, "rss_mib": r, "rss_minus_floor_mib": r - fr,
                      "min_ms": min(st["wall"]) * 1e3, "max_ms": max(st["wall"]) * 1e3,
                      "failures": st["failures"], "empty": st["empty"], "first_err": st["first_err"],
                      "unanswered": sum(shipped_top1[q] is not None for q in st["empty_queries"]),
                      "rss_source": st["rss_source"], "rss_runs": len(st["rss"])}
    return rows


def background_check_cost(index_path, env, runs=3):
    """Wall and CPU of one freshness check (what the detached child does
    when nothing changed): ``retriever.build.revalidate`` in a process."""
    code = ("import sys; sys.path.insert(0, %r)\nfrom retriever.build import revalidate\n"
            "import time; t=time.perf_counter(); r=revalidate(%r); "
            "print(r, round((time.perf_counter()-t)*1e3, 1))" % (REPO, index_path))
    # The first check after the big dict formats ran may find the dentry
    # cache evicted (20 s instead of 3 s at 100k): it is kept, but apart.
    first = measure.run_once([PY, "-I", "-c", code], env=env)
    walls = [measure.run_once([PY, "-I", "-c", code], env=env) for _ in range(runs)]
    out = walls[-1]["out"].decode().split()
    first_out = first["out"].decode().split()
    return {"process_wall_ms": measure.median([w["wall"] for w in walls]) * 1e3,
            "check_ms": float(out[-1]) if out else None, "result": out[0] if out else None,
            "first_check_ms": float(first_out[-1]) if first_out else None}


def fmt_row(label, row, budget=""):
    """One table line."""
    return "  %-44s %4d %8.1f %+8.1f %6.2fx %8.1f %+7.1f  %s" % (
        label, row["runs"], row["wall_ms"], row["wall_minus_floor_ms"], row["ratio"],
        row["rss_mib"], row["rss_minus_floor_mib"], budget)


HEAD = "  %-44s %4s %8s %8s %7s %8s %7s  %s" % ("variant", "runs", "wall ms", "-floor", "xfloor",
                                                 "RSS MiB", "-floor", "budget")


def budget_text(size, row):
    """Budget verdicts for a shipped-format row at ``size``."""
    parts = []
    if size in WALL_BUDGET_MS:
        b = WALL_BUDGET_MS[size]
        parts.append("wall <= floor+%g ms %s" % (b, "PASS" if row["wall_minus_floor_ms"] <= b else "FAIL"))
    if size in RSS_BUDGET_MIB:
        b = RSS_BUDGET_MIB[size]
        parts.append("RSS <= floor+%g MiB %s" % (b, "PASS" if row["rss_minus_floor_mib"] <= b else "FAIL"))
    return "; ".join(parts)


def main(argv=None):
    """Run the benchmark; returns 0 (budgets are reported, not enforced)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default=None, help="comma-separated library sizes (default 300,3741,20000,100000)")
    ap.add_argument("--runs", type=int, default=None, help="interleaved rounds per size (default 21; --quick 7)")
    ap.add_argument("--quick", action="store_true", help="7 rounds, sizes 300,3741, one 1,000-skill build")
    ap.add_argument("--row-budget", type=float, default=20.0,
                    help="seconds a slow variant may take per size before it gets fewer runs (default 20)")
    ap.add_argument("--rebuild", action="store_true",
                    help="rebuild the cached 20k/100k indexes (100k: about 5 min and 7 GB)")
    ap.add_argument("--profile", action="store_true",
                    help="always print the import/cProfile breakdowns of query and build "
                         "(default: only for a missed budget)")
    ap.add_argument("--no-build-table", action="store_true",
                    help="skip the build table (cold, one edit, ten added at 1k/3,741/20k/100k; about 10 min)")
    ap.add_argument("--cache", default=os.path.join(REPO, ".cache", "bench"), help="cache folder")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in (args.sizes or ("300,3741" if args.quick else "300,3741,20000,100000")).split(",")]
    runs = args.runs or (7 if args.quick else 21)
    cache = os.path.abspath(args.cache)
    os.makedirs(cache, exist_ok=True)
    env = measure.base_env(cache)
    measure.forget_use(env)
    t_start = time.time()
    key = source_key()
    report = {"python": PY, "version": sys.version.split()[0], "runs": runs, "sizes": sizes,
              "queries": QUERIES, "started": time.strftime("%Y-%m-%dT%H:%M:%S"), "source_key": key,
              "corpus_version": corpus.CORPUS_VERSION, "sizes_detail": {}}

    log("reading the real skills in %s" % corpus.SHARED)
    skills = corpus.real_skills()
    log("%d distinct real skills" % len(skills))

    # The 1,000-skill build budget: whole `skill-retrieve build` processes.
    sub1000 = corpus.subset(cache, 1000, skills, log)
    tmp_idx = os.path.join(cache, "tmp-build-1000.skr")
    builds = []
    for i in range(1 if args.quick else 3):
        log("timing a build of 1,000 real skills (%d)" % (i + 1))
        builds.append(build_index([sub1000], tmp_idx, env))
    b1000 = {"wall_s": [b["wall_s"] for b in builds], "median_wall_s": measure.median([b["wall_s"] for b in builds]),
             "build_seconds": [b["header"]["build_seconds"] for b in builds], "n_docs": builds[0]["header"]["n_docs"],
             "rss_mib": builds[0]["rss_mib"]}
    report["build_1000"] = b1000
    for p in (tmp_idx, tmp_idx + ".checked"):
        if os.path.exists(p):
            os.unlink(p)

    prepared = {}
    for size in sizes:
        roots, path, info = prepare_size(size, cache, skills, env, key, args.rebuild)
        pkl, oj = export_formats(path, cache)
        prepared[size] = (roots, path, info, pkl, oj)

    for size in sizes:
        roots, path, info, pkl, oj = prepared[size]
        log("size %d: %d skills indexed; checking top-1 agreement" % (size, info["header"]["n_docs"]))
        agree = agreement(size, roots, path, pkl, oj, env, size in BASELINE_SIZES)
        log("size %d: measuring %d interleaved rounds" % (size, runs))
        vs = variants_for(size, roots, path, pkl, oj, env)
        stats = measure.interleave(vs, runs, QUERIES, log, row_budget=args.row_budget)
        measure.fix_rss(vs, stats, QUERIES, log=log)
        detail = {"index": path, "build": info, "agreement": agree, "rows": summarise(stats, agree["shipped_top1"]),
                  "labels": {v["name"]: v["label"] for v in vs},
                  "sizes_bytes": {"shipped": os.path.getsize(path), "pickle": os.path.getsize(pkl),
                                  "orjson": os.path.getsize(oj)}}
        if size in INPROC_SIZES:
            log("size %d: in-process per-turn latency" % size)
            detail["inproc"] = {"hermes": inproc.hermes_latency(path, roots, QUERIES),
                                "search": inproc.search_latency(path, QUERIES)}
        report["sizes_detail"][size] = detail

    # Freshness: the product default (revalidate in a detached child at
    # most every 2 s) and the worst case (every query), against off.
    report["freshness"] = {}
    for size in [s for s in sizes if s in FRESHNESS_SIZES]:
        roots, path, info, pkl, oj = prepared[size]
        log("size %d: background revalidation rows" % size)
        on = {k: v for k, v in env.items() if k != "SKILL_RETRIEVAL_REVALIDATE"}
        every = dict(env, SKILL_RETRIEVAL_REVALIDATE="0")
        stamp = path + ".checked"
        if os.path.exists(stamp):
            os.unlink(stamp)
        vs = [
            {"name": "floor", "label": "floor: python -I -S -c pass",
             "make": lambda q: ([PY, "-I", "-S", "-c", "pass"], None, env)},
            {"name": "off", "label": "shipped, SKILL_RETRIEVAL_REVALIDATE=off",
             "make": lambda q, path=path: ([BIN, "--index", path, q], None, env)},
            {"name": "default", "label": "shipped, revalidation default (2 s)",
             "make": lambda q, path=path: ([BIN, "--index", path, q], None, on)},
            {"name": "every", "label": "shipped, REVALIDATE=0 (check every query)*",
             "make": lambda q, path=path: ([BIN, "--index", path, q], None, every)},
        ]
        stats = measure.interleave(vs[:3], runs, QUERIES, log, row_budget=args.row_budget)
        waited = measure.wait_for_background(path)
        # Every query forking a check is what the default does when prompts
        # come more than 2 s apart, the usual pace; here they come ms apart,
        # so each run first waits for the previous check to finish (untimed),
        # as the user's next prompt would.
        settle = {"pre": lambda path=path: measure.wait_for_background(path)}
        vs2 = [dict(vs[0], name="floor2", **settle), dict(vs[3], **settle)]
        stats.update(measure.interleave(vs2, runs, QUERIES, log, row_budget=args.row_budget))
        measure.fix_rss(vs[:3] + vs2, stats, QUERIES, log=log)
        waited += measure.wait_for_background(path)
        shipped_top1 = report["sizes_detail"][size]["agreement"]["shipped_top1"]
        rows = summarise({k: stats[k] for k in ("floor", "off", "default")}, shipped_top1)
        rows.update({k: v for k, v in summarise({"floor": stats["floor2"], "every": stats["every"]},
                                                 shipped_top1).items() if k == "every"})
        report["freshness"][size] = {"rows": rows, "labels": {v["name"]: v["label"] for v in vs},
                                     "floor2": summarise({"floor": stats["floor2"]}, shipped_top1)["floor"],
                                     "waited_for_children_s": waited}

    # What one background check costs (the detached child's work when
    # nothing changed), per size.
    for size in sizes:
        path = prepared[size][1]
        log("size %d: cost of one background freshness check" % size)
        report["sizes_detail"][size]["background_check"] = background_check_cost(path, env, 1 if size > 3741 else 3)

    if not args.no_build_table:
        import build_table
        # Its own trees and indexes: edits and additions never touch the
        # indexes the query rows above used.
        bsizes = [1000] + [s for s in sizes if s >= 3741]
        log("build table at %s skills" % ", ".join(str(s) for s in bsizes))
        report["build_table"] = build_table.run(bsizes, cache, env, 1 if args.quick else 3, skills)
    report["elapsed_s"] = time.time() - t_start
    text, failed_sizes = render(report)
    if report.get("build_table"):
        import build_table
        text += "\n" + build_table.table(report["build_table"])
    if not b1000["median_wall_s"] < BUILD_1000_BUDGET_S or args.profile:
        import hotspots
        log("profiling a build of 1,000 skills")
        prof = hotspots.build_profile(sub1000, cache)
        report["build_profile"] = prof
        text += "\nProfile of the 1,000-skill build (budget %s):\n%s\n" % (
            "met" if b1000["median_wall_s"] < BUILD_1000_BUDGET_S else "missed", prof)
    if failed_sizes or args.profile:
        import hotspots
        size = max(failed_sizes or sizes)
        path = prepared[size][1]
        log("profiling the shipped path at %d skills" % size)
        prof = hotspots.importtime(path, QUERIES[0], env) + "\n" + hotspots.cprofile(path, QUERIES, env)
        report["profile"] = {"size": size, "text": prof}
        text += "\nProfile of the shipped query path at %d skills (budget %s):\n%s\n" % (
            size, "missed" if failed_sizes else "met", prof)
    sys.stdout.write(text)
    out = os.path.join(cache, "last.json")
    with open(out + ".tmp", "w") as f:
        json.dump(report, f, indent=1, default=str)
    os.replace(out + ".tmp", out)
    log("done in %.0f s; JSON report in %s" % (time.time() - t_start, out))
    return 0


def render(report):
    """The final table as text, and the sizes whose shipped row missed a budget."""
    lines = []
    failed = []
    lines.append("skill-retrieval cold-start benchmark  (Python %s, %s; %d interleaved rounds; medians)"
                 % (report["version"], report["python"], report["runs"]))
    lines.append("One query per process, wall = spawn to exit as the parent sees it; RSS = peak (ru_maxrss).")
    lines.append("Dict formats and the rebuild baseline run with gc.disable() and os._exit (their best case).")
    lines.append("SKILL_RETRIEVAL_REVALIDATE=off in the format rows; see the freshness rows for the default.")
    lines.append("Peak RSS below the bench process's own size is re-measured with /usr/bin/time (3 runs):")
    lines.append("Linux counts the forking parent's RSS in a child's ru_maxrss.")
    b = report["build_1000"]
    ok = b["median_wall_s"] < BUILD_1000_BUDGET_S
    lines.append("")
    lines.append("Build of %d real skills (bin/skill-retrieve build, whole process): median %.2f s over %d "
                 "(in-build %s s), peak RSS %.0f MiB  budget < %g s %s"
                 % (b["n_docs"], b["median_wall_s"], len(b["wall_s"]),
                    "/".join("%.2f" % x for x in b["build_seconds"]), b["rss_mib"], BUILD_1000_BUDGET_S,
                    "PASS" if ok else "FAIL"))
    for size, d in report["sizes_detail"].items():
        info = d["build"]
        h = info["header"]
        fl = d["rows"]["floor"]
        lines.append("")
        if info.get("cached"):
            build = "cached index from %s (in-build %.1f s%s)" % (
                info["built_at"], h["build_seconds"],
                "; build code changed since: --rebuild to refresh" if info.get("stale_code") else "")
        else:
            build = "build %.2f s wall, peak RSS %.0f MiB" % (info["wall_s"], info["rss_mib"])
        lines.append("== %s skills: %d indexed, %d terms, %d postings; index %.1f MB, pickle %.1f MB, "
                     "orjson %.1f MB; %s"
                     % ("{:,}".format(size), h["n_docs"], h["n_terms"], h["n_postings"], h["size"] / 1e6,
                        d["sizes_bytes"]["pickle"] / 1e6, d["sizes_bytes"]["orjson"] / 1e6, build))
        lines.append(HEAD)
        for name, row in d["rows"].items():
            label = d["labels"][name]
            bud = ""
            if name == "shipped":
                bud = budget_text(size, row)
                if "FAIL" in bud:
                    failed.append(size)
            elif name == "hook" and budget_text(size, row):
                bud = "(info) " + budget_text(size, row)
            elif name == "warm":
                bud = "wall <= floor+%g ms %s" % (WARM_BUDGET_MS, "PASS" if row["wall_minus_floor_ms"]
                                                  <= WARM_BUDGET_MS else "FAIL")
            if row["failures"]:
                bud += "  [%d FAILED runs: %s]" % (row["failures"], row["first_err"].strip()[-120:])
            if row["unanswered"] and name not in ("floor", "warm"):
                bud += "  [%d runs printed nothing where shipped answers]" % row["unanswered"]
            lines.append(fmt_row(label, row, bud))
        if "rebuild" not in d["rows"]:
            lines.append("  %-44s  skipped above 3,741 skills (seconds per query)" % "rebuild every process")
        ag = d["agreement"]
        lines.append("  top-1 agreement with shipped over %d queries: %s (shipped abstains on %d of them)" % (
            len(QUERIES), ", ".join("%s %d/%d" % (k, v["agree"], v["of"]) for k, v in ag.items()
                                    if k != "shipped_top1"), sum(t is None for t in ag["shipped_top1"])))
        slow = [n for n, r in d["rows"].items() if r["runs"] < report["runs"]]
        if slow:
            lines.append("  fewer runs for %s: one warm-up took longer than the per-row time budget"
                         % ", ".join(slow))
        if "inproc" in d:
            hp = d["inproc"]["hermes"]
            sp = d["inproc"]["search"]
            if hp is None:
                lines.append("  in-process per turn: hermes_turn.per_turn_latency failed; "
                             "%s: median %.2f ms, p90 %.2f ms (store.load %.2f ms)"
                             % (sp["label"], sp["median_ms"], sp["p90_ms"], sp["load_ms"]))
            else:
                med = hp.get("median_ms")
                raw = hp.get("raw") if isinstance(hp.get("raw"), dict) else {}
                extra = ", p90 %.2f ms" % (raw["p90_us"] / 1e3) if isinstance(raw.get("p90_us"), (int, float)) else ""
                if isinstance(raw.get("injected_timed"), (int, float)):
                    extra += ", a block in %.0f%% of turns" % (raw["injected_timed"] * 100)
                lines.append("  in-process per turn (Hermes pre_llm_call, BM25 only), %s: %s" % (
                    hp["label"], ("median %.2f ms%s" % (med, extra)) if isinstance(med, float)
                    else hp.get("error", hp.get("raw"))))
                lines.append("  %s: median %.2f ms, p90 %.2f ms (store.load %.2f ms)"
                             % (sp["label"], sp["median_ms"], sp["p90_ms"], sp["load_ms"]))
        del fl
    for size, fr in report.get("freshness", {}).items():
        lines.append("")
        lines.append("== freshness at %s skills (separate interleaved group)" % "{:,}".format(size))
        lines.append(HEAD)
        for name, row in fr["rows"].items():
            bud = ""
            if row["failures"]:
                bud = "[%d FAILED runs]" % row["failures"]
            if row["unanswered"] and name not in ("floor", "warm"):
                bud += "  [%d runs printed nothing where shipped answers]" % row["unanswered"]
            lines.append(fmt_row(fr["labels"][name], row, bud))
        fl2 = fr["floor2"]
        lines.append("  * own interleaved group with its own floor (%.1f ms), each run waiting untimed for the"
                     % fl2["wall_ms"])
        lines.append("    previous detached check, as a user's next prompt would; this is also the default's cost")
        lines.append("    whenever prompts are more than 2 s apart.")
    checks = [(size, d["background_check"]) for size, d in report["sizes_detail"].items()
              if "background_check" in d]
    if checks:
        lines.append("")
        lines.append("One background freshness check (retriever.build.revalidate with nothing changed; the CPU a")
        lines.append("detached child burns after a query, at most once per SKILL_RETRIEVAL_REVALIDATE seconds):")
        for size, c in checks:
            lines.append("  %8s skills: %7.1f ms in the check, %7.1f ms as a whole process (first, maybe cold: %.1f ms)"
                         % ("{:,}".format(size), c["check_ms"] if c["check_ms"] is not None else -1,
                            c["process_wall_ms"], c.get("first_check_ms") or -1))
    lines.append("")
    lines.append("total bench time %.0f s" % report["elapsed_s"])
    return "\n".join(lines) + "\n", failed


if __name__ == "__main__":
    sys.exit(main())
