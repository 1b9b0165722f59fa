"""Drive the real Hermes Agent, Claude Code and Codex for one turn, offline.

Each ``run_*`` function runs one real turn against a :class:`MockLLM` on
127.0.0.1 and returns ``(subprocess.CompletedProcess, requests)``, where
``requests`` are the mock's log entries made during that run. Assert on those
requests, not on the exit code: hook and plugin failures are only logged.

Every process is started in its own session with a minimal environment (no
inherited proxies, API keys or base URLs), bounded by a timeout, and its whole
process group is killed afterwards (SIGTERM, then SIGKILL).

Pinned versions: read from the Makefile (``VERSIONS``), the one place they
are written: Hermes Agent (``.cache/hermes-venv``), Claude Code (the pinned
and the newest checked, ``CLAUDE_VERSIONS``), Codex, Gemini CLI and Cline
(``.cache/npm-clis/NAME-VERSION/node_modules/.bin``). Build them with
``make e2e-env``; missing ones make the tests skip with a visible reason
(``require_hermes()``, ``require_claude(version)``, ``require_codex()``,
``require_gemini()``, ``require_cline()``, ``require_opencode()``).

Observed on the wire (test_infra_smoke.py, a hook that prints MARKER-123):

* Hermes 0.19.0 -> ``POST /v1/chat/completions`` (stream, OpenAI SDK 2.24.0),
  exactly one per turn, plus ``GET /api/v1/models`` probes before and after.
  ``messages == [system, user]``: ``messages[0]`` is the whole system prompt
  as one string; the ``pre_llm_call`` shell-hook context is appended to the
  last (user) message after a blank line: ``"say hi\n\nMARKER-123"``. The
  first turn after installing took ~11 s (bytecode compile), later ones ~4 s;
  stdout is just the reply. Hook stdin: ``extra.user_message`` is the prompt.
* Claude Code 2.1.197 -> ``HEAD /`` then one ``POST /v1/messages?beta=true``
  (stream). ``messages[0]`` is the user turn (a ``<system-reminder>`` text
  block, then the prompt text); ``messages[1]`` is a mid-conversation
  ``role: "system"`` message whose *string* content holds the agent-type and
  skill listings and ends with
  ``"UserPromptSubmit hook additional context: MARKER-123"``. ``--bare`` skips
  hooks (control) but still sends the request. ~1 s per run.
* Codex 0.171.0 -> one ``POST /v1/responses`` (stream), no model-list probe.
  ``input`` = [developer (base instructions), developer (skills),
  user (environment_context), user (prompt), developer (hook context)]; the
  context is verbatim: ``{"type": "message", "role": "developer", "content":
  [{"type": "input_text", "text": "MARKER-123"}]}``. Without
  ``--dangerously-bypass-hook-trust`` the hook never runs and Codex still
  exits 0 (control). ~1 s per run; stderr carries harmless warnings (no
  bubblewrap, no model metadata for ``gpt-mock``, helper aliases under /tmp).

* Claude Code 2.1.332 -> same requests; the hook context now sits inside a
  system text block (``"UserPromptSubmit hook additional context: ..."``),
  and the skill listing shows ``folder (frontmatter name)``. ~1 s per run.
* Gemini CLI 0.61.0 (``GOOGLE_GEMINI_BASE_URL`` + ``GEMINI_API_KEY``) ->
  one ``POST /v1beta/models/<model>:streamGenerateContent?alt=sse``; the
  ``BeforeAgent`` context is the last part of the user turn:
  ``{"text": "<hook_context>MARKER-123</hook_context>"}``. Hook stdin:
  ``session_id, transcript_path, cwd, hook_event_name, timestamp, prompt``.
  ~3 s per run.
* Cline 3.0.65 (``cline auth -p openai -b URL/v1``, stored as provider
  ``openai-compatible``) -> one ``POST /v1/chat/completions``. A
  ``UserPromptSubmit`` hook in ``.clinerules/hooks`` or ``~/.cline/hooks`` is
  discovered (its log says so) but never started for the task's prompt;
  ``prompt_submit`` hooks run detached, their output unread. ~4 s per run.
  Cline leaves a detached "hub" daemon behind (``--cline-hub-daemon``, port
  ``$CLINE_HUB_PORT``, default 25463); ``run_cline`` stops it.

* OpenCode 1.18.33 (``run_opencode``) -> a title request and the turn, both
  ``POST /v1/chat/completions``; plugins in ``~/.config/opencode/plugins``.
  ~6-10 s per run.
* The mock can answer a turn with a call to a tool the request offers
  (``MockLLM(tool_call=...)``): the runner runs it, and its result is in
  the next request.

Gotchas: a hook script's shebang may carry only ONE argument on Linux
(``#!/usr/bin/python3 -IS``, not ``-I -S``); a hook that exits 2 *blocks* the
prompt in Claude Code (no model request at all). To see what a runner sends a
hook on stdin, use ``write_context_hook(..., stdin_copy=PATH)``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterable, Mapping, Sequence

try:  # pytest is optional so the module can be used from a plain script too
    import pytest
except ImportError:  # pragma: no cover
    pytest = None

from .mockserver import MockLLM, body_text, is_model_request

__all__ = [
    "REPO_ROOT", "CACHE_DIR", "HERMES_VENV", "HERMES_BIN", "HERMES_PYTHON",
    "CLAUDE_BIN", "CODEX_BIN", "GEMINI_BIN", "CLINE_BIN", "VERSIONS", "CLAUDE_VERSIONS",
    "hermes_available", "claude_available", "codex_available", "gemini_available", "cline_available",
    "require_hermes", "require_claude", "require_codex", "require_gemini", "require_cline",
    "claude_bin", "claude_env", "claude_plugin", "write_gemini_settings", "run_gemini", "run_cline",
    "OPENCODE_BIN", "opencode_available", "require_opencode", "write_opencode_config", "run_opencode",
    "write_hermes_config", "run_hermes",
    "hooks_json", "write_claude_settings", "run_claude",
    "write_codex_config", "write_codex_hooks", "run_codex",
    "write_context_hook", "run_process", "body_text", "is_model_request",
]

# ------------------------------------------------------------------ locations

REPO_ROOT = Path(__file__).resolve().parents[2]
CACHE_DIR = Path(os.environ.get("SKR_E2E_CACHE", REPO_ROOT / ".cache"))
# SKR_E2E_HERMES_VENV: another Hermes release's venv (make e2e-hermes-newest).
HERMES_VENV = Path(os.environ.get("SKR_E2E_HERMES_VENV") or CACHE_DIR / "hermes-venv")
HERMES_BIN = HERMES_VENV / "bin" / "hermes"
HERMES_PYTHON = HERMES_VENV / "bin" / "python"


def pinned_versions(makefile: Path = REPO_ROOT / "Makefile") -> dict:
    """``{"CLAUDE_CODE_VERSION": "2.1.197", ...}``: the runner versions the
    Makefile pins (the one place they are written down)."""
    import re
    out = {}
    for m in re.finditer(r"^([A-Z_]+_(?:VERSION|LATEST))\s*:=\s*(\S+)", makefile.read_text(), re.M):
        out[m.group(1)] = m.group(2)
    return out


VERSIONS = pinned_versions()
NPM_CLIS = CACHE_DIR / "npm-clis"


def npm_bin(name: str, version: str, exe: str) -> Path:
    """Where ``make e2e-env`` installs CLI ``name`` at ``version``."""
    return NPM_CLIS / f"{name}-{version}" / "node_modules" / ".bin" / exe


# Claude Code runs on the pinned version and the newest one checked.
CLAUDE_VERSIONS = (VERSIONS["CLAUDE_CODE_VERSION"], VERSIONS["CLAUDE_CODE_LATEST"])
CLAUDE_BIN = npm_bin("claude-code", CLAUDE_VERSIONS[0], "claude")
CODEX_BIN = npm_bin("codex", VERSIONS["CODEX_VERSION"], "codex")
GEMINI_BIN = npm_bin("gemini-cli", VERSIONS["GEMINI_CLI_VERSION"], "gemini")
CLINE_BIN = npm_bin("cline", VERSIONS["CLINE_VERSION"], "cline")
OPENCODE_BIN = npm_bin("opencode", VERSIONS["OPENCODE_VERSION"], "opencode")

HERMES_MODEL = "mock-model"
CODEX_MODEL = "gpt-mock"

# The child processes get a minimal environment built from scratch (see
# _base_env); only PATH is taken from ours, so node and sh are found.
# Version-manager shims are left out: Claude Code 2.1.332, on a fresh HOME,
# sometimes appended a pyenv shim's stderr to the prompt its hooks receive,
# and a shim's own start-up costs 100 ms or more per call.
_BASE_PATH = os.pathsep.join(
    p for p in os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin").split(os.pathsep)
    if "/shims" not in p) or "/usr/local/bin:/usr/bin:/bin"


def _is_exe(p: Path) -> bool:
    return p.is_file() and os.access(p, os.X_OK)


def hermes_available() -> tuple[bool, str]:
    if not _is_exe(HERMES_BIN):
        return False, (f"Hermes venv missing ({HERMES_BIN} not found); "
                       "run `make e2e-env` to build it")
    return True, ""


def _npm_cli_available(bin_path: Path, name: str) -> tuple[bool, str]:
    if _is_exe(bin_path):
        if name != "Claude Code" and shutil.which("node", path=_BASE_PATH) is None:
            return False, f"node not found on PATH: {name} end-to-end tests skipped"
        return True, ""
    if shutil.which("npm") is None:
        return False, f"npm not found: the {name} end-to-end tests are skipped"
    return False, (f"{name} CLI missing ({bin_path} not found); "
                   "run `make e2e-env` to install it")


def claude_bin(version: str | None = None) -> Path:
    """The Claude Code executable of ``version`` (default: the pinned one)."""
    return npm_bin("claude-code", version or CLAUDE_VERSIONS[0], "claude")


def claude_available(version: str | None = None) -> tuple[bool, str]:
    return _npm_cli_available(claude_bin(version), "Claude Code %s" % (version or CLAUDE_VERSIONS[0]))


def gemini_available() -> tuple[bool, str]:
    return _npm_cli_available(GEMINI_BIN, "Gemini CLI")


def cline_available() -> tuple[bool, str]:
    return _npm_cli_available(CLINE_BIN, "Cline")


def opencode_available() -> tuple[bool, str]:
    return _npm_cli_available(OPENCODE_BIN, "OpenCode")


def require_opencode() -> None:
    """``pytest.skip`` when npm / the OpenCode CLI is missing."""
    _require(opencode_available)


def codex_available() -> tuple[bool, str]:
    return _npm_cli_available(CODEX_BIN, "Codex")


def _require(check) -> None:
    ok, reason = check()
    if not ok:
        if pytest is None:  # pragma: no cover
            raise RuntimeError(reason)
        pytest.skip(reason)


def require_hermes() -> None:
    """``pytest.skip`` with a visible reason when the Hermes venv is missing."""
    _require(hermes_available)


def require_claude(version: str | None = None) -> None:
    """``pytest.skip`` when npm / the Claude Code CLI (``version``) is missing."""
    _require(lambda: claude_available(version))


def require_gemini() -> None:
    """``pytest.skip`` when npm / the Gemini CLI is missing."""
    _require(gemini_available)


def require_cline() -> None:
    """``pytest.skip`` when npm / the Cline CLI is missing."""
    _require(cline_available)


def require_codex() -> None:
    """``pytest.skip`` when npm / the Codex CLI is missing."""
    _require(codex_available)


# ------------------------------------------------------------------ processes


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGTERM then SIGKILL every process left in the group ``proc`` leads
    (started with ``start_new_session=True``, so the group is ours alone)."""
    pgid = proc.pid
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            proc.poll()  # reap the leader, else its zombie keeps the group alive
            try:
                os.killpg(pgid, 0)
            except (ProcessLookupError, PermissionError):
                return
            time.sleep(0.05)


