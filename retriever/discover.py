"""Find skill roots and the SKILL.md files below them.

Roots come from ``--root`` or from the agents' conventional locations (see
``default_roots``).  The walk skips what Hermes skips and follows symlinks
without looping.  Build path and revalidation only; the query path never
walks the tree.
"""

import os

from retriever import locate, userroots

# What Hermes' iter_skill_index_files skips, plus its curator backups.
EXCLUDED_DIRS = frozenset((
    ".git", ".github", ".hub", ".archive", ".curator_backups", ".venv", "venv",
    "node_modules", "site-packages", "__pycache__", ".tox", ".nox",
    ".pytest_cache", ".mypy_cache", ".ruff_cache",
))
# Support folders inside a skill hold progressive-disclosure files, never skills.
SUPPORT_DIRS = frozenset(("references", "templates", "assets", "scripts"))


def _root(path, source, prefix=""):
    return {"path": os.path.abspath(os.path.expanduser(path)), "source": source, "prefix": prefix}


def default_roots(env=None, cwd=None, external_dirs=(), only_hermes=False, plugin_dirs=()):
    """Skill roots in precedence order, for when no ``--root`` is given.

    1. Hermes local skills, ``$HERMES_HOME/skills``
    2. Hermes plugin skills, ``$HERMES_HOME/plugins/<plugin>/skills`` (named ``<plugin>:<skill>``)
    3. Hermes ``skills.external_dirs`` from config.yaml
    4. Claude Code personal skills, ``~/.claude/skills``
    5. Claude Code project skills, ``$CLAUDE_PROJECT_DIR/.claude/skills``
    6. ``~/.agents/skills`` and the current project's ``.agents/skills``
    7. the folders the user named (``retriever.userroots``)

    Only roots that exist are returned.  When two roots hold a skill of the
    same name, the earlier root wins and the later one is reported as shadowed.
    ``plugin_dirs`` is ``hermes_config.plugin_skill_dirs()``: every plugin
    folder with skills, its name and whether Hermes loads it.
    ``only_hermes`` keeps what a Hermes session can load: 1, 3 and the
    skills of enabled plugins.
    """
    env = os.environ if env is None else env
    home = os.path.expanduser("~")
    hh = locate.hermes_home(env)
    mine = [_root(d, "remembered") for d in userroots.remembered()]
    roots = [_root(os.path.join(hh, "skills"), "hermes")]
    roots += [_root(path, "hermes-plugin", name + ":") for path, name, enabled in plugin_dirs
              if enabled or not only_hermes]
    roots += [_root(d, "hermes-external") for d in external_dirs]
    if not only_hermes:
        roots.append(_root(os.path.join(home, ".claude", "skills"), "claude-code"))
        proj = env.get("CLAUDE_PROJECT_DIR")
        if proj:
            roots.append(_root(os.path.join(proj, ".claude", "skills"), "claude-code-project"))
        roots.append(_root(os.path.join(home, ".agents", "skills"), "agents"))
        roots.append(_root(os.path.join(cwd or os.getcwd(), ".agents", "skills"), "agents-project"))
    return dedupe_roots([r for r in roots + mine if os.path.isdir(r["path"])])


def dedupe_roots(roots):
    """Drop roots that resolve to a folder already listed (first one wins),
    and a project's folder that resolves to one of the user's folders
    (``locate.in_project``; as ``skillsets.existing``)."""
    reals = [os.path.realpath(r["path"]) for r in roots]
    users = set(real for r, real in zip(roots, reals) if not locate.in_project(r))
    seen = set()
    out = []
    for r, real in zip(roots, reals):
        if real in seen or (real in users and locate.in_project(r)):
            continue
        seen.add(real)
        out.append(r)
    return out


def project_of(root):
    """The project folder of a project's skills folder
    (``<project>/.claude/skills``: two levels up), else None."""
    if not locate.in_project(root):
        return None
    return os.path.dirname(os.path.dirname(os.path.abspath(root["path"]).rstrip(os.sep))) or os.sep


def outside_project(root):
    """Why the project's skills folder ``root`` is not walked (it resolves
    outside its project: a clone's ``.agents/skills -> /``), else None."""
    project = project_of(root)
    if project is None:
        return None
    real, base = os.path.realpath(root["path"]), os.path.realpath(project)
    if real == base or real.startswith(base.rstrip(os.sep) + os.sep):
        return None
    return "project skills folder resolves to %s, outside its project %s; not walked" % (real, base)


