"""``skill-retrieve stats``: whether the injected skills are used, from the
usage record (``retriever.usage``).

Per runner: ``prompts`` answered, ``silent`` (nothing injected),
``offered`` (skills injected, once per skill per session), ``followed``
(of those, loaded later in that session), ``loaded_unoffered`` (loaded in
a session that never injected them), and the top skills by each count.
A runner that shows no loads (no transcript, no history: Cline, OpenCode)
gets None for the last two and a ``loads`` line saying so.  Cold path.
"""

import json
import sys

from retriever import usage
from retriever.render import plural

TOP = 5


def add_arguments(parser):
    """Arguments of ``skill-retrieve stats``."""
    from retriever.runners.registry import NAMES
    parser.description = ("How often the injected skills were loaded by the agent, per runner, from the "
                          "local usage record (never leaves this machine).")
    parser.add_argument("--runner", choices=NAMES, help="only this runner")
    parser.add_argument("--days", type=_days, metavar="N", help="only the last N days (default: the whole "
                        "record, at most %d days)" % int(usage.MAX_AGE_S // 86400))
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--forget", action="store_true", help="delete the usage record")


def _days(raw):
    import argparse
    try:
        v = float(raw)
    except ValueError:
        v = -1.0
    if not 0 < v <= 36500:
        raise argparse.ArgumentTypeError("--days must be a number of days above 0, not %r" % raw)
    return v


def shows_loads(runner):
    """True when ``runner``'s hook payload can show what the agent loaded
    (a transcript or the conversation)."""
    from retriever.runners.registry import RUNNERS
    where = (RUNNERS.get(runner) or {}).get("session") or {}
    return bool(where.get("transcript") or where.get("history"))


def summarize(entries):
    """``{runner: counts}`` over record entries (``usage.read``), in
    runner order of first appearance."""
    out, sessions = {}, {}
    for n, e in enumerate(entries):
        r = out.setdefault(e["runner"], {"prompts": 0, "silent": 0, "offered": 0, "followed": 0,
                                         "loaded_unoffered": 0, "_seen_loads": False,
                                         "_top": {"offered": {}, "followed": {}, "loaded_unoffered": {}}})
        r["prompts"] += 1
        r["silent"] += not e["injected"]
        # A prompt without a session id is a session of its own.
        s = sessions.setdefault((e["runner"], e["session"] or n), {"offered": {}, "followed": set(), "loaded": []})
        if e["loaded"] is not None:
            r["_seen_loads"] = True
            for name in e["loaded"]:  # loaded since the session's last prompt: after what it was offered
                skill = _match(s["offered"], name)
                if skill is not None and skill not in s["followed"]:
                    s["followed"].add(skill)
                    _count(r, "followed", skill)
                s["loaded"].append(name)
        for names in e["injected"]:
            if names[0] not in s["offered"]:
                s["offered"][names[0]] = {x.lower() for x in names}
                _count(r, "offered", names[0])
    for (runner, _), s in sessions.items():
        for name in dict.fromkeys(s["loaded"]):
            if _match(s["offered"], name) is None:
                _count(out[runner], "loaded_unoffered", name)
    for runner, r in out.items():
        top = r.pop("_top")
        r["top"] = {k: [{"skill": n, "count": c} for n, c in sorted(v.items(), key=lambda x: (-x[1], x[0]))[:TOP]]
                    for k, v in top.items()}
        seen = r.pop("_seen_loads")
        if not seen:
            r["followed"] = r["loaded_unoffered"] = None
            r["loads"] = ("%s shows no loads (no transcript reaches its hook)" % runner if not shows_loads(runner)
                          else "no transcript seen yet")
    return out


def _match(offered, name):
    for skill, names in offered.items():
        if name in names:
            return skill
    return None


def _count(r, key, skill):
    r[key] += 1
    r["_top"][key][skill] = r["_top"][key].get(skill, 0) + 1


def one_line(stats):
    """The figures in one line, for doctor."""
    if not stats:
        return "no prompts recorded yet"
    parts = []
    for runner, r in stats.items():
        if r["followed"] is None:
            parts.append("%s %d prompts, %d skills offered (loads not shown)" % (runner, r["prompts"], r["offered"]))
        else:
            parts.append("%s %d prompts, %d of %d offered skills loaded, %d loaded unoffered"
                         % (runner, r["prompts"], r["followed"], r["offered"], r["loaded_unoffered"]))
    return "; ".join(parts)


def render_text(stats, days=None):
    """The text report."""
    if not stats:
        return "no prompts recorded%s (the usage record: %s)\n" % (
            " in the last %g days" % days if days else " yet", usage.path())
    out = []
    for runner, r in stats.items():
        line = "%s: %s, %d silent; %s offered" % (runner, plural(r["prompts"], "prompt"), r["silent"], plural(r["offered"], "skill"))
        if r["followed"] is None:
            line += "; loads unknown: %s" % r["loads"]
        else:
            share = " (%.0f%%)" % (100.0 * r["followed"] / r["offered"]) if r["offered"] else ""
            line += ", %d followed%s; %d loaded unoffered" % (r["followed"], share, r["loaded_unoffered"])
        out.append(line)
        for key, label in (("offered", "offered"), ("followed", "followed"), ("loaded_unoffered", "loaded unoffered")):
            if r["top"][key]:
                out.append("  top %s: %s" % (label, ", ".join("%s %d" % (x["skill"], x["count"])
                                                              for x in r["top"][key])))
    return "\n".join(out) + "\n"


def run(args):
    """``skill-retrieve stats``; 0, 1 when the record cannot be deleted."""
    if args.forget:
        try:
            gone = usage.forget()
            # What was learnt from the record goes with it.
            from retriever import learn
            learn.forget()
        except OSError as exc:
            sys.stderr.write("skill-retrieve: error: %s\n" % exc)
            return 1
        sys.stdout.write("%s %s\n" % ("deleted the usage record" if gone else "no usage record at", usage.path()))
        return 0
    entries, damaged = usage.read(days=args.days, runner=args.runner)
    stats = summarize(entries)
    if args.format == "json":
        sys.stdout.write(json.dumps(stats, indent=1) + "\n")
    else:
        sys.stdout.write(render_text(stats, args.days))
    if damaged:
        sys.stderr.write("skill-retrieve: %d damaged line%s of the usage record skipped\n"
                         % (damaged, "" if damaged == 1 else "s"))
    return 0
