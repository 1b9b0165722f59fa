"""Hostile files under the read-only commands: doctor, tokens --runner,
roots list, explain.

Every runner's file these commands read (and our own records in the state
folder) is replaced, in a home where every runner is installed, by each
hostile form: a FIFO, a folder, non-UTF-8 bytes, invalid JSON/TOML/YAML,
a value of the wrong type, a dangling symlink, a symlink loop, mode 000.
Each command must finish in time (a FIFO is never opened for reading),
exit with its documented code, print no traceback, and name the file in
one line where it reports a problem.  Real files, the real executable.
"""

import os
import re
import shutil

import pytest

from skillret_helpers import base_env, make_skill, run_cli

TIMEOUT = 8  # a hang would be a FIFO opened for reading: each run takes ~0.1 s

# name: (path under the test folder, commands that read it, syntax of its content)
FILES = {
    "claude settings.json": ("home/.claude/settings.json", ("doctor", "tokens claude-code"), "json"),
    "claude installed_plugins.json": ("home/.claude/plugins/installed_plugins.json",
                                      ("doctor", "tokens claude-code"), "json"),
    "codex hooks.json": ("home/.codex/hooks.json", ("doctor",), "json"),
    "codex config.toml": ("home/.codex/config.toml", ("doctor", "tokens codex"), "toml"),
    "gemini settings.json": ("home/.gemini/settings.json", ("doctor",), "json"),
    "gemini .env": ("home/.gemini/.env", ("doctor", "tokens gemini"), "text"),
    "gemini extension-enablement.json": ("home/.gemini/extensions/extension-enablement.json",
                                         ("doctor", "tokens gemini"), "json"),
    "opencode hook plugin": ("home/.config/opencode/plugins/skill-retrieval.js", ("doctor",), "text"),
    "opencode names-only plugin": ("home/.config/opencode/plugins/skill-retrieval-listing.js",
                                   ("doctor", "tokens opencode"), "text"),
    "cline hook": ("home/Documents/Cline/Hooks/UserPromptSubmit", ("doctor",), "text"),
    "cline hooks folder": ("home/Documents/Cline/Hooks", ("doctor",), "folder"),
    "cline plugin": ("home/.cline/plugins/skill-retrieval.js", ("doctor",), "text"),
    "hermes config.yaml": ("home/.hermes/config.yaml", ("doctor", "explain"), "yaml"),
    "listing.json": ("xdg-state/skill-retrieval/listing.json", ("doctor",), "json"),
    "created.json": ("xdg-state/skill-retrieval/created.json", ("doctor",), "json"),
    "installed.json": ("xdg-state/skill-retrieval/installed.json", ("doctor",), "json"),
    "roots file": ("home/.config/skill-retrieval/roots", ("roots list", "explain", "doctor"), "text"),
}

FORMS = ("fifo", "folder", "non-utf8", "invalid", "list", "string", "wrong-value", "dangling", "loop", "mode-000")

INVALID = {"json": b'{"hooks": [', "toml": b"[features\nomit = ", "yaml": b"plugins: [unclosed\n  - a: {",
           "text": b"{[ not what this file holds", "folder": b"a file where a folder goes\n"}
WRONG_VALUE = {
    "json": b'{"hooks": "x", "skillOverrides": [1], "skillListingMaxDescChars": "x", '
            b'"skillListingBudgetFraction": [1], "enabledPlugins": "x", "plugins": "x"}\n',
    "toml": b'features = "x"\nsuppress_unstable_features_warning = [1]\n',
    "yaml": b"plugins: x\nskills: [1]\nhooks: x\n",
    "text": b"GEMINI_PROMPT_AGENTSKILLS=[1]\n",
    "folder": b"#!/bin/sh\n",
}