def end_process(proc: subprocess.Popen) -> None:
    """Kill what is left of the group ``proc`` leads, then ``proc`` if it
    still runs, and reap it."""
    _kill_group(proc)
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def run_process(cmd: Sequence[str], env: Mapping[str, str], cwd: str | os.PathLike,
                timeout: float) -> subprocess.CompletedProcess:
    """Run ``cmd`` with stdin from /dev/null in a new session, bounded.

    stdout/stderr go to temp files (so a stray grandchild holding the pipe
    cannot hang us); on timeout the process group is killed and the
    returncode is -9 with a note appended to stderr. Any process left in the
    group after the leader exits is killed too.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            list(cmd), stdin=subprocess.DEVNULL, stdout=out, stderr=err,
            cwd=str(cwd), env=dict(env), start_new_session=True)
        timed_out = False
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            end_process(proc)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        stderr = err.read().decode("utf-8", "replace")
    if timed_out:
        stderr += f"\n[runners] TIMEOUT after {timeout}s: {' '.join(map(str, cmd))}\n"
    return subprocess.CompletedProcess(list(cmd), proc.returncode, stdout, stderr)


def _base_env(home: Path, extra_env: Mapping[str, str] | None = None) -> dict:
    env = {
        "PATH": _BASE_PATH,
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "TMPDIR": os.environ.get("TMPDIR", "/tmp"),
        # The semantic tier starts a helper process; only its own e2e test
        # turns it on (and stops the helper).
        "SKILL_RETRIEVAL_SEMANTIC": "off",
    }
    if extra_env:
        for k, v in extra_env.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = str(v)
    return env


def _sibling(path: Path, suffix: str) -> Path:
    d = path.parent / f"{path.name}-{suffix}"
    d.mkdir(parents=True, exist_ok=True)
    return d


def write_context_hook(path: str | os.PathLike, output: str | dict,
                       stdin_copy: str | os.PathLike | None = None) -> Path:
    """Write an executable Python script that prints ``output`` (JSON-dumped if
    not a str) and exits 0. With ``stdin_copy``, it first saves its stdin there.
    Returns the path; use ``str(path)`` as the hook command (no shell needed).
    """
    import sys
    path = Path(path)
    text = output if isinstance(output, str) else json.dumps(output)
    lines = [f"#!{sys.executable} -IS", "import sys"]
    if stdin_copy is not None:
        lines.append(f"open({str(stdin_copy)!r}, 'w').write(sys.stdin.read())")
    else:
        lines.append("sys.stdin.read()")
    lines.append(f"sys.stdout.write({text!r})")
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o755)
    return path


def _requests_since(mock: MockLLM, start: int) -> list[dict]:
    return mock.since(start)


# --------------------------------------------------------------------- Hermes


def _deep_merge(base: dict, extra: Mapping) -> dict:
    for k, v in extra.items():
        if isinstance(v, Mapping) and isinstance(base.get(k), dict):
            _deep_merge(base[k], v)
        else:
            base[k] = v
    return base


def write_hermes_config(hermes_home: str | os.PathLike, port: int,
                        plugins_enabled: Iterable[str] = (),
                        shell_hooks: Iterable[str | dict] | Mapping | None = None,
                        extra: Mapping | None = None,
                        hook_timeout: int = 20) -> Path:
    """Write ``$HERMES_HOME/config.yaml`` pointing the model at the mock.

    ``shell_hooks`` is a list of ``pre_llm_call`` commands (str, or a full
    ``{command, timeout}`` dict), or a mapping ``{event: [commands]}``. When
    any hook is given, ``hooks_auto_accept: true`` is set. ``extra`` is
    deep-merged last. Also creates ``.no-bundled-skills`` and ``skills/``.
    """
    home = Path(hermes_home)
    home.mkdir(parents=True, exist_ok=True)
    (home / ".no-bundled-skills").touch()
    (home / "skills").mkdir(exist_ok=True)
    cfg: dict = {
        "model": {"provider": "custom", "base_url": f"http://127.0.0.1:{port}/v1",
                  "default": HERMES_MODEL, "api_key": "dummy-key",
                  "context_length": 131072},
        "plugins": {"enabled": list(plugins_enabled)},
        "compression": {"enabled": False},
    }
    if shell_hooks:
        if not isinstance(shell_hooks, Mapping):
            shell_hooks = {"pre_llm_call": list(shell_hooks)}
        hooks = {}
        for event, cmds in shell_hooks.items():
            hooks[event] = [c if isinstance(c, Mapping) else
                            {"command": str(c), "timeout": hook_timeout}
                            for c in cmds]
        cfg["hooks_auto_accept"] = True
        cfg["hooks"] = hooks
    if extra:
        _deep_merge(cfg, extra)
    path = home / "config.yaml"
    try:
        import yaml
        text = yaml.safe_dump(cfg, sort_keys=False, default_flow_style=False)
    except ImportError:  # JSON is valid YAML
        text = json.dumps(cfg, indent=2)
    path.write_text(text)
    return path


def run_hermes(prompt: str, hermes_home: str | os.PathLike, mock: MockLLM,
               extra_env: Mapping[str, str] | None = None, timeout: float = 180,
               *, home: str | os.PathLike | None = None,
               cwd: str | os.PathLike | None = None,
               extra_args: Sequence[str] = ()) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """One ``hermes -z PROMPT --accept-hooks`` turn against ``mock``.

    ``HERMES_HOME=hermes_home`` (config.yaml written with default settings if
    absent; ``.no-bundled-skills`` always created), ``HOME`` and the cwd are
    empty sibling folders unless given. OPENAI_BASE_URL, CUSTOM_BASE_URL,
    OPENAI_API_KEY, OPENROUTER_API_KEY are never set (minimal environment)
    unless ``extra_env`` names them; an ``extra_env`` value of None removes a
    variable. Logs (plugin import errors too) are in
    ``$HERMES_HOME/logs/agent.log``.
    """
    require_hermes()
    hermes_home = Path(hermes_home)
    hermes_home.mkdir(parents=True, exist_ok=True)
    (hermes_home / ".no-bundled-skills").touch()
    if not (hermes_home / "config.yaml").exists():
        write_hermes_config(hermes_home, mock.port)
    home = Path(home) if home is not None else _sibling(hermes_home, "home")
    cwd = Path(cwd) if cwd is not None else _sibling(hermes_home, "cwd")
    env = _base_env(home, {"HERMES_HOME": str(hermes_home), "PYTHONUNBUFFERED": "1",
                           **(extra_env or {})})
    for k in ("OPENAI_BASE_URL", "CUSTOM_BASE_URL", "OPENAI_API_KEY", "OPENROUTER_API_KEY"):
        if not (extra_env and k in extra_env):
            env.pop(k, None)
    start = len(mock.requests)
    # "--oneshot=P" keeps a prompt that starts with "-" from parsing as a flag
    zarg = ["-z", prompt] if not prompt.startswith("-") else [f"--oneshot={prompt}"]
    cp = run_process([str(HERMES_BIN), *zarg, "--accept-hooks", *extra_args],
                     env, cwd, timeout)
    return cp, _requests_since(mock, start)


# ---------------------------------------------------------------- Claude Code


def hooks_json(commands: Iterable[str | dict], event: str = "UserPromptSubmit",
               timeout: int | None = 20) -> dict:
    """The Claude-shaped hooks object (also used by Codex's hooks.json)."""
    handlers = []
    for c in commands:
        if isinstance(c, Mapping):
            handlers.append(dict(c))
        else:
            h = {"type": "command", "command": str(c)}
            if timeout is not None:
                h["timeout"] = timeout
            handlers.append(h)
    return {"hooks": {event: [{"hooks": handlers}]}}


def write_claude_settings(path: str | os.PathLike, commands: Iterable[str | dict] = (),
                          event: str = "UserPromptSubmit", extra: Mapping | None = None,
                          timeout: int | None = 20) -> Path:
    """Write a settings.json with the given UserPromptSubmit hook commands."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    settings = hooks_json(commands, event, timeout) if commands else {}
    if extra:
        _deep_merge(settings, extra)
    path.write_text(json.dumps(settings, indent=2))
    return path


def claude_env(home: Path, mock: MockLLM, extra_env: Mapping[str, str] | None = None) -> dict:
    """The environment a Claude Code run against ``mock`` gets."""
    return _base_env(Path(home), {
        "ANTHROPIC_BASE_URL": mock.url,
        "ANTHROPIC_API_KEY": "dummy",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        **(extra_env or {}),
    })


def claude_plugin(args: Sequence[str], home: str | os.PathLike, mock: MockLLM, cwd: str | os.PathLike,
                  version: str | None = None, timeout: float = 90) -> subprocess.CompletedProcess:
    """``claude plugin ARGS...`` (marketplace add, install, list) under ``home``."""
    require_claude(version)
    return run_process([str(claude_bin(version)), "plugin", *args], claude_env(Path(home), mock),
                       cwd, timeout)


def run_claude(prompt: str, settings_path: str | os.PathLike | None, mock: MockLLM,
               home: str | os.PathLike, cwd: str | os.PathLike, bare: bool = False,
               *, timeout: float = 120, output_format: str = "json",
               extra_args: Sequence[str] = (),
               extra_env: Mapping[str, str] | None = None,
               version: str | None = None,
               ) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """One ``claude -p PROMPT`` turn against ``mock`` (``env -i`` style env).

    ``settings_path`` is passed with ``--settings`` (None: no flag). ``bare``
    adds ``--bare``, which skips hooks (the control). With
    ``output_format="stream-json"``, ``--verbose --include-hook-events`` are
    added so stdout shows the hook events.
    """
    require_claude(version)
    home, cwd = Path(home), Path(cwd)
    home.mkdir(parents=True, exist_ok=True)
    cwd.mkdir(parents=True, exist_ok=True)
    env = claude_env(home, mock, extra_env)
    cmd = [str(claude_bin(version)), "-p", "--output-format", output_format]
    if output_format == "stream-json":
        cmd += ["--verbose", "--include-hook-events"]
    if settings_path is not None:
        cmd += ["--settings", str(settings_path)]
    if bare:
        cmd.append("--bare")
    cmd += [*extra_args, "--", prompt]  # the prompt is positional
    start = len(mock.requests)
    cp = run_process(cmd, env, cwd, timeout)
    return cp, _requests_since(mock, start)


# ---------------------------------------------------------------------- Codex


def write_codex_config(codex_home: str | os.PathLike, port: int,
                       extra_toml: str = "") -> Path:
    """Write ``$CODEX_HOME/config.toml`` for the mock (Responses wire API)."""
    codex_home = Path(codex_home)
    codex_home.mkdir(parents=True, exist_ok=True)
    text = f'''model_provider = "mock"
model = "{CODEX_MODEL}"

[model_providers.mock]
name = "mock"
base_url = "http://127.0.0.1:{port}/v1"
env_key = "OPENAI_API_KEY"
wire_api = "responses"

[features]
plugins = false
remote_plugin = false

[analytics]
enabled = false
'''
    if extra_toml:
        text += "\n" + extra_toml.strip() + "\n"
    path = codex_home / "config.toml"
    path.write_text(text)
    return path


def write_codex_hooks(codex_home: str | os.PathLike, commands: Iterable[str | dict],
                      event: str = "UserPromptSubmit", timeout: int | None = 20) -> Path:
    """Write ``$CODEX_HOME/hooks.json`` (same shape as Claude's hooks)."""
    codex_home = Path(codex_home)
    codex_home.mkdir(parents=True, exist_ok=True)
    path = codex_home / "hooks.json"
    path.write_text(json.dumps(hooks_json(commands, event, timeout), indent=2))
    return path


def run_codex(prompt: str, codex_home: str | os.PathLike, mock: MockLLM,
              cwd: str | os.PathLike, trust_hooks: bool = True,
              *, timeout: float = 120, home: str | os.PathLike | None = None,
              extra_args: Sequence[str] = (), extra_toml: str = "",
              extra_env: Mapping[str, str] | None = None, write_config: bool = True,
              ) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """One ``codex exec`` turn against ``mock``.

    (Re)writes ``$CODEX_HOME/config.toml`` for ``mock.port`` (unless
    ``write_config`` is False: a test that installed into it); hooks come from
    ``$CODEX_HOME/hooks.json`` (see :func:`write_codex_hooks`).
    ``trust_hooks=False`` omits ``--dangerously-bypass-hook-trust``, so the
    untrusted hooks are skipped silently (the control).
    """
    require_codex()
    codex_home, cwd = Path(codex_home), Path(cwd)
    cwd.mkdir(parents=True, exist_ok=True)
    if write_config:
        write_codex_config(codex_home, mock.port, extra_toml)
    home = Path(home) if home is not None else _sibling(codex_home, "home")
    env = _base_env(home, {"CODEX_HOME": str(codex_home), "OPENAI_API_KEY": "dummy",
                           **(extra_env or {})})
    cmd = [str(CODEX_BIN), "exec", "--skip-git-repo-check"]
    if trust_hooks:
        cmd.append("--dangerously-bypass-hook-trust")
    cmd += ["-s", "read-only", *extra_args, "--", prompt]
    start = len(mock.requests)
    cp = run_process(cmd, env, cwd, timeout)
    return cp, _requests_since(mock, start)


# ----------------------------------------------------------------- Gemini CLI

GEMINI_MODEL = "gemini-2.5-flash"


def write_gemini_settings(home: str | os.PathLike, commands: Iterable[str] = (),
                          timeout_ms: int = 20000) -> Path:
    """``~/.gemini/settings.json``: API-key auth, no folder-trust prompt, no
    telemetry, and the given ``BeforeAgent`` hook commands (timeout in ms)."""
    settings: dict = {"security": {"auth": {"selectedType": "gemini-api-key"},
                                   "folderTrust": {"enabled": False}},
                      "privacy": {"usageStatisticsEnabled": False},
                      "telemetry": {"enabled": False}}
    cmds = list(commands)
    if cmds:
        settings["hooks"] = {"BeforeAgent": [{"hooks": [
            {"type": "command", "name": "skill-retrieval", "command": c, "timeout": timeout_ms}
            for c in cmds]}]}
    path = Path(home) / ".gemini" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings, indent=2))
    return path


