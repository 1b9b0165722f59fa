"""``skill-retrieve doctor``: is retrieval set up and working?

One screen: the skill roots and their problems, the index files, each
runner's registration (and the interpreter it starts), and a live probe
that runs the exact registered command with a sample payload and times it
against the bare interpreter.  Only a command install wrote (by the
digest it recorded) or this installation's own is ever run: a cloned
project's settings may name any program, and doctor is a read-only
check.  Every finding carries the command that fixes it.  Exit 1 when something would stop retrieval from working (no
skills, a settings file the runner cannot parse, a hook command that does
not resolve), else 0.

Cold path: imports freely.  Reads settings files, never writes them.
"""

import json
import os
import shlex
import statistics
import subprocess
import sys
import time

from retriever import build, discover, locate, service, skills, store
from retriever.runners import hook as hookio
from retriever.render import plural
from retriever.runners import install, record, skillsets

from retriever.runners.registry import NAMES as RUNNERS, RUNNERS as RECORDS

PROBE_RUNS = 5
PROBE_TIMEOUT = 20
PROJECT = "registered by the project"  # a hook command doctor neither runs nor takes options from


# ------------------------------------------------------------- findings


def _finding(report, level, what, fix=""):
    """Record one finding; level "error" makes the exit code 1.  The fix
    names this program as it can be run here (``skill-retrieve`` is not on
    PATH after ``make demo``)."""
    if fix:
        import re
        from retriever.cli import self_command
        me = self_command()
        fix = re.sub(r"(?<![\w/.-])skill-retrieve (?=[a-z])", lambda m: me + " ", fix)
    report["findings"].append({"level": level, "what": what, "fix": fix})


# ---------------------------------------------------------------- roots


def _runner_set(runner, cwd):
    """The skill set ``runner`` reads from ``cwd``: root dicts (existing
    folders, each with the ``source`` it came from and the runner's naming
    rules).  Hermes reads the default roots (its own config rules included)."""
    if not RECORDS[runner].get("skills"):
        return build.resolve(None)["roots"]
    return hookio.roots_for(runner, {"cwd": cwd, "workspaceRoots": [cwd]})


MAX_COLLISIONS = 20  # name collisions listed one a line; a count says the rest


def check_roots(report, roots):
    """Fill ``report["roots"]``: per root its skill count and problems.

    ``roots`` is a list of root dicts in precedence order; a name found in
    an earlier root shadows the same name later, as in the index.
    """
    scope = build.resolve(None)
    recs, problems, counts = skills.collect(roots, scope["disabled"])
    by_root = {r["path"]: {"path": r["path"], "source": r.get("source", "root"), "skills": 0,
                           "malformed": {}, "shadowed": [], "disabled": 0, "unreadable": 0}
               for r in roots}
    for r in roots:
        c = counts.get(r["path"], {})
        d = by_root[r["path"]]
        d["skills"] = c.get("indexed", 0)
        d["disabled"] = c.get("disabled", 0)
        d["unreadable"] = c.get("unreadable", 0)
    collisions = []
    for path, reason in problems:
        root = _owner(path, roots)
        if root is None:
            continue
        d = by_root[root]
        if reason.startswith(("duplicate name", "reserved name")):
            d["shadowed"].append({"file": path, "reason": reason})
            collisions.append("%s: %s" % (_home(path), reason))
        else:
            key = build.problem_kind(reason)
            d["malformed"].setdefault(key, []).append(path)
    # Every name collision, one line each: the skill ranked is the one of
    # the earlier root (or the plugin's), never the one that took its name.
    for line in collisions[:MAX_COLLISIONS]:
        _finding(report, "warn", "name collision: " + line)
    if len(collisions) > MAX_COLLISIONS:
        _finding(report, "warn", "%d more name collisions" % (len(collisions) - MAX_COLLISIONS),
                 "skill-retrieve build -v lists every one")
    for r in roots:
        why = discover.outside_project(r)  # the walk skipped it: say so
        if why:
            _finding(report, "warn", "%s: %s" % (_home(r["path"]), why))
    for i, r in enumerate(roots):
        # A root inside one listed before it: its skills count there.
        outer = _owner(r["path"].rstrip("/") + "/", [o for o in roots[:i] if o["path"] != r["path"]])
        if outer and not by_root[r["path"]]["skills"]:
            by_root[r["path"]]["inside"] = outer
    report["roots"] = list(by_root.values())
    report["skills_total"] = len(recs)
    bad = {p for p, _ in problems}
    report["sample_skill"] = _sample([r for r in recs if os.path.join(r["path"], "SKILL.md") not in bad]
                                     or recs)
    return recs


def _owner(path, roots):
    best = None
    for r in roots:
        p = r["path"].rstrip("/") + "/"
        if path.startswith(p) and (best is None or len(p) > len(best)):
            best = r["path"]
    return best


def _sample(recs):
    # A query that must match something: the first skill's name and the
    # start of its description.
    if not recs:
        return None
    r = sorted(recs, key=lambda r: r["id"])[0]
    words = (r["name"].replace("-", " ") + " " + r["description"]).split()[:10]
    return " ".join(words)


# ---------------------------------------------------------------- index


def check_index(report, path, used_by, roots=None):
    """One entry of ``report["indexes"]``: where, version, built, fresh, size.
    ``roots`` are the explicit roots it is built for (None: the defaults)."""
    info = {"path": path, "used_by": used_by, "exists": os.path.exists(path)}
    report["indexes"].append(info)
    if not info["exists"]:
        info["state"] = "missing"
        if report.get("skills_total"):
            _finding(report, "warn", "index %s does not exist yet (used by %s); the first query builds it "
                     "and waits for it" % (path, ", ".join(used_by)), _build_cmd(path, roots))
        return info
    try:
        header, f = store.read_header(path)
        f.close()
    except store.IndexError_ as exc:
        info["state"] = "unusable"
        info["error"] = str(exc)
        _finding(report, "warn", "index %s is unusable (%s); the next query rebuilds it" % (path, exc),
                 _build_cmd(path, roots))
        return info
    info.update(version=header.get("version"), built_at=header.get("built_at"),
                n_docs=header.get("n_docs"), size=os.path.getsize(path),
                roots=[r["path"] for r in header.get("roots", ())], explicit=header.get("explicit"))
    try:
        stale, _ = build.is_stale(header)
    except Exception as exc:  # a vanished root, unreadable config
        stale = True
        info["error"] = "%s: %s" % (type(exc).__name__, exc)
    info["state"] = "stale" if stale else "fresh"
    if stale:
        _finding(report, "warn", "index %s is stale (skills changed since it was built); queries rebuild "
                 "it in the background, so the next few may miss the change" % path,
                 _build_cmd(path, header.get("roots") if info.get("explicit") else None))
    return info