def _named(syntax, form):
    """True when the command must name the file: it is there and cannot
    be what it should be.  A dangling link is no file; text files (a
    .env, a plugin, the roots file) take any UTF-8 text, and a plugin or
    hook script any bytes (it may be the user's own program).  Mode 000
    is a read error (run as non-root only)."""
    if form in ("dangling", "wrong-value"):
        return False  # a wrong value inside is the runner's to ignore; these must only not crash
    if syntax == "folder":
        return form != "folder"  # any file there (a FIFO, a link loop) is in the way of what goes in it
    if syntax == "text":
        return form in ("fifo", "folder", "loop")
    return True


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A home where every runner is installed (hook and names-only), with
    one skill each runner reads; copied for each case."""
    base = tmp_path_factory.mktemp("installed")
    env = _env(base)
    for root in (".claude/skills", ".agents/skills"):
        make_skill(base / "home" / root, "demo", {"name": "demo", "description": "demo skill for the tests"})
    (base / "cwd").mkdir()
    for runner in ("claude-code", "codex", "gemini", "opencode", "cline", "hermes"):
        proc = run_cli(["install", runner], env, cwd=base / "cwd", timeout=60)
        assert proc.returncode == 0, proc.stderr
    # Files no install writes, but the read-only commands read.
    for rel in ("home/.claude/plugins/installed_plugins.json", "home/.gemini/extensions/extension-enablement.json"):
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_text("{}\n")
    (base / "home/.config/skill-retrieval").mkdir(parents=True)
    (base / "home/.config/skill-retrieval/roots").write_text("# none\n")
    return base


def _env(base):
    env = base_env(base)
    env.update(HERMES_HOME=str(base / "home" / ".hermes"), CODEX_HOME=str(base / "home" / ".codex"),
               XDG_CONFIG_HOME=str(base / "home" / ".config"))
    return env


def _place(path, form, syntax):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if form == "fifo":
        os.mkfifo(path)
    elif form == "folder":
        os.mkdir(path)
    elif form == "dangling":
        os.symlink(path + ".gone", path)
    elif form == "loop":
        os.symlink(os.path.basename(path), path)
    else:
        data = {"non-utf8": b"\xff\xfe bad \xc3\x28\n", "invalid": INVALID[syntax],
                "list": b"[1, 2]\n" if syntax != "yaml" else b"- a\n- b\n",
                "string": b'"text"\n' if syntax != "yaml" else b"just a string\n",
                "wrong-value": WRONG_VALUE[syntax], "mode-000": b"{}\n"}[form]
        with open(path, "wb") as f:
            f.write(data)
        if form == "mode-000":
            os.chmod(path, 0)


ARGV = {"doctor": ["doctor", "--no-probe"], "roots list": ["roots", "list"], "explain": ["explain", "demo"]}


def _argv(command):
    if command.startswith("tokens "):
        return ["tokens", "--runner", command.split()[1]]
    return ARGV[command]


CASES = [pytest.param(name, form, id="%s-%s" % (name.replace(" ", "_"), form))
         for name in FILES for form in FORMS]


@pytest.mark.parametrize("name,form", CASES)
def test_read_only_commands_survive_a_hostile_file(installed, tmp_path, name, form):
    if form == "mode-000" and os.geteuid() == 0:
        pytest.skip("root reads a file of mode 000")
    rel, commands, syntax = FILES[name]
    case = tmp_path / "case"
    shutil.copytree(installed, case, symlinks=True)
    path = str(case / rel)
    _place(path, form, syntax)
    env = _env(case)
    try:
        for command in commands:
            proc = run_cli(_argv(command), env, cwd=case / "cwd", timeout=TIMEOUT)
            text = proc.stdout + proc.stderr
            assert "Traceback" not in text, (command, text)
            assert "error: " not in proc.stderr, (command, proc.stderr)  # the catch-all's "error: TypeError: ..."
            if command == "doctor":
                # 1 exactly when a finding stops retrieval (documented in doctor's help).
                assert proc.returncode == (1 if "\n  ERROR " in proc.stdout else 0), (command, text)
                if _named(syntax, form):
                    # The path itself, not a file below it: "cannot read
                    # Hooks/UserPromptSubmit (Not a directory)" hid the
                    # file in the way.
                    lines = [l for l in text.splitlines() if re.search(re.escape(path) + "(?!/)", l)]
                    assert lines, (command, text)
            elif command.startswith("tokens "):
                assert proc.returncode == 0, (command, text)
            else:
                assert proc.returncode == 0, (command, text)
                if command == "roots list" and _named(syntax, form):
                    assert [l for l in proc.stderr.splitlines() if path in l], text
    finally:
        if form == "mode-000":
            os.chmod(path, 0o600)


@pytest.mark.parametrize("form", ("fifo", "folder", "non-utf8", "loop"))
def test_status_reports_a_hostile_cline_plugin_instead_of_raising(tmp_path, form):
    # listing.status read Cline's plugin outside its try: a FIFO, a folder,
    # a link loop or non-UTF-8 bytes there raised (doctor's catch-all then
    # printed the exception's class name).
    from retriever.runners import listing
    path = listing.target("cline")
    _place(path, form, "text")
    st = listing.status("cline", str(tmp_path))
    assert st["state"] == "broken" and path in st["note"] and "\n" not in st["note"]
