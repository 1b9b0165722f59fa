"""Register ``skill-retrieve mcp RUNNER`` in each runner's MCP configuration.

``install RUNNER`` adds one server entry, named ``skill-retrieval``, to the
file the runner reads its MCP servers from; ``uninstall`` takes it out
again.  As the hook's installer does (``retriever.runners.install``), each
edit runs under the installers' lock through ``record.change`` (the
file is replaced only if nobody wrote it meanwhile: Claude Code rewrites
``~/.claude.json`` while it runs), backs the file up, keeps the user's own
servers, and records the digest of the text written and of the command,
so that uninstall puts back the bytes it found and doctor runs only a
command install wrote.  An entry of that name the user changed is kept.

| runner | file (user; ``--project DIR``) | where |
|---|---|---|
| claude-code | ``$CLAUDE_CONFIG_DIR/.claude.json`` or ``~/.claude.json``; ``DIR/.mcp.json`` | ``mcpServers`` |
| codex | ``$CODEX_HOME/config.toml``; ``DIR/.codex/config.toml`` | ``[mcp_servers.skill-retrieval]`` |
| gemini | ``~/.gemini/settings.json``; ``DIR/.gemini/settings.json`` | ``mcpServers`` |
| opencode | ``$OPENCODE_CONFIG_DIR/opencode.json`` (``~/.config/opencode``); ``DIR/opencode.json`` | ``mcp`` |
| cline | ``$CLINE_MCP_SETTINGS_PATH``, else ``$CLINE_DATA_DIR`` or ``$CLINE_DIR/data`` (``~/.cline/data``) ``/settings/cline_mcp_settings.json``; no project file | ``mcpServers`` |

Hermes is not registered here (its plugin already answers in process).

Cold path: imports freely.
"""

import json
import os
import shlex
import sys

from retriever import fileutil
from retriever.runners import changes, install as hooks, listing, record

NAME = "skill-retrieval"
RUNNERS = tuple(listing.MODULES)
RECORD = "mcp "  # + runner: its entry in the install record (``record``), beside the hook's


# A project's own MCP settings (``--project DIR``); Cline has none.
PROJECT_FILES = {name: mod.MCP_PROJECT for name, mod in listing.MODULES.items() if mod.MCP_PROJECT}


def argv(runner, python=None):
    """The server's command line for ``runner``: our interpreter with
    ``-I -S`` on our entry script, as the hook runs."""
    return [python or hooks.interpreter(), "-I", "-S", hooks.entry_script(), "mcp", runner]


def command_text(args):
    """``args`` as one shell-quoted line: what doctor digests and shows."""
    return " ".join(shlex.quote(a) for a in args)


def config_path(runner, project=None, env=None):
    """The file ``runner`` reads its MCP servers from (user level, or the
    project's with ``project``): its module's ``mcp_file`` and
    ``MCP_PROJECT`` (``listing.MODULES``)."""
    env = os.environ if env is None else env
    if project:
        return os.path.join(os.path.abspath(os.path.expanduser(project)), PROJECT_FILES[runner])
    return listing.MODULES[runner].mcp_file(env, env.get("HOME") or os.path.expanduser("~"))


def _shape(runner):
    # How the runner writes a server entry: its module's MCP_SHAPE.
    return listing.MODULES[runner].MCP_SHAPE


def entry(runner, args):
    """Our server entry in ``runner``'s own shape."""
    if _shape(runner) == "local":
        return {"type": "local", "command": list(args), "enabled": True}
    if _shape(runner) == "stdio":
        return {"type": "stdio", "command": args[0], "args": list(args[1:]), "env": {}}
    return {"command": args[0], "args": list(args[1:])}


def _key(runner):
    return "mcp" if _shape(runner) == "local" else "mcpServers"


def entry_argv(runner, e):
    """The command line an entry (ours or the user's) runs, or None."""
    if not isinstance(e, dict):
        return None
    if _shape(runner) == "local":
        cmd = e.get("command")
        return list(cmd) if isinstance(cmd, list) and all(isinstance(a, str) for a in cmd) else None
    cmd, args = e.get("command"), e.get("args", [])
    if not isinstance(cmd, str) or not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        return None
    return [cmd] + args


def pristine(runner, args):
    """True when ``args`` is a command some install of ours wrote: an
    absolute interpreter, ``-I -S``, our entry script, ``mcp RUNNER``."""
    return (isinstance(args, list) and len(args) == 6 and args[1:3] == ["-I", "-S"]
            and args[4:] == ["mcp", runner] and os.path.isabs(args[0]) and os.path.isabs(args[3])
            and args[3].endswith(("/bin/skill-retrieve", "/retriever/__main__.py")))


