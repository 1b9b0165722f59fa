"""Names only: the other half of the job, in every runner.

The prompt hook adds the few relevant skills to each turn; this module
makes the runner stop listing every skill's description on every turn, so
the user pays for the names plus the retrieved block instead of the whole
catalogue.  Each runner has its own switch, chosen by measuring the pinned
CLIs against the loopback mock (docs/runners.md has the figures):

* Claude Code: ``skillOverrides: {"<folder>": "name-only"}`` per skill, in
  the settings file the hook goes in.  Per skill, so the bundled skills
  and the plugin skills (which ``skillOverrides`` does not reach) keep
  their descriptions.  A ``SessionStart`` hook (``skill-retrieve sync
  claude-code``) adds an entry for a skill that appears later; Claude Code
  reads it from the next session on.
* Codex: ``[features] omit_skill_descriptions = true`` plus top-level
  ``suppress_unstable_features_warning = true`` in ``config.toml`` (the
  feature is flagged "under development" and warns at start-up without
  it).  Global: Codex's own ``.system`` skills lose theirs too.
* Gemini CLI: ``GEMINI_PROMPT_AGENTSKILLS=0`` in ``~/.gemini/.env`` drops
  the ``<available_skills>`` section; the names stay in the
  ``activate_skill`` tool.  Global.
* OpenCode: a plugin of ours (``skill-retrieval-listing.js``) whose
  ``experimental.chat.system.transform`` drops the ``<description>`` and
  ``<location>`` of every skill the system prompt lists (the skill tool
  loads by name).  It must edit the array in place: OpenCode keeps its
  own reference to it.

Every change is recorded in our state (``listing.json``): which keys or
lines install added, so uninstall removes exactly those and leaves the
user's own entries (for the same keys too) alone.  A plugin file of ours
(OpenCode's, Cline's) has the digest of what install wrote recorded
(``fileutil.note_installed``, as the hook installer does): a copy the
user edited since is neither replaced nor deleted.  Whether install created
a file is recorded once, in ``fileutil.created``.  Every file is changed
by ``fileutil.update`` (under the installers' lock, backed up, replaced
only if it still holds what was read), and a dry run runs the very same
change and writes nothing.

Cold path: imports freely (``sync`` runs once per session, not per prompt).
"""

import json
import os
import re
import shlex
import sys

from retriever import fileutil
# One class for every installer's refusals, and for an edited file of ours.
from retriever.runners.install import Edited, Refused

NAME_ONLY = "name-only"
RUNNERS = ("claude-code", "codex", "gemini", "opencode")
SESSION_EVENT = "SessionStart"
SYNC_WAIT = 2.0  # seconds sync waits for an install under way (the hook's timeout is 10)


# ------------------------------------------------------------------ state

STATE = "listing.json"


def load_state():
    """``{"<runner> <file>": record}``: what install added, per file."""
    return fileutil.load_record(STATE)


def _key(runner, path):
    return "%s %s" % (runner, os.path.abspath(path))


def record_of(runner, path):
    """What install added to ``path`` for ``runner`` (None: nothing)."""
    return load_state().get(_key(runner, path))


def _set_record(runner, path, rec):
    # Called under the installers' lock, after the file was written.
    data = load_state()
    if rec:
        data[_key(runner, path)] = rec
    else:
        data.pop(_key(runner, path), None)
    fileutil.save_record(STATE, data)


# ------------------------------------------------------------------ files


def _decode(raw, path):
    # Strict UTF-8, a BOM kept: the text edits give back every other byte.
    if raw is None:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Refused("%s is not UTF-8 text; left unchanged" % path)


def _write(path, plan, out, dry_run, wait=None):
    """Change ``path`` by ``plan(old text or None)``, which returns the new
    text, ``fileutil.DELETE`` or None (leave the file) and may raise
    Refused.  Returns what was written (or, in a dry run, would be).

    ``fileutil.update`` does the writing: under the installers' lock and a
    flock on the file, the bytes read backed up, the file replaced or
    deleted only if it still holds them, and ``plan`` run again on another
    program's edit made meanwhile.  A dry run runs ``plan`` the same way
    and prints the outcome instead.  A file install creates is recorded
    (``fileutil.note_created``), and deleting one removes the folders made
    for it."""
    real = os.path.realpath(path)
    made = []

    def change(raw):
        made[:] = fileutil.missing_parents(real) if raw is None else []
        return plan(_decode(raw, path))

    raw, new, saved = fileutil.update(path, change, wait=wait, dry_run=dry_run)
    if dry_run:
        if new is not None:
            out.write(fileutil.would(path, new))
        return new
    if saved:
        out.write("backed up %s to %s\n" % (path, saved))
    if new is fileutil.DELETE:
        fileutil.remove_folders(fileutil.forget_created(path))
    elif new is not None and raw is None:
        fileutil.note_created(real, made)
    return new


def _forget(runner, path):
    # Uninstall is done with a file of the names-only half: no record of
    # what install added, nor of having created it, outlives it.
    _set_record(runner, path, None)
    fileutil.forget_created(path)


# ------------------------------------------------------- which skills