def run_gemini(prompt: str, home: str | os.PathLike, mock: MockLLM, cwd: str | os.PathLike,
               *, timeout: float = 120, extra_env: Mapping[str, str] | None = None,
               extra_args: Sequence[str] = (),
               ) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """One ``gemini -p PROMPT`` turn against ``mock``.

    ``GOOGLE_GEMINI_BASE_URL`` points the Gemini API client at the mock
    (``POST /v1beta/models/<model>:streamGenerateContent?alt=sse``), with
    ``GEMINI_API_KEY`` set to a dummy.  Settings come from
    ``home/.gemini/settings.json`` (see :func:`write_gemini_settings`).
    """
    require_gemini()
    home, cwd = Path(home), Path(cwd)
    cwd.mkdir(parents=True, exist_ok=True)
    if not (home / ".gemini" / "settings.json").exists():
        write_gemini_settings(home)
    env = _base_env(home, {"GEMINI_API_KEY": "dummy", "GOOGLE_GEMINI_BASE_URL": mock.url,
                           **(extra_env or {})})
    start = len(mock.requests)
    cp = run_process([str(GEMINI_BIN), "-p", prompt, "-m", GEMINI_MODEL, *extra_args], env, cwd, timeout)
    return cp, _requests_since(mock, start)


# ---------------------------------------------------------------------- Cline


