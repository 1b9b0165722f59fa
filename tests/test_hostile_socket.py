"""Hostile input, round three (issue 36): the helper's socket never lands
in a folder another user made.

When the helper's usual socket path is too long for a Unix socket, client
and helper fall back to ``/tmp/skill-retrieval-UID``, a name anyone can
take first.  A folder there that another user made, a symlink, or one
open to others is refused: the helper does not listen there, the tier
answers BM25 alone, and no query starts a helper (one would only be
refused again, every ten seconds for as long as queries come).

Tests run as root: "another user" is a folder chowned to uid 65534.  The
fallback is pointed at a folder of the test (``client.FALLBACK_DIR``), so
the real /tmp is never touched.  No model is loaded: the semantic extra
is not needed.
"""

import os
import posix

import pytest

from retriever.semantic import client, helper

HOW = ("another-user", "symlink", "open-to-others")


@pytest.fixture
def fallback(tmp_path, monkeypatch):
    """A runtime folder too long for a socket, and the fallback pointed
    at a sticky, world-writable folder of this test, as /tmp is."""
    runtime = tmp_path / ("r" * 110)
    runtime.mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.delenv("SKILL_RETRIEVAL_SEMANTIC_SOCKET", raising=False)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    tmp.chmod(0o1777)
    monkeypatch.setattr(client, "FALLBACK_DIR", str(tmp))
    return tmp / ("skill-retrieval-%d" % os.getuid())


@pytest.fixture
def forks(monkeypatch):
    """Every process start a query would make, counted and not made: the
    client's ``posix.fork`` answers as a parent would, so nothing forks
    here; one start per query is allowed (no ten-second pause)."""
    made = []
    monkeypatch.setattr(posix, "fork", lambda: made.append(1) or 2 ** 22 + 1)  # no such pid: waitpid fails
    monkeypatch.setattr(client, "_SPAWN_EVERY", 0.0)
    return made


def _log():
    try:
        with open(os.environ["XDG_CACHE_HOME"] + "/skill-retrieval/skill-retrieval.log") as f:
            return [l for l in f if "semantic helper:" in l]
    except FileNotFoundError:
        return []


def _squat(folder, how, tmp_path):
    if how == "another-user":
        folder.mkdir(mode=0o700)
        os.chown(folder, 65534, 65534)
    elif how == "symlink":
        target = tmp_path / "elsewhere"
        target.mkdir(mode=0o700)
        folder.symlink_to(target)
        return target
    else:
        folder.mkdir()
        folder.chmod(0o777)
    return folder


@pytest.mark.parametrize("how", HOW)
def test_a_squatted_fallback_folder_starts_no_helper(fallback, tmp_path, forks, how):
    """Issue 36: every query with no helper answering started one, which
    refused the folder and exited; the next query ten seconds later
    started another.  Counted over six queries: none now, and each
    attempt says why in the log, as the helper did."""
    if how == "another-user" and os.geteuid() != 0:
        pytest.skip("chown to another user needs root")
    _squat(fallback, how, tmp_path)
    path = client.socket_path()
    assert path == str(fallback / "semantic.sock")
    assert not client.private_folder(path) and not client.may_listen(path)
    for _ in range(6):
        p = client.Provider()
        assert p.ask(str(tmp_path / "index.skr"), "rotate the certificates") is False
        assert p.begin(str(tmp_path / "index.skr"), {"header": {}}) is None  # BM25 alone
    assert forks == []
    lines = _log()
    assert len(lines) == 6 and all("not listening in %s" % fallback in l for l in lines)


@pytest.mark.parametrize("how", HOW)
def test_the_helper_refuses_a_squatted_fallback_folder(fallback, tmp_path, how):
    if how == "another-user" and os.geteuid() != 0:
        pytest.skip("chown to another user needs root")
    inside = _squat(fallback, how, tmp_path)
    logged = []
    assert helper.serve(client.socket_path(), idle=1, log=logged.append, warm=False) == 4
    assert len(logged) == 1 and "not a folder of this user closed to others" in logged[0]
    assert os.listdir(inside) == []  # no socket, FIFO or lock put there


def test_a_missing_fallback_folder_still_starts_the_helper(fallback, tmp_path, forks):
    """The ordinary case: nobody made the folder, so a query starts the
    helper, which makes it private."""
    assert client.may_listen(client.socket_path())
    assert client.Provider().ask(str(tmp_path / "index.skr"), "rotate the certificates") is False
    assert forks == [1] and _log() == []