def _covered_roots(runner, cwd):
    """The runner's own skill folders the hook injects from and the switch
    reaches: for Claude Code the personal and project folders (not the
    plugins'), for the others every folder of its set."""
    from retriever.runners import skillsets
    roots = skillsets.existing(getattr(skillsets, runner.replace("-", "_"))({"cwd": cwd, "workspaceRoots": [cwd]}))
    if runner == "claude-code":
        return ([r for r in roots if " plugin " not in r["source"]],
                [r for r in roots if " plugin " in r["source"]])
    return roots, []


def covered(runner, cwd=None):
    """``(names the switch covers, [(name, reason)] still listed in full)``
    for the skills ``runner`` reads from ``cwd``."""
    from retriever import skills
    cwd = cwd or os.getcwd()
    roots, uncovered = _covered_roots(runner, cwd)
    names = sorted({r["name"] for r in skills.collect(roots)[0]}) if roots else []
    full = []
    if uncovered:
        for r in skills.collect(uncovered)[0]:
            full.append((r["name"], "a plugin skill: Claude Code's skillOverrides does not reach plugin skills"))
    return names, sorted(full)


# ------------------------------------------------------------ Claude Code


def _claude_path(project=None):
    from retriever.runners import install
    return install.settings_path("claude-code", project)


def sync_command(runner, project=None, python=None):
    """The command of our session-start hook (it brings the per-skill
    entries in step with the skills; ``project``: a project install's)."""
    from retriever.runners import install
    py = python or install.interpreter()
    cmd = "%s -I -S %s sync %s" % (shlex.quote(py), shlex.quote(install.entry_script()), runner)
    return cmd + (" --project %s" % shlex.quote(os.path.abspath(project)) if project else "")


def _is_sync(command, runner):
    return (isinstance(command, str) and ("skill-retrieve" in command or "retriever/__main__.py" in command)
            and (" sync %s" % runner) in command)


def _session_groups(data, path, create, made=None):
    # hooks.SessionStart (``install._groups``: "hooks" and "event" go in
    # ``made`` when this made them).
    from retriever.runners import install
    return install._groups(data, SESSION_EVENT, path, create, made)


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


def _claude_install(project, cwd, out, dry_run):
    from retriever.runners import install
    path = _claude_path(project)
    names, full = covered("claude-code", cwd)
    rec = {}

    def plan(old):
        data = install.parse_settings(old or "", path)
        prev = record_of("claude-code", path) or {}
        had_key = "skillOverrides" in data
        seen = _seen(prev)
        added = add_overrides(data, [n for n in names if n not in seen], path)
        sync_added = not _has_sync(data, "claude-code")
        made = []
        if sync_added:
            _session_groups(data, path, create=True, made=made).append(
                {"matcher": "startup|resume|clear",
                 "hooks": [{"type": "command", "command": sync_command("claude-code", project), "timeout": 10}]})
        rec.update(keys=sorted(set(prev.get("keys", ())) | set(added)), seen=sorted(seen | set(names)),
                   created_key=bool(prev.get("created_key")) or (bool(added) and not had_key),
                   sync=bool(prev.get("sync")) or sync_added,
                   # The containers the sync hook's group needed: uninstall
                   # keeps the others, even emptied (an older record has
                   # none of this, and they go as they always did).
                   made=made if sync_added or "made" not in prev else prev["made"])
        return install.dump_settings(data) if added or sync_added else None

    new = _write(path, plan, out, dry_run)
    if new is None:
        out.write("claude-code: names-only already set for %d skills in %s\n" % (len(names), path))
        return 0
    if dry_run:
        return 0
    _set_record("claude-code", path, rec)
    out.write("claude-code: listed by name only: %d skills (skillOverrides in %s)\n" % (len(names), path))
    if full:
        out.write("  still listed with descriptions: %d plugin skills (skillOverrides does not reach them)\n"
                  % len(full))
    return 0


def _claude_uninstall(project, out, dry_run):
    # settings.json is the hook's file too: whether install created it is
    # the hook's uninstall to use (it runs next), so it is not forgotten here.
    from retriever.runners import install
    path = _claude_path(project)
    rec = record_of("claude-code", path)
    if not rec:
        return 0
    removed = []

    def plan(old):
        if old is None:
            return None
        data = install.parse_settings(old, path)
        ov = _overrides(data, path) or {}
        removed[:] = [k for k in rec.get("keys", ()) if ov.get(k) == NAME_ONLY]
        for k in removed:
            del ov[k]
        if "skillOverrides" in data and not ov and rec.get("created_key"):
            del data["skillOverrides"]
        stay = () if "made" not in rec else tuple(k for k in ("hooks", "event") if k not in rec["made"])
        dropped = _drop_sync(data, "claude-code", path, stay)
        return install.dump_settings(data) if removed or dropped else None

    new = _write(path, plan, out, dry_run)
    if not dry_run:
        _set_record("claude-code", path, None)
        if new is not None:
            out.write("claude-code: removed %d names-only entries from %s\n" % (len(removed), path))
    return 0


