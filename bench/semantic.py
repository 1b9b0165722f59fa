"""The semantic tier's costs (issue 16), beside ``bench/bench.py``.

Per library size (300, 3,741 real skills; 20,000 renamed copies): the
client against the interpreter floor with the tier off, with the tier on
and no helper (a failed ``connect``), and with a warm helper; the helper's
RSS after serving; the helper's own work per question, plain product
against the bounded search, where the library is large enough for it; and
what embedding costs in CPU seconds (``embedding_costs``: cold builds at
1,000 skills and over the 16 collections, one edited skill), with, on
``--batch``, CPU per skill against the encoder's batch size.  Indexes and
vectors are cached in .cache/bench like bench.py's.  Reports, never fails.

    .venv/bin/python bench/semantic.py [--sizes 300,3741,20000] [--runs 15] [--batch]

``--sizes ""`` measures the embedding costs alone.
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)
sys.path.insert(0, HERE)

import bench  # noqa: E402
import corpus  # noqa: E402
import measure  # noqa: E402

WARM_BUDGET_MS = {300: 8.0, 20000: 12.0}
RSS_BUDGET_MIB = {3741: 250.0}
BUILD_BUDGET_S = 15.0
# Issue 32: CPU seconds (user + system, the build's forks included).
EMBED_PER_1000_CPU = 4.0
EMBED_ALL_CPU = 15.0
EMBED_EDIT_CPU = 0.5
log = bench.log


def helper_env(env, run_dir, **extra):
    e = dict(env, XDG_RUNTIME_DIR=run_dir, **extra)
    e.pop("SKILL_RETRIEVAL_SEMANTIC", None)
    return e


def rss_of(pid):
    """``(VmRSS, VmHWM)`` of a process in MiB."""
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                k, v = line.split(":")
                out[k] = int(v.split()[0]) / 1024.0
    return out.get("VmRSS"), out.get("VmHWM")


def warm_up(index, env, limit=1800.0):
    """Ask until the helper answers fused (it embeds missing vectors first)."""
    t0 = time.monotonic()
    slow = dict(env, SKILL_RETRIEVAL_SEMANTIC_TIMEOUT="5000")
    while time.monotonic() - t0 < limit:
        p = subprocess.run([bench.BIN, "--index", index, "--format", "json", bench.QUERIES[0]],
                           env=slow, capture_output=True)
        if p.returncode == 0 and json.loads(p.stdout)["tiers"] == ["bm25", "semantic"]:
            return time.monotonic() - t0
        time.sleep(0.5)
    raise SystemExit("the helper never answered for %s" % index)


def tiers_hit_rate(index, env, queries):
    """Share of queries the helper answered within the default deadline."""
    hit = 0
    for q in queries:
        p = subprocess.run([bench.BIN, "--index", index, "--format", "json", q], env=env, capture_output=True)
        hit += p.returncode == 0 and json.loads(p.stdout)["tiers"] == ["bm25", "semantic"]
    return hit / len(queries)


def helper_work(path, rounds=5):
    """Inside the helper, per question: encoding it and finding the
    encoder's top 10, with one plain product over every vector and with
    ``dense.py``'s bounded search, on one thread (the helper reads the
    heads on two once the client waits), interleaved in this process; medians
    in ms (None when the index has no vectors or is too small to split)."""
    import statistics
    from retriever import store
    from retriever.semantic import dense, embed, fuse, vectors
    embed.one_blas_thread()
    mat = vectors.load_for(path, store.load(path)["header"])
    if mat is None or len(mat) < dense.SPLIT_MIN:
        return None
    ways = {"plain": (mat,), "bounded": dense.prepare(mat)}
    embed.encode_query("warm up")
    times = {k: [] for k in ways}
    for _ in range(rounds):
        for q in bench.QUERIES:
            for k, vecs in ways.items():
                t = time.perf_counter()
                dense.top(vecs, dense.turn(vecs, embed.encode_query(q)), fuse.DENSE_POOL)
                times[k].append(time.perf_counter() - t)
    return {k: statistics.median(v) * 1e3 for k, v in times.items()}


def stop_helper(proc, env):
    """Stop the helper ``proc`` started (killed if it does not exit)."""
    subprocess.run([bench.BIN, "serve", "--stop"], env=env, capture_output=True)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _embedded(out):
    """The count in the build's "semantic vectors: N skills embedded" line."""
    import re
    m = re.search(rb"semantic vectors: (\d+) skills? embedded", out)
    return int(m.group(1)) if m else 0


