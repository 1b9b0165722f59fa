"""An install made by the version before ``changes.json`` (three records in
the state folder: created.json, installed.json, listing.json) is
uninstalled exactly by this one: the user's files come back byte for byte,
their own edits since install are kept, and the old records are migrated
into the one record, then removed.

The old state is ``tests/data/upgrade_state.json``, written by a real
install of that version (``tests/data/make_upgrade_state.py``), rebuilt
here in the test's own home.
"""

import hashlib
import json
import os

import pytest

from skillret_helpers import REPO, state_home

DATA = REPO / "tests" / "data" / "upgrade_state.json"
OLD_RECORDS = ("created.json", "installed.json", "listing.json")


def _fill(text, names):
    # Placeholders back to this machine's paths (see make_upgrade_state.py).
    for name, value in names:
        text = text.replace(name[:-1] + "%@", value.lstrip("/").replace("/", "%")).replace(name, value)
    return text


def _record(data, names):
    # A record with each "@SHA256:<text>@" as the digest of that text here.
    if isinstance(data, dict):
        return {_fill(k, names): _record(v, names) for k, v in data.items()}
    if isinstance(data, list):
        return [_record(v, names) for v in data]
    if isinstance(data, str) and data.startswith("@SHA256:") and data.endswith("@"):
        return hashlib.sha256(_fill(data[len("@SHA256:"):-1], names).encode()).hexdigest()
    return _fill(data, names) if isinstance(data, str) else data


@pytest.fixture
def old_install(tmp_path):
    """The old version's install of Claude Code and Codex (hook, names-only,
    MCP server) in this test's home: ``(home, state, before)``, ``before``
    the user's files before install by path."""
    data = json.loads(DATA.read_text())
    home = os.path.realpath(tmp_path / "home")
    state = os.path.realpath(state_home(tmp_path) / "skill-retrieval")
    names = [("@STATE@", state), ("@HOME@", home), ("@PY@", str(REPO / ".venv" / "bin" / "python3")),
             ("@REPO@", str(REPO))]
    for key in data["skills"]:
        _write(_fill(key, names), "---\nname: %s\ndescription: a skill\n---\n" % key.split("/")[-2])
    for key, text in data["after"].items():
        if key.startswith("@STATE@/") and key.endswith(".json"):
            text = json.dumps(_record(json.loads(text), names), indent=1, sort_keys=True) + "\n"
        _write(_fill(key, names), _fill(text, names))
    before = {_fill(k, names): v for k, v in data["before"].items()}
    for path, text in before.items():
        if not os.path.exists(path):
            _write(path, text)
    return home, state, before


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def _uninstall(cli):
    for runner in ("claude-code", "codex"):
        proc = cli("uninstall", runner, env={"SKILL_RETRIEVAL_PYTHON": REPO / ".venv" / "bin" / "python3"})
        assert proc.returncode == 0 and not proc.stderr, proc


def test_an_older_install_is_uninstalled_byte_for_byte(cli, old_install):
    home, state, before = old_install
    _uninstall(cli)
    for path, text in before.items():
        assert _read(path) == text, path
    assert not os.path.exists(os.path.join(home, ".codex", "hooks.json"))  # install had created it
    for name in OLD_RECORDS:
        assert not os.path.exists(os.path.join(state, name)), name
    assert json.loads(_read(os.path.join(state, "changes.json"))) == {}


def test_an_older_install_keeps_the_users_edits_on_uninstall(cli, old_install):
    home, state, before = old_install
    settings, mcp, toml = (os.path.join(home, p) for p in (".claude/settings.json", ".claude.json",
                                                           ".codex/config.toml"))
    # The user's own edits since install, each in a file install changed.
    edits = {settings: lambda d: dict(d, theme="dark"),
             mcp: lambda d: dict(d, numStartups=4)}
    expect = {}
    for path, edit in edits.items():
        _write(path, json.dumps(edit(json.loads(_read(path))), indent=2) + "\n")
        expect[path] = json.dumps(edit(json.loads(before[path])), indent=2) + "\n"
    _write(toml, _read(toml).replace('model = "o4-mini"', 'model = "o3-pro"'))
    expect[toml] = before[toml].replace('model = "o4-mini"', 'model = "o3-pro"')
    _uninstall(cli)
    for path, text in expect.items():
        assert _read(path) == text, path
    assert not os.path.exists(os.path.join(home, ".codex", "hooks.json"))
    for name in OLD_RECORDS:
        assert not os.path.exists(os.path.join(state, name)), name