def sync(runner, payload, project=None):
    """Add names-only entries for skills that appeared since install or
    the last sync (the session-start hook; the record's ``seen`` holds the
    skills seen so far, so an entry the user removed is not brought back).
    Only where install set names-only up; never changes an entry that is
    there already, nor creates the file.  Waits
    at most SYNC_WAIT seconds for an install or uninstall under way (Busy
    after it; the hook then leaves quietly), and re-reads the record once
    it holds the lock, so it never writes past one.  Returns the names
    added."""
    if runner != "claude-code":
        return []
    from retriever.runners import install
    path = _claude_path(project)
    if not record_of(runner, path):
        return []  # names-only not set up here: not even the lock is taken
    cwd = payload.get("cwd") if isinstance(payload.get("cwd"), str) else os.getcwd()
    names, _ = covered(runner, cwd)
    got = {}

    def plan(old):
        got.clear()
        rec = record_of(runner, path)
        if old is None or not rec:
            return None  # the file or the record went meanwhile (an uninstall)
        data = install.parse_settings(old, path)
        had_key = "skillOverrides" in data
        seen = _seen(rec)
        got["added"] = add_overrides(data, [n for n in names if n not in seen], path)
        got["made_key"] = bool(got["added"]) and not had_key
        return install.dump_settings(data) if got["added"] else None

    import io
    with fileutil.install_lock(wait=SYNC_WAIT):
        written = _write(path, plan, io.StringIO(), False, wait=SYNC_WAIT) is not None  # silent: a hook
        rec = record_of(runner, path)
        if not rec or (not written and set(names) <= _seen(rec)):
            return []
        # What this run saw is recorded even when nothing was written (a
        # new skill the user had an entry for already): from now on it is
        # the user's to keep or remove.
        rec["seen"] = sorted(_seen(rec) | set(names))
        if written:
            rec.update(keys=sorted(set(rec.get("keys", ())) | set(got["added"])),
                       created_key=bool(rec.get("created_key")) or got["made_key"])
        _set_record(runner, path, rec)
    return got["added"] if written else []


# ------------------------------------------------------------------ Codex


OMIT_LINE = "omit_skill_descriptions = true"
QUIET_LINE = "suppress_unstable_features_warning = true"
_HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")
_ANY_HEADER = re.compile(r"^\s*\[")


def _codex_path(project=None):
    from retriever.runners import install
    return os.path.join(os.path.dirname(install.settings_path("codex", project)), "config.toml")


class NoReader(Refused):
    """No TOML reader to check an edit with (Python < 3.11): the edit is
    not made, and install says how to make it by hand."""


def _toml(text, path):
    try:
        import tomllib
    except ImportError:  # Python < 3.11: no reader to check the edit with
        raise NoReader("editing %s needs Python 3.11 or newer (tomllib) to check the result; "
                       "add `%s` under [features] and `%s` at the top by hand" % (path, OMIT_LINE, QUIET_LINE))
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise Refused("%s is not valid TOML (%s); left unchanged" % (path, exc))


def _features_header(lines):
    """Index of the ``[features]`` header line, or None."""
    for i, line in enumerate(lines):
        m = _HEADER.match(line)
        if m and m.group(1).strip() == "features":
            return i
    return None


def codex_edit(text, path="config.toml", removed=()):
    """``(new text, record)`` turning Codex's names-only on in ``text`` (a
    config.toml); keys the user set already are left as they are, and so
    are the record's lines in ``removed`` ("top": an earlier install added
    the warning switch, and the user took it out since).  The edit is
    textual (the user's comments and layout stay) and checked by reading
    the result back.  Raises Refused."""
    data = _toml(text, path)
    lines = text.splitlines(True)
    rec = {"lines": [], "header": False, "newline": False}
    feats = data.get("features")
    if not (isinstance(feats, dict) and "omit_skill_descriptions" in feats):
        if feats is None:
            if lines and not lines[-1].endswith("\n"):
                lines[-1] += "\n"
                rec["newline"] = True
            lines += (["\n"] if lines else []) + ["[features]\n", OMIT_LINE + "\n"]
            rec["header"] = True
        else:
            at = _features_header(lines)
            if at is None:
                raise Refused("%s defines [features] in a form this installer does not edit; "
                              "add `%s` to it by hand" % (path, OMIT_LINE))
            lines.insert(at + 1, OMIT_LINE + "\n")
        rec["lines"].append("features")
    if "suppress_unstable_features_warning" not in data and "top" not in removed:
        lines.insert(0, QUIET_LINE + "\n")
        rec["lines"].append("top")
    new = "".join(lines)
    want = dict(data)
    if "features" in rec["lines"]:
        want["features"] = dict(feats or {}, omit_skill_descriptions=True)
    if "top" in rec["lines"]:
        want["suppress_unstable_features_warning"] = True
    if _toml(new, path) != want:
        raise Refused("%s: the edit would not read back as intended; left unchanged" % path)
    return new, rec


def codex_unedit(text, rec, path="config.toml"):
    """``text`` without the lines ``codex_edit`` added (``rec``); a line the
    user has changed since is left alone."""
    lines = text.splitlines(True)
    if "top" in rec.get("lines", ()):
        for i, line in enumerate(lines):
            if _ANY_HEADER.match(line):
                break
            if line.strip() == QUIET_LINE:
                del lines[i]
                break
    if "features" in rec.get("lines", ()):
        at = _features_header(lines)
        if at is not None:
            end = next((j for j in range(at + 1, len(lines)) if _ANY_HEADER.match(lines[j])), len(lines))
            for j in range(at + 1, end):
                if lines[j].strip() == OMIT_LINE:
                    del lines[j]
                    end -= 1
                    break
            if rec.get("header") and all(not ln.strip() for ln in lines[at + 1:end]):
                del lines[at:end]
                if at > 0 and at == len(lines) and not lines[at - 1].strip():
                    del lines[at - 1]  # the blank line install put before the header
                if rec.get("newline") and lines and lines[-1].endswith("\n"):
                    lines[-1] = lines[-1][:-1]
    new = "".join(lines)
    _toml(new, path)
    return new


