"""Run one process, timing its whole life, and interleave variants.

Wall time is taken around spawn + wait in the parent, so it includes
interpreter start and teardown, as a hook runner sees it.  Peak RSS comes
from ``os.wait4``'s rusage (``ru_maxrss``, KiB on Linux) of that process
alone: detached grandchildren (the background revalidation) are not in it.

That rusage has a catch: Linux carries the resident size a process had
just before ``exec`` into its ``ru_maxrss``, so a child forked from the big
benchmark process reports at least the benchmark's own RSS.  ``fix_rss``
therefore re-measures, through the small ``/usr/bin/time`` (whose children
start from its few hundred KiB), every variant whose figure is not clearly
above the benchmark's own size.
"""

import os
import subprocess
import tempfile
import time

TIME_BIN = "/usr/bin/time"


def run_once(argv, stdin=None, env=None):
    """Run ``argv`` to completion.  Returns a dict: wall (s), cpu (s: user
    + system of the process and of the children it waited for), rss (KiB),
    code, out (bytes), err (bytes)."""
    with tempfile.TemporaryFile() as errf:
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=errf, env=env)
        if stdin is not None:
            try:
                p.stdin.write(stdin)
            except BrokenPipeError:
                pass
            p.stdin.close()
        out = p.stdout.read()
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)  # already reaped
        p.stdout.close()
        errf.seek(0)
        err = errf.read()
    return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "rss": ru.ru_maxrss, "code": p.returncode,
            "out": out, "err": err}


# A million iterations of an empty interpreter loop, best of 5, in ms.
_PACE = ("import time\ndef loop():\n    for i in range(1000000):\n        pass\nbest = 1.0\n"
         "for _ in range(5):\n    t = time.perf_counter()\n    loop()\n"
         "    best = min(best, time.perf_counter() - t)\nprint(best * 1e3)")


def pace(py):
    """The machine's pace now: ms for a million iterations of an empty
    loop under interpreter ``py`` (a fresh ``-I -S`` process, best of 5;
    lower is faster).  This VM's speed drifts by a third within minutes;
    figures with no floor to subtract (builds, the helper's own work)
    compare across runs only at a like pace.  None if it cannot run."""
    try:
        out = subprocess.run([py, "-I", "-S", "-c", _PACE], capture_output=True, text=True, timeout=60)
        return float(out.stdout)
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def pace_text(paces):
    """``pace`` figures as one phrase: "14.2 ms" or "14.2 to 17.9 ms"."""
    got = sorted(p for p in paces if p is not None)
    if not got:
        return "not measured"
    return "%.1f ms" % got[0] if got[0] == got[-1] else "%.1f to %.1f ms" % (got[0], got[-1])


def median(xs):
    """Median of a non-empty list."""
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2.0


def interleave(variants, rounds, queries, log=None, row_budget=20.0, min_runs=3):
    """Measure every variant, interleaved round by round.

    ``variants`` is a list of dicts with ``name``, ``make(query) ->
    (argv, stdin bytes or None, env)`` and optionally ``pre()``, called
    untimed before each run.  Each variant first gets one
    discarded warm-up run; a variant whose warm-up takes longer than
    ``row_budget / rounds`` seconds gets fewer runs (at least ``min_runs``,
    spread evenly over the rounds), so one slow format cannot eat the whole
    time budget.  Round ``r`` uses ``queries[r % len(queries)]`` for every
    variant, so rows compare like with like.

    Returns ``{name: {"wall": [...], "rss": [...], "runs": n, "failures":
    n, "empty": n, "empty_queries": [query numbers], "first_err": str}}``
    (``empty``: runs that printed nothing).
    """
    stats = {}
    for v in variants:
        argv, stdin, env = v["make"](queries[0])
        r = run_once(argv, stdin, env)
        n = rounds
        if r["wall"] * rounds > row_budget:
            n = max(min_runs, min(rounds, int(row_budget / max(r["wall"], 1e-9))))
        stats[v["name"]] = {"wall": [], "rss": [], "runs": n, "failures": 0, "empty": 0, "empty_queries": [],
                            "first_err": "", "warmup_wall": r["wall"], "rss_source": "wait4"}
        if r["code"] != 0:
            stats[v["name"]]["first_err"] = r["err"].decode("utf-8", "replace")[-500:]
        if log:
            log("    warm-up %-34s %8.1f ms  -> %d runs" % (v["name"], r["wall"] * 1e3, n))
    for rnd in range(rounds):
        q = queries[rnd % len(queries)]
        order = variants[rnd % len(variants):] + variants[:rnd % len(variants)]
        for v in order:
            st = stats[v["name"]]
            n = st["runs"]
            if (rnd + 1) * n // rounds == rnd * n // rounds:
                continue  # not this variant's turn (fewer runs than rounds)
            if v.get("pre"):
                v["pre"]()  # e.g. let background children finish first
            argv, stdin, env = v["make"](q)
            r = run_once(argv, stdin, env)
            if r["code"] != 0:
                st["failures"] += 1
                if not st["first_err"]:
                    st["first_err"] = r["err"].decode("utf-8", "replace")[-500:]
            if not r["out"].strip():
                st["empty"] += 1
                st["empty_queries"].append(rnd % len(queries))
            st["wall"].append(r["wall"])
            st["rss"].append(r["rss"])
        if log and (rnd + 1) % 5 == 0:
            log("    round %d/%d" % (rnd + 1, rounds))
    return stats