def _build_cmd(path, roots=None):
    """The build command that writes ``path`` (a default cache path is
    keyed by the roots, so naming them is enough).  ``roots`` are paths or
    root dicts; a runner's skill set (roots with naming rules) is rebuilt
    by a query through that runner's set, which keeps the rules."""
    runners = {(r.get("source") or "").split(" ")[0] for r in roots or () if isinstance(r, dict)
               and locate.root_key(r) != r["path"]}
    if len(runners) == 1 and runners <= {n for n, r in RECORDS.items() if r.get("skills")}:
        return "skill-retrieve query --runner %s --fresh skills  (from the project folder)" % runners.pop()
    roots = [r["path"] if isinstance(r, dict) else r for r in roots or ()]
    flags = "".join(" --root %s" % shlex.quote(r) for r in roots or ())
    if roots and path == service.index_path({"roots": list(roots)}):
        return "skill-retrieve build" + flags
    return "skill-retrieve build%s --index %s" % (flags, shlex.quote(path))


# -------------------------------------------------------------- runners


def _hook_opts(argv):
    """``--root``/``--index`` given on a registered command line."""
    roots, index = [], None
    i = 0
    while i < len(argv):
        a = argv[i]
        name, eq, val = a.partition("=")
        if name in ("--root", "--index"):
            if not eq:
                val = argv[i + 1] if i + 1 < len(argv) else ""
                i += 1
            if name == "--root":
                roots.append(val)
            else:
                index = val
        i += 1
    return roots, index


def may_run(runner, path, command):
    """None when doctor may run the hook ``command`` registered in
    ``path`` (the runner's file), else why not, in a few words.  It may
    when install wrote that command there (the digest it recorded for that
    file and runner), or when the command is exactly the one this
    installation registers (our interpreter, our script, nothing else).
    Whatever else a file names is never run: a cloned project's settings
    can name a program of the clone (issue 36)."""
    from retriever import fileutil
    if command == install.hook_command(runner):
        return None
    real = os.path.realpath(path)
    rec = record.entry(real, runner)
    if rec and rec.get("command") == fileutil.digest(command):
        return None
    if runner == "hermes" or real == os.path.realpath(install.settings_path(runner)):
        return "not as skill-retrieve install wrote it"
    return PROJECT


def check_command(report, runner, command, where, why_not=None):
    """Resolve the registered ``command``: interpreter, shim, -S, .pth.

    Returns the dict stored in the runner entry (``argv`` is None when
    the command cannot run; ``trusted`` when doctor may run it, else
    ``why_not`` says why, see ``may_run``, and nothing it names is run).
    """
    info = {"command": command, "argv": None, "trusted": why_not is None}
    if why_not:
        info["not_run"] = why_not
        _finding(report, "warn", "%s hook in %s is %s, so doctor does not run it"
                 % (runner, where, why_not))
    reinstall = "skill-retrieve install %s" % runner
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        _finding(report, "error", "%s hook command in %s cannot be parsed (%s)" % (runner, where, exc), reinstall)
        return info
    if argv and argv[0] == "exec":
        argv = argv[1:]
    if not argv:
        _finding(report, "error", "%s hook command in %s is empty" % (runner, where), reinstall)
        return info
    prog = argv[0]
    # Read the flags before anything can stop the checks: a hook whose
    # script is missing was reported as "no -S" although it had -S.
    info["no_site"] = "-S" in argv[1:] or any(a.startswith("-") and not a.startswith("--") and "S" in a
                                              for a in argv[1:3])
    resolved = prog if os.path.isabs(prog) else _which(prog)
    info["interpreter"] = resolved
    info["absolute"] = os.path.isabs(prog)
    if resolved is None or not os.path.isfile(resolved) or not os.access(resolved, os.X_OK):
        _finding(report, "error", "%s hook command does not resolve: %s is not an executable file "
                 "(the runner fails to start it, so nothing is injected)" % (runner, prog), reinstall)
        return info
    if not os.path.isabs(prog):
        _finding(report, "warn", "%s hook starts %r through PATH (found %s); the runner's PATH may differ"
                 % (runner, prog, resolved), reinstall)
    scripts = [a for a in argv[1:] if ("skill-retrieve" in a or a.endswith("retriever/__main__.py"))
               and not a.startswith("-")]
    for s in scripts[:1]:
        if os.path.isabs(s) and not os.path.isfile(s):
            _finding(report, "error", "%s hook runs %s, which does not exist" % (runner, s), reinstall)
            return info
    is_bin = os.path.basename(os.path.realpath(resolved)) == "skill-retrieve"
    info["shim"] = (not is_bin) and install.is_shim(resolved)
    info["no_site"] = is_bin or info["no_site"]
    if is_bin:
        info["note"] = "runs bin/skill-retrieve directly (its sh preamble picks the interpreter)"
        _finding(report, "warn", "%s hook starts bin/skill-retrieve through /bin/sh, one extra exec per "
                 "prompt" % runner, reinstall)
    elif info["shim"]:
        _finding(report, "warn", "%s hook starts Python through a shim, %s: a version-manager shim adds "
                 "tens to hundreds of ms to every prompt" % (runner, resolved),
                 "%s  (or SKILL_RETRIEVAL_PYTHON=/path/to/real/python3 %s)" % (reinstall, reinstall))
    if not info["no_site"]:
        # Asking an interpreter doctor may not run is running it.
        info["pth"] = _pth_files(resolved) if info["trusted"] else []
        _finding(report, "warn", "%s hook runs %s without -S, so site-packages and its %s "
                 "load on every prompt%s" % (runner, resolved, plural(len(info["pth"]), ".pth file")
                                              if info["trusted"] else ".pth files",
                                              ": " + ", ".join(os.path.basename(p) for p in info["pth"][:5])
                                              if info["pth"] else ""), reinstall)
    info["argv"] = argv
    return info