def _codex_install(project, out, dry_run):
    path = _codex_path(project)
    rec = {}

    def plan(old):
        # The warning switch is a side line of ours: one the user removed
        # after an earlier install stays out.  The names-only line itself
        # is what install is run for, and is set again.
        prev = record_of("codex", path) or {}
        new, edit = codex_edit(old or "", path, removed=("top",) if "top" in prev.get("lines", ()) else ())
        rec.clear()
        rec.update(edit)
        return new if edit["lines"] else None

    if _write(path, plan, out, dry_run) is None:
        out.write("codex: names-only already on in %s\n" % path)
        return 0
    if "top" in rec["lines"]:
        # A global setting beyond the switch itself: said, not only shown.
        out.write("codex: install %s %s at the top of %s: Codex flags omit_skill_descriptions as under "
                  "development and warns at every start without it (uninstall takes it out again)\n"
                  % ("would also set" if dry_run else "also sets", QUIET_LINE, path))
    if dry_run:
        return 0
    rec0 = record_of("codex", path)
    if rec0:  # an earlier install's lines: merge what this one adds
        rec["lines"] = sorted(set(rec0["lines"]) | set(rec["lines"]))
        rec["header"] = rec0.get("header") or rec["header"]
    _set_record("codex", path, rec)
    out.write("codex: listed by name only: every skill (omit_skill_descriptions in %s)\n" % path)
    return 0


def _codex_uninstall(project, out, dry_run):
    path = _codex_path(project)
    rec = record_of("codex", path)
    if not rec:
        return 0

    def plan(old):
        if old is None:
            return None
        new = codex_unedit(old, rec, path)
        if not new.strip() and fileutil.created_folders(path) is not None:
            return fileutil.DELETE  # install created it; nothing else was put in since
        return new if new != old else None

    _write(path, plan, out, dry_run)
    if not dry_run:
        _forget("codex", path)
        out.write("codex: removed the names-only switch from %s\n" % path)
    return 0


# ------------------------------------------------------------- Gemini CLI


GEMINI_VAR = "GEMINI_PROMPT_AGENTSKILLS"
GEMINI_LINE = GEMINI_VAR + "=0"
_ENV_LINE = re.compile(r"^\s*(?:export\s+)?%s\s*=\s*(.*?)\s*$" % GEMINI_VAR)


def _gemini_path(project=None):
    base = os.path.join(os.path.abspath(os.path.expanduser(project)), ".gemini") if project \
        else os.path.join(os.environ.get("HOME") or os.path.expanduser("~"), ".gemini")
    return os.path.join(base, ".env")


def gemini_value(text):
    """The value ``text`` (a .env file) gives GEMINI_PROMPT_AGENTSKILLS, or None."""
    for line in (text or "").splitlines():
        m = _ENV_LINE.match(line)
        if m:
            return m.group(1).strip("'\"")
    return None


def _gemini_install(project, out, dry_run):
    path = _gemini_path(project)
    rec = {}

    def plan(old):
        if gemini_value(old) is not None:
            return None  # the user's own setting, whatever its value
        text = old or ""
        rec["newline"] = bool(text) and not text.endswith("\n")
        return text + ("\n" if rec["newline"] else "") + GEMINI_LINE + "\n"

    if _write(path, plan, out, dry_run) is None:
        out.write("gemini: %s already set in %s; left as it is\n" % (GEMINI_VAR, path))
        return 0
    if dry_run:
        return 0
    _set_record("gemini", path, rec)
    out.write("gemini: skills listed by name only (%s in %s)\n" % (GEMINI_LINE, path))
    return 0


def _gemini_uninstall(project, out, dry_run):
    path = _gemini_path(project)
    rec = record_of("gemini", path)
    if not rec:
        return 0

    def plan(old):
        if old is None:
            return None
        lines = old.splitlines(True)
        for i in range(len(lines) - 1, -1, -1):
            if lines[i].rstrip("\r\n") == GEMINI_LINE:
                del lines[i]
                if rec.get("newline") and i == len(lines) and lines and lines[-1].endswith("\n"):
                    lines[-1] = lines[-1][:-1]
                break
        new = "".join(lines)
        if new == old:
            return None
        if not new and fileutil.created_folders(path) is not None:
            return fileutil.DELETE  # install created it; nothing else was put in since
        return new

    _write(path, plan, out, dry_run)
    if not dry_run:
        _forget("gemini", path)
        out.write("gemini: removed %s from %s\n" % (GEMINI_LINE, path))
    return 0


# ---------------------------------------------------------------- OpenCode


