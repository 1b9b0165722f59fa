"""Per-turn cost of the in-process plugin, for ``make bench``.

Times the real ``pre_llm_call`` callable (text extraction, search,
visibility filter, rendering) against an index already in memory, which is
what a Hermes turn pays once the plugin has warmed up.  Index build and
load are excluded and reported separately.  Without Hermes installed the
visibility filter takes its stdlib fallbacks.

BM25 only, as the process rows of ``make bench`` are: the semantic tier
has its own bench (bench/semantic.py), and in process it would load numpy
and the model into the caller, the bench itself, whose exit could then
hang in OpenBLAS's ``blas_thread_shutdown`` (and whose later rows ran
beside the model's loading thread).  Each turn is the first of a session of its own,
so session memory (retriever/session.py) never holds back what an earlier
turn of the bench was given.

    import hermes_turn  # run from bench/
    root = hermes_turn.subset_root(["/path/to/corpora"], 300, "/tmp/skills-300")
    print(hermes_turn.per_turn_latency([root], hermes_turn.load_queries(paths)))
"""

import itertools
import os
import shutil
import tempfile
import time


def subset_root(roots, n, dest):
    """A folder ``dest`` of symlinks to the first ``n`` skills below
    ``roots`` (sorted paths), for a fixed-size library.  Returns ``dest``."""
    from retriever import discover
    os.makedirs(dest, exist_ok=True)
    made = 0
    for root in roots:
        for skill_dir, _ in discover.walk_skill_files(os.path.abspath(root)):
            if made >= n:
                return dest
            link = os.path.join(dest, "%05d-%s" % (made, os.path.basename(skill_dir)))
            if not os.path.lexists(link):
                os.symlink(skill_dir, link)
            made += 1
    return dest


def load_queries(paths, limit=200):
    """Up to ``limit`` ``query`` strings from JSONL files (eval format)."""
    import json
    out = []
    for p in paths:
        with open(p, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                q = json.loads(line).get("query")
                if isinstance(q, str) and q.strip():
                    out.append(q)
                    if len(out) >= limit:
                        return out
    return out


def _percentile(sorted_vals, p):
    if not sorted_vals:
        return 0.0
    i = min(len(sorted_vals) - 1, int(round(p * (len(sorted_vals) - 1))))
    return sorted_vals[i]


def per_turn_latency(roots, queries, repeat=5, index_path=None):
    """Time the plugin's ``pre_llm_call`` over ``queries`` (each ``repeat``
    times, after one untimed warm-up pass).

    Returns a dict: ``n_docs``, ``calls``, ``median_us``, ``p90_us``,
    ``max_us`` (per call, microseconds), ``injected`` (share of queries
    that got a block in the warm-up pass), ``injected_timed`` (the same
    share over the timed calls: equal to ``injected`` when every turn did
    the whole work), ``load_ms`` (first load, building included).
    """
    from hermes_plugin import runtime
    tmp = None
    if index_path is None:
        tmp = tempfile.mkdtemp(prefix="skr-bench-")
        index_path = os.path.join(tmp, "index.skr")
    # Off for the whole call, not just new_state: a rebuild in here would
    # embed the skills too.  (os.environ writes through to posix.environ,
    # which retriever.settings reads.)
    saved = os.environ.get("SKILL_RETRIEVAL_SEMANTIC")
    os.environ["SKILL_RETRIEVAL_SEMANTIC"] = "off"
    sessions = ("bench-%d" % n for n in itertools.count())
    try:
        state = runtime.new_state(roots=roots, index_path=index_path, interval=None)
        t0 = time.perf_counter()
        idx = runtime.ensure_index(state)
        load_ms = (time.perf_counter() - t0) * 1000.0
        if idx is None:
            raise RuntimeError("index could not be loaded for %r" % (roots,))
        hook = runtime.make_pre_llm_call(state)
        injected = sum(1 for q in queries if hook(user_message=q, session_id=next(sessions), platform="cli"))
        times = []
        blocks = 0
        clock = time.perf_counter_ns
        for _ in range(repeat):
            for q in queries:
                sid = next(sessions)
                t = clock()
                got = hook(user_message=q, session_id=sid, platform="cli")
                times.append((clock() - t) / 1000.0)
                blocks += got is not None
        times.sort()
        return {
            "n_docs": idx["header"]["n_docs"],
            "calls": len(times),
            "median_us": round(_percentile(times, 0.5), 1),
            "p90_us": round(_percentile(times, 0.9), 1),
            "max_us": round(times[-1], 1) if times else 0.0,
            "injected": round(injected / len(queries), 3) if queries else 0.0,
            "injected_timed": round(blocks / len(times), 3) if times else 0.0,
            "load_ms": round(load_ms, 1),
        }
    finally:
        if saved is None:
            os.environ.pop("SKILL_RETRIEVAL_SEMANTIC", None)
        else:
            os.environ["SKILL_RETRIEVAL_SEMANTIC"] = saved
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
