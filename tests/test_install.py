"""``skill-retrieve install|uninstall RUNNER`` on temporary homes.

The real executable edits settings files under tmp_path (HOME, CODEX_HOME
and XDG_CACHE_HOME all point there).  Other people's entries and keys must
survive byte-for-byte in meaning, a second install must change nothing, a
file that is not valid JSON must never be overwritten, and every change
must leave a backup.
"""

import io
import json
import os
import shlex
import stat
import subprocess
import sys

import pytest

from conftest import BIN, REPO, backups_of, make_skill

from retriever.runners import install as inst

JSON_RUNNERS = {"claude-code": ("UserPromptSubmit", 5), "codex": ("UserPromptSubmit", 5),
                "gemini": ("BeforeAgent", 5000)}


@pytest.fixture
def home(cli_env):
    return cli_env["HOME"]


@pytest.fixture
def env_extra(tmp_path):
    return {"CODEX_HOME": tmp_path / "codex-home"}


@pytest.fixture
def run(cli, env_extra):
    def go(*args, **env):
        return cli(*args, env=dict(env_extra, **env))
    return go


def user_file(runner, home, tmp_path):
    return {"claude-code": os.path.join(home, ".claude", "settings.json"),
            "codex": os.path.join(str(tmp_path / "codex-home"), "hooks.json"),
            "gemini": os.path.join(home, ".gemini", "settings.json"),
            "cline": os.path.join(home, "Documents", "Cline", "Hooks", "UserPromptSubmit")}[runner]


def ours(data, runner):
    """Our handlers in a settings object."""
    event = JSON_RUNNERS[runner][0]
    return [h for g in data.get("hooks", {}).get(event, []) for h in g.get("hooks", [])
            if "skill-retrieve" in h.get("command", "") and (" hook %s" % runner) in h["command"]]


def warmers(data, runner):
    """Our session-start handlers in a settings object."""
    return [h for g in data.get("hooks", {}).get("SessionStart", []) for h in g.get("hooks", [])
            if "skill-retrieve" in h.get("command", "") and (" warm %s" % runner) in h["command"]]


def backups(path):
    return backups_of(path)


def ok(proc):
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    return proc


# ------------------------------------------------------------ fresh file


@pytest.mark.parametrize("runner", list(JSON_RUNNERS))
def test_fresh_install_writes_one_entry(runner, run, home, tmp_path):
    ok(run("install", runner, "--no-compact", "--no-mcp"))  # the hook alone (names-only: test_listing.py)
    path = user_file(runner, home, tmp_path)
    data = json.load(open(path))
    event, timeout = JSON_RUNNERS[runner]
    # The prompt hook, and the session-start one that warms the semantic
    # helper (issue 38), in every install mode.
    assert list(data) == ["hooks"] and list(data["hooks"]) == [event, "SessionStart"]
    (h,) = ours(data, runner)
    assert h["type"] == "command" and h["timeout"] == timeout
    argv = shlex.split(h["command"])
    assert argv[1:] == ["-I", "-S", str(BIN), "hook", runner]
    (w,) = warmers(data, runner)
    assert shlex.split(w["command"]) == argv[:4] + ["warm", runner] and w["timeout"] == timeout
    assert os.path.isabs(argv[0]) and os.access(argv[0], os.X_OK)
    assert "/shims/" not in argv[0] and not inst.is_shim(argv[0])
    assert backups(path) == []  # nothing existed to back up


@pytest.mark.parametrize("runner", list(JSON_RUNNERS))
def test_registered_command_answers_a_prompt(runner, run, home, tmp_path, cli_env):
    # The exact command written to the settings file, run the way the
    # runner runs it (through sh -c), finds a skill in the runner's folder.
    skill_dir = {"claude-code": os.path.join(home, ".claude", "skills"),
                 "codex": os.path.join(str(tmp_path / "codex-home"), "skills"),
                 "gemini": os.path.join(home, ".gemini", "skills")}[runner]
    make_skill(skill_dir, "pdf-extract", {"name": "pdf-extract", "description": "Extract text from scanned PDF files."})
    ok(run("install", runner))
    (h,) = ours(json.load(open(user_file(runner, home, tmp_path))), runner)
    env = dict(cli_env, CODEX_HOME=str(tmp_path / "codex-home"))
    stdin = json.dumps({"cwd": home, "prompt": "text from a scanned pdf", "hook_event_name": "x"})
    proc = subprocess.run(["sh", "-c", h["command"]], input=stdin.encode(), env=env, cwd=home,
                          capture_output=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == b""
    assert "**pdf-extract**" in json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]