# Bounds on one walk (issue 15): a symlink to / or /proc must not walk the
# machine.  Real libraries nest skills 4 levels deep at most.
MAX_DEPTH = 40
MAX_DIRS = 200000
PATH_MAX = 4096


def walk_skill_files(root, problems=None, inside=None, stats=None, owner=None):
    """``[(skill_dir, skill_md_path)]`` below ``root``, sorted by path
    (``iter_skill_files``, sorted)."""
    found = list(iter_skill_files(root, problems, inside, stats, owner))
    found.sort()
    return found


def iter_skill_files(root, problems=None, inside=None, stats=None, owner=None):
    """Yield ``(skill_dir, skill_md_path)`` below ``root`` as the walk
    finds them (in no set order: a cold build analyses each file while
    the walk goes on).

    A symlinked folder is followed only when its target lies inside
    ``root`` (or one of the real paths in ``inside``: the build's other
    roots) or is itself a skill folder (Claude Code allows symlinked skill
    folders; such a folder's own skill is taken, nothing below it).  A
    folder reached twice (a symlink loop, two links to one place) is
    walked once, by device and inode.  The walk stops MAX_DEPTH levels
    down and after MAX_DIRS folders.  What it skips and why (links out of
    the roots, unreadable folders, paths past PATH_MAX, a SKILL.md that
    is a FIFO or a device) is appended to ``problems`` as ``(path, reason)``.
    ``stats``, a dict, receives each SKILL.md's ``os.stat`` result (taken
    here anyway), so the build need not stat the file again.  ``owner``,
    a uid, keeps the walk to folders and SKILL.md files that user owns
    (a project's folder: ``walking``); the others are reported, not read.
    """
    report = problems.append if problems is not None else (lambda item: None)
    inside = [os.path.realpath(root)] + [p for p in (inside or ()) if p]
    seen = set()
    stack = [(root, 0, False)]
    push = stack.append
    n_dirs = 0
    # The loop runs once per folder (137,000 at 100k skills): the common
    # case, a folder without links, is kept to few operations.
    stat, scandir = os.stat, os.scandir
    while stack:
        d, depth, leaf = stack.pop()
        # A character is at most 4 bytes: only long paths are encoded to check.
        if len(d) * 4 >= PATH_MAX and len(os.fsencode(d)) >= PATH_MAX:
            report((d, "path longer than %d bytes; not walked" % PATH_MAX))
            continue
        try:
            st = stat(d)
        except OSError as exc:
            report((d, "cannot read folder (%s)" % (exc.strerror or exc)))
            continue
        key = (st.st_dev, st.st_ino)
        if key in seen:
            continue
        seen.add(key)
        if owner is not None and st.st_uid != owner:
            report((d, "owned by another user (uid %d) in a project's skills folder; not read" % st.st_uid))
            continue
        n_dirs += 1
        if n_dirs > MAX_DIRS:
            report((d, "more than %d folders below %s; stopped walking" % (MAX_DIRS, root)))
            break
        try:
            with scandir(d) as it:
                entries = list(it)
        except OSError as exc:
            report((d, "cannot read folder (%s)" % (exc.strerror or exc)))
            continue
        has_skill = False
        subdirs = []
        for e in entries:
            name = e.name
            if name == "SKILL.md":
                kind, st = _kind_stat(e)
                if kind == "file" and owner is not None and st.st_uid != owner:
                    report((e.path, "owned by another user (uid %d) in a project's skills folder; not read"
                            % st.st_uid))
                elif kind == "file":
                    has_skill = e.path
                    if stats is not None:
                        stats[e.path] = st
                elif kind != "dir":
                    report((e.path, "not a regular file (%s); skipped" % kind))
                elif not leaf:
                    subdirs.append(e)  # a folder named SKILL.md: walked like any other
            elif not leaf and name not in EXCLUDED_DIRS:
                subdirs.append(e)
        if has_skill:
            yield d, has_skill  # the SKILL.md entry's path
        if not subdirs:
            continue
        depth += 1
        for e in subdirs:
            if has_skill and e.name in SUPPORT_DIRS:
                continue
            try:
                if not e.is_dir(follow_symlinks=True):
                    continue
                link = e.is_symlink()
            except OSError:
                continue
            if depth > MAX_DEPTH:
                report((e.path, "more than %d levels below %s; not walked" % (MAX_DEPTH, root)))
                continue
            if not link:
                push((e.path, depth, False))
                continue
            target = os.path.realpath(e.path)
            if any(target == r or target.startswith(r.rstrip(os.sep) + os.sep) for r in inside):
                push((e.path, depth, False))
            elif os.path.isfile(os.path.join(target, "SKILL.md")):
                push((e.path, depth, True))
            else:
                report((e.path, "symlink to %s, outside the skill roots and not a skill folder; "
                                "not followed" % target))


