"""Hostile input, round two (issue 31): the semantic tier's warm helper.

- It removes only what it made (its socket, its question FIFO and reply
  FIFOs of this user, named as it names them) in a folder of the user's
  closed to others; a socket setting that is relative, or names something
  else, is refused with one line.
- It serves many clients at once: a slow, silent or huge client costs
  only its own request, whose deadline is per request, and ``serve
  --status`` answers meanwhile.

Skipped when the ``semantic`` extra is not installed.  Every helper a test
starts is stopped, then killed if it does not stop; the ``helpers``
fixture removes every runtime folder ``_helper_env`` made.
"""

import os
import signal
import socket
import threading
import time

import pytest

from skillret_helpers import assert_clean, run_cli
from test_semantic import _fused, _helper_env, _sock, _wait, helpers, tree  # noqa: F401 (fixtures)
from retriever import semantic
from retriever.semantic import client

pytestmark = pytest.mark.skipif(not semantic.installed(), reason="the semantic extra is not installed")

TEXT = "把扫描的PDF文件里的文字提取出来"


def _log(env):
    try:
        with open(env["XDG_CACHE_HOME"] + "/skill-retrieval/skill-retrieval.log", encoding="utf-8") as f:
            return [l for l in f if "semantic helper:" in l]
    except FileNotFoundError:
        return []


def _stop(env, folder):
    """Stop a helper started at ``folder`` (by a query), killing it if need be."""
    run_cli(["serve", "--stop"], env)
    try:
        pid = int(open(folder + "/semantic.lock").read().strip() or 0)
    except (OSError, ValueError):
        return
    if pid and not _wait(lambda: not os.path.exists("/proc/%d" % pid)
                         or open("/proc/%d/stat" % pid).read().split(") ")[1][:1] == "Z", 20):
        os.kill(pid, signal.SIGKILL)


def _home_with_files(env, mode):
    home = env["HOME"]
    os.chmod(home, mode)
    files = {"notes.txt": "my notes\n", "r.sh": "echo hi\n", "r.todo": "- buy milk\n",
             "r.123-abcdefabcdef": "named like a reply FIFO, but a file\n"}
    for name, text in files.items():
        with open(os.path.join(home, name), "w") as f:
            f.write(text)
    return home, files


@pytest.mark.parametrize("mode", [0o755, 0o700])
def test_a_socket_setting_naming_a_file_deletes_nothing(tmp_path, tree, mode, helpers):
    """Issue 31, defect 1: with SKILL_RETRIEVAL_SEMANTIC_SOCKET=$HOME/notes.txt
    one query deleted notes.txt, r.sh and r.todo.  The helper refuses to
    listen there, with one log line, and removes nothing: a home folder of
    mode 0755 is not a private folder, and in a 0700 one notes.txt is not
    a socket."""
    env = _helper_env(tmp_path)
    home, files = _home_with_files(env, mode)
    env["SKILL_RETRIEVAL_SEMANTIC_SOCKET"] = home + "/notes.txt"
    try:
        doc = _fused(env, tree["index"], "rotate kubernetes TLS certificates")
        assert doc["tiers"] == ["bm25"] and doc["results"][0]["name"] == "k8s-cert-rotation"
        # The helper the query started has had its say.
        assert _wait(lambda: _log(env), 60)
        (line,) = _log(env)
        assert ("not listening in %s" % home if mode == 0o755 else "not the helper's socket") in line
        for name, text in files.items():
            assert open(os.path.join(home, name)).read() == text, name
        fg = run_cli(["serve"], env)
        assert fg.returncode == 4 and len(fg.stderr.splitlines()) == 1 and home in fg.stderr
    finally:
        _stop(env, home)


def test_a_plausible_socket_in_the_home_folder_removes_only_the_helpers_own(tmp_path, tree, helpers):
    """``~/semantic.sock`` in a private home: the helper listens there, and
    of the ``r.*`` names beside it removes only reply FIFOs of this user
    (a dead helper's), never the user's files."""
    env = _helper_env(tmp_path)
    home, files = _home_with_files(env, 0o700)
    stale = home + "/r.%s" % client.question_id()
    os.mkfifo(stale, 0o600)
    env["SKILL_RETRIEVAL_SEMANTIC_SOCKET"] = home + "/semantic.sock"
    try:
        _fused(env, tree["index"], "rotate kubernetes TLS certificates")
        assert _wait(lambda: os.path.exists(home + "/semantic.sock"), 60)
        assert _wait(lambda: _fused(env, tree["index"], TEXT)["tiers"] == ["bm25", "semantic"])
        assert not os.path.exists(stale)
        for name, text in files.items():
            assert open(os.path.join(home, name)).read() == text, name
    finally:
        _stop(env, home)