def run_cline(prompt: str, home: str | os.PathLike, mock: MockLLM, cwd: str | os.PathLike,
              *, timeout: float = 120, extra_env: Mapping[str, str] | None = None,
              ) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """One ``cline --json PROMPT`` task against ``mock``.

    ``cline auth -p openai -b <mock>/v1`` first configures the
    OpenAI-compatible provider (``POST /v1/chat/completions``); hooks are
    executables named after the event in ``<cwd>/.clinerules/hooks/`` or
    ``~/.cline/hooks/``.
    """
    require_cline()
    home, cwd = Path(home), Path(cwd)
    home.mkdir(parents=True, exist_ok=True)
    cwd.mkdir(parents=True, exist_ok=True)
    # Cline starts a background "hub" daemon in a session of its own, on a
    # fixed port by default: give each run its own port, and stop the
    # daemon afterwards (a later run would otherwise reuse it, HOME and all).
    port = _free_port()
    env = _base_env(home, {"CLINE_HUB_PORT": str(port), **(extra_env or {})})
    try:
        auth = run_process([str(CLINE_BIN), "auth", "-p", "openai", "-k", "dummy", "-m", HERMES_MODEL,
                            "-b", mock.base_url_v1], env, cwd, 60)
        if auth.returncode != 0:
            return auth, []
        start = len(mock.requests)
        cp = run_process([str(CLINE_BIN), "--json", prompt], env, cwd, timeout)
        return cp, _requests_since(mock, start)
    finally:
        _stop_cline_hub(port)


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop_cline_hub(port: int) -> None:
    """SIGTERM, then SIGKILL, the Cline hub daemon serving ``port`` (found
    by its command line: it runs detached, outside our process group)."""
    def daemons():
        found = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                args = Path("/proc", pid, "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"--cline-hub-daemon" in args and b"--port" in args and \
                    args[args.index(b"--port") + 1:args.index(b"--port") + 2] == [str(port).encode()]:
                found.append(int(pid))
        return found
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = daemons()
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and daemons():
            time.sleep(0.05)


# ------------------------------------------------------------------- OpenCode


def write_opencode_config(home: str | os.PathLike, port: int) -> Path:
    """``~/.config/opencode/opencode.json``: an OpenAI-compatible provider
    ``mock`` at the mock's ``/v1`` (bundled in the binary: nothing is
    downloaded), model ``mock/mock-model``."""
    path = Path(home) / ".config" / "opencode" / "opencode.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "$schema": "https://opencode.ai/config.json",
        "provider": {"mock": {"npm": "@ai-sdk/openai-compatible", "name": "Mock",
                              "options": {"baseURL": f"http://127.0.0.1:{port}/v1", "apiKey": "dummy"},
                              "models": {HERMES_MODEL: {"name": "Mock"}}}},
        "model": f"mock/{HERMES_MODEL}", "autoupdate": False, "share": "disabled"}, indent=2))
    return path


