"""Each runner's own skill set: the folders it loads skills from, in its
precedence order, and how it names and hides what it finds there.

A hook should offer exactly the skills its runner can load, under the names
that runner uses.  One function per runner turns a hook payload into a list
of root dicts (``path``, ``source``, ``prefix`` and the rules ``naming``,
``hide_manual``, ``max_depth`` and ``require`` that ``skills.collect``
applies);
``skill_set`` keeps the folders that exist, without aliases of one folder.
Checked against the pinned CLIs (docs/runners.md, "Skill sets", lists the source of
each folder):

* Claude Code 2.1.197 / 2.1.332: ``$CLAUDE_CONFIG_DIR/skills`` (personal),
  ``.claude/skills`` in the working folder and each parent up to the
  repository root, and ``<installPath>/skills`` of each enabled plugin.  A
  skill is named by its folder (``plugin:folder`` in a plugin), and
  ``disable-model-invocation: true`` keeps it out of the model's listing.
  ``.agents/skills`` is not read.
* Codex 0.171.0: ``.agents/skills`` from the working folder up to the
  repository root, ``<cwd>/.codex/skills``, ``$CODEX_HOME/skills``,
  ``~/.agents/skills``, ``/etc/codex/skills``; frontmatter names.
* Gemini CLI 0.61.0: ``<project>/.agents/skills``, ``<project>/.gemini/skills``,
  ``~/.agents/skills``, ``~/.gemini/skills`` (highest first), then the
  ``skills/`` of each extension enabled for the project.
* Cline 3.0.65: ``.clinerules/skills``, ``.cline/skills`` and
  ``.agents/skills`` in each workspace root, ``$CLINE_DIR/skills``
  (``~/.cline``), ``~/.agents/skills``.

Claude Code, Gemini CLI and Cline read ``<folder>/<skill>/SKILL.md`` only,
never deeper (Gemini also ``<folder>/SKILL.md``); Codex walks the whole tree.
Codex skips a skill without ``description``, Gemini CLI one without ``name``
or ``description``, Cline one without ``name`` (rule ``require``).

Hot path: runs inside a hook under ``python -I -S``; built-in modules only.
"""

import posix

from retriever import locate, userroots

_MAX_ANCESTORS = 40


def _dir_key(path):
    # Folders are deduplicated by inode so a symlinked alias (say
    # ~/.agents/skills -> ~/.claude/skills) is indexed once; the index
    # header lists deduplicated roots and must match what we ask for.
    try:
        st = posix.stat(path)
    except OSError:
        return None
    if (st.st_mode & 0o170000) != 0o040000:
        return None
    return (st.st_dev, st.st_ino)


def existing(roots):
    """The root dicts whose folder exists, in order, first of each alias;
    a project's folder that is one of the user's (a clone's link to
    ``~/.agents/skills``) is read as the user's, never as the project's
    (``discover.dedupe_roots`` keeps the same one)."""
    keyed = []
    for r in roots:
        if r["path"]:
            r = dict(r, path=locate.abspath(r["path"]))
            key = _dir_key(r["path"])
            if key is not None:
                keyed.append((r, key))
    users = set(key for r, key in keyed if not locate.in_project(r))
    seen = set()
    out = []
    for r, key in keyed:
        if key in seen or (key in users and locate.in_project(r)):
            continue
        seen.add(key)
        out.append(r)
    return out


def _exists(path):
    try:
        posix.stat(path)
        return True
    except OSError:
        return False


def project_dirs(cwd):
    """``cwd`` and its parents up to the repository root (the first folder
    holding ``.git``), nearest first; just ``[cwd]`` outside a repository."""
    if not cwd:
        return []
    cwd = locate.abspath(cwd)
    chain = []
    d = cwd
    for _ in range(_MAX_ANCESTORS):
        chain.append(d)
        if _exists(d + "/.git"):
            return chain
        if d == "/":
            break
        d = d.rsplit("/", 1)[0] or "/"
    return [cwd]


