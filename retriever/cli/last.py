"""``skill-retrieve last [N]``: what the last prompts got, from the usage
record (``retriever.usage``): time, runner, the prompt (shortened; kept
only while learning is on), the skills injected and the ranking that
answered.  Cold path."""

import json
import sys
import time

from retriever import usage

PROMPT_SHOWN = 48


def add_arguments(parser):
    """Arguments of ``skill-retrieve last``."""
    from retriever.runners.registry import NAMES
    parser.description = "What the last prompts answered by a hook got, from the local usage record."
    parser.add_argument("n", nargs="?", type=_count, default=10, metavar="N", help="how many (default 10)")
    parser.add_argument("--runner", choices=NAMES, help="only this runner's prompts")
    parser.add_argument("--format", choices=("text", "json"), default="text")


def _count(raw):
    import argparse
    if not raw.isdigit() or not 0 < int(raw) <= usage.MAX_PROMPTS:
        raise argparse.ArgumentTypeError("N must be a whole number from 1 to %d, not %r" % (usage.MAX_PROMPTS, raw))
    return int(raw)


def shorten(text, width=PROMPT_SHOWN):
    """``text`` on one line, cut to ``width`` characters with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 1] + "…"


def rows(entries):
    """One dict per entry: time (local, ISO), runner, prompt, injected, tier."""
    return [{"time": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(e["t"])), "runner": e["runner"],
             "prompt": e["prompt"], "injected": [x[0] for x in e["injected"]], "tier": e["tier"]}
            for e in entries]


def run(args):
    """``skill-retrieve last``; always 0."""
    entries, _ = usage.read(runner=args.runner)
    out = rows(entries[-args.n:])
    if args.format == "json":
        sys.stdout.write(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
        return 0
    if not out:
        sys.stdout.write("no prompts recorded yet (the usage record: %s)\n" % usage.path())
        return 0
    for r in out:
        prompt = shorten(r["prompt"]) if r["prompt"] is not None else "(prompt not kept: learning off)"
        sys.stdout.write("%s  %-11s  %-*s  %s%s\n" % (
            r["time"], r["runner"], PROMPT_SHOWN, prompt, ", ".join(r["injected"]) or "-",
            "  [%s]" % r["tier"] if r["tier"] and r["injected"] else ""))
    return 0