def _which(prog):
    import shutil
    return shutil.which(prog)


def _pth_files(python):
    """The .pth files in ``python``'s site-packages (it is asked)."""
    code = "import site,sys;print('\\n'.join(site.getsitepackages()+[site.getusersitepackages()]))"
    try:
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    found = []
    for d in out.split("\n"):
        d = d.strip()
        try:
            names = sorted(os.listdir(d)) if d else []
        except OSError:
            continue
        found += [os.path.join(d, n) for n in names if n.endswith(".pth")]
    return found


def _claude_plugin_hook(report, info):
    """Fill ``info`` from this repository installed as a Claude Code plugin
    (``claude plugin install skill-retrieval``), if it is; else leave it."""
    cwd = os.getcwd()
    for name, path, key, _ in skillsets.claude_plugins(skillsets.claude_config_dir(),
                                                       skillsets.project_dirs(cwd)):
        hooks_file = os.path.join(path, "hooks", "hooks.json")
        if name != "skill-retrieval" or not os.path.isfile(hooks_file):
            continue
        from retriever import fileutil
        try:
            cmds = install.our_commands(json.loads(fileutil.read_text(hooks_file) or "{}"), "claude-code")
        except (fileutil.Unreadable, ValueError):
            cmds = []
        if cmds:
            info.update(installed=True, enabled=True, state="installed (plugin %s)" % key, settings=hooks_file)
            # Claude Code runs an installed plugin's hooks itself; a plugin
            # path outside the user's config folder is not one it installed.
            mine = os.path.realpath(hooks_file).startswith(
                os.path.realpath(skillsets.claude_config_dir()) + "/")
            info["hook"] = check_command(report, "claude-code", cmds[0].replace("${CLAUDE_PLUGIN_ROOT}", path),
                                         hooks_file, None if mine else "outside Claude Code's config folder")
            return info
    return info


def check_json_runner(report, runner, path=None):
    """A runner with a JSON settings file (the user's, or ``path``): our
    handler under its event (for claude-code's user settings, else this
    repository installed as a plugin)."""
    info = _check_settings_hook(report, runner, path)
    if runner == "claude-code" and path is None and info["state"] == "not installed":
        _claude_plugin_hook(report, info)
    return info


def _check_settings_hook(report, runner, path=None):
    path = path or install.settings_path(runner)
    info = {"runner": runner, "settings": path, "installed": False, "enabled": False}
    text = _read(report, runner, path, info)
    if text is None:
        return info
    try:
        data = install.parse_settings(text, path)
    except install.Refused as exc:
        info["state"] = "broken settings"
        # The parser's own words: "not valid JSON (where)", or valid JSON
        # that is no object (a list, a string).
        why = str(exc).split("; ")[0]
        _finding(report, "error", "%s settings file: %s: %s cannot read it, so no hook runs"
                 % (runner, why, runner),
                 "fix the JSON (`%s -m json.tool %s` shows where), then `skill-retrieve install %s`"
                 % (sys.executable, shlex.quote(path), runner))
        info["error"] = str(exc)
        return info
    cmds = install.our_commands(data, runner)
    if not cmds:
        info["state"] = "not installed"
        return info
    info["installed"] = info["enabled"] = True
    info["state"] = "installed"
    for key, off, fix in RECORDS[runner]["switches"]:
        value = data
        for part in key.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if value is off:
            info["enabled"] = False
            _finding(report, "error", "%s: %s is %s in %s, so the hook never runs"
                     % (runner, key, json.dumps(off), path), fix % path)
    if len(cmds) > 1:
        _finding(report, "warn", "%s: %d skill-retrieve hooks in %s; each prompt runs all of them"
                 % (runner, len(cmds), path), "skill-retrieve install %s  (keeps one)" % runner)
    info["hook"] = check_command(report, runner, cmds[0], path, may_run(runner, path, cmds[0]))
    start = RECORDS[runner].get("start")
    if start:
        warm = install.our_commands(data, runner, start, install.is_warm)
        info["session_start"] = {"event": start, "command": warm[0] if warm else None}
        if not warm:
            _finding(report, "warn", "%s: no session-start hook in %s, so the first prompt after a break is "
                     "answered by BM25 alone while the semantic helper loads" % (runner, path),
                     "skill-retrieve install %s" % runner)
    return info


def _read(report, runner, path, info, errors="strict"):
    """The text of a runner's file ``path`` for doctor, or None: absent
    (``info`` says "not installed"), or unreadable (a FIFO, a folder, a
    symlink loop, no permission, not UTF-8: "unreadable" and one error
    naming the file).  ``fileutil.read_text`` never blocks."""
    from retriever import fileutil
    try:
        text = fileutil.read_text(path, errors)
    except fileutil.Unreadable as exc:
        info["state"] = "unreadable"
        _finding(report, "error", "%s: %s, so %s cannot use it" % (runner, exc, runner),
                 "chmod u+r %s" % shlex.quote(path) if os.path.isfile(path) and not os.access(path, os.R_OK)
                 else "move it away, then `skill-retrieve install %s`" % runner)
        return None
    if text is None:
        info["state"] = "not installed"
    return text