def _cwd(payload, env_name=None):
    cwd = payload.get("cwd")
    if isinstance(cwd, str) and cwd.startswith("/"):
        return cwd
    if env_name and locate.env(env_name):
        return locate.env(env_name)
    return posix.getcwd()


def _read_json(path):
    # Small settings files only; a missing or broken file counts as empty.
    raw = locate.read_bytes(path)
    if raw is None:
        return None
    from retriever import jsonlite
    try:
        return jsonlite.loads(raw.decode("utf-8", "replace"))
    except ValueError:
        return None


def _root(path, source, **rules):
    r = {"path": path, "source": source, "prefix": ""}
    r.update(rules)
    return r


# ------------------------------------------------------------ Claude Code


def claude_config_dir():
    """``$CLAUDE_CONFIG_DIR`` or ``~/.claude``, absolute."""
    return locate.abspath(locate.env("CLAUDE_CONFIG_DIR") or "~/.claude")


def _enabled_plugins(config_dir, projects):
    # enabledPlugins from user, then project settings; a later layer wins.
    merged = {}
    files = [config_dir + "/settings.json"]
    for d in reversed(projects):  # the repository root first, the nearest last
        files += [d + "/.claude/settings.json", d + "/.claude/settings.local.json"]
    for f in files:
        data = _read_json(f)
        enabled = data.get("enabledPlugins") if isinstance(data, dict) else None
        if isinstance(enabled, dict):
            merged.update(enabled)
    return merged


def claude_plugins_file(config_dir):
    """Claude Code's record of the installed plugins (``claude_plugins``
    reads it; doctor names it when it is damaged)."""
    return config_dir + "/plugins/installed_plugins.json"


def claude_plugins(config_dir, projects=()):
    """``[(plugin name, install path, key, plugin.json)]`` of the installed Claude Code
    plugins that are enabled (``installed_plugins.json``, v1 or v2 layout,
    and ``enabledPlugins``; a plugin no settings file mentions counts as
    enabled, as installs made before ``enabledPlugins`` existed).
    Project-scoped installs count only inside their project."""
    data = _read_json(claude_plugins_file(config_dir))
    plugins = data.get("plugins") if isinstance(data, dict) else None
    if not isinstance(plugins, dict):
        return []
    enabled = _enabled_plugins(config_dir, projects)
    out = []
    for key, entries in plugins.items():
        if enabled.get(key, True) is not True:
            continue
        for e in entries if isinstance(entries, list) else [entries]:
            if not isinstance(e, dict) or not isinstance(e.get("installPath"), str):
                continue
            proj = e.get("projectPath")
            if isinstance(proj, str) and proj and locate.abspath(proj) not in projects:
                continue
            manifest = _read_json(e["installPath"] + "/.claude-plugin/plugin.json")
            name = manifest.get("name") if isinstance(manifest, dict) else None
            if not isinstance(name, str) or not name:
                name = key.split("@", 1)[0]
            out.append((name, e["installPath"], key, manifest if isinstance(manifest, dict) else {}))
    return out


def _plugin_skill_dirs(install_path, manifest):
    # plugin.json may name extra skill folders ("skills": path or list);
    # skills/ is read either way.
    dirs = [install_path + "/skills"]
    extra = manifest.get("skills")
    for p in [extra] if isinstance(extra, str) else extra if isinstance(extra, list) else []:
        if isinstance(p, str) and p:
            dirs.append(install_path + "/" + p[2:] if p.startswith("./") else
                        p if p.startswith("/") else install_path + "/" + p)
    return dirs


def claude_code(payload):
    """Claude Code's skill set for ``payload``: personal, project (the
    working folder and its parents up to the repository root), then the
    enabled plugins.  Names are folder names (``plugin:folder``); skills
    with ``disable-model-invocation: true`` are hidden."""
    cfg = claude_config_dir()
    projects = project_dirs(_cwd(payload, "CLAUDE_PROJECT_DIR"))
    started = locate.env("CLAUDE_PROJECT_DIR")
    if started and locate.abspath(started) not in projects:
        projects.append(locate.abspath(started))
    rules = {"naming": "folder", "hide_manual": True, "max_depth": 1}
    roots = [_root(cfg + "/skills", "claude-code personal", **rules)]
    roots += [_root(d + "/.claude/skills", "claude-code project", **rules) for d in projects]
    for name, path, key, manifest in claude_plugins(cfg, projects):
        for d in _plugin_skill_dirs(path, manifest):
            roots.append(_root(d, "claude-code plugin " + key, prefix=name + ":", **rules))
    return roots


