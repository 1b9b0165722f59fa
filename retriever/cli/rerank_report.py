"""``skill-retrieve rerank-report``: summarise the LLM rerank's A/B log.

Reads the JSONL log that ``retriever.rerank`` appends to (one record per
reranked query) and prints fallback rates, rank-1 flips, displacement,
latency and token use.  Cold path.
"""

from retriever import locate
from retriever.cli.stats import percentile
from retriever.rerank import log_path


def read_log(paths):
    """``(records, unreadable_lines)`` from JSONL files (missing ones skipped)."""
    from retriever import jsonlite
    records = []
    bad = 0
    for p in paths:
        try:
            f = open(p, "rb")
        except FileNotFoundError:
            continue
        with f:
            for raw in f:
                if not raw.strip():
                    continue
                try:
                    rec = jsonlite.loads(raw.decode("utf-8"))
                except Exception:
                    rec = None
                if isinstance(rec, dict):
                    records.append(rec)
                else:
                    bad += 1
    return records, bad


def displacement(rec):
    """Mean |rank change| over the reranked skills of one successful call."""
    bm25 = {s: i for i, s in enumerate(rec.get("bm25_order") or ())}
    moves = [abs(i - bm25[s]) for i, s in enumerate(rec.get("jev_order") or ()) if s in bm25]
    return sum(moves) / len(moves) if moves else None


def summarise(records):
    """The report's figures as a dict (see ``format_report``)."""
    calls = len(records)
    ok = [r for r in records if not r.get("fallback_reason")]
    reasons = {}
    for r in records:
        if r.get("fallback_reason"):
            reasons[str(r["fallback_reason"])] = reasons.get(str(r["fallback_reason"]), 0) + 1
    flips = sum(1 for r in ok if r.get("rank1_flip") is True)
    disp = [d for d in (displacement(r) for r in ok) if d is not None]
    lat_all = [float(r["latency_ms"]) for r in records if _number_any(r.get("latency_ms"))]
    lat_ok = [float(r["latency_ms"]) for r in ok if _number_any(r.get("latency_ms"))]
    tokens = [r["input_tokens"] for r in records
              if isinstance(r.get("input_tokens"), int) and not isinstance(r.get("input_tokens"), bool)]

    def rate(n, d):
        return n / d if d else None

    return {
        "calls": calls,
        "ok": len(ok),
        "fallbacks": calls - len(ok),
        "fallback_rate": rate(calls - len(ok), calls),
        "fallback_by_reason": {k: {"count": v, "rate": rate(v, calls)}
                               for k, v in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))},
        "rank1_flips": flips,
        "rank1_flip_rate": rate(flips, len(ok)),
        "mean_displacement": sum(disp) / len(disp) if disp else None,
        "latency_ms": {
            "p50": percentile(lat_all, 50) if lat_all else None,
            "p95": percentile(lat_all, 95) if lat_all else None,
            "ok_p50": percentile(lat_ok, 50) if lat_ok else None,
            "ok_p95": percentile(lat_ok, 95) if lat_ok else None,
        },
        "input_tokens": {
            "total": sum(tokens),
            "calls_reporting": len(tokens),
            "mean": sum(tokens) / len(tokens) if tokens else None,
        },
    }


def _number_any(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x == x


def format_report(s, source, bad=0):
    """The human-readable report for a ``summarise`` dict."""
    def pct(x):
        return "-" if x is None else "%.1f%%" % (100.0 * x)

    def num(x, fmt="%.0f"):
        return "-" if x is None else fmt % x

    lines = ["rerank A/B log: %s" % source]
    if bad:
        lines.append("unreadable lines skipped: %d" % bad)
    lines.append("calls: %d (reranked %d, fell back %d)" % (s["calls"], s["ok"], s["fallbacks"]))
    lines.append("fallback rate: %s" % pct(s["fallback_rate"]))
    for reason, c in s["fallback_by_reason"].items():
        lines.append("  %-16s %d (%s)" % (reason, c["count"], pct(c["rate"])))
    lines.append("rank-1 flip rate: %s (%d of %d reranked calls)"
                 % (pct(s["rank1_flip_rate"]), s["rank1_flips"], s["ok"]))
    lines.append("mean displacement: %s positions per reranked skill"
                 % num(s["mean_displacement"], "%.2f"))
    lat = s["latency_ms"]
    lines.append("latency ms: p50 %s, p95 %s (all calls); p50 %s, p95 %s (reranked calls)"
                 % (num(lat["p50"]), num(lat["p95"]), num(lat["ok_p50"]), num(lat["ok_p95"])))
    tok = s["input_tokens"]
    lines.append("input tokens: %d total, mean %s per call (%d calls reported usage)"
                 % (tok["total"], num(tok["mean"]), tok["calls_reporting"]))
    return "\n".join(lines) + "\n"


def add_arguments(parser):
    """``rerank-report [LOG] [--rotated] [--format text|json]`` (``--json``:
    the older spelling of ``--format json``, kept for scripts)."""
    parser.add_argument("log", nargs="?", metavar="LOG",
                        help="the A/B log (default $SKILL_RETRIEVAL_RERANK_LOG or "
                             "$HERMES_HOME/data/jev-trial/rerank_ab_log.jsonl)")
    parser.add_argument("--rotated", action="store_true", help="also read LOG.1, the rotated part")
    parser.add_argument("--format", choices=("text", "json"), default="text",
                        help="text: the report; json: the figures as one JSON object")
    parser.add_argument("--json", action="store_const", const="json", dest="format",
                        help="the same as --format json")


def run(args):
    """Print the report; exit 1 when the log does not exist."""
    import os
    import sys
    path = locate.abspath(args.log) if args.log else log_path()
    paths = ([path + ".1"] if args.rotated else []) + [path]
    if not any(os.path.exists(p) for p in paths):
        sys.stderr.write("skill-retrieve: no rerank A/B log at %s (rerank is off, or has not run yet)\n"
                         % path)
        return 1
    records, bad = read_log(paths)
    s = summarise(records)
    if args.format == "json":
        from retriever import jsonlite
        s = dict(s, log=path, unreadable_lines=bad)
        sys.stdout.write(jsonlite.dumps(s) + "\n")
    else:
        sys.stdout.write(format_report(s, path, bad))
    return 0