OPENCODE_PLUGIN = "skill-retrieval-listing.js"
OPENCODE_MARK = "skill-retrieve listing opencode"
OPENCODE_SOURCE = """\
// skill-retrieve listing opencode: list skills by name only.
// Written by `skill-retrieve install opencode`; `skill-retrieve uninstall opencode` removes it.
// OpenCode lists every skill with its description in the system prompt on
// every turn; the skill-retrieval hook injects the few relevant ones per
// message, so the list keeps the names only (the skill tool loads a skill
// by its name; the location, an absolute path, costs more than the name).
const DESC = /\\n?[ \\t]*<(description|location)>[\\s\\S]*?<\\/\\1>/g;
const SKILL = /<skill>[\\s\\S]*?<\\/skill>/g;
// OpenCode's own skills keep their descriptions: the hook never injects them.
const BUILTIN = /<location>[^<]*built-in[^<]*<\\/location>/;
export const SkillRetrievalListing = async () => ({
  "experimental.chat.system.transform": async (input, output) => {
    try {
      // In place: OpenCode keeps its own reference to this array.
      const sys = output.system;
      for (let i = 0; i < sys.length; i++) {
        if (typeof sys[i] === "string" && sys[i].includes("<available_skills>"))
          sys[i] = sys[i].replace(/<available_skills>[\\s\\S]*?<\\/available_skills>/g,
            (block) => block.replace(SKILL, (one) => (BUILTIN.test(one) ? one : one.replace(DESC, ""))));
      }
    } catch (e) { /* fail open: the prompt goes as it is */ }
  },
});
"""


def _opencode_path(project=None):
    from retriever.runners import install
    return os.path.join(os.path.dirname(install.settings_path("opencode", project)), OPENCODE_PLUGIN)


def _plugin_install(runner, path, source, mark, out, dry_run, force=False):
    """Write our plugin file ``source`` at ``path``; returns "written",
    "same" (already there) or "kept".

    A file there without our ``mark`` is someone else's: Refused.  One
    with it is ours as some install wrote it (replaced, backed up) unless
    it differs from the digest install recorded of its own write: then the
    user edited it, and it stays ("kept", one line saying how to take ours)
    unless ``force``.  No digest (an older version's install): ours, as
    before digests were kept.  The digest of what is written is recorded
    (``fileutil.note_installed``), the hook installer's record and rule."""
    real = os.path.realpath(path)

    def plan(old):
        if old == source:
            return None
        if old is not None and mark not in old:
            raise Refused("%s exists and is not skill-retrieve's; left unchanged" % path)
        if old is not None and not force and fileutil.as_installed(fileutil.installed(real, runner), old) is False:
            raise Edited(path)
        return source

    try:
        new = _write(path, plan, out, dry_run)
    except Edited:
        out.write("%s: kept %s: it was edited since install; `skill-retrieve install %s --force` "
                  "replaces it with ours\n" % (runner, path, runner))
        return "kept"
    if not dry_run and (new is not None or fileutil.installed(real, runner) is None):
        # Also when it was there already: a copy an older version wrote
        # without a digest is guarded from now on.
        fileutil.note_installed(real, runner, {"after": fileutil.digest(source)})
    return "same" if new is None else "written"


def _plugin_uninstall(runner, path, mark, out, dry_run):
    """Delete our plugin file as install wrote it; returns "deleted",
    "kept" (edited since install: left, with one line saying so) or None
    (no plugin of ours there).  The records of it go with it (an older
    version kept one in ``listing.json`` too); an edited copy keeps its
    digest, so a later install leaves it too."""
    real = os.path.realpath(path)

    def plan(old):
        if old is None or mark not in old:
            return None
        if fileutil.as_installed(fileutil.installed(real, runner), old) is False:
            raise Edited(path)
        return fileutil.DELETE

    try:
        gone = _write(path, plan, out, dry_run) is not None
    except Edited:
        out.write("%s: left %s in place: it was edited since install; delete it yourself if you "
                  "no longer want it\n" % (runner, path))
        return "kept"
    if not dry_run:
        _forget(runner, path)
        fileutil.forget_installed(real, runner)
    return "deleted" if gone else None


def _opencode_install(project, out, dry_run, force=False):
    path = _opencode_path(project)
    done = _plugin_install("opencode", path, OPENCODE_SOURCE, OPENCODE_MARK, out, dry_run, force)
    if done == "same":
        out.write("opencode: names-only plugin already in %s\n" % path)
    elif done == "written" and not dry_run:
        out.write("opencode: skills listed by name only (plugin %s)\n" % path)
    return 0


def _opencode_uninstall(project, out, dry_run):
    path = _opencode_path(project)
    if _plugin_uninstall("opencode", path, OPENCODE_MARK, out, dry_run) == "deleted" and not dry_run:
        out.write("opencode: removed the names-only plugin %s\n" % path)
    return 0


# ------------------------------------------------------------------ Cline
# The Cline CLI runs UserPromptSubmit hook files detached and never reads
# them (the VS Code extension does: install keeps writing that file), but
# an SDK plugin's beforeRun may return appendContext, which becomes a
# <hook_context> message the model sees on the run's first request
# (measured on the CLI 3.0.65).  The plugin asks the same hook.

