"""The user's files keep what the user wrote; nothing of ours piles up
(issue 36, issue 41 item 7).

``roots add|remove`` edit only the lines they change; ``sync`` and the
installers add only what they record as theirs and never bring back what
the user removed; backups hold only bytes the user had, one line per file
changed, and are capped.  Everything runs the real executable in a temp
HOME (``cli``).
"""

import json
import os
import signal
from pathlib import Path

from conftest import assert_clean, backups_of, make_skill


def _roots_file(cli_env):
    return Path(cli_env["HOME"]) / ".config" / "skill-retrieval" / "roots"


# ------------------------------------------------------------------- roots


def test_roots_add_and_remove_keep_the_users_lines_byte_for_byte(cli, cli_env):
    home = Path(cli_env["HOME"])
    for name in ("mine", "work", "old", "new"):
        make_skill(home / name, "s-" + name, {"name": "s-" + name, "description": "A skill " + name})
    f = _roots_file(cli_env)
    f.parent.mkdir(parents=True)
    mine = (b"# my skill folders\n"
            b"~/mine\n"
            b"\n"
            b"#~/old   (off for now, back after the release)\n"
            b"  ~/work  \n"
            b"# caf\xe9 (not UTF-8)")  # and no newline at the end
    f.write_bytes(mine)
    assert_clean(cli("roots", "add", str(home / "new")))
    assert f.read_bytes() == mine + b"\n" + str(home / "new").encode() + b"\n"
    assert_clean(cli("roots", "remove", "~/work"))
    assert f.read_bytes() == mine.replace(b"  ~/work  \n", b"") + b"\n" + str(home / "new").encode() + b"\n"
    assert_clean(cli("roots", "remove", str(home / "new")))
    assert f.read_bytes() == mine.replace(b"  ~/work  \n", b"") + b"\n"
    # What the file names is what a query reads.
    listed = cli("roots").stdout
    assert str(home / "mine") in listed and str(home / "old") not in listed


def test_roots_add_to_no_file_writes_the_header_and_the_folder(cli, cli_env):
    home = Path(cli_env["HOME"])
    make_skill(home / "mine", "s", {"name": "s", "description": "A skill"})
    assert_clean(cli("roots", "add", "~/mine"))
    text = _roots_file(cli_env).read_text()
    assert text.startswith("# ") and text.endswith("\n%s\n" % (home / "mine"))
    again = cli("roots", "add", "~/mine")
    assert "already there" in again.stdout and _roots_file(cli_env).read_text() == text


def test_roots_add_to_a_read_only_file_says_so_in_one_line(cli, cli_env):
    home = Path(cli_env["HOME"])
    make_skill(home / "mine", "s", {"name": "s", "description": "A skill"})
    f = _roots_file(cli_env)
    f.parent.mkdir(parents=True)
    f.write_text("# mine, read-only on purpose\n")
    f.chmod(0o444)
    proc = cli("roots", "add", "~/mine")
    assert_clean(proc, 1)
    assert proc.stderr.startswith("skill-retrieve: roots add: ") and proc.stderr.count("\n") == 1
    assert f.read_text() == "# mine, read-only on purpose\n"


# ------------------------------------------------- names-only entries (sync)


def _claude_settings(cli_env):
    return Path(cli_env["HOME"]) / ".claude" / "settings.json"


def _overrides(cli_env):
    return json.loads(_claude_settings(cli_env).read_text()).get("skillOverrides")


def _drop_override(cli_env, name):
    f = _claude_settings(cli_env)
    data = json.loads(f.read_text())
    del data["skillOverrides"][name]
    f.write_text(json.dumps(data, indent=2))


