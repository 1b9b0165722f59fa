"""The one record of what install changed (``retriever.runners.record``)
and the one refusal every installer raises (``fileutil.Refused``)."""

import pytest

from retriever import fileutil


def test_every_refusal_is_one_class_with_a_hint():
    # Six classes in three families meant one thing, "left unchanged, and
    # here is why", and callers caught them as a tuple.
    from retriever.runners import changes, hermes_install, install
    for cls in (fileutil.ReadOnly, fileutil.NotAFile, fileutil.InTheWay, fileutil.Unreadable, fileutil.Busy,
                install.Edited, changes.NoReader, hermes_install.HermesInstallError):
        assert issubclass(cls, fileutil.Refused), cls
    assert install.Refused is fileutil.Refused
    exc = fileutil.Refused("x.json is read-only; left unchanged", hint="make it writable")
    assert str(exc) == "x.json is read-only; left unchanged - make it writable"
    assert exc.hint == "make it writable"
    with pytest.raises(fileutil.Refused) as err:
        raise fileutil.ReadOnly("f is read-only (mode 444); left unchanged - make it writable (chmod u+w) to change it")
    assert err.value.hint == "make it writable (chmod u+w) to change it"


# ------------------------------------------------------------ migration


def _state(name, text):
    import os
    os.makedirs(fileutil.state_dir(), exist_ok=True)
    with open(os.path.join(fileutil.state_dir(), name), "w") as f:
        f.write(text)


def _old_records(home):
    # The three records of an older version, as it wrote them.
    import json
    settings, toml = str(home / ".claude" / "settings.json"), str(home / ".codex" / "config.toml")
    _state("created.json", json.dumps({toml: [str(home / ".codex")]}))
    _state("installed.json", json.dumps({settings: {"claude-code": {"after": "ab", "backup": None, "made": []}}}))
    _state("listing.json", json.dumps({"codex " + toml: {"header": True, "lines": ["features"], "newline": False}}))
    return settings, toml


def test_the_older_records_read_as_one_and_move_on_the_first_write(tmp_path):
    import os
    from retriever.runners import record
    settings, toml = _old_records(tmp_path / "home")
    assert record.entry(settings, "claude-code")["after"] == "ab"
    assert record.entry(toml, "listing codex")["lines"] == ["features"]
    assert record.created_folders(toml) == [str(tmp_path / "home" / ".codex")]
    state = fileutil.state_dir()
    assert sorted(os.listdir(state)) == ["created.json", "installed.json", "listing.json"]  # reading writes nothing
    with fileutil.install_lock():
        record.set_entry(settings, "mcp claude-code allow", {"after": "cd"})
    assert sorted(n for n in os.listdir(state) if n.endswith(".json")) == ["changes.json"]
    assert record.entry(settings, "claude-code")["after"] == "ab"  # migrated, then the new entry beside it
    assert record.entry(settings, "mcp claude-code allow") == {"after": "cd"}
    assert record.entry(toml, "listing codex")["header"] is True
    assert record.created_folders(toml) == [str(tmp_path / "home" / ".codex")]


def test_the_older_records_stay_until_the_new_one_is_written(tmp_path, monkeypatch):
    import os
    from retriever.runners import record
    settings, _ = _old_records(tmp_path / "home")

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fileutil, "write_atomic", full)
    with pytest.raises(OSError), fileutil.install_lock():
        record.set_entry(settings, "hermes", {"after": "ef"})
    assert sorted(os.listdir(fileutil.state_dir())) == ["created.json", "install.lock", "installed.json",
                                                        "listing.json"]
    assert record.entry(settings, "claude-code")["after"] == "ab"


def test_a_damaged_older_record_is_one_log_line_never_a_traceback(cli, cli_env, tmp_path):
    import os
    from conftest import make_skill
    make_skill(os.path.join(cli_env["HOME"], ".agents", "skills"), "demo", {"name": "demo", "description": "demo"})
    state = os.path.join(cli_env["XDG_STATE_HOME"], "skill-retrieval")
    os.makedirs(state)
    with open(os.path.join(state, "installed.json"), "wb") as f:
        f.write(b"\xff{ not json")
    with open(os.path.join(state, "listing.json"), "w") as f:
        f.write("[1, 2]")
    for args in (("doctor", "--runner", "codex", "--no-probe"), ("install", "codex"), ("uninstall", "codex")):
        proc = cli(*args)
        assert "Traceback" not in proc.stderr and proc.returncode in (0, 1), proc
    assert sorted(n for n in os.listdir(state) if n.endswith(".json")) == ["changes.json"]
    log = open(os.path.join(cli_env["XDG_CACHE_HOME"], "skill-retrieval", "skill-retrieval.log")).read().splitlines()
    said = [line for line in log if "install record" in line]
    assert len(said) == 2 and "installed.json is not UTF-8" in said[0] and "listing.json does not hold" in said[1]