CLINE_PLUGIN = "skill-retrieval.js"
CLINE_MARK = "skill-retrieve plugin cline"
CLINE_TEMPLATE = """\
// skill-retrieve plugin cline: add the skills relevant to each task's prompt.
// Written by `skill-retrieve install cline`; `skill-retrieve uninstall cline` removes it.
// The Cline CLI never reads a UserPromptSubmit hook's output; a plugin's
// beforeRun appendContext reaches the model.
import { spawn, spawnSync } from "node:child_process";
const ARGV = %(argv)s;
let root = "";
function warm(ws) {
  // Loaded as a task starts: warm the semantic helper for the first prompt.
  try {
    const w = spawn(ARGV[0], ARGV.slice(1, -2).concat(["warm", "cline"]),
      { stdio: ["pipe", "ignore", "ignore"], detached: true });
    w.on("error", () => {});
    w.stdin.on("error", () => {});
    w.stdin.end(JSON.stringify({ cwd: ws, workspaceRoots: [ws] }));
    w.unref();
  } catch (e) { /* fail open: the first prompt starts the helper */ }
}
function promptOf(messages) {
  for (let i = (messages || []).length - 1; i >= 0; i--) {
    const m = messages[i];
    if (!m || m.role !== "user") continue;
    const parts = typeof m.content === "string" ? [{ type: "text", text: m.content }] : (m.content || []);
    const text = parts.filter((p) => p && p.type === "text" && typeof p.text === "string")
      .map((p) => p.text).join("\\n");
    const inner = /<user_input[^>]*>([\\s\\S]*?)<\\/user_input>/.exec(text);
    return inner ? inner[1] : text;
  }
  return "";
}
export default {
  name: "skill-retrieval",
  manifest: { capabilities: ["hooks"] },
  setup(api, ctx) {
    root = (ctx && ctx.workspaceInfo && ctx.workspaceInfo.rootPath) || "";
    warm(root || process.cwd());
  },
  hooks: {
    beforeRun: async ({ snapshot }) => {
      try {
        const prompt = promptOf(snapshot && snapshot.messages);
        if (!prompt.trim()) return undefined;
        const ws = root || process.cwd();
        const r = spawnSync(ARGV[0], ARGV.slice(1), {
          input: JSON.stringify({ hookName: "UserPromptSubmit", workspaceRoots: [ws], cwd: ws,
                                  userPromptSubmit: { prompt } }),
          encoding: "utf8", timeout: 5000 });
        const out = r.status === 0 && r.stdout.trim() ? JSON.parse(r.stdout) : {};
        return out.contextModification ? { appendContext: out.contextModification } : undefined;
      } catch (e) { return undefined; /* fail open: the task runs as it is */ }
    },
  },
};
"""


def cline_plugin_path(project=None):
    """Where the Cline plugin goes: ``$CLINE_DIR/plugins`` (``~/.cline``), or
    the project's ``.cline/plugins``."""
    if project:
        return os.path.join(os.path.abspath(os.path.expanduser(project)), ".cline", "plugins", CLINE_PLUGIN)
    base = os.environ.get("CLINE_DIR") or os.path.join(os.environ.get("HOME") or os.path.expanduser("~"), ".cline")
    return os.path.join(base, "plugins", CLINE_PLUGIN)


def cline_plugin(command):
    """The plugin's source for the hook ``command``."""
    return CLINE_TEMPLATE % {"argv": json.dumps(shlex.split(command))}


def _cline_install(project, out, dry_run, force=False):
    from retriever.runners import install as inst
    path = cline_plugin_path(project)
    done = _plugin_install("cline", path, cline_plugin(inst.hook_command("cline")), CLINE_MARK, out, dry_run, force)
    if done == "same":
        out.write("cline: plugin already in %s\n" % path)
    elif done == "written" and not dry_run:
        out.write("cline: plugin %s (the Cline CLI reads the hook's context through it)\n" % path)
    return 0


def _cline_uninstall(project, out, dry_run):
    path = cline_plugin_path(project)
    if _plugin_uninstall("cline", path, CLINE_MARK, out, dry_run) == "deleted" and not dry_run:
        out.write("cline: removed the plugin %s\n" % path)
    return 0


# -------------------------------------------------------------- dispatch


def target(runner, project=None):
    """The file the names-only switch of ``runner`` lives in."""
    return {"claude-code": _claude_path, "codex": _codex_path, "gemini": _gemini_path,
            "opencode": _opencode_path}[runner](project)


def _locked(dry_run):
    # Install and uninstall hold the installers' lock from reading the
    # record to saving it; a dry run writes nothing and takes none.
    import contextlib
    return contextlib.nullcontext() if dry_run else fileutil.install_lock()


def install(runner, project=None, dry_run=False, out=sys.stdout, compact=True, force=False):
    """Turn names-only on for ``runner`` (unless not ``compact``), and
    write Cline's plugin; returns the exit code (1 and one line on stderr
    when a file cannot be changed safely).  A plugin file of ours the user
    edited since install is kept (exit 0, one line), as the hook installer
    keeps an edited hook, unless ``force``."""
    if runner == "cline":
        try:
            with _locked(dry_run):
                return _cline_install(project, out, dry_run, force)
        except (Refused, fileutil.Unchanged, OSError) as exc:
            sys.stderr.write("skill-retrieve: Cline plugin not written: %s\n" % exc)
            return 1
    if runner not in RUNNERS or not compact:
        return 0
    try:
        with _locked(dry_run):
            if runner == "claude-code":
                return _claude_install(project, os.path.abspath(project) if project else os.getcwd(), out, dry_run)
            if runner == "opencode":
                return _opencode_install(project, out, dry_run, force)
            return {"codex": _codex_install, "gemini": _gemini_install}[runner](project, out, dry_run)
    except NoReader as exc:
        # Not an error of the user's files: the hook works, the listing
        # stays as it was, and the line says how to finish by hand.
        out.write("%s: names only not set: %s\n" % (runner, exc))
        return 0
    except (Refused, fileutil.Unchanged, OSError) as exc:
        sys.stderr.write("skill-retrieve: names-only not set for %s: %s (the hook is installed; "
                         "--no-compact skips this step)\n" % (runner, exc))
        return 1


