"""Read every skill below a list of roots into plain records.

discover (files) + frontmatter (text) + the config rules (disabled names,
shadowing) in one pass.  Every SKILL.md ends up either indexed or named in
``problems``; nothing here raises on bad input.
"""

import os

from retriever import discover, frontmatter
from retriever.render import name_key


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
    # How many folders below root skill_dir is (0: the root itself).
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


# ':' and what a person reads as ':' (name_key folds the full-width forms).
_COLONS = (":", "\ua789", "\u2236", "\u02d0", "\u0589", "\u05c3", "\u1361", "\u16ec", "\ufe13", "\ufe55")


def reserved(name):
    """True when ``name`` holds the runners' plugin separator ``:``, or a
    character that reads as one: the name of a plugin's skill
    (``plugin:skill``).  A skill of any other folder may not take it, so a
    cloned repository's ``superpowers:brainstorming`` never stands in for
    the plugin's skill (``read_skill`` leaves such a skill out)."""
    key = name_key(name)
    return any(c in key for c in _COLONS)


def manual_only(meta):
    """True when the frontmatter says ``disable-model-invocation: true``:
    the skill is for the user to call, and the runner hides it from the
    model (a string "true" counts, as the fallback parser reads it)."""
    v = meta.get("disable-model-invocation")
    return v is True or (isinstance(v, str) and v.strip().lower() in ("true", "yes", "on"))


def scan(roots, walked=None, stats=None):
    """Every SKILL.md below ``roots`` (in precedence order), each file once.

    Returns a list of ``(root, skill_dir, md, stat)``; ``stat`` is
    ``(size, mtime_ns, inode)``, taken before the file is read, or the
    OSError that stat raised.  A file reached twice (through a symlink) is
    listed the first time only; skills deeper than a root's ``max_depth``
    are left out.  ``walked`` reuses a discover.walk_roots() result,
    ``stats`` the stat results that walk took.
    """
    stats = stats or {}
    walked = walked or discover.walk_roots(roots)  # a project's folder is walked under its rules
    jobs = []
    seen = set()
    for root in roots:
        found = walked[root["path"]]
        for skill_dir, md in found:
            if too_deep(root, skill_dir):
                continue
            try:
                st = stats.get(md) or os.stat(md)
            except OSError as exc:
                jobs.append((root, skill_dir, md, exc))
                continue
            # (device, inode) names the file whatever the path: the same
            # dedupe as realpath() without its per-component lstat calls.
            ident = (st.st_dev, st.st_ino)
            if ident in seen:
                continue
            seen.add(ident)
            jobs.append(job(root, skill_dir, md, st))
    return jobs


def job(root, skill_dir, md, st):
    """A ``scan`` job for the SKILL.md ``md`` whose stat result is ``st``:
    what its analysis needs and what says it changed (size, mtime, inode)."""
    return root, skill_dir, md, (st.st_size, st.st_mtime_ns, st.st_ino)


def too_deep(root, skill_dir):
    """True when ``skill_dir`` lies below ``root``'s max_depth (the runner
    never looks there)."""
    max_depth = root.get("max_depth")
    return max_depth is not None and _depth(root["path"], skill_dir) > max_depth


