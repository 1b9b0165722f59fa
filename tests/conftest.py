"""Shared fixtures: real skill trees in tmp_path and the real executable.

Nothing here mocks the product.  ``make_skill`` writes SKILL.md files the way
people write them (including broken ones); ``cli`` runs ``bin/skill-retrieve``
as a subprocess with HOME and XDG_CACHE_HOME pointing into tmp_path, and
in-process tests get the same (``_own_home``), so no test reads or writes
the real home folder, saved roots or index cache.
"""

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = REPO / "bin" / "skill-retrieve"

# Tests import the library directly for the pure functions (tokenizer,
# parser) and to read an index file back.
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
# Test modules import the helpers below as ``from skillret_helpers import ...``.  A
# stable alias is needed because pytest drops the plain ``conftest`` module
# from sys.modules when it loads another folder's conftest.py (tests/e2e).
sys.modules.setdefault("skillret_helpers", sys.modules[__name__])

# Variables that would let the developer's own set-up leak into a test.
_SCRUB_PREFIXES = ("SKILL_RETRIEVAL_", "HERMES_")
_SCRUB = ("CLAUDE_PROJECT_DIR", "CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_PROJECT_DIR", "XDG_CACHE_HOME",
          "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR",
          "PYTHONPATH", "PYTHONHOME", "TYPESAFE_API_KEY", "TYPESAFE_KEY", "OPENROUTER_API_KEY")



def _scrubbed(env):
    """``env`` without the variables that carry the developer's set-up."""
    return {k: v for k, v in env.items() if k not in _SCRUB and not k.startswith(_SCRUB_PREFIXES)}


# In-process tests (the Hermes plugin's, the service's) read the same
# variables and files the executable does: the developer's saved roots
# (``skill-retrieve roots add``), SKILL_RETRIEVAL_* and ~/.cache must not
# reach them.  Until a test's own HOME is set (``_own_home``), collection
# and module set-up see an empty HOME of the session's.
for _k in set(os.environ) - set(_scrubbed(os.environ)):
    del os.environ[_k]
_SESSION_HOME = tempfile.mkdtemp(prefix="skillret-tests-home-")
atexit.register(shutil.rmtree, _SESSION_HOME, True)
os.environ["HOME"] = _SESSION_HOME
# In-process callers (the Hermes plugin's tests) see the same default.
os.environ["SKILL_RETRIEVAL_SEMANTIC"] = "off"
# The ranking, visibility and plumbing tests read the plain ranking: every
# skill that matches, best first.  The decision of what to inject has its
# own tests (test_explain_and_abstain.py, test_semantic.py, test_session.py),
# which turn it on.
os.environ["SKILL_RETRIEVAL_DECIDE"] = "off"


def _yaml_dump(data):
    import yaml
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=10000)


def make_skill(root, relpath, frontmatter=None, body="", raw=None):
    """Write ``root/relpath/SKILL.md`` and return the skill folder (a Path).

    ``frontmatter`` is a dict (dumped as YAML), a str (written verbatim
    between ``---`` fences, so it may be invalid YAML) or None (no
    frontmatter at all).  ``raw`` (str or bytes) replaces the whole file,
    for BOMs, CRLF, unclosed fences and undecodable bytes.
    """
    folder = Path(root) / relpath
    folder.mkdir(parents=True, exist_ok=True)
    md = folder / "SKILL.md"
    if raw is not None:
        md.write_bytes(raw.encode("utf-8") if isinstance(raw, str) else raw)
        return folder
    if isinstance(frontmatter, dict):
        fm = _yaml_dump(frontmatter)
    else:
        fm = frontmatter
    text = "" if fm is None else "---\n" + fm.rstrip("\n") + "\n---\n"
    md.write_text(text + body, encoding="utf-8")
    return folder


def state_home(tmp_path):
    """The XDG_STATE_HOME of a test: installers' backups land below it."""
    return tmp_path / "xdg-state"


@pytest.fixture(autouse=True)
def _own_home(tmp_path, monkeypatch):
    # Each test has its own HOME and cache, the ones ``cli`` gives the
    # executable: in-process code finds no saved roots, writes no index
    # into the developer's ~/.cache (nor the side files of an index in a
    # shared folder, locate.side_path), and in-process installers (Hermes'
    # tests) back up into the test's folder, never into ~/.local/state.
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.setenv("XDG_STATE_HOME", str(state_home(tmp_path)))


def backups_of(path):
    """Backups of ``path`` made by the installers in this test (full paths)."""
    from retriever import fileutil
    folder = os.path.join(fileutil.state_dir(), "backups")
    stem = fileutil.backup_name(str(path)) + ".bak-"
    return sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.startswith(stem)) \
        if os.path.isdir(folder) else []


@pytest.fixture(autouse=True)
def _no_thread_left_behind():
    """Our background threads (the plugin's index refresher, the model
    loader, the rerank worker) end before the next test starts: one left
    running would log into the next test's log or hold its files."""
    yield
    import threading
    for t in threading.enumerate():
        if t.name.startswith("skill-retrieval-") and t is not threading.current_thread():
            t.join(60)


# Where the helper listens when its usual path is too long for a Unix
# socket (semantic/client.socket_path): pytest's tmp paths are.  It is
# shared by every test, so a helper left there would answer the next ones.
_SHARED_SOCKET = "/tmp/skill-retrieval-%d/semantic.sock" % os.getuid()


