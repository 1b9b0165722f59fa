"""Codex: where its files are, install, uninstall, status and the
listing's cost (``retriever.runners.listing`` has the table of runners).

Names only: ``[features] omit_skill_descriptions = true`` plus top-level
``suppress_unstable_features_warning = true`` in ``config.toml`` (the
feature is flagged "under development" and warns at start-up without
it).  Global: Codex's own ``.system`` skills lose theirs too.
"""

import os
import re

from retriever import fileutil
from retriever.runners import changes, record, skillsets
from retriever.runners.install import Refused

NAME = "codex"
LISTING = True


def roots(cwd):
    """``(folders the switch reaches, [])``: every folder of its set."""
    return changes.folders(skillsets.codex, cwd), []


OMIT_LINE = "omit_skill_descriptions = true"
QUIET_LINE = "suppress_unstable_features_warning = true"
_HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")
_ANY_HEADER = re.compile(r"^\s*\[")


def target(project=None):
    """Codex's config.toml, beside its hooks.json."""
    from retriever.runners import install
    return os.path.join(os.path.dirname(install.settings_path(NAME, project)), "config.toml")


def _toml(text, path):
    return changes.read_toml(text, path, "add `%s` under [features] and `%s` at the top by hand"
                             % (OMIT_LINE, QUIET_LINE))


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


def install(project, out, dry_run, force=False):
    """Names-only on in config.toml (and the warning switch)."""
    path = target(project)
    rec = {}

    def plan(old):
        # The warning switch is a side line of ours: one the user removed
        # after an earlier install stays out.  The names-only line itself
        # is what install is run for, and is set again.
        prev = changes.record_of(NAME, path) or {}
        new, edit = codex_edit(old or "", path, removed=("top",) if "top" in prev.get("lines", ()) else ())
        rec.clear()
        rec.update(edit)
        return new if edit["lines"] else None

    if changes.write(path, plan, out, dry_run) is None:
        out.write("codex: names-only already on in %s\n" % path)
        return 0
    if "top" in rec["lines"]:
        # A global setting beyond the switch itself: said, not only shown.
        out.write("codex: install %s %s at the top of %s: Codex flags omit_skill_descriptions as under "
                  "development and warns at every start without it (uninstall takes it out again)\n"
                  % ("would also set" if dry_run else "also sets", QUIET_LINE, path))
    if dry_run:
        return 0
    rec0 = changes.record_of(NAME, path)
    if rec0:  # an earlier install's lines: merge what this one adds
        rec["lines"] = sorted(set(rec0["lines"]) | set(rec["lines"]))
        rec["header"] = rec0.get("header") or rec["header"]
    changes.set_record(NAME, path, rec)
    out.write("codex: listed by name only: every skill (omit_skill_descriptions in %s)\n" % path)
    return 0


def uninstall(project, out, dry_run):
    """The lines install added out."""
    path = target(project)

    def unedit(old, rec):
        new = codex_unedit(old, rec, path)
        if not new.strip() and record.created_folders(path) is not None:
            return fileutil.DELETE  # install created it; nothing else was put in since
        return new if new != old else None

    return changes.undo(NAME, path, unedit, out, dry_run, "codex: removed the names-only switch from %s\n")


def status(out, text, path, cwd):
    """Doctor's view of names-only in ``text``, the file at ``path``
    (``listing.status`` has the keys of ``out``)."""
    runner = NAME
    names = changes.covered(*roots(cwd))[0]
    try:
        data = _toml(text or "", path)
    except Refused as exc:
        out.update(state="broken", note=str(exc))
        return out
    feats = data.get("features") if isinstance(data.get("features"), dict) else {}
    if feats.get("omit_skill_descriptions") is True:
        out["state"] = "on" if changes.record_of(runner, path) else "user"
        out["covered"] = len(names)
        out["note"] = "global switch: Codex's bundled skills are listed by name too"
    return out


# ------------------------------------------------------------ listing cost

CODEX_PERCENT = 0.02          # 2% of the context window
CODEX_WINDOW = 272000         # Codex's fallback model metadata


def cost(recs, other_recs, window):
    """The listing's characters, rebuilt the way Codex writes and budgets
    it (``listing.listing_cost``)."""
    budget = int((window or CODEX_WINDOW) * CODEX_PERCENT * changes.CHARS_PER_TOKEN)
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


# ------------------------------------------------------------- MCP server
# Where ``mcp_config`` registers our MCP server for this runner.

MCP_SHAPE = "toml"  # [mcp_servers.NAME] command, args in config.toml
MCP_PROJECT = ".codex/config.toml"


def mcp_file(env, home):
    """The file Codex reads its user-level MCP servers from (config.toml)."""
    return os.path.join(changes.under(env, home, "CODEX_HOME", "~/.codex"), "config.toml")