# ----------------------------------------------------------------- JSON


def _json_plan(runner, text, path, args, force):
    # (new text or None, containers made) for installing into JSON ``text``.
    data = hooks.parse_settings(text or "", path)
    key = _key(runner)
    made = []
    servers = data.get(key)
    if servers is None:
        servers = data[key] = {}
        made.append(key)
    if not isinstance(servers, dict):
        raise hooks.Refused("%s: \"%s\" is not an object; left unchanged" % (path, key))
    want = entry(runner, args)
    have = servers.get(NAME)
    if have == want:
        return (None if text is not None else hooks.dump_settings(data)), made
    if have is not None and not force and not _as_ours(runner, have):
        raise hooks.Edited("the %s entry differs from the one install writes" % NAME)
    servers[NAME] = want
    return hooks.dump_settings(data), made


def _as_ours(runner, have):
    # An entry as some install wrote it: only its paths may differ.
    args = entry_argv(runner, have)
    return pristine(runner, args) and have == entry(runner, args)


def _json_unplan(runner, text, path, made):
    data = hooks.parse_settings(text, path)
    key = _key(runner)
    servers = data.get(key)
    if not isinstance(servers, dict) or NAME not in servers:
        return None
    if not _as_ours(runner, servers[NAME]):
        raise hooks.Refused("%s: the %s server entry was changed since install; left in place - "
                            "take it out yourself" % (path, NAME))
    del servers[NAME]
    if not servers and key in made:
        del data[key]
    return hooks.dump_settings(data) if data else ""


# ----------------------------------------------------------------- TOML


def _toml(text, path):
    return changes.read_toml(text, path, "add the [mcp_servers.%s] table by hand (docs/mcp.md)" % NAME)


_TABLE = "[mcp_servers.%s]" % NAME


def _toml_block(args):
    # JSON strings are TOML basic strings (json.dumps writes no "\/").
    return "%s\ncommand = %s\nargs = [%s]\n" % (_TABLE, json.dumps(args[0]),
                                                ", ".join(json.dumps(a) for a in args[1:]))


def _toml_span(lines):
    # (start, end) of our table's lines, or None.
    for i, line in enumerate(lines):
        if line.strip() == _TABLE:
            end = next((j for j in range(i + 1, len(lines)) if lines[j].lstrip().startswith("[")), len(lines))
            return i, end
    return None


def _toml_plan(text, path, args, force):
    text = text or ""
    data = _toml(text, path)
    servers = data.get("mcp_servers")
    have = servers.get(NAME) if isinstance(servers, dict) else None
    want = {"command": args[0], "args": list(args[1:])}
    if have == want:
        return None, []
    lines = text.splitlines(True)
    made = []
    if have is not None:
        if not force and not (isinstance(have, dict) and set(have) == {"command", "args"}
                              and pristine("codex", [have["command"]] + list(have["args"]))):
            raise hooks.Edited("the [mcp_servers.%s] table differs from the one install writes" % NAME)
        span = _toml_span(lines)
        if span is None:
            raise hooks.Refused("%s defines mcp_servers.%s in a form this installer does not edit; "
                                "left unchanged" % (path, NAME))
        del lines[span[0]:span[1]]
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
        made.append("newline")  # uninstall takes it away again
    new = "".join(lines) + ("\n" if "".join(lines).strip() else "") + _toml_block(args)
    back = _toml(new, path)
    expect = dict(data, mcp_servers=dict(servers or {}, **{NAME: want}))
    if back != expect:
        raise hooks.Refused("%s: the edit would not read back as intended; left unchanged" % path)
    return new, made


def _toml_unplan(text, path, made=()):
    data = _toml(text, path)
    servers = data.get("mcp_servers")
    if not isinstance(servers, dict) or NAME not in servers:
        return None
    lines = text.splitlines(True)
    span = _toml_span(lines)
    if span is None:
        raise hooks.Refused("%s defines mcp_servers.%s in a form this installer does not edit; "
                            "take it out yourself" % (path, NAME))
    start, end = span
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1  # blank lines before the next table are the user's
    del lines[start:end]
    last = start == len(lines)  # the table was the file's end, where install puts it
    if last and start > 0 and not lines[start - 1].strip():
        del lines[start - 1]  # the blank line install put before the table
    if "newline" in made and last and lines and lines[-1].endswith("\n"):
        lines[-1] = lines[-1][:-1]
    new = "".join(lines)
    rest = dict(servers)
    del rest[NAME]
    want = dict(data)
    if rest:
        want["mcp_servers"] = rest
    else:
        want.pop("mcp_servers")
    if _toml(new, path) != want:
        raise hooks.Refused("%s: taking the table out would not read back as intended; left unchanged" % path)
    return new