def test_install_builds_the_index_up_front(run, home, cli_env):
    make_skill(os.path.join(home, ".claude", "skills"), "pdf-extract",
               {"name": "pdf-extract", "description": "Extract text from PDF files."})
    proc = ok(run("install", "claude-code"))
    assert "indexed 1 skill from" in proc.stdout
    cache = os.path.join(cli_env["XDG_CACHE_HOME"], "skill-retrieval")
    assert [f for f in os.listdir(cache) if f.endswith(".skr")]


# -------------------------------------------- existing file, idempotence

OTHER = {
    "model": "opus",
    "permissions": {"allow": ["Bash(ls:*)"], "deny": []},
    "hooks": {
        "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "echo other-ups", "timeout": 3}]}],
        "BeforeAgent": [{"hooks": [{"type": "command", "command": "other-gemini-hook"}]}],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "guard.sh"}]}],
    },
    "ünïcode": "kept as is ✓",
}


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


@pytest.mark.parametrize("runner", list(JSON_RUNNERS))
def test_existing_file_keeps_everything_else(runner, run, home, tmp_path):
    path = user_file(runner, home, tmp_path)
    original = json.dumps(OTHER, indent=4, ensure_ascii=False)
    write(path, original)
    ok(run("install", runner, "--no-compact", "--no-mcp"))
    data = json.load(open(path, encoding="utf-8"))
    event = JSON_RUNNERS[runner][0]
    # everything but our one new group is unchanged, in order
    assert data["hooks"][event][:len(OTHER["hooks"][event])] == OTHER["hooks"][event]
    assert len(ours(data, runner)) == 1
    data["hooks"][event] = [g for g in data["hooks"][event] if not ours({"hooks": {event: [g]}}, runner)]
    assert len(warmers(data, runner)) == 1
    del data["hooks"]["SessionStart"]  # added by install: OTHER has none
    assert data == OTHER and list(data) == list(OTHER)
    (b,) = backups(path)
    assert open(os.path.join(os.path.dirname(path), b), encoding="utf-8").read() == original


@pytest.mark.parametrize("runner", list(JSON_RUNNERS))
def test_second_install_is_a_no_op(runner, run, home, tmp_path):
    path = user_file(runner, home, tmp_path)
    write(path, json.dumps(OTHER))
    ok(run("install", runner))
    first = open(path, "rb").read()
    n_backups = len(backups(path))
    proc = ok(run("install", runner))
    assert "already installed" in proc.stdout
    assert open(path, "rb").read() == first
    assert len(backups(path)) == n_backups
    assert len(ours(json.loads(first), runner)) == 1


@pytest.mark.parametrize("runner", list(JSON_RUNNERS))
def test_uninstall_removes_only_ours(runner, run, home, tmp_path):
    path = user_file(runner, home, tmp_path)
    write(path, json.dumps(OTHER))
    ok(run("install", runner))
    installed = open(path, encoding="utf-8").read()
    ok(run("uninstall", runner))
    assert json.load(open(path, encoding="utf-8")) == OTHER
    assert installed in [open(os.path.join(os.path.dirname(path), b), encoding="utf-8").read()
                         for b in backups(path)]
    proc = ok(run("uninstall", runner))  # again: nothing to do, nothing written
    assert "nothing to remove" in proc.stdout


def test_uninstall_of_a_fresh_install_leaves_no_hooks_key(run, home, tmp_path):
    path = user_file("claude-code", home, tmp_path)
    os.makedirs(os.path.dirname(path))
    ok(run("install", "claude-code"))
    write(path, json.dumps(dict(json.load(open(path)), theme="dark")))  # the user adds a key
    ok(run("uninstall", "claude-code"))
    assert json.load(open(path)) == {"theme": "dark"}