def read_skill(root, skill_dir, md):
    """Read and parse one SKILL.md under ``root``'s rules.

    Returns ``(kind, rec, problems, malformed)``.  ``kind`` is "ok" (``rec``
    has the frontmatter fields, ``body``, ``id``, ``path``, ``category``,
    ``vis`` and ``source``), "unreadable", "rejected" (the parser refused
    it) or "hidden" (the runner does not load it; ``problems`` then holds
    only the file's own, not the frontmatter's).

    A root's rules (runners/skillsets.py) decide the name and visibility:
    ``naming: "folder"`` names a skill by its folder, after the root's
    prefix (Claude Code's ``plugin:skill``), not by its frontmatter; and
    ``hide_manual`` leaves out ``disable-model-invocation`` skills, and
    ``require`` (frontmatter fields) those missing a field the runner
    needs, both hidden.  A skill of a root without a plugin prefix whose
    name is ``reserved`` is "shadowed": left out, with the reason.
    """
    try:
        raw = read_capped(md)
    except OSError as exc:
        return "unreadable", None, ["cannot read (%s)" % (exc.strerror or exc)], False
    except ValueError as exc:
        return "unreadable", None, ["skipped: %s" % exc], False
    problems = []
    if len(raw) > MAX_FILE:
        raw = raw[:MAX_FILE]
        problems.append("larger than %d MiB; read the first %d MiB" % (MAX_FILE >> 20, MAX_FILE >> 20))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("utf-8", "replace")
        problems.append("not valid UTF-8; undecodable bytes replaced")
    folder = os.path.basename(skill_dir.rstrip(os.sep)) or "skill"
    try:
        rec, probs = frontmatter.parse_skill(text, folder)
    except frontmatter.Rejected as exc:
        return "rejected", None, problems + ["skipped: %s" % exc], True
    if root.get("source") == "hermes-plugin":
        # Hermes loads a plugin's skill only by its qualified name
        # (skill_view("<plugin>:<skill>")), and skills.disabled
        # does not apply to it.
        rec["name"] = root["prefix"] + folder
    if root.get("naming") == "folder":
        rec["name"] = root.get("prefix", "") + folder
        probs = [p for p in probs if not p.startswith("missing name")]
        if not _has(rec["meta"], "description"):
            # Claude Code describes such a skill by its body's first
            # paragraph, a heading included ("# Title" -> "Title"),
            # never by when_to_use (a field of its own).
            rec["description"] = _lead(rec["body"]) or rec["description"]
    if not root.get("prefix") and reserved(rec["name"]):
        return "shadowed", None, problems + ["reserved name %r: ':' joins a plugin's name to its skill's "
                                             "(plugin:skill), and only a plugin's skill may hold one; "
                                             "not indexed" % rec["name"]], False
    if any(not _has(rec["meta"], f) for f in root.get("require") or ()):
        return "hidden", None, problems, False  # the runner does not load it
    if root.get("hide_manual") and manual_only(rec["meta"]):
        return "hidden", None, problems, False
    sid = discover.skill_id(root, skill_dir)
    parts = sid.split(":", 1)[-1].split("/")
    rec.update(
        id=sid,
        path=os.path.abspath(skill_dir),
        category="/".join(parts[:-1]),
        vis=_visibility(rec.pop("meta")),
        source=root.get("source", "root"),
    )
    return "ok", rec, problems + probs, bool(probs)


def select(roots, jobs, results, disabled=frozenset()):
    """Apply the config rules to read skills, in precedence order.

    ``results[i]`` is ``read_skill``'s ``(kind, rec, problems, malformed)``
    for ``jobs[i]`` (an "ok" ``rec`` needs ``name`` and ``id``).  Returns
    ``(recs, problems, counts)`` as ``collect`` does.
    """
    recs = []
    problems = []
    counts = {r["path"]: {"found": 0, "indexed": 0, "disabled": 0, "hidden": 0, "shadowed": 0,
                          "unreadable": 0, "malformed": 0} for r in roots}
    by_name = {}
    for (root, skill_dir, md, _), (kind, rec, probs, malformed) in zip(jobs, results):
        c = counts[root["path"]]
        c["found"] += 1
        for p in probs:
            problems.append((md, p))
        if kind != "ok":
            c["malformed" if kind == "rejected" else kind] += 1
            continue
        if malformed:
            c["malformed"] += 1
        folder = os.path.basename(skill_dir.rstrip(os.sep)) or "skill"
        plugin_skill = root.get("source") == "hermes-plugin"
        if rec["name"] in disabled or (folder in disabled and not plugin_skill):
            c["disabled"] += 1
            continue
        # Names that look the same are the same skill: a lower-precedence
        # "PDF-tools" or "pdf\u200b-tools" never sits beside "pdf-tools".
        key = name_key(rec["name"])
        prev = by_name.get(key)
        if prev is not None:
            problems.append((md, "duplicate name %r; shadowed by %s" % (rec["name"], prev)))
            c["shadowed"] += 1
            continue
        by_name[key] = md
        recs.append(rec)
        c["indexed"] += 1
    return recs, problems, counts


def collect(roots, disabled=frozenset(), walked=None):
    """Parse the skills below ``roots`` (in precedence order).

    Returns ``(skills, problems, counts)``: ``skills`` is a list of dicts
    (id, name, path, description, triggers, tags, category, body, vis,
    source); ``problems`` a list of ``(file, reason)``; ``counts`` per root
    path: found / indexed / disabled / hidden / shadowed / unreadable /
    malformed.  ``walked`` reuses a discover.walk_roots() result.  See
    read_skill for the roots' rules.
    """
    jobs = scan(roots, walked)
    results = [read_skill(root, d, md) if not isinstance(st, OSError)
               else ("unreadable", None, ["cannot read (%s)" % (st.strerror or st)], False)
               for root, d, md, st in jobs]
    return select(roots, jobs, results, disabled)
