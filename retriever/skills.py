"""Read every skill below a list of roots into plain records.

discover (files) + frontmatter (text) + the config rules (disabled names,
shadowing) in one pass.  Every SKILL.md ends up either indexed or named in
``problems``; nothing here raises on bad input.
"""

import os

from retriever import discover, frontmatter


# The largest of 3,741 real SKILL.md files is 290 KiB; past this, the rest
# of a file is not read (what is analysed per field is cut again later).
MAX_FILE = 4 << 20


def read_capped(path, limit=MAX_FILE):
    """Up to ``limit + 1`` bytes of ``path``.  Raises OSError, or ValueError
    when it is not a regular file (a FIFO or a device named SKILL.md: opened
    non-blocking, so a FIFO never stalls the build)."""
    import stat
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ValueError("not a regular file (%s)" % ("FIFO" if stat.S_ISFIFO(mode) else
                                                          "device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                                                          else "socket" if stat.S_ISSOCK(mode) else "special file"))
        chunks = []
        left = limit + 1
        while left > 0:
            b = os.read(fd, min(left, 1 << 20))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _visibility(meta):
    """The Hermes visibility gates of a skill, or None when it has none."""
    vis = {}
    for key in ("platforms", "environments"):
        v = meta.get(key)
        if v:
            vis[key] = [str(x).strip().lower() for x in (v if isinstance(v, list) else [v]) if str(x).strip()]
    md = meta.get("metadata")
    hermes = md.get("hermes") if isinstance(md, dict) else None
    if isinstance(hermes, dict):
        for key in ("requires_tools", "requires_toolsets", "fallback_for_tools", "fallback_for_toolsets"):
            v = hermes.get(key)
            if v:
                vis[key] = [str(x).strip() for x in (v if isinstance(v, list) else [v]) if str(x).strip()]
    return vis or None


def _depth(root, skill_dir):
    rel = os.path.relpath(skill_dir, root)
    return 0 if rel == "." else rel.count(os.sep) + 1


def _has(meta, field):
    v = meta.get(field)
    return isinstance(v, str) and bool(v.strip())


def _lead(body):
    for block in body.strip().split("\n\n"):
        text = " ".join(l.strip() for l in block.strip().split("\n") if l.strip())
        if text:
            return text.lstrip("#").strip()
    return ""


def manual_only(meta):
    """True when the frontmatter says ``disable-model-invocation: true``:
    the skill is for the user to call, and the runner hides it from the
    model (a string "true" counts, as the fallback parser reads it)."""
    v = meta.get("disable-model-invocation")
    return v is True or (isinstance(v, str) and v.strip().lower() in ("true", "yes", "on"))


def collect(roots, disabled=frozenset(), walked=None):
    """Parse the skills below ``roots`` (in precedence order).

    Returns ``(skills, problems, counts)``: ``skills`` is a list of dicts
    (id, name, path, description, triggers, tags, category, body, vis,
    source); ``problems`` a list of ``(file, reason)``; ``counts`` per root
    path: found / indexed / disabled / hidden / shadowed / unreadable.
    ``walked`` reuses a discover.walk_roots() result.

    A root's rules (runners/skillsets.py) decide the name and visibility:
    ``naming: "folder"`` names a skill by its folder, after the root's
    prefix (Claude Code's ``plugin:skill``), not by its frontmatter; and
    ``hide_manual`` leaves out ``disable-model-invocation`` skills, and
    ``require`` (frontmatter fields) those missing a field the runner
    needs, both counted as hidden; ``max_depth`` skips skills nested deeper below the root
    than the runner looks (1: only ``<root>/<skill>/SKILL.md``).
    """
    skills = []
    problems = []
    counts = {}
    by_name = {}
    seen_files = set()
    for root in roots:
        c = counts.setdefault(root["path"], {"found": 0, "indexed": 0, "disabled": 0, "hidden": 0,
                                             "shadowed": 0, "unreadable": 0, "malformed": 0})
        by_folder = root.get("naming") == "folder"
        max_depth = root.get("max_depth")
        found = walked[root["path"]] if walked else discover.walk_skill_files(root["path"])
        for skill_dir, md in found:
            if max_depth is not None and _depth(root["path"], skill_dir) > max_depth:
                continue  # the runner never looks that deep
            real = os.path.realpath(md)
            if real in seen_files:
                continue
            seen_files.add(real)
            c["found"] += 1
            try:
                raw = read_capped(md)
            except OSError as exc:
                problems.append((md, "cannot read (%s)" % (exc.strerror or exc)))
                c["unreadable"] += 1
                continue
            except ValueError as exc:
                problems.append((md, "skipped: %s" % exc))
                c["unreadable"] += 1
                continue
            if len(raw) > MAX_FILE:
                raw = raw[:MAX_FILE]
                problems.append((md, "larger than %d MiB; read the first %d MiB" % (MAX_FILE >> 20, MAX_FILE >> 20)))
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                text = raw.decode("utf-8", "replace")
                problems.append((md, "not valid UTF-8; undecodable bytes replaced"))
            folder = os.path.basename(skill_dir.rstrip(os.sep)) or "skill"
            try:
                rec, probs = frontmatter.parse_skill(text, folder)
            except frontmatter.Rejected as exc:
                problems.append((md, "skipped: %s" % exc))
                c["malformed"] += 1
                continue
            plugin_skill = root.get("source") == "hermes-plugin"
            if plugin_skill:
                # Hermes loads a plugin's skill only by its qualified name
                # (skill_view("<plugin>:<skill>")), and skills.disabled
                # does not apply to it.
                rec["name"] = root["prefix"] + folder
            if by_folder:
                rec["name"] = root.get("prefix", "") + folder
                probs = [p for p in probs if not p.startswith("missing name")]
                if not _has(rec["meta"], "description"):
                    # Claude Code describes such a skill by its body's first
                    # paragraph, a heading included ("# Title" -> "Title"),
                    # never by when_to_use (a field of its own).
                    rec["description"] = _lead(rec["body"]) or rec["description"]
            if any(not _has(rec["meta"], f) for f in root.get("require") or ()):
                c["hidden"] += 1  # the runner does not load it
                continue
            if root.get("hide_manual") and manual_only(rec["meta"]):
                c["hidden"] += 1
                continue
            if probs:
                c["malformed"] += 1
            for p in probs:
                problems.append((md, p))
            if rec["name"] in disabled or (folder in disabled and not plugin_skill):
                c["disabled"] += 1
                continue
            sid = discover.skill_id(root, skill_dir)
            prev = by_name.get(rec["name"])
            if prev is not None:
                problems.append((md, "duplicate name %r; shadowed by %s" % (rec["name"], prev)))
                c["shadowed"] += 1
                continue
            by_name[rec["name"]] = md
            parts = sid.split(":", 1)[-1].split("/")
            rec.update(
                id=sid,
                path=os.path.abspath(skill_dir),
                category="/".join(parts[:-1]),
                vis=_visibility(rec.pop("meta")),
                source=root.get("source", "root"),
            )
            skills.append(rec)
            c["indexed"] += 1
    return skills, problems, counts