def check_script(report, runner, path=None):
    """A runner that runs or loads a file of ours (Cline: an executable
    named UserPromptSubmit; OpenCode: a JS plugin), the user's or ``path``."""
    path = path or install.settings_path(runner)
    info = {"runner": runner, "settings": path, "installed": False, "enabled": False}
    # Any bytes: the file may be the user's own program (Cline runs it).
    text = _read(report, runner, path, info, errors="replace")
    if text is None:
        return info
    if not install.is_ours(text, runner):
        info["state"] = "not installed (another file is there)"
        return info
    info["installed"] = True
    info["state"] = "installed"
    runs_file = bool(RECORDS[runner]["install"]["mode"] & 0o111)
    info["enabled"] = os.access(path, os.X_OK) or not runs_file
    if not info["enabled"]:
        _finding(report, "error", "%s: %s is not executable, so %s cannot run it" % (runner, path, runner),
                 "chmod +x %s" % shlex.quote(path))
    line = [l for l in text.splitlines() if l.startswith(("exec ", "// command: "))]
    cmd = line[0].split(" ", 1)[1] if line else ""
    if cmd.startswith("command: "):
        cmd = cmd[len("command: "):]
    info["hook"] = check_command(report, runner, cmd, path, may_run(runner, path, cmd))
    if info["hook"].get("argv") and runs_file and _as_written(runner, path, text):
        info["hook"]["spawn"] = [path]  # the runner runs the file itself
    return info


def _as_written(runner, path, text):
    """Whether the script at ``path`` holds ``text`` exactly as install
    wrote it (its recorded digest), or as this installation writes it:
    only then may doctor run the file itself, whatever other lines it has."""
    if text == install.script(runner, install.hook_command(runner)):
        return True
    return bool(record.as_installed(record.entry(path, runner), text))


def check_hermes(report):
    """Hermes: the plugin folder, plugins.enabled, or a shell hook."""
    from retriever.runners import hermes_install
    hh = locate.hermes_home()
    dest = os.path.join(hh, "plugins", hermes_install.PLUGIN_NAME)
    config = os.path.join(hh, "config.yaml")
    info = {"runner": "hermes", "settings": config, "plugin": dest, "installed": False, "enabled": False}
    try:
        _, cfg = hermes_install.read_config(config)
    except hermes_install.HermesInstallError as exc:
        info["state"] = "broken settings"
        _finding(report, "error", "hermes: %s" % exc, "fix %s, then `skill-retrieve install hermes`" % config)
        return info
    plugins = cfg.get("plugins") if isinstance(cfg.get("plugins"), dict) else {}
    enabled = _names(plugins.get("enabled"))
    disabled = _names(plugins.get("disabled"))
    name = hermes_install.PLUGIN_NAME
    present = os.path.lexists(dest)
    if present and not (os.path.isfile(os.path.join(dest, "plugin.yaml"))
                        and os.path.isfile(os.path.join(dest, "__init__.py"))):
        info["state"] = "broken plugin folder"
        _finding(report, "error", "hermes: %s is there but holds no plugin (a dangling link?)" % dest,
                 "skill-retrieve install hermes")
        return info
    hook_cmds = []
    hooks = cfg.get("hooks") if isinstance(cfg.get("hooks"), dict) else {}
    for h in hooks.get("pre_llm_call") or () if isinstance(hooks.get("pre_llm_call"), list) else ():
        c = h.get("command") if isinstance(h, dict) else None
        if isinstance(c, str) and install.is_ours(c, "hermes"):
            hook_cmds.append(c)
    if present:
        info["installed"] = True
        info["enabled"] = name in enabled and name not in disabled
        info["state"] = "plugin installed" + ("" if info["enabled"] else ", not enabled")
        if not info["enabled"]:
            why = "listed in plugins.disabled" if name in disabled else "not in plugins.enabled"
            _finding(report, "error", "hermes: the plugin is installed but %s in %s, so Hermes never loads it"
                     % (why, config), "skill-retrieve install hermes  (then restart Hermes)")
    if hook_cmds:
        info["installed"] = info["enabled"] = True
        info["state"] = (info.get("state", "") + "; " if present else "") + "shell hook in config.yaml"
        info["hook"] = check_command(report, "hermes", hook_cmds[0], config,
                                     may_run("hermes", config, hook_cmds[0]))
    if not info["installed"]:
        info["state"] = "not installed"
    return info


def _names(v):
    if isinstance(v, str):
        return {v}
    return {str(x) for x in v} if isinstance(v, list) else set()


# ---------------------------------------------------------------- probe


def _payload(runner, query, cwd):
    """The runner's sample stdin with ``query`` where it puts the prompt."""
    rec = RECORDS[runner]
    p = dict(rec["payload"], cwd=cwd, workspaceRoots=[cwd])
    node = p
    keys = rec["prompt"]
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    node[keys[-1]] = query
    return p


def _time(argv, stdin, env, runs):
    """Median wall time (ms) of ``runs`` runs, and the last stdout."""
    times, out = [], b""
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.run(argv, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              env=env, timeout=PROBE_TIMEOUT)
        times.append((time.perf_counter() - t0) * 1000)
        out = proc.stdout
    return statistics.median(times), out


def _injected(runner, out):
    """Characters of skill text in a hook's (or the CLI's) output."""
    text = out.decode("utf-8", "replace").strip()
    if not text or runner is None:
        return len(text)
    try:
        data = json.loads(text)
    except ValueError:
        return -1
    if not isinstance(data, dict):
        return -1
    for v in (data.get("hookSpecificOutput", {}).get("additionalContext") if
              isinstance(data.get("hookSpecificOutput"), dict) else None,
              data.get("contextModification"), data.get("context")):
        if isinstance(v, str):
            return len(v)
    return 0