# ------------------------------------------------------------------ others


def codex(payload):
    """Codex's skill set: ``.agents/skills`` from the working folder up to
    the repository root, ``<cwd>/.codex/skills``, ``$CODEX_HOME/skills``,
    ``~/.agents/skills`` and the admin ``/etc/codex/skills``."""
    cwd = _cwd(payload)
    home = locate.home()
    rules = {"require": ("description",)}
    roots = [_root(d + "/.agents/skills", "codex project", **rules) for d in project_dirs(cwd)]
    roots.append(_root(locate.abspath(cwd) + "/.codex/skills", "codex project", **rules))
    roots.append(_root(locate.abspath(locate.env("CODEX_HOME") or "~/.codex") + "/skills", "codex user", **rules))
    roots.append(_root(home + "/.agents/skills", "codex user", **rules))
    roots.append(_root("/etc/codex/skills", "codex admin", **rules))
    return roots


def _gemini_enabled(rules, cwd):
    # extension-enablement.json overrides: "[!]/abs/dir/" for that folder,
    # "[!]/abs/dir/*" for it and below; the last matching rule wins.
    path = "/" + cwd.strip("/") + "/" if cwd.strip("/") else "/"
    enabled = True
    for rule in rules if isinstance(rules, list) else []:
        if not isinstance(rule, str):
            continue
        off = rule.startswith("!")
        base = rule[1:] if off else rule
        below = base.endswith("*")
        base = base[:-1] if below else base
        base = "/" + base.strip("/") + "/" if base.strip("/") else "/"
        if path == base or (below and path.startswith(base)):
            enabled = not off
    return enabled


def gemini_enablement_file(home):
    """Gemini CLI's per-folder switches for its extensions
    (``gemini_extensions`` reads it; doctor names it when it is damaged)."""
    return home + "/.gemini/extensions/extension-enablement.json"


def gemini_extensions(home, cwd):
    """``[(name, folder)]`` of the Gemini CLI extensions enabled for
    ``cwd`` (``~/.gemini/extensions/<dir>``, a linked one read from its
    source), in folder order."""
    base = home + "/.gemini/extensions"
    try:
        names = sorted(posix.listdir(base))
    except OSError:
        return []
    enablement = _read_json(gemini_enablement_file(home))
    enablement = enablement if isinstance(enablement, dict) else {}
    out = []
    for d in names:
        folder = base + "/" + d
        meta = _read_json(folder + "/.gemini-extension-install.json")
        if isinstance(meta, dict) and meta.get("type") == "link" and isinstance(meta.get("source"), str):
            folder = meta["source"]
        config = _read_json(folder + "/gemini-extension.json")
        if not isinstance(config, dict) or not isinstance(config.get("name"), str):
            continue
        rules = enablement.get(config["name"])
        if _gemini_enabled(rules.get("overrides") if isinstance(rules, dict) else None, cwd):
            out.append((config["name"], folder))
    return out


def gemini(payload):
    """Gemini CLI's skill set, highest precedence first: the project's
    ``.agents/skills`` and ``.gemini/skills``, then the user's, then those
    of the extensions enabled for the project."""
    projects = [locate.abspath(_cwd(payload, "GEMINI_PROJECT_DIR"))]
    started = locate.env("GEMINI_PROJECT_DIR")
    if started and locate.abspath(started) not in projects:
        projects.append(locate.abspath(started))
    home = locate.home()
    rules = {"max_depth": 1, "require": ("name", "description")}
    roots = []
    for d in projects:
        roots += [_root(d + "/.agents/skills", "gemini project", **rules),
                  _root(d + "/.gemini/skills", "gemini project", **rules)]
    roots += [_root(home + "/.agents/skills", "gemini user", **rules),
              _root(home + "/.gemini/skills", "gemini user", **rules)]
    for name, folder in gemini_extensions(home, projects[0]):
        roots.append(_root(folder + "/skills", "gemini extension " + name, **rules))
    return roots


