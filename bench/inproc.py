"""In-process latency: what a long-lived agent (the Hermes plugin) pays
per turn, with the index already open.

Uses ``hermes_turn.per_turn_latency`` when that module exists;
otherwise times ``retriever.query.search`` on an index loaded once, and
says so in the label.
"""

import inspect
import time


def _median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2.0


def search_latency(index_path, queries, repeat=20):
    """Median/p90 ms of ``retriever.query.search`` per query on an index
    loaded once, and the median ms of ``retriever.store.load``."""
    from retriever import store
    from retriever.query import search
    loads = []
    for _ in range(5):
        t0 = time.perf_counter()
        idx = store.load(index_path)
        loads.append(time.perf_counter() - t0)
    times = []
    for _ in range(repeat):
        for q in queries:
            t0 = time.perf_counter()
            search(idx, q, 6)
            times.append(time.perf_counter() - t0)
    times.sort()
    return {"label": "in-process retriever.query.search (index loaded once)",
            "median_ms": _median(times) * 1e3, "p90_ms": times[int(len(times) * 0.9)] * 1e3,
            "load_ms": _median(loads) * 1e3, "calls": len(times)}


def _summarise(raw):
    """Median ms from whatever per_turn_latency returned: a number (s), a
    list of seconds, or a dict with a median-ish key."""
    if isinstance(raw, (int, float)):
        return raw * 1e3 if raw < 10 else float(raw)
    if isinstance(raw, (list, tuple)) and raw and all(isinstance(x, (int, float)) for x in raw):
        return _median(raw) * 1e3
    if isinstance(raw, dict):
        for key, scale in (("median_ms", 1.0), ("p50_ms", 1.0), ("median_us", 1e-3), ("p50_us", 1e-3)):
            if isinstance(raw.get(key), (int, float)):
                return float(raw[key]) * scale
    return None


def hermes_latency(index_path, roots, queries, repeat=20):
    """Per-turn latency of the Hermes plugin's ``pre_llm_call``
    (``hermes_turn.per_turn_latency``)."""
    import hermes_turn
    fn = hermes_turn.per_turn_latency
    offer = {"index_path": index_path, "index": index_path, "roots": list(roots),
             "queries": list(queries), "prompts": list(queries), "repeat": repeat,
             "runs": repeat, "n": repeat}
    params = inspect.signature(fn).parameters
    kwargs = {k: v for k, v in offer.items() if k in params}
    try:
        raw = fn(**kwargs)
    except Exception as exc:
        return {"label": "hermes_turn.per_turn_latency", "error": "%s: %s" % (type(exc).__name__, exc)}
    return {"label": "hermes_turn.per_turn_latency(%s)" % ", ".join(sorted(kwargs)),
            "median_ms": _summarise(raw), "raw": raw if isinstance(raw, (dict, int, float)) else repr(raw)[:300]}