def uninstall(runner, project=None, dry_run=False, out=sys.stdout):
    """Remove what ``install`` added for ``runner``; returns the exit code.
    A dry run runs the same changes and prints what they would write."""
    if runner == "cline":
        try:
            with _locked(dry_run):
                return _cline_uninstall(project, out, dry_run)
        except (Refused, fileutil.Unchanged, OSError) as exc:
            sys.stderr.write("skill-retrieve: Cline plugin left in place: %s\n" % exc)
            return 1
    if runner not in RUNNERS:
        return 0
    try:
        with _locked(dry_run):
            return {"claude-code": _claude_uninstall, "codex": _codex_uninstall, "gemini": _gemini_uninstall,
                    "opencode": _opencode_uninstall}[runner](project, out, dry_run)
    except (Refused, fileutil.Unchanged, OSError) as exc:
        sys.stderr.write("skill-retrieve: names-only entries of %s left in place: %s\n" % (runner, exc))
        return 1


# ---------------------------------------------------------------- status


def status(runner, cwd=None, project=None):
    """For doctor: ``{"state": "on"|"off"|"user"|"broken"|"empty", "file",
    "covered", "full": [(name, reason)], "note"}`` ("empty": Claude Code has
    no skill of its own for the switch to cover)."""
    from retriever.runners import install as inst
    path = cline_plugin_path(project) if runner == "cline" else target(runner, project)
    out = {"runner": runner, "file": path, "state": "off", "covered": 0, "full": [], "note": ""}
    try:
        # Every runner's file is read here, the one way (never blocks, one
        # line naming the file when it cannot be read).
        text = fileutil.read_text(path)
    except fileutil.Unreadable as exc:
        out.update(state="broken", note=str(exc))
        return out
    if runner == "cline":
        ok = bool(text) and CLINE_MARK in text
        out.update(state="native", note="the Cline CLI gets the block through this plugin" if ok else
                   "no plugin: the Cline CLI never reads the hook file (skill-retrieve install cline)")
        return out
    names, full = covered(runner, cwd) if runner != "opencode" or text else ([], [])
    if runner == "claude-code":
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
        seen = _seen(record_of(runner, path))
        missing = [n for n in names if n not in ov and n not in seen]
        out["full"] += [(n, "added since the last session; listed by name from the next one")
                        for n in missing]
        # Seen before and without an entry now: the user took it out, and
        # neither sync nor install puts it back.
        out["full"] += [(n, "its skillOverrides entry was removed by hand; left so")
                        for n in names if n not in ov and n in seen]
        if on:
            out["state"] = "on" if record_of(runner, path) else "user"
        elif not names:
            # No skill of its own to list (the user's skills sit in a folder
            # named with `roots add`, which Claude Code does not read):
            # nothing is listed in full, and install has nothing to set.
            out["state"] = "empty"
        if out["state"] != "off" and not _has_sync(data, runner) and missing:
            out["note"] = "no session-start sync hook: new skills keep their descriptions"
        return out
    if runner == "codex":
        try:
            data = _toml(text or "", path)
        except Refused as exc:
            out.update(state="broken", note=str(exc))
            return out
        feats = data.get("features") if isinstance(data.get("features"), dict) else {}
        if feats.get("omit_skill_descriptions") is True:
            out["state"] = "on" if record_of(runner, path) else "user"
            out["covered"] = len(names)
            out["note"] = "global switch: Codex's bundled skills are listed by name too"
        return out
    if runner == "gemini":
        value = gemini_value(text)
        if value is not None and value.strip().lower() in ("0", "false"):
            out["state"] = "on" if record_of(runner, path) else "user"
            out["covered"] = len(names)
            out["note"] = ("read from %s unless the project (or a folder above it) has its own .env"
                           % path)
        return out
    if runner == "opencode":
        if text and OPENCODE_MARK in text:
            out["state"] = "on"
            out["covered"] = len(names)
        return out
    return out


# ------------------------------------------------------- `sync` subcommand


def add_arguments(parser):
    """Arguments of ``skill-retrieve sync`` (run by a session-start hook)."""
    parser.description = ("Bring a runner's names-only entries in step with its skills: a skill added "
                          "since install is listed by name only too. Reads the hook payload on stdin; "
                          "silent, always exits 0.")
    parser.add_argument("runner", choices=RUNNERS, metavar="RUNNER", help="one of: " + ", ".join(RUNNERS))
    parser.add_argument("--project", metavar="DIR", help="the project's settings file instead of the user's")