def probe(report, label, runner, argv, interp, query, cwd, runs=PROBE_RUNS):
    """Run ``argv`` like the runner would and time it against the floor."""
    env = dict(os.environ)
    env["SKILL_RETRIEVAL_REVALIDATE"] = "off"  # no background rebuild forked by a probe
    stdin = json.dumps(_payload(runner, query, cwd)).encode() if runner else b""
    p = {"label": label, "argv": argv, "query": query}
    report["probes"].append(p)
    log_before = _log_size()
    try:
        _time(argv, stdin, env, 1)  # warm-up: builds the index if it is missing
        p["ms"], out = _time(argv, stdin, env, runs)
        p["floor_ms"], _ = _time([interp, "-I", "-S", "-c", "pass"], b"", env, runs) if interp else (None, b"")
    except (OSError, subprocess.SubprocessError) as exc:
        p["error"] = "%s: %s" % (type(exc).__name__, exc)
        _finding(report, "error", "%s: the probe could not run %s (%s)" % (label, argv[0], p["error"]),
                 "skill-retrieve install %s" % runner if runner else "")
        return p
    p["injected_chars"] = _injected(runner, out)
    p["floor_interpreter"] = interp
    new_log = _log_tail(log_before)
    if new_log:
        p["log"] = new_log
    if p["injected_chars"] < 0:
        _finding(report, "error", "%s: the hook printed output the runner cannot parse: %r"
                 % (label, out[:200]), "skill-retrieve install %s" % runner)
    elif p["injected_chars"] == 0:
        _finding(report, "warn", "%s: the probe injected nothing for a query taken from one of your skills%s"
                 % (label, " (log: %s)" % new_log[-1] if new_log else ""),
                 "skill-retrieve doctor --runner %s after checking %s" % (runner or "all", locate.log_path()))
    return p


def _log_size():
    try:
        return os.path.getsize(locate.log_path())
    except OSError:
        return 0


def _log_tail(since):
    try:
        with open(locate.log_path(), "rb") as f:
            f.seek(since)
            return [l for l in f.read().decode("utf-8", "replace").splitlines() if l.strip()][-3:]
    except OSError:
        return []


# ---------------------------------------------------------------- doctor


def recent_tiers(m=50):
    """How the last ``m`` prompts the hooks answered were answered
    (``usage.tier_tally`` over the usage record): ``{"prompts": M,
    "bm25": N, "why": {reason: count}}``."""
    from retriever import usage
    try:
        entries = usage.read()[0]
    except Exception:  # a doctor must report, not crash
        entries = []
    return usage.tier_tally(entries, m)


def check_runner(report, runner, projects=()):
    """One runner's set-up: the user's settings, else the first project
    in ``projects`` (folders, nearest first) whose settings have our hook
    (``install --project DIR`` writes there)."""
    how = install.kind(runner)
    if how == "hermes":
        return check_hermes(report)
    check = check_script if how == "script" else check_json_runner
    info = check(report, runner)
    if info["installed"]:
        return info
    for d in projects:
        path = install.settings_path(runner, d)
        if os.path.exists(path):
            found = check(report, runner, path)
            if found["installed"] or found["state"] != "not installed":
                found["project"] = d
                return found
    return info


def _names_only(report, info, cwd):
    """Whether the runner lists skills by name only (issue 30), for how
    many, and which skills it still lists in full and why."""
    from retriever.runners import listing
    r = info["runner"]
    if r not in listing.RUNNERS and r != "cline":
        return
    try:
        st = listing.status(r, cwd, info.get("project"))
    except Exception as exc:  # a doctor must report, not crash
        st = {"state": "broken", "note": "%s: %s" % (type(exc).__name__, exc), "covered": 0, "full": [],
              "file": ""}
    info["names_only"] = st
    if st["state"] == "off":
        _finding(report, "warn", "%s lists every skill's description on every turn (names-only is off)" % r,
                 "skill-retrieve install %s" % r)
    elif st["state"] == "broken":
        _finding(report, "warn", "%s: names-only cannot be checked: %s" % (r, st["note"]))


def _records(report):
    """Our own files: the roots file, and the records of what install
    changed (a damaged one reads as empty: uninstall then leaves our
    entries, and doctor calls them the user's).  Each unreadable one is
    named in one line."""
    from retriever import userroots
    problem = userroots.problem()
    if problem:
        # Queries skip it silently (hot path): the folders named there are lost.
        _finding(report, "warn", "%s; the folders named with `skill-retrieve roots add` are not used" % problem,
                 "move it away, then `skill-retrieve roots add DIR` again")
    for problem in record.problems():
        _finding(report, "warn", "%s; skill-retrieve's record of what install changed is ignored, so "
                 "uninstall may leave entries of ours behind" % problem,
                 "move it away; the next `skill-retrieve install RUNNER` writes it again")


def _skill_set_files(report, selected):
    """The runners' files a hook's skill set reads beside the settings:
    Claude Code's installed plugins, Gemini CLI's extension switches.  The
    hook reads a damaged one as empty, silently (hot path); doctor names
    each in one warning line, with what that costs."""
    from retriever import fileutil
    files = []
    if "claude-code" in selected:
        files.append(("claude-code", skillsets.claude_plugins_file(skillsets.claude_config_dir()),
                      "the skills of Claude Code's plugins are left out of its skill set",
                      "move it away, then `claude plugin install NAME` for each plugin"))
    if "gemini" in selected:
        files.append(("gemini", skillsets.gemini_enablement_file(locate.home()),
                      "every Gemini CLI extension's skills count as enabled in every folder",
                      "move it away, then `gemini extensions disable NAME` where one should be off"))
    for runner, path, cost, fix in files:
        try:
            # Any bytes, as the skill set reads it (undecodable ones replaced).
            text = fileutil.read_text(path, errors="replace")
            problem = None
            if text is not None and text.strip():
                install.parse_settings(text, path)
        except fileutil.Unreadable as exc:
            problem = str(exc)
        except install.Refused as exc:
            problem = str(exc).split("; ")[0]
        if problem:
            _finding(report, "warn", "%s: %s, so skill-retrieve reads it as empty: %s" % (runner, problem, cost),
                     fix)