def cline(payload):
    """Cline's skill set: ``.clinerules/skills``, ``.cline/skills`` and
    ``.agents/skills`` of each workspace root, then ``$CLINE_DIR/skills``
    (``~/.cline/skills``) and ``~/.agents/skills``."""
    ws = payload.get("workspaceRoots")
    projects = []
    for w in ws if isinstance(ws, list) else []:
        if isinstance(w, dict):
            w = w.get("path") or w.get("fsPath")
        if isinstance(w, str) and w.startswith("/"):
            projects.append(w)
    if not projects:
        projects.append(_cwd(payload))
    rules = {"max_depth": 1, "require": ("name",)}
    roots = []
    for d in projects:
        roots += [_root(d + "/" + sub + "/skills", "cline project", **rules)
                  for sub in (".clinerules", ".cline", ".agents")]
    roots.append(_root(locate.abspath(locate.env("CLINE_DIR") or "~/.cline") + "/skills", "cline user", **rules))
    roots.append(_root(locate.home() + "/.agents/skills", "cline user", **rules))
    return roots


def opencode(payload):
    """OpenCode's skill set (the user folder checked with the real 1.18.33; the
    others from its documentation): ``.opencode/skills``
    in the working folder and its parents up to the repository root, the
    user's ``$OPENCODE_CONFIG_DIR/skills``, then the Claude Code and
    ``.agents`` folders it also reads, project before user."""
    projects = project_dirs(_cwd(payload))
    home = locate.home()
    roots = [_root(d + "/.opencode/skills", "opencode project") for d in projects]
    roots.append(_root(locate.abspath(locate.env("OPENCODE_CONFIG_DIR") or "~/.config/opencode") + "/skills",
                       "opencode user"))
    for sub in (".claude/skills", ".agents/skills"):
        roots += [_root(d + "/" + sub, "opencode project") for d in projects]
        roots.append(_root(home + "/" + sub, "opencode user"))
    return roots



# A runner's name -> the function giving its folders; a runner whose
# registry record has "skills" is here (Hermes is not: its own rules).
SETS = {"claude-code": claude_code, "codex": codex, "gemini": gemini, "cline": cline, "opencode": opencode}

def skill_set(runner, payload):
    """The existing skill folders ``runner`` reads for ``payload`` (root
    dicts, precedence order), from its function in ``SETS``, then the
    folders the user named for every front end (``retriever.userroots``).
    Hermes, and unknown runners, give ``[]``: the default roots, which carry
    Hermes' own config rules and the named folders."""
    folders = SETS.get(runner)
    if folders is None:
        return []
    return existing(folders(payload) + [_root(p, "remembered") for p in userroots.remembered()])


def scope_request(req):
    """Point a query request at the skill set ``req["runner"]``'s hook
    ranks from the current folder (``query --runner``; Hermes: its own
    folders).  ValueError, with a one-line reason, for an unknown runner
    or one that reads no existing folder."""
    from retriever.runners.registry import RUNNERS
    runner = req["runner"]
    if runner not in RUNNERS:
        from retriever.suggest import did_you_mean
        raise ValueError("unknown runner %r%s (expected one of: %s)"
                         % (runner, did_you_mean(str(runner), RUNNERS), ", ".join(RUNNERS)))
    if not RUNNERS[runner].get("skills"):
        req["roots"], req["only_hermes"] = [], True
        return
    cwd = posix.getcwd()
    roots = skill_set(runner, {"cwd": cwd, "workspaceRoots": [cwd]})
    if not roots:
        raise ValueError("%s reads no existing skill folder from %s" % (runner, cwd))
    req["roots"], req["only_hermes"] = roots, False