def _proc_cpu(pid):
    """CPU seconds of a running process and of the children it waited for."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _edit_one(root):
    """Put a sentence at the start of one skill's body (so its embedded
    text changes); returns ``(path, original bytes)`` to undo it."""
    for d, _, files in sorted(os.walk(root)):
        if "SKILL.md" not in files:
            continue
        path = os.path.join(d, "SKILL.md")
        with open(path, "rb") as f:
            raw = f.read()
        parts = raw.split(b"\n---", 1)
        if raw.startswith(b"---") and len(parts) == 2 and b"\n" in parts[1]:
            head, rest = parts[1].split(b"\n", 1)
            with open(path, "wb") as f:
                f.write(parts[0] + b"\n---" + head + b"\nEdited for the benchmark: a new first line.\n" + rest)
            return path, raw
    raise SystemExit("no skill to edit under %s" % root)


def embedding_costs(cache, env, off, run_dir, skills):
    """What the tier's vectors cost in CPU seconds (issue 32): a cold
    ``skill-retrieve build`` with the tier on against the same build with
    it off, at 1,000 skills and over the 16 collections (3,741 files; the
    model's load included, once a build); then one edited skill, which
    the rebuild leaves to the helper, and the helper's CPU (its forked
    embedding child included) from the first query after the rebuild to
    its first fused answer."""
    import shutil
    import tempfile
    out = {}
    henv = helper_env(env, run_dir, SKILL_RETRIEVAL_SEMANTIC_IDLE="600")
    work = tempfile.mkdtemp(prefix="skill-sem-bench-")
    try:
        trees = {1000: [corpus.subset(cache, 1000, skills, log)], 3741: corpus.real_tree(cache, log)}
        for size, roots in trees.items():
            argv = [bench.BIN, "build", "-q"] + [a for r in roots for a in ("--root", r)]
            log("cold build, tier on and off, %d skills" % size)
            on = measure.run_once(argv + ["--index", os.path.join(work, "on-%d.skr" % size)], env=henv)
            no = measure.run_once(argv + ["--index", os.path.join(work, "off-%d.skr" % size)], env=off)
            n = _embedded(on["out"])
            out[size] = {"cpu_on": on["cpu"], "cpu_off": no["cpu"], "wall_on": on["wall"], "wall_off": no["wall"],
                         "embedded": n, "rss_mib": on["rss"] / 1024.0, "out": on["out"].decode().strip()}
        # One edit, over the 16 collections.
        roots = trees[3741]
        index = os.path.join(work, "on-3741.skr")
        argv = [bench.BIN, "build", "-q"] + [a for r in roots for a in ("--root", r)]
        subprocess.run([bench.BIN, "serve", "--stop"], env=henv, capture_output=True)
        proc = subprocess.Popen([bench.BIN, "serve", "--idle", "600"], env=henv,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        path, raw = _edit_one(roots[0])
        try:
            time.sleep(0.5)
            warm_up(index, henv)
            on = measure.run_once(argv + ["--index", index], env=henv)
            no = measure.run_once(argv + ["--index", os.path.join(work, "off-3741.skr")], env=off)
            before = _proc_cpu(proc.pid)
            waited = warm_up(index, henv)
            helper_cpu = _proc_cpu(proc.pid) - before
            rss, hwm = rss_of(proc.pid)
        finally:
            with open(path, "wb") as f:
                f.write(raw)
            stop_helper(proc, henv)
        out["edit"] = {"build_cpu_on": on["cpu"], "build_cpu_off": no["cpu"], "helper_cpu": helper_cpu,
                       "helper_wait_s": waited, "helper_rss_mib": rss, "helper_hwm_mib": hwm,
                       "out": on["out"].decode().strip()}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def batch_sweep(cache, skills, budgets=(384, 1024, 2048, 4096, 8192, 16384), rounds=3):
    """CPU seconds per 1,000 skills embedded against the encoder's batch
    (tokens per forward pass, ``batched.TOKEN_BUDGET``; 384 is the
    encoder's own), over the texts of the 1,000-skill subset, interleaved
    in this process, median of ``rounds``.  One thread."""
    import statistics
    from retriever import build, store
    from retriever.semantic import batched, embed, vectors
    embed.one_blas_thread()
    root = corpus.subset(cache, 1000, skills, log)
    index = os.path.join(cache, "batch-sweep.skr")
    build.build(build.resolve([root]), index)
    texts = vectors.texts_of(store.load(index))
    fast = batched.Batched(embed.model())
    got = {b: [] for b in budgets}
    plain = []
    keep = batched.TOKEN_BUDGET
    try:
        for _ in range(rounds):
            t = time.thread_time()
            embed.model().encode(texts)
            plain.append(time.thread_time() - t)
            for b in budgets:
                batched.TOKEN_BUDGET = b
                fast.words.clear()  # each run tokenizes afresh, as a new process would
                t = time.thread_time()
                fast.encode(texts)
                got[b].append(time.thread_time() - t)
    finally:
        batched.TOKEN_BUDGET = keep
    per = 1000.0 / len(texts)
    return {"skills": len(texts), "plain": statistics.median(plain) * per,
            "budgets": {b: statistics.median(v) * per for b, v in got.items()}, "shipped": keep}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="300,3741,20000")
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--cache", default=os.path.join(REPO, ".cache", "bench"))
    ap.add_argument("--batch", action="store_true",
                    help="also measure CPU per skill against the encoder's batch size (batched.TOKEN_BUDGET)")
    args = ap.parse_args(argv)
    from retriever import semantic
    if not semantic.installed():
        print("semantic tier not installed (make semantic); nothing to measure")
        return 0
    cache = os.path.abspath(args.cache)
    os.makedirs(cache, exist_ok=True)
    env = measure.base_env(cache)
    off = dict(env, SKILL_RETRIEVAL_SEMANTIC="off")
    run_dir = os.path.join(cache, "run")
    os.makedirs(run_dir, mode=0o700, exist_ok=True)
    key = bench.source_key()
    skills = corpus.real_skills()
    report = {"sizes": {}, "runs": args.runs, "pace_ms": [measure.pace(sys.executable)]}

    report["embedding"] = embedding_costs(cache, env, off, run_dir, skills)
    if args.batch:
        report["batch"] = batch_sweep(cache, skills)

    for size in [int(s) for s in args.sizes.split(",") if s]:
        roots, path, info = bench.prepare_size(size, cache, skills, off, key, False)
        henv = helper_env(env, run_dir, SKILL_RETRIEVAL_SEMANTIC_IDLE="600")
        # No helper: a socket path nothing listens on, and a start stamp
        # dated ahead so no query starts one (the steady state between the
        # first query and the helper being up).
        nohelp_dir = os.path.join(cache, "run-nohelper")
        os.makedirs(nohelp_dir + "/skill-retrieval", mode=0o700, exist_ok=True)
        stamp = nohelp_dir + "/skill-retrieval/semantic.spawned"
        open(stamp, "w").close()
        t = time.time() + 10 * 86400
        os.utime(stamp, (t, t))
        nohelp = helper_env(env, nohelp_dir)
        log("size %d: starting the helper" % size)
        # One left running in this folder (an earlier run, by hand) would
        # hold the lock and be measured in place of ours: stop it first.
        subprocess.run([bench.BIN, "serve", "--stop"], env=henv, capture_output=True)
        proc = subprocess.Popen([bench.BIN, "serve", "--idle", "600"], env=henv,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(0.5)
            waited = warm_up(path, henv)
            deep, deep_pre = bench.deep_session(cache, henv)
            log("size %d: helper ready after %.1f s (vectors embedded or loaded)" % (size, waited))
            vs = [
                {"name": "floor", "make": lambda q: ([bench.PY, "-I", "-S", "-c", "pass"], None, env)},
                {"name": "off", "make": lambda q: ([bench.BIN, "--index", path, q], None, off)},
                {"name": "nohelper", "make": lambda q: ([bench.BIN, "--index", path, q], None, nohelp)},
                {"name": "warm", "make": lambda q: ([bench.BIN, "--index", path, q], None, henv)},
                {"name": "hook", "make": lambda q: (bench.hook_argv(path, roots), bench.hook_payload(q), henv)},
                {"name": "hook-deep", "make": lambda q: (bench.hook_argv(path, roots), deep(q), henv),
                 "pre": deep_pre},
            ]
            stats = measure.interleave(vs, args.runs, bench.QUERIES, log)
            rows = {}
            fw = measure.median(stats["floor"]["wall"]) * 1e3
            for name, st in stats.items():
                w = measure.median(st["wall"]) * 1e3
                rows[name] = {"wall_ms": w, "minus_floor_ms": w - fw,
                              "p90_ms": sorted(st["wall"])[int(0.9 * (len(st["wall"]) - 1))] * 1e3}
            hit = tiers_hit_rate(path, henv, bench.QUERIES)
            rss, hwm = rss_of(proc.pid)
        finally:
            stop_helper(proc, henv)
        report["sizes"][size] = {"rows": rows, "helper_rss_mib": rss, "helper_hwm_mib": hwm,
                                 "fused_within_deadline": hit, "warm_up_s": waited,
                                 "n_docs": info["header"]["n_docs"], "path": path}
    # Last: it loads numpy and the model into this process.
    for size, d in report["sizes"].items():
        log("size %d: helper work per question, in process" % size)
        d["helper_work_ms"] = helper_work(d.pop("path"))
    report["pace_ms"].append(measure.pace(sys.executable))
    text = render(report)
    sys.stdout.write(text)
    with open(os.path.join(cache, "semantic.json"), "w") as f:
        json.dump(report, f, indent=1)
    return 0


def render(report):
    out = ["", "Semantic tier (issue 16): client wall - floor, median (p90) ms; helper memory"]
    out.append("| skills | tier off | tier on, no helper | warm helper | budget (warm) | fused in time |"
               " helper RSS / peak MiB |")
    out.append("|---|---|---|---|---|---|---|")
    for size, d in report["sizes"].items():
        r = d["rows"]
        b = WARM_BUDGET_MS.get(size)
        warm = r["warm"]["minus_floor_ms"]
        rb = RSS_BUDGET_MIB.get(size)
        out.append("| %s | +%.1f (%.1f) | +%.1f (%.1f) | +%.1f (%.1f) | %s | %.0f%% | %.0f / %.0f%s |" % (
            size, r["off"]["minus_floor_ms"], r["off"]["p90_ms"] - r["floor"]["wall_ms"],
            r["nohelper"]["minus_floor_ms"], r["nohelper"]["p90_ms"] - r["floor"]["wall_ms"],
            warm, r["warm"]["p90_ms"] - r["floor"]["wall_ms"],
            ("+%.0f %s" % (b, "met" if warm <= b else "MISSED")) if b else "-",
            100 * d["fused_within_deadline"], d["helper_rss_mib"] or 0, d["helper_hwm_mib"] or 0,
            (" (budget %.0f: %s)" % (rb, "met" if (d["helper_hwm_mib"] or 0) <= rb else "MISSED")) if rb else ""))
    for size, d in report["sizes"].items():
        r = d["rows"]
        if "hook-deep" in r:
            out.append("")
            out.append("hook claude-code at %s skills, warm helper, wall - floor median (p90) ms: first prompt of a "
                       "session +%.1f (%.1f); fifth prompt, 512 KiB transcript, full session state +%.1f (%.1f)"
                       % (size, r["hook"]["minus_floor_ms"], r["hook"]["p90_ms"] - r["floor"]["wall_ms"],
                          r["hook-deep"]["minus_floor_ms"], r["hook-deep"]["p90_ms"] - r["floor"]["wall_ms"]))
    for size, d in report["sizes"].items():
        w = d.get("helper_work_ms")
        if w:
            out.append("")
            out.append("helper work per question at %s skills (encode + top 10, in process, one thread, interleaved): "
                       "plain product %.1f ms, bounded search (dense.py) %.1f ms" % (size, w["plain"], w["bounded"]))
    out.append("")
    out.append("machine pace at the start and the end (ms for a million empty interpreter loop iterations, best of 5; "
               "lower is faster; this VM drifts by a third): %s" % measure.pace_text(report.get("pace_ms", ())))
    out += render_embedding(report)
    return "\n".join(out) + "\n"


def render_embedding(report):
    """The embedding-cost lines (issue 32) of ``render``."""
    e = report["embedding"]
    out = ["", "Embedding cost (issue 32): CPU seconds (user + system, forks included) of a cold "
           "`skill-retrieve build`, tier on minus tier off; the model's load is in it, once a build"]
    out.append("| skills (files) | embedded | tier on | tier off | embedding | per 1,000 embedded | budget |")
    out.append("|---|---|---|---|---|---|---|")
    for size in (1000, 3741):
        d = e[size]
        extra = d["cpu_on"] - d["cpu_off"]
        per = 1000.0 * extra / d["embedded"] if d["embedded"] else float("nan")
        budget = ("per 1,000 <= %.0f: %s" % (EMBED_PER_1000_CPU, "met" if per <= EMBED_PER_1000_CPU else "MISSED"))
        if size == 3741:
            budget += "; all <= %.0f: %s" % (EMBED_ALL_CPU, "met" if extra <= EMBED_ALL_CPU else "MISSED")
        out.append("| %s | %d | %.1f | %.1f | %.1f | %.2f | %s |" % (
            "{:,}".format(size), d["embedded"], d["cpu_on"], d["cpu_off"], extra, per, budget))
    ed = e["edit"]
    edit = ed["build_cpu_on"] - ed["build_cpu_off"] + ed["helper_cpu"]
    out.append("")
    out.append("one edited skill (of 3,741 files): the rebuild costs %.2f CPU s more with the tier than without "
               "(it leaves the skill to the helper), the warm helper re-embeds it for %.2f CPU s (index reload and "
               "queries included; fused again after %.1f s): %.2f CPU s in all (budget %.1f: %s)"
               % (ed["build_cpu_on"] - ed["build_cpu_off"], ed["helper_cpu"], ed["helper_wait_s"], edit,
                  EMBED_EDIT_CPU, "met" if edit <= EMBED_EDIT_CPU else "MISSED"))
    out.append("the helper after it, holding the model and the 3,741 files' vectors: RSS %.0f MiB, peak %.0f MiB; "
               "the cold build's peak RSS (its largest process) %.0f MiB"
               % (ed["helper_rss_mib"], ed["helper_hwm_mib"], e[3741]["rss_mib"]))
    out.append("  %s" % e[3741]["out"].replace("\n", "\n  "))
    out.append("  after the edit: %s" % ed["out"].replace("\n", "\n  "))
    b = report.get("batch")
    if b:
        out.append("")
        out.append("CPU s per 1,000 skills against the batch (tokens per forward pass; %d skills, one thread, "
                   "median of 3): the encoder's own encode %.2f; %s (shipped %d)" % (
                       b["skills"], b["plain"],
                       ", ".join("%d: %.2f" % (k, v) for k, v in sorted(b["budgets"].items())), b["shipped"]))
    return out


if __name__ == "__main__":
    sys.exit(main())