# ------------------------------------------------------------ change, undo


def test_undo_puts_back_the_bytes_change_found_unless_the_user_edited_since(tmp_path):
    from retriever.runners import record
    path = tmp_path / "home" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b'{"a":1}')  # a layout the edit does not keep

    def add(raw):
        return raw.decode().rstrip("}") + ',"ours":1}'

    def take_out(raw, rec):
        return None if raw is None else raw.decode().replace(',"ours":1', "")

    with fileutil.install_lock():
        raw, new, saved = record.change(str(path), add)
        record.note(str(path), "demo", raw, new, saved, made=[])
    assert record.entry(str(path), "demo")["backup"] == saved
    record.undo(str(path), "demo", take_out)
    assert path.read_bytes() == b'{"a":1}' and record.entry(str(path), "demo") is None
    with fileutil.install_lock():
        raw, new, saved = record.change(str(path), add)
        record.note(str(path), "demo", raw, new, saved, made=[])
    path.write_text(path.read_text() + " ")  # the user's own edit
    record.undo(str(path), "demo", take_out)
    assert path.read_text() == '{"a":1} '


def test_a_file_change_created_is_recorded_and_undo_deletes_it_with_its_folders(tmp_path):
    from retriever.runners import record
    path = tmp_path / "home" / "new" / "deeper" / "f.toml"
    with fileutil.install_lock():
        raw, new, saved = record.change(str(path), lambda raw: "x = 1\n")
        record.note(str(path), "demo", raw, new, saved)
    assert record.created_folders(str(path)) == [str(path.parent), str(path.parent.parent)]
    record.undo(str(path), "demo", lambda raw, rec: "", settle=record.created_and(str(path), lambda new: not new.strip()))
    assert not (tmp_path / "home" / "new").exists() and record.load() == {}


@pytest.mark.parametrize("runner,theirs", [("claude-code", False), ("claude-code", True), ("opencode", False)])
def test_uninstall_writes_the_record_once_for_each_file_it_changes(runner, theirs, monkeypatch):
    """undo forgot its entry in a load and a save of its own, after the one
    its change made; the installers then forgot the created record, the
    names-only entry and the plugin's in more: six to seven writes of the
    record for three or four files.  Now each file uninstall changes (or
    deletes: a file install created, the plugin file) is one write of the
    record, whatever is left in the file (``theirs``: the user's own key,
    so every file is kept, and the created record goes with the entry)."""
    import io
    import json
    import os
    from contextlib import redirect_stdout
    from retriever.cli import commands
    from retriever.runners import record
    with redirect_stdout(io.StringIO()):
        assert commands.main(["install", runner]) == 0
    settings = os.path.join(os.environ["HOME"], ".claude", "settings.json")
    if theirs:
        with open(settings) as f:
            data = json.load(f)
        with open(settings, "w") as f:
            json.dump(dict(data, theme="dark"), f)
    written, saves = [], []
    update, save = fileutil.update, record._save

    def counted(path, change, *a, **k):
        out = update(path, change, *a, **k)
        if out[1] is not None and not k.get("dry_run"):
            written.append(path)
        return out

    monkeypatch.setattr(fileutil, "update", counted)
    monkeypatch.setattr(record, "_save", lambda data: saves.append(1) or save(data))
    with redirect_stdout(io.StringIO()) as out:
        assert commands.main(["uninstall", runner]) == 0
    assert len(written) >= 3 and len(saves) == len(written), (written, len(saves), out.getvalue())
    assert record.load() == {}  # nothing recorded outlives the uninstall
    assert os.path.exists(settings) == theirs


def test_undo_reads_the_record_once_and_writes_it_once(tmp_path, monkeypatch):
    from retriever.runners import record
    path = str(tmp_path / "home" / "new" / "f.toml")
    with fileutil.install_lock():
        raw, new, saved = record.change(path, lambda raw: "x = 1\n")
        record.note(path, "demo", raw, new, saved)
    calls = []
    load, save = record.load, record._save
    monkeypatch.setattr(record, "load", lambda: calls.append("load") or load())
    monkeypatch.setattr(record, "_save", lambda data: calls.append("save") or save(data))
    record.undo(path, "demo", lambda raw, rec: "", settle=lambda new: fileutil.DELETE)
    assert calls == ["load", "save"]
    monkeypatch.undo()
    assert record.load() == {} and not (tmp_path / "home" / "new").exists()