def _unknown_settings(report):
    """One warning per ``SKILL_RETRIEVAL_*`` variable that is no setting
    (``settings.unknown``), with the one it is closest to."""
    from retriever import settings
    for name, meant in settings.unknown(k.decode("utf-8", "replace") for k in os.environb):
        # One line each: the name meant is the fix.
        _finding(report, "warn", "%s is not a setting, so it is ignored; %s"
                 % (name, "did you mean %s?" % meant if meant else "the settings: skill-retrieve --help"))


def _mcp(report, info, do_probe):
    """The runner's MCP server entry (``mcp_config``): where, and whether
    it answers ``tools/list``; run only when install wrote that command
    (its recorded digest) or it is this installation's own."""
    from retriever.runners import mcp_config
    runner = info["runner"]
    if runner not in mcp_config.RUNNERS:
        return
    path, args, why_not = mcp_config.registered(runner, info.get("project"))
    if args is None:
        info["mcp"] = {"state": "not registered", "file": path}
        return
    info["mcp"] = {"state": "registered", "file": path, "command": mcp_config.command_text(args)}
    if why_not:
        info["mcp"]["state"] = "registered, not run: " + why_not
        _finding(report, "warn", "%s MCP server entry in %s is %s, so doctor does not run it"
                 % (runner, _home(path), why_not), "skill-retrieve install %s --force" % runner)
        return
    if not do_probe:
        return
    ok, detail = mcp_config.probe(args)
    info["mcp"]["state"] = detail if ok else "does not answer: " + detail
    if not ok:
        _finding(report, "warn", "%s MCP server in %s does not answer tools/list (%s); the agent cannot "
                 "search its skills mid-task" % (runner, _home(path), detail), "skill-retrieve install %s" % runner)


def diagnose(runner="all", roots=(), index=None, cwd=None, do_probe=True, project=None):
    """Run every check; returns the report dict (``healthy``, ``roots``,
    ``indexes``, ``runners``, ``probes``, ``findings``).  Project-level
    installs are looked for in ``project``, else in ``cwd`` and its parents
    up to the repository root."""
    if project:
        project = os.path.abspath(os.path.expanduser(project))
        cwd = cwd or project
    cwd = cwd or os.getcwd()
    projects = [project] if project else skillsets.project_dirs(cwd)
    selected = RUNNERS if runner == "all" else (runner,)
    report = {"runner": runner, "roots": [], "indexes": [], "runners": [], "probes": [], "findings": [],
              "log": locate.log_path()}
    platform = locate.env("HERMES_PLATFORM") or None

    # Runners first: they decide which roots and indexes matter.
    for r in selected:
        try:
            info = check_runner(report, r, projects)
        except Exception as exc:  # a doctor must report, not crash
            info = {"runner": r, "installed": False, "enabled": False, "state": "check failed"}
            _finding(report, "error", "%s: check failed: %s: %s" % (r, type(exc).__name__, exc))
        report["runners"].append(info)
    installed = [i for i in report["runners"] if i["installed"]]
    for info in installed:
        _names_only(report, info, cwd)
        _mcp(report, info, do_probe)
    _records(report)
    _skill_set_files(report, selected)
    _unknown_settings(report)
    report["usage"] = _usage_line(None if runner == "all" else runner)
    if runner != "all" and not installed:
        _finding(report, "error", "%s: skill-retrieve is not installed" % runner,
                 "skill-retrieve install %s" % runner)
    elif runner == "all" and not installed:
        _finding(report, "warn", "no runner is set up; retrieval works from the command line only",
                 "skill-retrieve install claude-code  (or %s)" % ", ".join(r for r in RUNNERS if r != "claude-code"))

    # Skill roots: the explicit ones, else every folder a selected runner reads.
    if roots:
        rlist = build.resolve(list(roots))["roots"]
    else:
        rlist, by_path = [], {}
        for r in selected:
            for root in _runner_set(r, cwd):
                p = root["path"]
                # Where the folder came from in this runner's set ("claude-code
                # plugin x@y", "codex project", ...): what `doctor --runner` shows.
                src = root.get("source") or r
                src = src if src.startswith(r) else "%s %s" % (r, src)
                if p in by_path:
                    by_path[p]["source"] += ", " + src
                else:
                    by_path[p] = dict(root, source=src)
                    rlist.append(by_path[p])
    recs = check_roots(report, rlist)
    for r in report["roots"]:
        # A folder the user named that holds no skill is most often the
        # wrong folder (its parent, a clone's root): say so even when other
        # folders hold skills and retrieval works.
        # (With no skill anywhere, the error below says it for all.)
        if not (recs and (roots or "remembered" in r["source"])):
            continue
        why = locate.not_a_folder(r["path"])
        if why:
            # A file or a typo, named as query and build name it: "no
            # SKILL.md below it" would send the user to put skills there.
            forget = "skill-retrieve roots remove %s" % shlex.quote(r["path"])
            _finding(report, "warn", "%s: %s; it is skipped" % (_home(r["path"]), why),
                     forget if not roots else "")
        elif not discover.holds_skills(r["path"]):
            _finding(report, "warn", "no skills in %s (no SKILL.md below it)" % _home(r["path"]),
                     "skills live at %s/<name>/SKILL.md; or forget the folder: skill-retrieve roots remove %s"
                     % (_home(r["path"]), shlex.quote(r["path"])) if not roots else
                     "skills live at %s/<name>/SKILL.md" % _home(r["path"]))
    if not recs:
        looked = ", ".join(r["path"] for r in rlist) or "no skill folder exists"
        _finding(report, "error", "no skills found (%s); retrieval has nothing to inject" % looked,
                 "put skills in ~/.claude/skills/<name>/SKILL.md (or ~/.hermes/skills, ~/.agents/skills), "
                 "or name your folder once: skill-retrieve roots add DIR")
    for info in installed:
        r = info["runner"]
        info["set"] = _runner_set(r, cwd) if not roots else rlist
        info["roots"] = [x["path"] for x in info["set"]]
        if not info["roots"] and recs:
            _finding(report, "warn", "%s reads none of the folders holding skills (from %s)" % (r, cwd),
                     "put skills where %s looks (see `skill-retrieve hook --help`)" % r)

    # Index files: the one asked for, else the CLI's and each runner's.
    idx_users, idx_roots = {}, {}
    if index or roots:
        path = service.index_path({"index": index, "roots": list(roots), "platform": platform})
        idx_users.setdefault(path, []).append("this command")
        idx_roots[path] = [locate.abspath(r) for r in roots]
    else:
        cli_path = service.index_path({"platform": platform})
        if os.path.exists(cli_path) or not installed:
            idx_users.setdefault(cli_path, []).append("command line")
        for info in installed:
            hook = info.get("hook") or {}
            # A project's command chooses its own --root and --index: neither
            # is checked, written by a probe, nor offered in a fix.
            h_roots, h_index = _hook_opts((hook.get("argv") or []) if hook.get("not_run") != PROJECT else [])
            hermes = info["runner"] == "hermes"
            # The same request the hook makes, so the same path.
            path = service.index_path({"index": h_index, "platform": platform,
                                       "roots": h_roots or ([] if hermes else info.get("set") or []),
                                       "only_hermes": hermes and not h_roots})
            info["index"] = path
            if h_roots or info.get("roots") or info["runner"] == "hermes":
                idx_users.setdefault(path, []).append(info["runner"])
                idx_roots.setdefault(path, h_roots or (info.get("set") if info["runner"] != "hermes" else []))
    for path, users in idx_users.items():
        check_index(report, path, users, idx_roots.get(path))

    from retriever import semantic
    report["semantic"] = semantic.state(list(idx_users))
    report["semantic"]["recent"] = recent_tiers()
    from retriever.cli import bundler
    b_state, b_path = bundler.state(sys.modules["retriever"].__path__[0].rsplit("/", 1)[0])
    report["bundle"] = {"state": b_state, "path": b_path}

    if do_probe and report["sample_skill"]:
        _probe_all(report, installed, roots, index, cwd, platform)
    report["healthy"] = not any(f["level"] == "error" for f in report["findings"])
    return report