def test_stale_entry_of_ours_is_replaced_in_place(run, home, tmp_path):
    # As an older install wrote it from a checkout since moved: only the
    # paths differ, so it is ours to update.
    path = user_file("claude-code", home, tmp_path)
    stale = {"type": "command", "command": "/old/python3 -I -S /old/bin/skill-retrieve hook claude-code",
             "timeout": 5}
    write(path, json.dumps({"hooks": {"UserPromptSubmit": [
        {"hooks": [stale, {"type": "command", "command": "echo mine"}]},
        {"hooks": [dict(stale, command="/o/py -I -S /o/retriever/__main__.py hook claude-code")]},  # a duplicate
    ]}}))
    ok(run("install", "claude-code"))
    groups = json.load(open(path))["hooks"]["UserPromptSubmit"]
    assert len(groups) == 1  # the group holding only the duplicate is gone
    assert groups[0]["hooks"][1] == {"type": "command", "command": "echo mine"}
    assert groups[0]["hooks"][0]["command"] == inst.hook_command("claude-code")


def test_other_runners_entries_are_not_ours(run, home, tmp_path):
    # a codex entry in a Claude file (odd, but not ours to remove)
    path = user_file("claude-code", home, tmp_path)
    codex_cmd = "/p -I -S /r/bin/skill-retrieve hook codex"
    write(path, json.dumps({"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": codex_cmd}]}]}}))
    ok(run("install", "claude-code"))
    ok(run("uninstall", "claude-code"))
    assert json.load(open(path))["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"] == codex_cmd


# ------------------------------------------------------------- refusals


@pytest.mark.parametrize("runner", list(JSON_RUNNERS))
@pytest.mark.parametrize("text", ['{"hooks": {', "// comment\n{}", "[1, 2]", '{"hooks": []}',
                                  '{"hooks": {"UserPromptSubmit": {}, "BeforeAgent": {}}}'])
@pytest.mark.parametrize("command", ["install", "uninstall"])
def test_unparseable_file_is_refused_and_untouched(runner, text, command, run, home, tmp_path):
    path = user_file(runner, home, tmp_path)
    write(path, text)
    proc = run(command, runner)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert proc.stderr.count("\n") == 1 and path in proc.stderr and "Traceback" not in proc.stderr
    assert open(path).read() == text
    assert backups(path) == []


@pytest.mark.parametrize("command", [["install", "cline"], ["install", "cline", "--dry-run"],
                                     ["doctor", "--runner", "cline", "--no-probe"]])
def test_a_file_where_the_cline_hooks_folder_goes_is_named(run, home, tmp_path, command):
    # ~/Documents/Cline/Hooks a file: install said "cannot update
    # .../Hooks/UserPromptSubmit: Not a directory" and doctor "cannot read"
    # that file, naming one that is not there and not the one in the way.
    hooks = os.path.dirname(user_file("cline", home, tmp_path))
    os.makedirs(os.path.dirname(hooks))
    with open(hooks, "w") as f:
        f.write("notes\n")
    proc = run(*command)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, (proc.stdout, proc.stderr)
    said = [l for l in (proc.stdout + proc.stderr).splitlines() if hooks in l]
    assert len(said) == 1 and "%s is a file, not a folder" % hooks in said[0], said
    assert open(hooks).read() == "notes\n"


def test_dry_run_writes_nothing(run, home, tmp_path):
    proc = ok(run("install", "gemini", "--dry-run"))
    assert '"BeforeAgent"' in proc.stdout and "5000" in proc.stdout
    assert not os.path.exists(user_file("gemini", home, tmp_path))


# ---------------------------------------------------------------- paths


@pytest.mark.parametrize("runner,rel", [("claude-code", ".claude/settings.json"), ("codex", ".codex/hooks.json"),
                                        ("gemini", ".gemini/settings.json"),
                                        ("cline", ".clinerules/hooks/UserPromptSubmit")])
