"""Find skill roots and the SKILL.md files below them.

Roots come from ``--root`` or from the agents' conventional locations (see
``default_roots``).  The walk skips what Hermes skips and follows symlinks
without looping.  Build path and revalidation only; the query path never
walks the tree.
"""

import os

from retriever import locate

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
    return dedupe_roots([r for r in roots if os.path.isdir(r["path"])])


def dedupe_roots(roots):
    """Drop roots that resolve to a folder already listed (first one wins)."""
    seen = set()
    out = []
    for r in roots:
        real = os.path.realpath(r["path"])
        if real in seen:
            continue
        seen.add(real)
        out.append(r)
    return out


def walk_skill_files(root):
    """Yield ``(skill_dir, skill_md_path)`` below ``root``, sorted by path.

    Symlinked folders are followed; a folder reached twice (a symlink loop,
    or two links to one place) is walked once.
    """
    found = []
    seen = set()
    stack = [root]
    while stack:
        d = stack.pop()
        try:
            st = os.stat(d)
        except OSError:
            continue
        key = (st.st_dev, st.st_ino)
        if key in seen:
            continue
        seen.add(key)
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        has_skill = any(e.name == "SKILL.md" and _is_file(e) for e in entries)
        if has_skill:
            found.append((d, os.path.join(d, "SKILL.md")))
        for e in entries:
            if e.name in EXCLUDED_DIRS or (has_skill and e.name in SUPPORT_DIRS):
                continue
            try:
                if e.is_dir(follow_symlinks=True):
                    stack.append(e.path)
            except OSError:
                continue
    found.sort()
    return found


def _is_file(entry):
    try:
        return entry.is_file(follow_symlinks=True)
    except OSError:
        return False


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


def walk_roots(roots):
    """``{root path: walk_skill_files(root path)}``, walked once per build
    and shared by the manifest and the collection."""
    return {r["path"]: walk_skill_files(r["path"]) for r in roots}


def manifest(roots, extra_files=(), walked=None):
    """Stat signature of everything the index depends on.

    A tuple of ``(path, mtime_ns, size)`` for every SKILL.md below the roots
    plus ``extra_files`` (config.yaml); missing files are recorded as -1.
    Any add, remove, rename or edit at any depth changes it.  ``walked``
    reuses a walk_roots() result.
    """
    walked = walked or walk_roots(roots)
    sig = []
    for r in roots:
        for _, md in walked[r["path"]]:
            try:
                st = os.stat(md)
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