def self_rss_kib():
    """This process's current resident size in KiB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def rss_via_time(argv, stdin=None, env=None):
    """Peak RSS (KiB) of ``argv`` as reported by ``/usr/bin/time``."""
    with tempfile.NamedTemporaryFile(suffix=".rss") as tf:
        r = run_once([TIME_BIN, "-f", "%M", "-o", tf.name] + list(argv), stdin, env)
        tf.seek(0)
        text = tf.read().decode().strip().split()
    return int(text[-1]) if text else r["rss"]


def fix_rss(variants, stats, queries, n=3, log=None):
    """Replace wait4 RSS figures that may be the benchmark's own size.

    A figure well above this process's current RSS can only be the child's
    own peak and is kept; others are re-measured ``n`` times with
    ``/usr/bin/time`` (or kept and marked an upper bound when it is absent).
    """
    parent = self_rss_kib()
    have_time = os.access(TIME_BIN, os.X_OK)
    for v in variants:
        st = stats[v["name"]]
        if st["rss"] and median(st["rss"]) > parent * 1.25 + 4096:
            continue
        if not have_time:
            st["rss_source"] = "wait4, upper bound (no /usr/bin/time)"
            continue
        st["rss_wait4"] = st["rss"]
        st["rss"] = [rss_via_time(*v["make"](queries[i % len(queries)])) for i in range(n)]
        st["rss_source"] = "/usr/bin/time"
    if log:
        log("    peak RSS re-measured via /usr/bin/time where needed (this process: %.0f MiB)" % (parent / 1024.0))
    return parent


def base_env(cache):
    """A clean environment: nothing read from or written to the real home,
    background revalidation off unless a row turns it on."""
    home = os.path.join(cache, "home")
    os.makedirs(home, exist_ok=True)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SKILL_RETRIEVAL_", "HERMES_", "CLAUDE_")) and k != "PYTHONPATH"}
    # BM25 rows: the semantic tier (measured by bench/semantic.py) stays off.
    env.update(HOME=home, XDG_CACHE_HOME=os.path.join(cache, "xdg"), SKILL_RETRIEVAL_REVALIDATE="off",
               SKILL_RETRIEVAL_SEMANTIC="off")
    return env


def forget_use(env):
    """Start a bench run with no usage record, learnt table or session
    memory left by an earlier run in the bench's cache folders (``env``'s
    and the deep session's): what was learnt changes the answers, and the
    rows must see the same state in every run."""
    import glob
    from retriever import learn, usage
    for home in (env["XDG_CACHE_HOME"], env["XDG_CACHE_HOME"] + "-deep"):
        folder = os.path.join(home, "skill-retrieval")
        for pattern in (usage.FILE + "*", learn.PREFIX + "*", "sessions.json"):
            for path in glob.glob(os.path.join(folder, pattern)):
                os.unlink(path)


def wait_for_background(index_path, limit=60.0):
    """Wait until no detached revalidation child of ``index_path`` is left,
    so it does not steal CPU from the next group (reads /proc; kills nothing)."""
    t0 = time.time()
    needle = index_path.encode()
    while time.time() - t0 < limit:
        busy = False
        for pid in os.listdir("/proc"):
            if pid.isdigit() and int(pid) != os.getpid():
                try:
                    with open("/proc/%s/cmdline" % pid, "rb") as f:
                        if needle in f.read():
                            busy = True
                            break
                except OSError:
                    pass
        if not busy:
            return time.time() - t0
        time.sleep(0.1)
    return time.time() - t0