# ------------------------------------------------- Claude Code's permission

# Claude Code asks before an MCP tool's first use, and ``claude -p`` denies
# it: both tools only read the user's own skills, so install allows them
# (``permissions.allow`` in the settings file the hook is in).
ALLOW = "mcp__" + NAME


def _allow_plan(text, path):
    data = hooks.parse_settings(text or "", path)
    made = []
    perms = data.get("permissions")
    if perms is None:
        perms = data["permissions"] = {}
        made.append("permissions")
    if not isinstance(perms, dict):
        raise hooks.Refused("%s: \"permissions\" is not an object; left unchanged" % path)
    allow = perms.get("allow")
    if allow is None:
        allow = perms["allow"] = []
        made.append("allow")
    if not isinstance(allow, list):
        raise hooks.Refused("%s: \"permissions.allow\" is not a list; left unchanged" % path)
    if ALLOW in allow:
        return None, []
    allow.append(ALLOW)
    return hooks.dump_settings(data), made


def _allow_unplan(text, path, made):
    data = hooks.parse_settings(text, path)
    perms = data.get("permissions")
    allow = perms.get("allow") if isinstance(perms, dict) else None
    if not isinstance(allow, list) or ALLOW not in allow:
        return None
    allow.remove(ALLOW)
    if not allow and "allow" in made:
        del perms["allow"]
    if not perms and "permissions" in made:
        del data["permissions"]
    return hooks.dump_settings(data) if data else ""


# ------------------------------------------------------------ operations


def _steps(runner, project, args=None, force=False):
    """``[(file, record name, plan(text) -> (new or None, made), unplan(text, made) -> new or None)]``:
    the edits install makes for ``runner``, in order."""
    path = config_path(runner, project)
    if _shape(runner) == "toml":
        out = [(path, RECORD + runner, lambda t: _toml_plan(t, path, args, force),
                lambda t, made: _toml_unplan(t, path, made))]
    else:
        out = [(path, RECORD + runner, lambda t: _json_plan(runner, t, path, args, force),
                lambda t, made: _json_unplan(runner, t, path, made))]
    if _shape(runner) == "stdio":  # Claude Code also asks before a server's tools run
        sp = hooks.settings_path(runner, project)
        out.append((sp, RECORD + runner + " allow", lambda t: _allow_plan(t, sp),
                    lambda t, made: _allow_unplan(t, sp, made)))
    return out


def install(runner, project=None, dry_run=False, out=sys.stdout, force=False, python=None):
    """Register the server for ``runner``; returns the exit code (a
    refusal is one line on stderr and exit 1; an entry the user edited is
    kept, exit 0)."""
    if runner not in RUNNERS:
        return 0
    if project and runner not in PROJECT_FILES:
        out.write("%s: MCP server not registered for the project: %s reads MCP servers from its user "
                  "settings only (install without --project)\n" % (runner, runner))
        return 0
    args = argv(runner, python)
    said = []
    try:
        for path, key, plan, _ in _steps(runner, project, args, force):
            if _install_file(path, key, plan, args, dry_run, out):
                said.append(path)
    except hooks.Edited as exc:
        out.write("%s: kept your edited MCP server entry in %s (%s); `skill-retrieve install %s --force` "
                  "replaces it\n" % (runner, config_path(runner, project), exc, runner))
        return 0
    except (hooks.Refused, OSError) as exc:
        return _failed(exc)
    if dry_run:
        return 0
    if not said:
        out.write("%s: the MCP server is already registered in %s\n" % (runner, config_path(runner, project)))
    else:
        out.write("%s: MCP server registered (search_skills, read_skill) in %s\n"
                  % (runner, config_path(runner, project)))
    return 0


def _failed(exc):
    # One line on stderr for a refused or failed edit; exit code 1.
    if isinstance(exc, OSError):
        sys.stderr.write("skill-retrieve: cannot update %s: %s\n" % (exc.filename or "a settings file",
                                                                  exc.strerror or exc))
    else:
        sys.stderr.write("skill-retrieve: %s\n" % exc)
    return 1