def test_sync_and_reinstall_never_bring_back_an_entry_the_user_removed(cli, cli_env, tmp_path):
    skills = Path(cli_env["HOME"]) / ".claude" / "skills"
    for n in ("alpha", "beta"):
        make_skill(skills, n, {"name": n, "description": "Does %s." % n})
    assert_clean(cli("install", "claude-code"))
    assert _overrides(cli_env) == {"alpha": "name-only", "beta": "name-only"}
    _drop_override(cli_env, "beta")  # keep beta's description in the listing
    payload = json.dumps({"cwd": str(tmp_path)})
    assert_clean(cli("sync", "claude-code", input=payload))
    assert _overrides(cli_env) == {"alpha": "name-only"}
    # A skill that appears later is still covered, and once only.
    make_skill(skills, "late", {"name": "late", "description": "Arrives later."})
    assert_clean(cli("sync", "claude-code", input=payload))
    assert _overrides(cli_env) == {"alpha": "name-only", "late": "name-only"}
    _drop_override(cli_env, "late")
    assert_clean(cli("sync", "claude-code", input=payload))
    # An install run again adds nothing the user took out either.
    assert_clean(cli("install", "claude-code"))
    assert _overrides(cli_env) == {"alpha": "name-only"}
    # The log names what sync added: "late", once, and never "beta".
    logged = (Path(cli_env["XDG_CACHE_HOME"]) / "skill-retrieval" / "skill-retrieval.log").read_text()
    assert logged.count("new skills: late") == 1 and "beta" not in logged


# ----------------------------------------------------------------- backups


def _backed_up(out, path):
    return [line for line in out.splitlines() if line.startswith("backed up %s " % path)]


def test_install_backs_up_no_file_that_was_not_there(cli, cli_env):
    # Issue 41 item 7: install "backed up" a settings file that did not
    # exist: its second half backed up what the first half had just written.
    make_skill(Path(cli_env["HOME"]) / ".claude" / "skills", "alpha", {"name": "alpha", "description": "A."})
    settings = _claude_settings(cli_env)
    proc = cli("install", "claude-code")
    assert_clean(proc)
    assert _backed_up(proc.stdout, settings) == [] and backups_of(settings) == []
    proc = cli("uninstall", "claude-code")
    assert_clean(proc)
    assert not settings.exists()
    assert len(_backed_up(proc.stdout, settings)) <= 1 and "None" not in proc.stdout


def test_one_backup_line_per_file_holding_the_users_bytes(cli, cli_env):
    make_skill(Path(cli_env["HOME"]) / ".claude" / "skills", "alpha", {"name": "alpha", "description": "A."})
    settings = _claude_settings(cli_env)
    mine = b'{\n  "theme": "dark"\n}\n'
    settings.write_bytes(mine)
    proc = cli("install", "claude-code")
    assert_clean(proc)
    (line,) = _backed_up(proc.stdout, settings)
    assert [Path(b).read_bytes() for b in backups_of(settings)] == [mine]
    installed = settings.read_bytes()
    proc = cli("uninstall", "claude-code")
    assert_clean(proc)
    (line,) = _backed_up(proc.stdout, settings)  # one, though both halves changed it
    assert Path(line.split(" to ", 1)[1]).read_bytes() == installed
    assert settings.read_bytes() == mine


def test_backups_are_capped_but_the_one_uninstall_needs_is_kept(cli, cli_env):
    from retriever import fileutil
    from retriever.runners import record
    make_skill(Path(cli_env["HOME"]) / ".claude" / "skills", "alpha", {"name": "alpha", "description": "A."})
    settings = _claude_settings(cli_env)
    for n in range(4):  # install and uninstall, over and over: each backs up
        settings.write_text(json.dumps({"n": n}))
        assert_clean(cli("install", "claude-code"))
        assert_clean(cli("uninstall", "claude-code"))
    assert len(backups_of(settings)) == fileutil.BACKUPS_KEPT
    mine = b'{"theme": "dark"}\n'
    settings.write_bytes(mine)
    assert_clean(cli("install", "claude-code"))
    last = [fileutil.backup(str(settings), b"%d" % n, record.needed_backups()) for n in range(8)][-1]
    kept = backups_of(settings)
    assert len(kept) == fileutil.BACKUPS_KEPT + 1 and last in kept
    assert mine in [Path(b).read_bytes() for b in kept]  # install's record names it
    assert_clean(cli("uninstall", "claude-code"))
    assert settings.read_bytes() == mine  # restored from it, byte for byte


# ------------------------------------------------- killed writers leave nothing


def _killed_before_rename(module, write):
    """Run ``write()`` in a child process that is killed (SIGKILL) at the
    rename of its temp file: the moment a temp file is left behind."""
    pid = os.fork()
    if pid == 0:
        try:
            def die(*_a, **_k):
                os.kill(os.getpid(), signal.SIGKILL)
            for name in ("rename", "replace"):
                if hasattr(module, name):
                    setattr(module, name, die)
            write()
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL


