"""Claude Code: where its files are, install, uninstall, status and the
listing's cost (``retriever.runners.listing`` has the table of runners).

Names only: ``skillOverrides: {"<folder>": "name-only"}`` per skill, in
the settings file the hook goes in.  Per skill, so the bundled skills
and the plugin skills (which ``skillOverrides`` does not reach) keep
their descriptions.  A ``SessionStart`` hook (``skill-retrieve sync
claude-code``) adds an entry for a skill that appears later; Claude Code
reads it from the next session on.

Cold path: imports freely (``sync`` runs once per session, not per prompt).
"""

import os
import shlex

from retriever import fileutil
from retriever.runners import changes, skillsets
from retriever.runners.install import Refused

NAME = "claude-code"
LISTING = True  # a names-only switch (not only the hook's delivery)
NAME_ONLY = "name-only"
SESSION_EVENT = "SessionStart"
SYNC_WAIT = 2.0  # seconds sync waits for an install under way (the hook's timeout is 10)
PLUGIN_SKILL = "a plugin skill: Claude Code's skillOverrides does not reach plugin skills"


def target(project=None):
    """The settings file names-only goes in (the hook's)."""
    from retriever.runners import install as inst
    return inst.settings_path(NAME, project)


def roots(cwd):
    """``(folders the switch reaches, [(folder, why)] it does not)``: the
    personal and project folders, then the plugins'."""
    found = changes.folders(skillsets.claude_code, cwd)
    return ([r for r in found if " plugin " not in r["source"]],
            [(r, PLUGIN_SKILL) for r in found if " plugin " in r["source"]])


def covered(cwd):
    """``(names the switch covers, [(name, reason)] listed in full)``."""
    return changes.covered(*roots(cwd))


def sync_command(runner, project=None, python=None):
    """The command of our session-start hook (it brings the per-skill
    entries in step with the skills; ``project``: a project install's)."""
    from retriever.runners import install as inst
    py = python or inst.interpreter()
    cmd = "%s -I -S %s sync %s" % (shlex.quote(py), shlex.quote(inst.entry_script()), runner)
    return cmd + (" --project %s" % shlex.quote(os.path.abspath(project)) if project else "")


def _is_sync(command, runner):
    return (isinstance(command, str) and ("skill-retrieve" in command or "retriever/__main__.py" in command)
            and (" sync %s" % runner) in command)


def _session_groups(data, path, create, made=None):
    # hooks.SessionStart (``inst._groups``: "hooks" and "event" go in
    # ``made`` when this made them).
    from retriever.runners import install as inst
    return inst._groups(data, SESSION_EVENT, path, create, made)


def _has_sync(data, runner):
    groups = (data.get("hooks") or {}).get(SESSION_EVENT) if isinstance(data.get("hooks"), dict) else None
    return any(isinstance(g, dict) and isinstance(g.get("hooks"), list)
               and any(isinstance(h, dict) and _is_sync(h.get("command"), runner) for h in g["hooks"])
               for g in groups or ())


def _drop_sync(data, runner, path, stay=()):
    # Our sync hook out; the containers it leaves empty go too, except
    # those in ``stay`` ("hooks", "event": there before install).
    groups = _session_groups(data, path, create=False)
    if groups is None:
        return False
    changed = False
    for g in list(groups):
        hs = g.get("hooks") if isinstance(g, dict) else None
        if not isinstance(hs, list):
            continue
        keep = [h for h in hs if not (isinstance(h, dict) and _is_sync(h.get("command"), runner))]
        if len(keep) != len(hs):
            changed = True
            if keep:
                g["hooks"] = keep
            else:
                groups.remove(g)
    if changed and not groups and "event" not in stay:
        del data["hooks"][SESSION_EVENT]
        if not data["hooks"] and "hooks" not in stay:
            del data["hooks"]
    return changed


def _overrides(data, path):
    ov = data.get("skillOverrides")
    if ov is not None and not isinstance(ov, dict):
        raise Refused('%s: "skillOverrides" is not an object; left unchanged' % path)
    return ov


def add_overrides(data, names, path="settings"):
    """Add ``"name-only"`` for each of ``names`` not in ``skillOverrides``
    yet (the user's own entries are kept as they are).  Returns the names
    added."""
    ov = _overrides(data, path)
    added = [n for n in names if ov is None or n not in ov]
    if added:
        if ov is None:
            ov = data["skillOverrides"] = {}
        for n in added:
            ov[n] = NAME_ONLY
    return added


def _seen(rec):
    # The skills install or sync has seen for a settings file (a set): an
    # entry is added only for a skill not among them, so one the user took
    # out by hand (to keep its description) stays out.  A record from
    # before "seen" was kept: the entries install added.
    seen = rec.get("seen") if isinstance(rec, dict) else None
    if not isinstance(seen, list):
        seen = rec.get("keys", ()) if isinstance(rec, dict) else ()
    return {n for n in seen if isinstance(n, str)}


