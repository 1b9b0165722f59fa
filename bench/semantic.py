"""The semantic tier's costs (issue 16), beside ``bench/bench.py``.

Per library size (300, 3,741 real skills; 20,000 renamed copies): the
client against the interpreter floor with the tier off, with the tier on
and no helper (a failed ``connect``), and with a warm helper; the helper's
RSS after serving; the helper's own work per question, plain product
against the bounded search, where the library is large enough for it; and
a cold ``skill-retrieve build`` with vectors at 1,000 skills (model load
included).  Indexes and vectors are cached in
.cache/bench like bench.py's.  Reports, never fails.

    .venv/bin/python bench/semantic.py [--sizes 300,3741,20000] [--runs 15]
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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="300,3741,20000")
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--cache", default=os.path.join(REPO, ".cache", "bench"))
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

    # A cold build with vectors at 1,000 skills: no .vec, a fresh process
    # (the model is loaded inside the timed build).
    import shutil
    import tempfile
    work = tempfile.mkdtemp(prefix="skill-sem-bench-")
    sub = os.path.join(work, "skills")
    # A private copy: the edit below must not touch the cached subset.
    shutil.copytree(corpus.subset(cache, 1000, skills, log), sub)
    tmp = os.path.join(work, "sem-build-1000.skr")
    log("cold build with vectors, 1,000 skills")
    r = measure.run_once([bench.BIN, "build", "-q", "--root", sub, "--index", tmp],
                         env=helper_env(env, run_dir))
    b_off = measure.run_once([bench.BIN, "build", "-q", "--root", sub, "--index", tmp + ".off"], env=off)
    report["build_1000"] = {"wall_s": r["wall"], "rss_mib": r["rss"] / 1024.0, "wall_off_s": b_off["wall"],
                            "out": r["out"].decode().strip()}
    # An edit re-embeds one skill.
    md = next((os.path.join(d, "SKILL.md") for d, _, files in sorted(os.walk(sub)) if "SKILL.md" in files), None)
    if md:
        with open(md, "a") as f:
            f.write("\nEdited for the benchmark.\n")
        r2 = measure.run_once([bench.BIN, "build", "-q", "--root", sub, "--index", tmp],
                              env=helper_env(env, run_dir))
        report["build_1000"]["rebuild_one_edit_s"] = r2["wall"]
        report["build_1000"]["rebuild_out"] = r2["out"].decode().strip()
    shutil.rmtree(work, ignore_errors=True)

    for size in [int(s) for s in args.sizes.split(",")]:
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
            log("size %d: helper ready after %.1f s (vectors embedded or loaded)" % (size, waited))
            vs = [
                {"name": "floor", "make": lambda q: ([bench.PY, "-I", "-S", "-c", "pass"], None, env)},
                {"name": "off", "make": lambda q: ([bench.BIN, "--index", path, q], None, off)},
                {"name": "nohelper", "make": lambda q: ([bench.BIN, "--index", path, q], None, nohelp)},
                {"name": "warm", "make": lambda q: ([bench.BIN, "--index", path, q], None, henv)},
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
            subprocess.run([bench.BIN, "serve", "--stop"], env=henv, capture_output=True)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
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
        w = d.get("helper_work_ms")
        if w:
            out.append("")
            out.append("helper work per question at %s skills (encode + top 10, in process, one thread, interleaved): "
                       "plain product %.1f ms, bounded search (dense.py) %.1f ms" % (size, w["plain"], w["bounded"]))
    out.append("")
    out.append("machine pace at the start and the end (ms for a million empty interpreter loop iterations, best of 5; "
               "lower is faster; this VM drifts by a third): %s" % measure.pace_text(report.get("pace_ms", ())))
    b = report["build_1000"]
    out.append("")
    out.append("build of 1,000 skills with vectors, cold (model load included): %.1f s (budget %.0f s: %s); "
               "tier off %.2f s; after editing one skill %.1f s"
               % (b["wall_s"], BUILD_BUDGET_S, "met" if b["wall_s"] <= BUILD_BUDGET_S else "MISSED",
                  b["wall_off_s"], b.get("rebuild_one_edit_s", float("nan"))))
    out.append("  %s" % b["out"].replace("\n", "\n  "))
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.exit(main())