def _socket_stamp():
    try:
        st = os.lstat(_SHARED_SOCKET)
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns


@pytest.fixture(autouse=True)
def _no_helper_in_the_shared_fallback():
    """A test that turns the semantic tier on names a short folder of its
    own for the helper (XDG_RUNTIME_DIR or SKILL_RETRIEVAL_SEMANTIC_SOCKET).
    One that lets the helper fall back to the shared /tmp socket fails,
    and its helper is stopped."""
    before = _socket_stamp()
    yield
    after = _socket_stamp()
    if after is not None and after != before:  # bound during this test (a stale one may lie there)
        from retriever.semantic import client
        client.stop_helper(_SHARED_SOCKET, 5.0)
        pytest.fail("this test started a semantic helper at the shared %s; give it a short "
                    "XDG_RUNTIME_DIR of its own" % _SHARED_SOCKET)


def base_env(tmp_path):
    """A clean environment for the executable, rooted in ``tmp_path``."""
    env = _scrubbed(os.environ)
    home = tmp_path / "home"
    cache = tmp_path / "xdg-cache"
    home.mkdir(exist_ok=True)
    cache.mkdir(exist_ok=True)
    # The semantic tier (when its extra is installed) starts a helper
    # process; only the tests about it turn it on, each with its own socket.
    env.update(HOME=str(home), XDG_CACHE_HOME=str(cache), SKILL_RETRIEVAL_REVALIDATE="off",
               SKILL_RETRIEVAL_SEMANTIC="off", SKILL_RETRIEVAL_DECIDE="off", LC_ALL="C.UTF-8", XDG_STATE_HOME=str(state_home(tmp_path)))
    return env


def run_cli(args, env, input=None, cwd=None, timeout=60):
    """Run ``bin/skill-retrieve args...``; returns a CompletedProcess whose
    stdout and stderr are str (decoded as UTF-8, undecodable bytes replaced)."""
    if isinstance(input, str):
        input = input.encode("utf-8")
    proc = subprocess.run([str(BIN)] + [str(a) for a in args], env=env, cwd=cwd,
                          input=b"" if input is None else input,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode,
                                       proc.stdout.decode("utf-8", "replace"),
                                       proc.stderr.decode("utf-8", "replace"))


@pytest.fixture
def cli_env(tmp_path):
    """The environment ``cli`` uses (a dict; tests may copy and extend it)."""
    return base_env(tmp_path)


@pytest.fixture
def cli(tmp_path, cli_env):
    """``cli(*args, input=None, env=None, cwd=None, timeout=60)`` runs the
    executable; ``env`` entries are added to (None values removed from) the
    fixture's clean environment.  The working folder defaults to a fresh
    empty folder so a project's ``.agents/skills`` never leaks in."""
    workdir = tmp_path / "cwd"
    workdir.mkdir(exist_ok=True)

    def run(*args, input=None, env=None, cwd=None, timeout=60):
        e = dict(cli_env)
        for k, v in (env or {}).items():
            if v is None:
                e.pop(k, None)
            else:
                e[k] = str(v)
        return run_cli(args, e, input=input, cwd=cwd or workdir, timeout=timeout)

    return run


def wait_until(cond, timeout=60.0, step=0.05):
    """True once ``cond()`` is, polled every ``step`` seconds; False after
    ``timeout`` (for what a detached process does in its own time)."""
    import time
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(step)
    return False


def assert_clean(proc, code=0):
    """Exit ``code`` and no Python traceback on stderr."""
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)


def json_results(proc):
    """Parse ``--format json`` output; asserts a clean exit first."""
    import json
    assert_clean(proc)
    return json.loads(proc.stdout)["results"]


def warning_lines(stderr):
    """The ``skill-retrieve: warning: ...`` lines of a build's stderr."""
    return [l for l in stderr.splitlines() if l.startswith("skill-retrieve: warning: ")]


def index_docs(index_path):
    """Every ``(id, name, path, description, vis)`` record in an index file."""
    from retriever import store
    idx = store.load(str(index_path))
    return [store.doc(idx, n) for n in range(idx["header"]["n_docs"])]


def index_ids(index_path):
    """The sorted skill ids held by an index file."""
    return sorted(d[0] for d in index_docs(index_path))


def apply_diff(old, diff):
    """``old`` (text, or None for no file) with the unified diff ``diff``
    applied: the text a dry run's ``would write`` says the real run
    writes (``fileutil.diff``)."""
    src = (old or "").splitlines(True)
    out, at = [], 0
    lines = diff.splitlines(True)
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.startswith("@@"):
            continue
        start = int(line.split()[1].split(",")[0][1:])
        start = start - 1 if start else 0
        out += src[at:start]
        at = start
        while i < len(lines) and lines[i][:1] in (" ", "-", "+", "\\"):
            tag, body = lines[i][:1], lines[i][1:]
            if tag == "\\":  # no newline at the end of the line before
                if out and out[-1].endswith("\n") and last in (" ", "+"):
                    out[-1] = out[-1][:-1]
            elif tag in (" ", "-"):
                at += 1
            if tag in (" ", "+"):
                out.append(body)
            last = tag if tag != "\\" else last
            i += 1
    out += src[at:]
    return "".join(out)