def run(args):
    """``skill-retrieve sync RUNNER``: fail open, silent, exit 0."""
    from retriever import locate
    try:
        raw = sys.stdin.read() if not sys.stdin.isatty() else ""
        payload = json.loads(raw) if raw.strip() else {}
        added = sync(args.runner, payload if isinstance(payload, dict) else {}, args.project)
        if added:
            locate.log("sync %s: names-only for %d new skills: %s" % (args.runner, len(added), ", ".join(added[:10])))
    except BaseException as exc:  # a session-start hook must never get in the way
        try:
            locate.log("sync %s: %s: %s" % (getattr(args, "runner", "?"), type(exc).__name__, exc))
        except BaseException:
            pass
    return 0


# ------------------------------------------------------------ listing cost
# What each runner's skill listing costs, rebuilt the way the runner
# writes and budgets it (checked against the requests the pinned CLIs
# send: docs/runners.md), for ``skill-retrieve tokens --runner``.

CLAUDE_DESC_MAX = 1536        # skillListingMaxDescChars default
CLAUDE_FRACTION = 0.01        # skillListingBudgetFraction default
CLAUDE_WINDOW = 200000        # tokens, when the model's is unknown
CODEX_PERCENT = 0.02          # 2% of the context window
CODEX_WINDOW = 272000         # Codex's fallback model metadata
CHARS_PER_TOKEN = 4


def _number(value, default, kind=(int, float)):
    # A positive number of the right kind from settings, else the default:
    # a string or a list there must not make the estimate crash.
    ok = isinstance(value, kind) and not isinstance(value, bool) and value > 0
    return value if ok else default


def _claude_cost(covered_recs, other_recs, settings, window):
    cap = _number(settings.get("skillListingMaxDescChars"), CLAUDE_DESC_MAX, int)
    frac = _number(settings.get("skillListingBudgetFraction"), CLAUDE_FRACTION)
    budget = int((window or CLAUDE_WINDOW) * CHARS_PER_TOKEN * frac)

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


def _codex_cost(recs, window):
    budget = int((window or CODEX_WINDOW) * CODEX_PERCENT * CHARS_PER_TOKEN)
    locs = ["(file: r0/%s/SKILL.md)" % os.path.basename(r["path"]) for r in recs]
    bare = [len("- %s: %s\n" % (r["name"], loc)) for r, loc in zip(recs, locs)]
    descs = [len(r["description"]) + 1 for r in recs]
    full = sum(bare) + sum(descs)
    room = budget - sum(bare)
    if full <= budget or room <= 0:
        stock = full if full <= budget else sum(bare)
    else:  # equal shares of what is left, as Codex's renderer hands it out
        share, left, given = 0, sorted(descs), 0
        n = len(left)
        for i, d in enumerate(left):
            share = (room - given) // (n - i)
            if d <= share:
                given += d
            else:
                given += share * (n - i)
                break
        stock = sum(bare) + given
    return {"stock": stock, "unbudgeted": full, "names_only": sum(bare), "budget": budget}


def _gemini_cost(recs):
    entry = "  <skill>\n    <name>%s</name>\n    <description>%s</description>\n    <location>%s</location>\n  </skill>\n"
    section = sum(len(entry % (r["name"], r["description"], os.path.join(r["path"], "SKILL.md"))) for r in recs)
    tool = sum(len("'%s', " % r["name"]) + len('"%s", ' % r["name"]) for r in recs)
    return {"stock": section + tool, "unbudgeted": section + tool, "names_only": tool, "budget": None}


def _opencode_cost(recs):
    entry = "  <skill>\n    <name>%s</name>\n    <description>%s</description>\n    <location>file://%s</location>\n  </skill>\n"
    stock = sum(len(entry % (r["name"], r["description"], os.path.join(r["path"], "SKILL.md"))) for r in recs)
    named = sum(len(entry % (r["name"], "", os.path.join(r["path"], "SKILL.md"))) - len("    <description></description>\n")
                for r in recs)
    return {"stock": stock, "unbudgeted": stock, "names_only": named, "budget": None}


def listing_cost(runner, cwd=None, window=None):
    """``{"runner", "skills", "stock", "unbudgeted", "names_only", "budget",
    "in_full"}`` in characters: the runner's skill listing for the user's
    skills (from ``cwd``) without names-only (``stock``, after the
    runner's own budget; ``unbudgeted``: before it) and with it."""
    from retriever import skills
    cwd = cwd or os.getcwd()
    roots, others = _covered_roots(runner, cwd)
    recs = skills.collect(roots)[0] if roots else []
    other_recs = skills.collect(others)[0] if others else []
    if runner == "claude-code":
        from retriever.runners import install as inst
        try:
            settings = inst.parse_settings(fileutil.read_text(_claude_path()) or "", _claude_path())
        except (Refused, fileutil.Unchanged):
            settings = {}  # doctor names the file; the cost uses Claude Code's defaults
        cost = _claude_cost(recs, other_recs, settings, window)
    elif runner == "codex":
        cost = _codex_cost(recs, window)
    elif runner == "gemini":
        cost = _gemini_cost(recs)
    else:
        cost = _opencode_cost(recs)
    cost.update(runner=runner, skills=len(recs) + len(other_recs), in_full=len(other_recs))
    return cost