def _install_file(path, key, plan, args, dry_run, out):
    # One step of install: True when the file changed.
    made = []

    def change(raw):
        new, m = plan(hooks.decode_text(raw, path))
        made[:] = m
        return new

    if dry_run:
        _, new, _ = record.change(path, change, dry_run=True)
        if new is not None:
            out.write(fileutil.would(path, new))
        return new is not None
    with fileutil.install_lock():
        raw, new, saved = record.change(path, change)
        if new is None:
            return False
        # As the hook's record (install._note): a re-install over our own
        # untouched write keeps the first backup; over a file changed
        # since, the byte-exact restore is off.
        record.note(path, key, raw, new, saved, made=made, fresh=raw is None,
                    command=fileutil.digest(command_text(args)))
    if saved:
        out.write("backed up %s to %s\n" % (path, saved))
    return True


def uninstall(runner, project=None, dry_run=False, out=sys.stdout):
    """Take our server entry out of ``runner``'s MCP configuration: the
    bytes install found when the file is as install left it, else the
    entry (and the container install added, and the file install
    created once nothing else is in it).  The steps run last first."""
    if runner not in RUNNERS or (project and runner not in PROJECT_FILES):
        return 0
    try:
        for path, key, _, unplan in reversed(_steps(runner, project)):
            said = _uninstall_file(path, key, unplan, dry_run, out)
            if said and key == RECORD + runner:
                out.write("%s: removed the MCP server%s\n" % (runner, said))
    except (hooks.Refused, OSError) as exc:
        return _failed(exc)
    return 0


def _uninstall_file(path, key, unplan, dry_run, out):
    # One step of uninstall (``record.undo``): how it ended, in words (""
    # when untouched).
    def unplanned(raw, rec):
        text = hooks.decode_text(raw, path)
        return None if text is None else unplan(text, (rec or {}).get("made") or ())

    def empty(new):
        return not new.strip() or (not path.endswith(".toml") and json.loads(new) == {})

    _, new, saved, _ = record.undo(path, key, unplanned, dry_run=dry_run, settle=record.created_and(path, empty))
    if dry_run:
        if new is not None:
            out.write("would change %s\n%s" % (path, fileutil.would(path, new)))
        return ""
    if new is None:
        return ""
    if saved:
        out.write("backed up %s to %s\n" % (path, saved))
    return ": deleted %s (install had created it)" % path if new is fileutil.DELETE else " from %s" % path


# ----------------------------------------------------------------- doctor


def registered(runner, project=None):
    """``(path, argv or None, why doctor may not run it or None)`` of our
    server entry for ``runner``; argv None when there is none."""
    path = config_path(runner, project if runner in PROJECT_FILES else None)
    try:
        raw = fileutil.read_bytes(path)
    except (OSError, hooks.Refused):
        return path, None, None
    if raw is None:
        return path, None, None
    try:
        text = raw.decode("utf-8-sig")
        if _shape(runner) == "toml":
            servers = _toml(text, path).get("mcp_servers")
            have = servers.get(NAME) if isinstance(servers, dict) else None
            args = [have.get("command")] + list(have.get("args") or []) if isinstance(have, dict) else None
            args = args if args and all(isinstance(a, str) for a in args) else None
        else:
            servers = hooks.parse_settings(text, path).get(_key(runner))
            args = entry_argv(runner, servers.get(NAME)) if isinstance(servers, dict) else None
    except (UnicodeDecodeError, hooks.Refused):
        return path, None, None
    if args is None:
        return path, None, None
    rec = record.entry(path, RECORD + runner) or {}
    if args == argv(runner) or rec.get("command") == fileutil.digest(command_text(args)):
        return path, args, None
    return path, args, "not as skill-retrieve install wrote it"


def probe(args, timeout=20):
    """``(ok, detail)``: start ``args``, ask ``initialize`` and
    ``tools/list``, and check both tools answer."""
    import subprocess
    import time
    msgs = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                        "clientInfo": {"name": "skill-retrieve doctor", "version": "1"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]
    stdin = "".join(json.dumps(m) + "\n" for m in msgs).encode()
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(args, input=stdin, capture_output=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, "%s: %s" % (type(exc).__name__, exc)
    ms = (time.perf_counter() - t0) * 1000
    try:
        answers = [json.loads(l) for l in proc.stdout.splitlines() if l.strip()]
        tools = [t["name"] for a in answers if a.get("id") == 2 for t in a["result"]["tools"]]
    except (ValueError, KeyError, TypeError):
        tools = []
    if tools != ["search_skills", "read_skill"]:
        err = " ".join(proc.stderr.decode("utf-8", "replace").split())[-200:]
        return False, "no tools/list answer (exit %s%s)" % (proc.returncode, "; stderr: " + err if err else "")
    return True, "answers tools/list (%.0f ms, start to exit)" % ms