def _usage_line(runner):
    # One line of `skill-retrieve stats` (the usage record), or why not.
    try:
        from retriever import usage
        from retriever.cli import usage_stats
        return usage_stats.one_line(usage_stats.summarize(usage.read(runner=runner)[0]))
    except Exception as exc:  # a doctor must report, not crash
        return "cannot read the usage record (%s: %s)" % (type(exc).__name__, exc)


def _probe_all(report, installed, roots, index, cwd, platform):
    query = report["sample_skill"]
    probed = False
    for info in installed:
        hook = info.get("hook")
        if not hook or not hook.get("argv") or not hook.get("trusted"):
            continue  # (an untrusted command is named, never run)
        if not info.get("roots") and not roots:
            continue
        argv = hook.get("spawn") or hook["argv"]
        interp = hook.get("interpreter")
        if interp and os.path.basename(os.path.realpath(interp)) == "skill-retrieve":
            interp = install.interpreter()
        probe(report, "%s hook" % info["runner"], info["runner"], argv, interp, query, cwd)
        probed = True
    if not probed:
        # No spawned hook to try (CLI only, or the in-process Hermes
        # plugin): run bin/skill-retrieve on the index, as a hook would.
        py = install.interpreter()
        argv = [py, "-I", "-S", install.entry_script()]
        for r in roots:
            argv += ["--root", locate.abspath(r)]
        argv += ["--index", report["indexes"][0]["path"], "--", query]
        probe(report, "bin/skill-retrieve", None, argv, py, query, cwd)


# ------------------------------------------------------------------ text