def test_project_files(runner, rel, run, home, tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    ok(run("install", runner, "--project", proj))
    target = proj / rel
    assert target.is_file()
    assert not os.path.exists(user_file(runner, home, tmp_path))
    ok(run("uninstall", runner, "--project", proj))
    # install created the file and its folder: uninstall removes both.
    assert not target.exists() and os.listdir(proj) == []


def test_codex_home_is_respected(run, tmp_path, home):
    ok(run("install", "codex"))
    assert (tmp_path / "codex-home" / "hooks.json").is_file()
    assert not os.path.exists(os.path.join(home, ".codex", "hooks.json"))


def test_settings_paths_default_to_home():
    env = {"HOME": "/h"}
    assert inst.settings_path("claude-code", env=env) == "/h/.claude/settings.json"
    assert inst.settings_path("codex", env=env) == "/h/.codex/hooks.json"
    assert inst.settings_path("codex", env={"HOME": "/h", "CODEX_HOME": "/c"}) == "/c/hooks.json"
    assert inst.settings_path("gemini", env=env) == "/h/.gemini/settings.json"
    assert inst.settings_path("cline", env=env) == "/h/Documents/Cline/Hooks/UserPromptSubmit"


# ---------------------------------------------------------------- Cline


def test_cline_hook_file(run, home, tmp_path, cli_env):
    path = user_file("cline", home, tmp_path)
    ok(run("install", "cline"))
    assert os.stat(path).st_mode & stat.S_IXUSR
    text = open(path).read()
    assert text.startswith("#!/bin/sh\n") and inst.hook_command("cline") in text
    # it answers a Cline payload with valid JSON
    make_skill(os.path.join(home, ".cline", "skills"), "pdf-extract",
               {"name": "pdf-extract", "description": "Extract text from scanned PDF files."})
    stdin = json.dumps({"hookName": "UserPromptSubmit", "workspaceRoots": [],
                        "userPromptSubmit": {"prompt": "text from a scanned pdf"}})
    proc = subprocess.run([path], input=stdin.encode(), env=cli_env, capture_output=True, timeout=60)
    doc = json.loads(proc.stdout)
    assert proc.returncode == 0 and doc["cancel"] is False and "**pdf-extract**" in doc["contextModification"]
    proc = ok(run("install", "cline"))
    assert "already installed" in proc.stdout and backups(path) == []
    ok(run("uninstall", "cline"))
    assert not os.path.exists(path) and len(backups(path)) == 1


def test_cline_someone_elses_hook_is_left_alone(run, home, tmp_path):
    path = user_file("cline", home, tmp_path)
    write(path, "#!/bin/sh\necho '{\"cancel\": false}'\n")
    proc = run("install", "cline")
    assert proc.returncode == 1 and "not skill-retrieve's" in proc.stderr
    proc = ok(run("uninstall", "cline"))
    assert "left unchanged" in proc.stdout
    assert open(path).read() == "#!/bin/sh\necho '{\"cancel\": false}'\n" and backups(path) == []


def test_repo_cline_hook_finds_the_checkout_through_a_symlink(tmp_path, cli_env):
    link = tmp_path / "Hooks" / "UserPromptSubmit"
    link.parent.mkdir()
    link.symlink_to(REPO / "hooks" / "cline" / "UserPromptSubmit")
    proc = subprocess.run([str(link)], input=b"not json", env=cli_env, capture_output=True, timeout=60)
    assert (proc.returncode, proc.stdout) == (0, b'{"cancel": false}\n')
    copy = tmp_path / "copy"
    copy.write_bytes((REPO / "hooks" / "cline" / "UserPromptSubmit").read_bytes())
    copy.chmod(0o755)
    proc = subprocess.run([str(copy)], input=b"{}", env=cli_env, capture_output=True, timeout=60)
    assert (proc.returncode, proc.stdout) == (0, b'{"cancel": false}\n')  # no checkout next to it


# ------------------------------------------------------------ interpreter


def _script(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o755)
    return path


def test_shims_are_detected(tmp_path):
    real = os.path.realpath(sys.executable)
    assert not inst.is_shim(real)
    shim = _script(str(tmp_path / ".pyenv" / "shims" / "python3"), '#!/usr/bin/env bash\nexec pyenv exec python3 "$@"\n')
    assert inst.is_shim(shim)
    wrapper = _script(str(tmp_path / "bin" / "python3"), "#!/bin/sh\nexec python3 \"$@\"\n")
    assert inst.is_shim(wrapper)
    linked = tmp_path / "asdf" / "shims" / "python"
    linked.parent.mkdir(parents=True)
    linked.symlink_to(real)
    assert inst.is_shim(str(linked))  # a /shims/ folder, whatever it points to


def test_interpreter_skips_a_shim(tmp_path):
    shim = _script(str(tmp_path / ".pyenv" / "shims" / "python3"), "#!/bin/sh\nexec python3 \"$@\"\n")
    py = inst.interpreter({"SKILL_RETRIEVAL_PYTHON": shim})
    assert py != shim and os.path.isabs(py) and not inst.is_shim(py)
    real = os.path.realpath(sys.executable)
    assert inst.interpreter({"SKILL_RETRIEVAL_PYTHON": real}) == real


def test_install_help_and_bad_runner(run):
    proc = run("install", "--help")
    assert proc.returncode == 0 and "--project" in proc.stdout
    proc = run("install", "cursor")
    assert proc.returncode == 2 and "invalid choice" in proc.stderr


def test_hermes_takes_no_project(run, tmp_path):
    proc = run("install", "hermes", "--project", tmp_path)
    assert proc.returncode == 2 and "HERMES_HOME" in proc.stderr


def test_hermes_delegates_to_the_plugin_installer(run, tmp_path):
    hh = tmp_path / "hermes-home"
    hh.mkdir()
    (hh / "config.yaml").write_text("model:\n  default: m\n")
    proc = ok(run("install", "hermes", HERMES_HOME=hh))
    assert (hh / "plugins" / "skill-retrieval").exists() and "restart Hermes" in proc.stdout
    ok(run("uninstall", "hermes", HERMES_HOME=hh))
    assert not (hh / "plugins" / "skill-retrieval").exists()
    (hh / "config.yaml").write_text("model: [unclosed\n")
    proc = run("install", "hermes", HERMES_HOME=hh)
    assert proc.returncode == 1 and "not valid YAML" in proc.stderr and "Traceback" not in proc.stderr


# ------------------------------- user edits, dotfiles links, other writers


def _edit_ours(path, runner, tmp_path):
    # What a user does by hand: more arguments and a longer timeout.
    data = json.load(open(path, encoding="utf-8"))
    (h,) = ours(data, runner)
    h["command"] += " --root %s -k 3" % shlex.quote(str(tmp_path / "team skills"))
    h["timeout"] = h["timeout"] * 3
    write(path, json.dumps(data, indent=2))
    return open(path, "rb").read()


@pytest.mark.parametrize("runner", list(JSON_RUNNERS))
def test_reinstall_keeps_the_users_edited_entry(runner, run, home, tmp_path):
    # Issue 31.5: a second install replaced the edited entry with the
    # default and said "installed".
    path = user_file(runner, home, tmp_path)
    ok(run("install", runner))
    edited = _edit_ours(path, runner, tmp_path)
    proc = ok(run("install", runner))
    assert open(path, "rb").read() == edited
    (line,) = [l for l in proc.stdout.splitlines() if "kept your edited hook" in l]
    assert "-k 3" in line and "timeout %d" % (JSON_RUNNERS[runner][1] * 3) in line and "--force" in line
    assert "installed the" not in proc.stdout
    ok(run("install", runner, "--force"))
    (h,) = ours(json.load(open(path)), runner)
    assert h["command"] == inst.hook_command(runner) and h["timeout"] == JSON_RUNNERS[runner][1]


def test_reinstall_refuses_an_edited_entry_that_cannot_run(run, home, tmp_path):
    path = user_file("claude-code", home, tmp_path)
    entry = {"type": "command", "timeout": 5,
             "command": "/gone/python3 -I -S /gone/bin/skill-retrieve hook claude-code -k 3"}
    write(path, json.dumps({"hooks": {"UserPromptSubmit": [{"hooks": [entry]}]}}))
    before = open(path, "rb").read()
    proc = run("install", "claude-code")
    assert proc.returncode == 1 and proc.stdout == "" and proc.stderr.count("\n") == 1
    assert "/gone/python3" in proc.stderr and "-k 3" in proc.stderr and "--force" in proc.stderr
    assert open(path, "rb").read() == before and backups(path) == []


def test_reinstall_keeps_an_edited_cline_script(run, home, tmp_path):
    path = user_file("cline", home, tmp_path)
    ok(run("install", "cline"))
    text = open(path).read().replace("exec ", "export SKILL_RETRIEVAL_TOP_K=2\nexec ")
    write(path, text)
    proc = ok(run("install", "cline"))
    assert open(path).read() == text and "kept your edited hook" in proc.stdout
    ok(run("install", "cline", "--force"))
    assert open(path).read() == inst.script("cline", inst.hook_command("cline"))


@pytest.mark.parametrize("whose", ["users", "edited"])
def test_uninstall_takes_our_line_out_of_a_cline_script_the_user_wrote_or_edited(whose, run, home, tmp_path):
    # Uninstall deleted any hook file holding our command: the user's own
    # script, to which they had added the line install told them to add,
    # and our script with the user's lines in it.  Only the line of ours
    # goes; a script exactly as install wrote it is still deleted.
    path = user_file("cline", home, tmp_path)
    command = inst.hook_command("cline")
    if whose == "users":
        write(path, "#!/bin/sh\necho mine >> /tmp/log\n")
        assert run("install", "cline").returncode == 1  # "add this line to it: ..."
        write(path, "#!/bin/sh\necho mine >> /tmp/log\n%s\n" % command)
        left = "#!/bin/sh\necho mine >> /tmp/log\n"
    else:
        ok(run("install", "cline"))
        write(path, open(path).read().replace("exec ", "export SKILL_RETRIEVAL_TOP_K=2\nexec "))
        left = "#!/bin/sh\nexport SKILL_RETRIEVAL_TOP_K=2\n"
    proc = ok(run("uninstall", "cline"))
    assert open(path).read() == left, proc.stdout
    assert len(backups(path)) == 1


def test_uninstall_leaves_an_edited_opencode_plugin_and_says_so(run, home, tmp_path):
    # Our command is no line of its own in a JS plugin: the user's edit
    # stays whole, with one line saying why.
    ok(run("install", "opencode"))
    path = inst.settings_path("opencode", env={"HOME": home})
    text = open(path).read().replace("if (!prompt.trim()) return;", "if (!prompt.trim() || mine) return;")
    write(path, text)
    proc = run("uninstall", "opencode")
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and "changed since install" in proc.stderr
    assert open(path).read() == text


@pytest.mark.parametrize("runner", ["claude-code", "cline"])
def test_uninstall_keeps_a_dotfiles_link_whose_target_install_created(runner, run, home, tmp_path):
    # Issue 31.6: the settings file is a link into a dotfiles folder that
    # does not exist yet.  Uninstall deleted the link and left the hook in
    # the target.
    path = user_file(runner, home, tmp_path)
    target = tmp_path / "dotfiles" / "agent" / os.path.basename(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.symlink(target, path)
    ok(run("install", runner))
    assert os.path.islink(path) and target.is_file() and "skill-retrieve" in target.read_text()
    ok(run("uninstall", runner))
    assert os.path.islink(path) and os.readlink(path) == str(target)
    assert not (tmp_path / "dotfiles").exists()  # as before install: the link dangles again


def test_uninstall_through_a_link_to_an_existing_file(run, home, tmp_path):
    path = user_file("claude-code", home, tmp_path)
    target = tmp_path / "dotfiles" / "settings.json"
    write(str(target), json.dumps(OTHER))
    os.makedirs(os.path.dirname(path))
    os.symlink(target, path)
    ok(run("install", "claude-code"))
    ok(run("uninstall", "claude-code"))
    assert os.path.islink(path) and json.loads(target.read_text()) == OTHER


@pytest.fixture
def in_process(tmp_path, monkeypatch):
    """Installers called in process on a home under tmp_path (no index build)."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.setattr(inst, "_warm", lambda *a: None)
    return os.path.join(str(tmp_path / "home"), ".claude", "settings.json")


def _written_meanwhile(monkeypatch, module, name, path, text):
    # Another program rewrites ``path`` once, after the installer has read
    # it and before it writes (``name`` runs in between).
    real = getattr(module, name)
    done = []

    def racing(*a, **k):
        if not done:
            done.append(1)
            write(path, text)
        return real(*a, **k)
    monkeypatch.setattr(module, name, racing)


@pytest.mark.parametrize("command", ["install", "uninstall"])
def test_a_key_written_during_install_survives(command, in_process, monkeypatch):
    # Issue 31.8: an install racing another writer of settings.json lost
    # that writer's key (no re-check between read and replace).
    path = in_process
    write(path, json.dumps({"theme": "dark"}))
    if command == "uninstall":
        assert inst.install("claude-code", out=io.StringIO()) == 0
    _written_meanwhile(monkeypatch, inst, "parse_settings", path,
                       json.dumps(dict(json.load(open(path)), other=1)))
    assert getattr(inst, command)("claude-code", out=io.StringIO()) == 0
    data = json.load(open(path))
    assert data["other"] == 1 and data["theme"] == "dark"
    assert len(ours(data, "claude-code")) == (1 if command == "install" else 0)


def test_a_key_written_during_hermes_enable_survives(tmp_path, monkeypatch):
    from retriever.runners import hermes_install
    config = str(tmp_path / "config.yaml")
    write(config, "model:\n  default: m\n")
    _written_meanwhile(monkeypatch, hermes_install, "_wanted", config, "model:\n  default: m\ntheme: dark\n")
    hermes_install.set_enabled(config, True)
    import yaml
    data = yaml.safe_load(open(config))
    assert data["theme"] == "dark" and data["plugins"]["enabled"] == ["skill-retrieval"]


@pytest.mark.parametrize("runner", list(JSON_RUNNERS))
def test_uninstall_gives_back_the_very_bytes_install_found(runner, run, home, tmp_path):
    # Install rewrites the file (two-space indent); uninstall, with nothing
    # changed since, puts back the user's own layout byte for byte.
    path = user_file(runner, home, tmp_path)
    original = "\ufeff{\n    \"model\":   \"opus\",\n\t\"hooks\": {}, \"z\": [1,2]\n}"
    write(path, original)
    ok(run("install", runner))
    assert open(path, "rb").read() != original.encode()
    ok(run("uninstall", runner))
    assert open(path, "rb").read() == original.encode("utf-8")


@pytest.mark.parametrize("before", [[{"hooks": [{"type": "command", "command": "echo hello"}]}], []])
@pytest.mark.parametrize("runner", list(JSON_RUNNERS))
def test_uninstall_takes_out_exactly_the_session_start_hook(runner, before, run, home, tmp_path):
    # Install adds one session-start hook (``warm``) beside the user's;
    # a second install adds none; uninstall, after a change that rules out
    # the byte-exact restore, takes out ours alone and keeps the list that
    # was there, even emptied.
    path = user_file(runner, home, tmp_path)
    theirs = {"hooks": {"SessionStart": before}, "x": 1}
    write(path, json.dumps(theirs))
    ok(run("install", runner, "--no-compact"))
    data = json.load(open(path))
    assert data["hooks"]["SessionStart"][:len(before)] == before and len(warmers(data, runner)) == 1
    ok(run("install", runner, "--no-compact"))
    assert json.load(open(path)) == data
    write(path, json.dumps(dict(data, y=2)))
    ok(run("uninstall", runner))
    assert json.load(open(path)) == dict(theirs, y=2)


def test_uninstall_keeps_the_empty_lists_that_were_there(run, home, tmp_path):
    path = user_file("claude-code", home, tmp_path)
    write(path, json.dumps({"hooks": {"UserPromptSubmit": []}, "x": 1}))
    ok(run("install", "claude-code"))
    write(path, json.dumps(dict(json.load(open(path)), y=2)))  # the user adds a key meanwhile
    ok(run("uninstall", "claude-code"))
    assert json.load(open(path)) == {"hooks": {"UserPromptSubmit": []}, "x": 1, "y": 2}


@pytest.mark.parametrize("special", ["fifo", "folder"])
@pytest.mark.parametrize("command", ["install", "uninstall"])
def test_a_fifo_or_folder_at_the_settings_path_is_refused_in_one_line(special, command, run, home, tmp_path):
    # Opening a FIFO for reading waits for a writer: the installer must
    # not hang on one (cli's timeout turns a hang into a failure).
    path = user_file("claude-code", home, tmp_path)
    os.makedirs(os.path.dirname(path))
    os.mkfifo(path) if special == "fifo" else os.mkdir(path)
    proc = run(command, "claude-code")
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert ("a FIFO" if special == "fifo" else "a folder") in proc.stderr and path in proc.stderr


def test_a_fifo_as_hermes_config_is_refused(run, tmp_path):
    hh = tmp_path / "hermes-home"
    hh.mkdir()
    os.mkfifo(hh / "config.yaml")
    proc = run("install", "hermes", HERMES_HOME=hh)
    assert proc.returncode == 1 and "a FIFO" in proc.stderr and proc.stderr.count("\n") == 1


def test_hermes_uninstall_removes_the_config_install_created(run, tmp_path):
    hh = tmp_path / "hermes-home"
    hh.mkdir()
    ok(run("install", "hermes", HERMES_HOME=hh))
    assert (hh / "config.yaml").is_file()
    ok(run("uninstall", "hermes", HERMES_HOME=hh))
    # plugins/ too: install made it (the Hermes home was there before).
    assert os.listdir(hh) == []


def test_hermes_leaves_a_users_own_link_at_the_plugin_path(run, tmp_path):
    hh = tmp_path / "hermes-home"
    (hh / "plugins").mkdir(parents=True)
    (hh / "config.yaml").write_text("model:\n  default: m\n")
    mine = tmp_path / "my-fork"
    mine.mkdir()
    (mine / "plugin.yaml").write_text("name: my-fork\n")
    (hh / "plugins" / "skill-retrieval").symlink_to(mine)
    proc = run("install", "hermes", HERMES_HOME=hh)
    assert proc.returncode == 1 and "my-fork" in proc.stderr and proc.stderr.count("\n") == 1
    ok(run("uninstall", "hermes", HERMES_HOME=hh))
    assert os.readlink(hh / "plugins" / "skill-retrieval") == str(mine)


@pytest.mark.parametrize("special", ["fifo", "folder"])
def test_an_unreadable_backup_makes_uninstall_take_the_hook_out_instead(special, run, home, tmp_path):
    # The backup installed.json names cannot be read (as root, a FIFO or a
    # folder stands in for a file without read permission): uninstall
    # stopped with an error; now it edits the file, as with no backup.
    from retriever.runners import record
    path = user_file("claude-code", home, tmp_path)
    write(path, json.dumps({"model": "opus"}))
    ok(run("install", "claude-code", "--no-compact"))
    saved = record.entry(path, "claude-code")["backup"]
    os.unlink(saved)
    os.mkfifo(saved) if special == "fifo" else os.mkdir(saved)
    for dry in (True, False):
        proc = ok(run("uninstall", "claude-code", *(["--dry-run"] if dry else [])))
        (line,) = [ln for ln in proc.stdout.splitlines() if "cannot be read" in ln]
        assert saved + "," in line and "taken out" in line
    assert json.load(open(path)) == {"model": "opus"}


def test_a_hook_taken_out_by_hand_then_reinstalled_still_restores_exactly(run, home, tmp_path):
    path = user_file("claude-code", home, tmp_path)
    write(path, json.dumps({"model": "opus"}))
    ok(run("install", "claude-code"))
    mine = '{\n    "model": "sonnet"\n}'
    write(path, mine)  # the user edits the file and drops our entry by hand
    ok(run("install", "claude-code"))
    ok(run("uninstall", "claude-code"))
    assert open(path).read() == mine


@pytest.mark.parametrize("command", ["install", "uninstall"])
def test_hermes_waits_for_the_installers_lock_before_touching_anything(command, tmp_path, monkeypatch):
    # Hermes' plugin link and the record of the folders made for it were
    # placed (or removed) before the lock was asked for: only config.yaml's
    # edit took it.  With another install holding the lock, install left the
    # plugin linked but not enabled, and wrote created.json under the other
    # install's feet.
    import threading
    from retriever import fileutil
    from retriever.runners import hermes_install, record
    hh = tmp_path / "hermes-home"
    if command == "uninstall":
        hermes_install.install(str(hh))
    before = (os.path.lexists(hh / "plugins" / "skill-retrieval"), record.load(),
              os.path.exists(hh / "config.yaml") and open(hh / "config.yaml", "rb").read())
    monkeypatch.setattr(fileutil, "LOCK_WAIT", 0.3)
    held, release = threading.Event(), threading.Event()

    def hold():
        with fileutil.install_lock():
            held.set()
            release.wait(30)
    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(30)
    try:
        with pytest.raises(fileutil.Busy):
            getattr(hermes_install, command)(str(hh))
    finally:
        release.set()
        holder.join()
    assert (os.path.lexists(hh / "plugins" / "skill-retrieval"), record.load(),
            os.path.exists(hh / "config.yaml") and open(hh / "config.yaml", "rb").read()) == before


def test_each_runners_install_record_names_its_fields():
    # One meaning per field, whatever the kind: a JSON runner has no
    # template, a script runner no handler keys, Hermes no file of ours.
    from retriever.runners.registry import RUNNERS
    for name, rec in RUNNERS.items():
        how = rec["install"]
        assert set(how) == {"kind", "user", "project", "keys", "template", "mode"}, name
        assert how["kind"] in ("json", "script", "hermes"), name
        if how["kind"] == "hermes":
            assert how["user"] is None and how["project"] is None, name
            continue
        assert set(how["user"]) == {"env", "folder", "name"}, name
        assert how["user"]["folder"].startswith("~/") and how["user"]["name"] and how["project"], name
        if how["kind"] == "json":
            assert how["template"] is None and how["mode"] == 0o644, name
        else:
            assert how["template"] and how["keys"] == {} and how["mode"] in (0o644, 0o755), name