def _ours(folder, name):
    return sorted(f for f in os.listdir(folder) if f.startswith(name))


def test_session_memory_sweeps_the_temp_files_of_killed_writers(tmp_path):
    import posix
    from retriever import session
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    path = str(folder / "sessions.json")
    for n in range(3):  # each save sweeps what the one killed before it left
        _killed_before_rename(posix, lambda: session.save(path, {"k%d" % n: {"t": 1.0}}))
        assert len(_ours(folder, "sessions.json.tmp-")) == 1
    session.save(path, {"k": {"t": 2.0}})
    assert _ours(folder, "sessions.json") == ["sessions.json"]
    assert json.loads(Path(path).read_text()) == {"v": 1, "sessions": {"k": {"t": 2.0}}}


def test_an_installers_write_sweeps_the_temp_files_of_killed_writers(tmp_path):
    from retriever import fileutil
    folder = tmp_path / "claude"
    folder.mkdir(mode=0o700)
    path = str(folder / "settings.json")
    _killed_before_rename(os, lambda: fileutil.write_atomic(path, "{}\n"))
    assert len(_ours(folder, "settings.json.tmp-")) == 1 and not os.path.exists(path)
    fileutil.write_atomic(path, '{"a": 1}\n')
    assert _ours(folder, "settings.json") == ["settings.json"]
    # Another user's file, or a live writer's, is never touched.
    live = folder / ("settings.json.tmp-%d-1" % os.getpid())
    live.write_text("x")
    fileutil.write_atomic(path, '{"a": 2}\n')
    assert live.exists()


def test_a_backup_killed_midway_is_never_a_truncated_backup(tmp_path):
    from retriever import fileutil
    path = tmp_path / "settings.json"
    data = b"{" + b" " * (1 << 20) + b"}"
    pid = os.fork()
    if pid == 0:
        try:
            real = os.fsync

            def die(fd):  # the bytes are written, not yet in place
                os.kill(os.getpid(), signal.SIGKILL)
                real(fd)
            os.fsync = die
            fileutil.backup(str(path), data)
        finally:
            os._exit(1)
    os.waitpid(pid, 0)
    folder = Path(fileutil.state_dir()) / "backups"
    assert backups_of(path) == []  # nothing under a backup's name
    done = fileutil.backup(str(path), data)
    assert backups_of(path) == [done] and Path(done).read_bytes() == data
    assert sorted(os.listdir(folder)) == [os.path.basename(done)]  # the temp file swept


def test_status_calls_a_removed_entry_the_users_choice_not_a_new_skill(cli, cli_env, tmp_path):
    from retriever.runners import listing
    skills = Path(cli_env["HOME"]) / ".claude" / "skills"
    for n in ("alpha", "beta"):
        make_skill(skills, n, {"name": n, "description": "Does %s." % n})
    assert_clean(cli("install", "claude-code"))
    _drop_override(cli_env, "beta")
    make_skill(skills, "late", {"name": "late", "description": "Arrives later."})
    full = dict(listing.status("claude-code", str(tmp_path))["full"])
    assert "removed by hand" in full["beta"] and "added since" in full["late"]


def test_codex_reinstall_leaves_out_the_warning_switch_the_user_removed(cli, tmp_path):
    codex = tmp_path / "codex-home"
    env = {"CODEX_HOME": codex}
    make_skill(codex / "skills", "alpha", {"name": "alpha", "description": "A."})
    config = codex / "config.toml"
    config.write_text('model = "x"\n')
    assert_clean(cli("install", "codex", env=env))
    text = config.read_text()
    assert "suppress_unstable_features_warning = true" in text
    # The user wants Codex's warning back, and removes our switch for it.
    config.write_text(text.replace("suppress_unstable_features_warning = true\n", ""))
    mine = config.read_text()
    assert_clean(cli("install", "codex", env=env))
    assert config.read_text() == mine
    # The names-only line itself is what install is for: taken out, it is set again.
    config.write_text(mine.replace("omit_skill_descriptions = true\n", ""))
    assert_clean(cli("install", "codex", env=env))
    assert "omit_skill_descriptions = true" in config.read_text()
    assert "suppress_unstable" not in config.read_text()
    assert_clean(cli("uninstall", "codex", env=env))
    assert config.read_text() == 'model = "x"\n'