def _kind(entry):
    """"file", "dir", "missing" or the kind of special file ``entry`` is
    (following symlinks)."""
    return _kind_stat(entry)[0]


def _kind_stat(entry):
    """``(_kind(entry), its stat result or None)``."""
    import stat
    try:
        st = entry.stat(follow_symlinks=True)
    except OSError:
        return "missing", None
    mode = st.st_mode
    if stat.S_ISREG(mode):
        return "file", st
    if stat.S_ISDIR(mode):
        return "dir", st
    if stat.S_ISFIFO(mode):
        return "FIFO", st
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device", st
    return ("socket" if stat.S_ISSOCK(mode) else "special file"), st


def skill_id(root, skill_dir):
    """Id of a skill: its folder relative to the root, ``/``-separated,
    prefixed ``<plugin>:`` for skills bundled in a Hermes plugin."""
    rel = os.path.relpath(skill_dir, root["path"])
    if rel == ".":
        rel = os.path.basename(root["path"].rstrip(os.sep)) or "skill"
    parts = rel.split(os.sep)
    # A root above a Hermes plugins/ folder still yields plugin-prefixed ids.
    for i in range(len(parts) - 3):
        if parts[i] == "plugins" and parts[i + 2] == "skills":
            return parts[i + 1] + ":" + "/".join(parts[i + 3:])
    return root["prefix"] + "/".join(parts)


def holds_skills(root):
    """True when a SKILL.md lies below ``root`` (the walk stops at the
    first one found: cheap for a library, a whole walk for an empty or
    wrong folder)."""
    return next(iter_skill_files(root), None) is not None


def walk_roots(roots, problems=None, stats=None):
    """``{root path: walk_skill_files(root path)}``, walked once per build
    and shared by the manifest and the collection; a symlink from one root
    into another is followed.  What was skipped goes to ``problems``, the
    files' stat results to ``stats`` (see walk_skill_files)."""
    walked = {}
    for _ in walking(roots, problems, stats, walked):
        pass
    return walked


def walking(roots, problems, stats, walked):
    """``walk_roots`` into the dict ``walked`` (each root's list sorted
    once its walk is done), yielding ``(root, skill_dir, skill_md_path)``
    for each SKILL.md as the walk finds it."""
    refused = {}
    for r in roots:
        why = outside_project(r)
        if why:
            refused[r["path"]] = why
    inside = [os.path.realpath(r["path"]) for r in roots if r["path"] not in refused]
    for r in roots:
        found = walked[r["path"]] = []
        if r["path"] in refused:
            if problems is not None:
                problems.append((r["path"], refused[r["path"]]))
            continue
        # A walk that starts in a project reads only the user's own files.
        owner = os.getuid() if locate.in_project(r) else None
        for item in iter_skill_files(r["path"], problems, inside, stats, owner):
            found.append(item)
            yield (r,) + item
        found.sort()


def manifest(roots, extra_files=(), walked=None, stats=None):
    """Stat signature of everything the index depends on.

    A tuple of ``(path, mtime_ns, size)`` for every SKILL.md below the roots
    plus ``extra_files`` (config.yaml); missing files are recorded as -1.
    Any add, remove, rename or edit at any depth changes it.  ``walked``
    reuses a walk_roots() result, ``stats`` the stat results it took.
    """
    walked = walked or walk_roots(roots)
    stats = stats or {}
    sig = []
    for r in roots:
        for _, md in walked[r["path"]]:
            try:
                st = stats.get(md) or os.stat(md)
                sig.append((md, st.st_mtime_ns, st.st_size))
            except OSError:
                pass
    for f in extra_files:
        try:
            st = os.stat(f)
            sig.append((f, st.st_mtime_ns, st.st_size))
        except OSError:
            sig.append((f, -1, -1))
    return tuple(sig)