def install(project, out, dry_run, force=False):
    """Names-only on, and the session-start sync hook beside it."""
    from retriever.runners import install as inst
    cwd = os.path.abspath(project) if project else os.getcwd()
    path = target(project)
    names, full = covered(cwd)
    rec = {}

    def plan(old):
        data = inst.parse_settings(old or "", path)
        prev = changes.record_of(NAME, path) or {}
        had_key = "skillOverrides" in data
        seen = _seen(prev)
        added = add_overrides(data, [n for n in names if n not in seen], path)
        sync_added = not _has_sync(data, NAME)
        made = []
        if sync_added:
            _session_groups(data, path, create=True, made=made).append(
                {"matcher": "startup|resume|clear",
                 "hooks": [{"type": "command", "command": sync_command(NAME, project), "timeout": 10}]})
        rec.update(keys=sorted(set(prev.get("keys", ())) | set(added)), seen=sorted(seen | set(names)),
                   created_key=bool(prev.get("created_key")) or (bool(added) and not had_key),
                   sync=bool(prev.get("sync")) or sync_added,
                   # The containers the sync hook's group needed: uninstall
                   # keeps the others, even emptied (an older record has
                   # none of this, and they go as they always did).
                   made=made if sync_added or "made" not in prev else prev["made"])
        return inst.dump_settings(data) if added or sync_added else None

    new = changes.write(path, plan, out, dry_run)
    if new is None:
        out.write("claude-code: names-only already set for %d skills in %s\n" % (len(names), path))
        return 0
    if dry_run:
        return 0
    changes.set_record(NAME, path, rec)
    out.write("claude-code: listed by name only: %d skills (skillOverrides in %s)\n" % (len(names), path))
    if full:
        out.write("  still listed with descriptions: %d plugin skills (skillOverrides does not reach them)\n"
                  % len(full))
    return 0


def uninstall(project, out, dry_run):
    """The entries install added out, and the sync hook.  settings.json is
    the hook's file too: whether install created it is the hook's
    uninstall to use (it runs next), so it is not forgotten here."""
    from retriever.runners import install as inst
    path = target(project)
    rec = changes.record_of(NAME, path)
    if not rec:
        return 0
    removed = []

    def plan(old):
        if old is None:
            return None
        data = inst.parse_settings(old, path)
        ov = _overrides(data, path) or {}
        removed[:] = [k for k in rec.get("keys", ()) if ov.get(k) == NAME_ONLY]
        for k in removed:
            del ov[k]
        if "skillOverrides" in data and not ov and rec.get("created_key"):
            del data["skillOverrides"]
        stay = () if "made" not in rec else tuple(k for k in ("hooks", "event") if k not in rec["made"])
        dropped = _drop_sync(data, NAME, path, stay)
        return inst.dump_settings(data) if removed or dropped else None

    new = changes.write(path, plan, out, dry_run)
    if not dry_run:
        changes.set_record(NAME, path, None)
        if new is not None:
            out.write("claude-code: removed %d names-only entries from %s\n" % (len(removed), path))
    return 0


def sync(payload, project=None):
    """Add names-only entries for skills that appeared since install or
    the last sync (the session-start hook; the record's ``seen`` holds the
    skills seen so far, so an entry the user removed is not brought back).
    Only where install set names-only up; never changes an entry that is
    there already, nor creates the file.  Waits
    at most SYNC_WAIT seconds for an install or uninstall under way (Busy
    after it; the hook then leaves quietly), and re-reads the record once
    it holds the lock, so it never writes past one.  Returns the names
    added."""
    from retriever.runners import install as inst
    runner = NAME
    path = target(project)
    if not changes.record_of(runner, path):
        return []  # names-only not set up here: not even the lock is taken
    cwd = payload.get("cwd") if isinstance(payload.get("cwd"), str) else os.getcwd()
    names, _ = covered(cwd)
    got = {}

    def plan(old):
        got.clear()
        rec = changes.record_of(runner, path)
        if old is None or not rec:
            return None  # the file or the record went meanwhile (an uninstall)
        data = inst.parse_settings(old, path)
        had_key = "skillOverrides" in data
        seen = _seen(rec)
        got["added"] = add_overrides(data, [n for n in names if n not in seen], path)
        got["made_key"] = bool(got["added"]) and not had_key
        return inst.dump_settings(data) if got["added"] else None

    import io
    with fileutil.install_lock(wait=SYNC_WAIT):
        written = changes.write(path, plan, io.StringIO(), False, wait=SYNC_WAIT) is not None  # silent: a hook
        rec = changes.record_of(runner, path)
        if not rec or (not written and set(names) <= _seen(rec)):
            return []
        # What this run saw is recorded even when nothing was written (a
        # new skill the user had an entry for already): from now on it is
        # the user's to keep or remove.
        rec["seen"] = sorted(_seen(rec) | set(names))
        if written:
            rec.update(keys=sorted(set(rec.get("keys", ())) | set(got["added"])),
                       created_key=bool(rec.get("created_key")) or got["made_key"])
        changes.set_record(runner, path, rec)
    return got["added"] if written else []