def test_a_relative_socket_setting_is_refused_with_one_line(tmp_path, tree, helpers):
    env = _helper_env(tmp_path)
    env["SKILL_RETRIEVAL_SEMANTIC_SOCKET"] = "semantic.sock"
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    proc = run_cli(["--index", tree["index"], "pdf"], env, cwd=str(cwd))
    assert_clean(proc)
    (line,) = proc.stderr.splitlines()
    assert "SKILL_RETRIEVAL_SEMANTIC_SOCKET" in line and "absolute path" in line
    fg = run_cli(["serve", "--socket", "rel.sock"], env, cwd=str(cwd))
    assert fg.returncode == 2 and len(fg.stderr.splitlines()) == 1 and "relative" in fg.stderr
    assert os.listdir(cwd) == []
    _stop(env, env["XDG_RUNTIME_DIR"] + "/skill-retrieval")


# -- many clients at once ---------------------------------------------------------


class Pests:
    """Clients that never finish a request: one sends a byte now and then
    (a header, then a body it trickles), one connects and says nothing,
    one announces a huge frame.  Each reconnects when the helper closes
    it, until ``stop``."""

    def __init__(self, path):
        self.path, self.done, self.threads = path, threading.Event(), []

    def _run(self, kind):
        while not self.done.is_set():
            s = socket.socket(socket.AF_UNIX)
            try:
                s.connect(self.path)
                if kind == "huge":
                    s.sendall(client.MAGIC + (1 << 24).to_bytes(4, "little"))
                elif kind == "slow":
                    s.sendall(client.MAGIC + (100).to_bytes(4, "little"))
                while not self.done.is_set():
                    if kind != "silent":
                        s.sendall(b"x")
                    time.sleep(0.3)
            except OSError:
                time.sleep(0.05)
            finally:
                s.close()

    def __enter__(self):
        for kind in ("slow", "silent", "huge"):
            t = threading.Thread(target=self._run, args=(kind,), daemon=True)
            t.start()
            self.threads.append(t)
        time.sleep(0.5)  # all three connected and holding on
        return self

    def __exit__(self, *exc):
        self.done.set()
        for t in self.threads:
            t.join(10)


def test_slow_silent_and_huge_clients_do_not_freeze_the_helper(tmp_path, tree, helpers):
    """Issue 31, defect 4: a client sending a byte every 1.5 s stalled
    every query (one thread, a timeout per read): every query fell back to
    BM25 and ``serve --status`` said "not running".  Now each client has
    its own thread and its request one deadline."""
    env, p = helpers[0](idle=120)
    assert _wait(lambda: _fused(env, tree["index"], TEXT)["tiers"] == ["bm25", "semantic"])
    with Pests(_sock(env)):
        for _ in range(3):
            st = run_cli(["serve", "--status"], env)
            assert "pid %d" % p.pid in st.stdout, st.stdout
            assert _fused(env, tree["index"], TEXT)["tiers"] == ["bm25", "semantic"]
            # Over the socket too (a question too long for the FIFO).
            long = TEXT + "。" + "扫描的文件" * 400
            assert _fused(env, tree["index"], long)["tiers"] == ["bm25", "semantic"]
            time.sleep(1.0)
    assert p.poll() is None


def test_junk_on_the_question_fifo_costs_no_other_client_its_question():
    """Found by the helper campaign: junk another writer put in the
    question FIFO made the helper drop everything after it in the same
    read, other clients' whole questions included; they waited for their
    deadline and answered BM25 only."""
    from retriever.semantic import helper
    r, w = os.pipe2(os.O_NONBLOCK)
    try:
        qid = client.question_id()
        ask = client.frame(("ask\n%s\n/i.skr\nsome text" % qid).encode())
        cands = client.frame(("cands\n%s\n1 2 3" % qid).encode())
        junk = [b"not a frame at all",
                client.MAGIC + (40).to_bytes(4, "little") + b"ask\n../x",  # a frame swallowing the next
                client.MAGIC + (client.PIPE_BUF + 9).to_bytes(4, "little")]
        for j in junk:
            os.write(w, j)
            os.write(w, ask)
            os.write(w, cands)
        got = helper.Questions(r, lambda m: None).read()
    finally:
        os.close(r)
        os.close(w)
    assert got == [(client.ASK, qid, ("/i.skr", "some text")), (client.CANDS, qid, [1, 2, 3])] * 3


def test_doctor_says_why_the_helper_cannot_start(tmp_path, tree, helpers):
    env = _helper_env(tmp_path)
    home, _ = _home_with_files(env, 0o755)
    env["SKILL_RETRIEVAL_SEMANTIC_SOCKET"] = home + "/notes.txt"
    doc = run_cli(["doctor"], env)
    (line,) = [l for l in doc.stdout.splitlines() if "helper" in l and "not running" in l]
    assert "not listening in %s" % home in line