def run_opencode(prompt: str, home: str | os.PathLike, mock: MockLLM, cwd: str | os.PathLike,
                 *, timeout: float = 120, extra_env: Mapping[str, str] | None = None,
                 ) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """One ``opencode run PROMPT`` against ``mock`` (config from
    :func:`write_opencode_config`, written when missing).

    Observed with 1.18.33: two ``POST /v1/chat/completions``, a title
    request (small model, no tools) and the turn itself, whose
    ``messages[0]`` is the system prompt with ``<available_skills>``
    (name, description, location per skill).  Plugins are the
    ``{plugin,plugins}/*.{js,ts}`` files of ``~/.config/opencode``.
    ~6 s per run (the first start unpacks its bundled runtime).
    """
    require_opencode()
    home, cwd = Path(home), Path(cwd)
    cwd.mkdir(parents=True, exist_ok=True)
    if not (home / ".config" / "opencode" / "opencode.json").exists():
        write_opencode_config(home, mock.port)
    stub = _rg_stub(home.parent / f"{home.name}-bin")
    env = _base_env(home, {"PATH": f"{stub}{os.pathsep}{_BASE_PATH}",
                           "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1",
                           "OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "OPENCODE_DISABLE_SHARE": "1",
                           **(extra_env or {})})
    start = len(mock.requests)
    cp = run_process([str(OPENCODE_BIN), "run", "--model", f"mock/{HERMES_MODEL}", prompt], env, cwd, timeout)
    return cp, _requests_since(mock, start)


def _rg_stub(folder: Path) -> Path:
    """A folder holding ``rg``: OpenCode's skill tool lists a skill's files
    with ripgrep (``rg --files``) and downloads ripgrep when none is on
    PATH; the tests run offline, so this stand-in prints the files below
    the working folder (all that tool asks of it)."""
    import sys
    folder.mkdir(parents=True, exist_ok=True)
    rg = folder / "rg"
    rg.write_text(f"#!{sys.executable} -IS\n"
                  "import os, sys\n"
                  "if '--files' not in sys.argv: sys.exit(2)\n"
                  "for d, subs, files in os.walk('.'):\n"
                  "    subs[:] = [s for s in subs if s != '.git']\n"
                  "    for f in files: print(os.path.relpath(os.path.join(d, f)))\n")
    rg.chmod(0o755)
    return folder