def status(out, text, path, cwd):
    """Doctor's view of names-only in the settings ``text`` (``listing.status``
    has the keys of ``out``)."""
    from retriever.runners import install as inst
    runner = NAME
    names, full = covered(cwd)
    try:
        data = inst.parse_settings(text or "", path)
    except Refused as exc:
        out.update(state="broken", note=str(exc))
        return out
    ov = data.get("skillOverrides") if isinstance(data.get("skillOverrides"), dict) else {}
    on = [n for n in names if ov.get(n) == NAME_ONLY]
    out["covered"] = len(on)
    out["full"] = full + [(n, "skillOverrides sets it to %r" % ov[n]) for n in names
                          if n in ov and ov[n] != NAME_ONLY]
    seen = _seen(changes.record_of(runner, path))
    missing = [n for n in names if n not in ov and n not in seen]
    out["full"] += [(n, "added since the last session; listed by name from the next one")
                    for n in missing]
    # Seen before and without an entry now: the user took it out, and
    # neither sync nor install puts it back.
    out["full"] += [(n, "its skillOverrides entry was removed by hand; left so")
                    for n in names if n not in ov and n in seen]
    if on:
        out["state"] = "on" if changes.record_of(runner, path) else "user"
    elif not names:
        # No skill of its own to list (the user's skills sit in a folder
        # named with `roots add`, which Claude Code does not read):
        # nothing is listed in full, and install has nothing to set.
        out["state"] = "empty"
    if out["state"] != "off" and not _has_sync(data, runner) and missing:
        out["note"] = "no session-start sync hook: new skills keep their descriptions"
    return out


# ------------------------------------------------------------ listing cost

CLAUDE_DESC_MAX = 1536        # skillListingMaxDescChars default
CLAUDE_FRACTION = 0.01        # skillListingBudgetFraction default
CLAUDE_WINDOW = 200000        # tokens, when the model's is unknown


def cost(covered_recs, other_recs, window):
    """The listing's characters, rebuilt the way Claude Code writes and
    budgets it (``listing.listing_cost``): its settings' cap and fraction,
    or its defaults when the file cannot be read (doctor names it)."""
    from retriever.runners import install as inst
    try:
        settings = inst.parse_settings(fileutil.read_text(target()) or "", target())
    except Refused:
        settings = {}
    cap = changes.number(settings.get("skillListingMaxDescChars"), CLAUDE_DESC_MAX, int)
    frac = changes.number(settings.get("skillListingBudgetFraction"), CLAUDE_FRACTION)
    budget = int((window or CLAUDE_WINDOW) * changes.CHARS_PER_TOKEN * frac)

    def fit(entries):
        # Over budget, Claude Code drops descriptions (least used first;
        # here: from the end) until the listing fits; names always stay.
        lines = ["- %s: %s\n" % (n, d[:cap]) if d else "- %s\n" % n for n, d in entries]
        total = sum(map(len, lines))
        for i in range(len(lines) - 1, -1, -1):
            if total <= budget:
                break
            short = "- %s\n" % entries[i][0]
            total -= len(lines[i]) - len(short)
            lines[i] = short
        return total
    stock = [(r["name"], r["description"]) for r in covered_recs + other_recs]
    named = [(r["name"], "") for r in covered_recs] + [(r["name"], r["description"]) for r in other_recs]
    full = sum(len("- %s: %s\n" % (n, d[:cap])) for n, d in stock)
    return {"stock": fit(stock), "unbudgeted": full, "names_only": fit(named), "budget": budget}


# ------------------------------------------------------------- MCP server
# Where ``mcp_config`` registers our MCP server for this runner.

MCP_SHAPE = "stdio"  # {"type": "stdio", "command", "args", "env"} under "mcpServers"; and allowed in settings.json
MCP_PROJECT = ".mcp.json"


def mcp_file(env, home):
    """The file Claude Code reads its user-level MCP servers from."""
    d = env.get("CLAUDE_CONFIG_DIR")
    return os.path.join(os.path.abspath(os.path.expanduser(d)), ".claude.json") if d else \
        os.path.join(home, ".claude.json")