def _ago(ts):
    if not ts:
        return "?"
    s = max(0, time.time() - ts)
    for unit, n in (("d", 86400), ("h", 3600), ("min", 60)):
        if s >= n:
            return "%d %s ago" % (s // n, unit)
    return "%d s ago" % s


def _size(n):
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return ("%d %s" if unit == "B" else "%.1f %s") % (n, unit)
        n /= 1024.0


def _home(p):
    h = locate.home()
    return "~" + p[len(h):] if isinstance(p, str) and h and p.startswith(h + "/") else p


def render_text(report):
    """The one-screen text report."""
    out = []
    w = out.append
    w("Skill roots")
    if not report["roots"]:
        w("  (none found)")
    for r in report["roots"]:
        w("  %-4s %s  %s  [%s]" % ("ok" if r["skills"] else "--", _home(r["path"]), plural(r["skills"], "skill"),
                                  r["source"]))
        if r.get("inside"):
            w("       inside %s, listed above: its skills count there" % _home(r["inside"]))
        bad = sum(len(v) for v in r["malformed"].values())
        if bad:
            # Named, as build names them: the first few files of each kind.
            w("       %s with problems: %s" % (plural(bad, "file"), "; ".join(
                "%s (%d): %s%s" % (k, len(v), ", ".join(_home(f) for f in v[:3]), " ..." if len(v) > 3 else "")
                for k, v in sorted(r["malformed"].items(), key=lambda kv: -len(kv[1]))[:4])))
        if r["shadowed"]:
            w("       %d shadowed by an earlier root or duplicate name: %s" % (
                len(r["shadowed"]), ", ".join(_home(s["file"]) for s in r["shadowed"][:3])
                + (" ..." if len(r["shadowed"]) > 3 else "")))
        if r["disabled"]:
            w("       %d disabled in Hermes config" % r["disabled"])
        if r["unreadable"]:
            w("       %d unreadable" % r["unreadable"])
    w("Index")
    for i in report["indexes"]:
        if i.get("state") in ("missing", "unusable"):
            w("  --   %s  %s%s  (%s)" % (_home(i["path"]), i["state"],
                                        ": " + i["error"] if i.get("error") else "", ", ".join(i["used_by"])))
        else:
            w("  %-4s %s  v%s, %s, built %s, %s, %s  (%s)" % (
                "ok" if i["state"] == "fresh" else "!!", _home(i["path"]), i["version"], plural(i["n_docs"], "skill"),
                _ago(i["built_at"]), i["state"], _size(i["size"]), ", ".join(i["used_by"])))
    sem = report.get("semantic")
    if sem:
        w("Semantic tier")
        w("  %-4s %s; helper %s" % ("ok" if sem["state"] == "on" else "--", sem["state"], sem["helper"]))
        for p, v in sem["vectors"].items():
            w("       vectors of %s: %s" % (_home(p), v))
        rec = sem.get("recent")
        if rec and rec["prompts"]:
            w("  %-4s %d of the last %d prompts were answered by BM25 alone%s" % (
                "ok" if not rec["bm25"] else "--", rec["bm25"], rec["prompts"],
                ": " + ", ".join("%s (%d)" % kv for kv in rec["why"].items()) if rec["bm25"] else ""))
    b = report.get("bundle")
    if b:
        w("Start-up")
        w("  %-4s module bundle %s: %s" % ("!!" if b["state"] == "unwritable" else "ok" if b["state"] == "fresh" else "--",
                                          b["state"], {
            "fresh": _home(b["path"]),
            "stale": "a module changed; the next query writes it again",
            "missing": "the next query writes it",
            "unwritable": "%s cannot be written, so each query imports its modules one by one "
                          "(about 0.5 ms slower)" % _home(b["path"].rsplit("/", 1)[0])}[b["state"]]))
    w("Runners")
    for r in report["runners"]:
        mark = "ok" if r["installed"] and r["enabled"] else ("!!" if r["installed"] else "--")
        w("  %-4s %-12s %s  %s" % (mark, r["runner"], r["state"], _home(r.get("settings", ""))))
        hook = r.get("hook")
        if hook and hook.get("interpreter"):
            what = ("shim" if hook.get("shim") else "real binary") if "shim" in hook else "?"
            site = ("-S, no .pth files" if hook.get("no_site") else
                    "no -S: %s load" % plural(len(hook.get("pth", ())), ".pth file"))
            w("         python: %s (%s, %s)" % (_home(hook["interpreter"]), what, site))
        if r.get("mcp"):
            w("         MCP server: %s  (%s)" % (r["mcp"]["state"], _home(r["mcp"]["file"])))
        st = r.get("session_start")
        if st:
            w("         session start: %s" % ("%s runs `warm %s` (starts the semantic helper)" % (st["event"], r["runner"])
                                          if st["command"] else "no %s hook: the first prompt starts the helper"
                                          % st["event"]))
        no = r.get("names_only")
        if no:
            w("         names only: %s" % {"on": "on, %s listed by name" % plural(no["covered"], "skill"),
                                          "user": "on (set by you), %s listed by name"
                                                  % plural(no["covered"], "skill"),
                                          "off": "off: every description is listed",
                                          "broken": "unknown",
                                          "native": "the runner lists names only itself",
                                          "empty": "nothing to list: none of its own folders holds a skill"}[
                                              no["state"]]
              + ("  (%s)" % _home(no["file"]) if no.get("file") else ""))
            if no.get("note"):
                w("           %s" % no["note"])
            for name, why in no["full"][:8]:
                w("           in full: %s (%s)" % (name, why))
            if len(no["full"]) > 8:
                w("           ... and %d more in full" % (len(no["full"]) - 8))
    if report.get("usage"):
        w("Usage  (skill-retrieve stats)")
        w("       %s" % report["usage"])
    if report["probes"]:
        w("Live probe  (query: %r)" % report["probes"][0]["query"][:60])
    for p in report["probes"]:
        if "error" in p:
            w("  !!   %s: %s" % (p["label"], p["error"]))
            continue
        floor = " vs %.0f ms for `python -I -S -c pass`" % p["floor_ms"] if p.get("floor_ms") else ""
        inj = ("injected %d chars" % p["injected_chars"] if p["injected_chars"] > 0 else
               "injected nothing" if p["injected_chars"] == 0 else "unparseable output")
        w("  %-4s %s: %.0f ms median of %d%s; %s" % ("ok" if p["injected_chars"] > 0 else "!!", p["label"],
                                                    p["ms"], PROBE_RUNS, floor, inj))
    errors = [f for f in report["findings"] if f["level"] == "error"]
    warns = [f for f in report["findings"] if f["level"] != "error"]
    if report["findings"]:
        w("Findings")
    for f in errors + warns:
        w("  %s %s" % ("ERROR" if f["level"] == "error" else "warn ", f["what"]))
        if f["fix"]:
            w("        fix: %s" % f["fix"])
    w("")
    w("healthy: retrieval should work" if report["healthy"] else
      "NOT healthy: %s retrieval (see ERROR above)" % (
          "1 problem stops" if len(errors) == 1 else "%d problems stop" % len(errors)))
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------- CLI


def add_arguments(parser):
    """Arguments of ``skill-retrieve doctor``."""
    parser.add_argument("--runner", choices=RUNNERS + ("all",), default="all",
                        help="check one runner's set-up (default: all)")
    parser.add_argument("--format", choices=("text", "json"), default="text",
                        help="text: one screen; json: one object for scripts")
    parser.add_argument("--root", action="append", default=[], metavar="DIR",
                        help="check these skill folders instead of the runners' (repeatable)")
    parser.add_argument("--index", metavar="FILE", help="check this index file")
    parser.add_argument("--no-probe", action="store_true", help="skip the live probe")
    parser.add_argument("--project", metavar="DIR",
                        help="check hooks installed with install --project DIR (default: this folder "
                             "and its parents up to the repository root)")


def run(args):
    """``skill-retrieve doctor``; 0 when healthy, 1 otherwise, 2 on a
    usage error (a --root that is no folder)."""
    refused = service.refuse_roots(args.root)
    if refused:  # as a query: "0 skills" would hide the typo
        return refused
    report = diagnose(args.runner, args.root, args.index, do_probe=not args.no_probe, project=args.project)
    if args.format == "json":
        sys.stdout.write(json.dumps(report, indent=1, default=str) + "\n")
    else:
        sys.stdout.write(render_text(report))
    return 0 if report["healthy"] else 1
