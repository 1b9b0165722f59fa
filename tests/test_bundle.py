"""The executable's module bundle (retriever/cli/bundle.py): the modules a
query needs come from one file, and it never serves stale code.

Each test runs a private copy of ``bin/`` and ``retriever/`` (no
``__pycache__``), so editing a module or damaging the bundle touches
nothing of the repository's.  ``python -v`` says where each module came
from: a ``.pyc`` or a source prints "code object from", a bundled module
prints nothing.
"""

import shutil
import subprocess
import sys

import pytest

from skillret_helpers import REPO, assert_clean, base_env, make_skill

PY = str(REPO / ".venv" / "bin" / "python3") if (REPO / ".venv" / "bin" / "python3").exists() else sys.executable
TAG = sys.implementation.cache_tag


@pytest.fixture
def tree(tmp_path):
    """A private install: ``bin/``, ``retriever/``, a skill tree, an index."""
    t = tmp_path / "install"
    shutil.copytree(REPO / "bin", t / "bin")
    shutil.copytree(REPO / "retriever", t / "retriever", ignore=shutil.ignore_patterns("__pycache__"))
    root = tmp_path / "skills"
    make_skill(root, "pdf-merge", {"name": "pdf-merge", "description": "Merge PDF files into one document"})
    make_skill(root, "k8s-certs", {"name": "k8s-certs", "description": "Rotate Kubernetes TLS certificates"})
    env = dict(base_env(tmp_path), SKILL_RETRIEVAL_PYTHON=PY)
    index = tmp_path / "i.skr"
    build = subprocess.run([str(t / "bin" / "skill-retrieve"), "build", "-q", "--root", str(root),
                            "--index", str(index)], env=env, capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    bundle = t / "retriever" / "__pycache__" / ("skill-retrieve.%s.bundle" % TAG)
    assert bundle.is_file()  # the build's process wrote it: start without one
    bundle.unlink()
    return {"dir": t, "env": env, "index": index,
            "bundle": bundle}


def _query(tree, *flags, exe="bin"):
    """Answer "merge pdf" with the copy's executable; returns (output, the
    copy's modules read from a .pyc or a source).  ``exe``: ``bin`` (bin/skill-retrieve)
    or ``main`` (retriever/__main__.py, the executable of pip installs)."""
    script = tree["dir"] / ("bin/skill-retrieve" if exe == "bin" else "retriever/__main__.py")
    proc = subprocess.run([PY, "-I", "-S", "-v"] + list(flags) + [str(script), "--index", str(tree["index"]),
                                                                  "merge", "pdf"],
                          env=tree["env"], capture_output=True, text=True, timeout=60)
    assert_clean(proc)
    here = "%s/retriever/" % tree["dir"]
    from_files = [line for line in proc.stderr.splitlines() if line.startswith("# code object from") and here in line]
    return proc.stdout, from_files


@pytest.mark.parametrize("exe", ["bin", "main"])
def test_the_first_query_writes_the_bundle_and_the_next_serves_every_module_from_it(tree, exe):
    first, from_files = _query(tree, exe=exe)
    assert "pdf-merge" in first
    assert from_files  # no bundle yet: the normal imports
    assert tree["bundle"].is_file()
    again, from_files = _query(tree, exe=exe)
    assert again == first
    assert from_files == []


def test_an_edited_module_takes_effect_at_once_and_the_bundle_follows(tree):
    _query(tree)
    render = tree["dir"] / "retriever" / "render.py"
    text = render.read_text()
    assert "## Retrieved Skills" in text
    render.write_text(text.replace("## Retrieved Skills", "## Retrieved Skills (edited)"))
    out, from_files = _query(tree)
    assert "## Retrieved Skills (edited)" in out  # the source, not the bundle's stale copy
    assert any("render" in line for line in from_files)
    out, from_files = _query(tree)
    assert "## Retrieved Skills (edited)" in out
    assert from_files == []  # the rewritten bundle holds the edit


def test_a_damaged_bundle_is_ignored_and_replaced(tree):
    expected, _ = _query(tree)
    whole = tree["bundle"].read_bytes()
    for junk in (b"", b"\x00" * 64, whole[:1000], whole[:-100],
                 whole[:len(whole) // 2] + b"\x00" * (len(whole) - len(whole) // 2)):
        tree["bundle"].write_bytes(junk)
        out, _ = _query(tree)
        assert out == expected
        assert tree["bundle"].read_bytes() not in (junk, b"")  # written again
        out, from_files = _query(tree)
        assert out == expected
        assert from_files == []


def test_nothing_is_written_under_dont_write_bytecode(tree):
    out, _ = _query(tree, "-B")
    assert "pdf-merge" in out
    assert not tree["bundle"].exists()


def test_a_bundle_for_another_interpreter_is_not_used(tree):
    import marshal
    expected, _ = _query(tree)
    data = tree["bundle"].read_bytes()
    n = int.from_bytes(data[:4], "little")
    magic, boot, table = marshal.loads(data[4:4 + n])
    head = marshal.dumps((b"\x00\x00\r\n", boot, table))
    tree["bundle"].write_bytes(len(head).to_bytes(4, "little") + head + data[4 + n:])
    out, from_files = _query(tree)
    assert out == expected
    assert from_files


def test_a_cache_folder_that_cannot_be_written_changes_nothing_but_speed(tree):
    # Root ignores file modes, so the folder is made impossible instead:
    # a plain file where __pycache__ would be (no .pyc can be written either).
    cache = tree["dir"] / "retriever" / "__pycache__"
    shutil.rmtree(cache, ignore_errors=True)
    cache.write_text("not a folder\n")
    for _ in range(2):
        out, from_files = _query(tree)
        assert "pdf-merge" in out
        assert from_files
    assert cache.read_text() == "not a folder\n"


def test_doctor_says_whether_the_bundle_is_fresh(tree):
    import json

    def said():
        proc = subprocess.run([PY, "-I", "-S", str(tree["dir"] / "bin" / "skill-retrieve"), "doctor", "--no-probe",
                               "--format", "json", "--index", str(tree["index"])],
                              env=tree["env"], capture_output=True, text=True, timeout=120)
        assert "Traceback" not in proc.stderr, proc.stderr
        return json.loads(proc.stdout)["bundle"]

    assert said()["state"] == "missing"  # doctor's own process then writes it
    assert said() == {"state": "fresh", "path": str(tree["bundle"])}
    render = tree["dir"] / "retriever" / "render.py"
    render.write_text(render.read_text() + "\n# edited\n")
    assert said()["state"] == "stale"
    _query(tree)  # a query imports render.py, notices, and writes the bundle again
    assert said()["state"] == "fresh"
    tree["bundle"].write_bytes(b"\x00" * 64)  # damaged, or another version's format
    assert said()["state"] == "stale"


def test_doctor_in_a_venv_without_bytecode_still_sees_a_writable_folder(tree):
    # Issue 32: a pip venv with PYTHONDONTWRITEBYTECODE=1 ran doctor through
    # the console script, which honours it, and heard "__pycache__ cannot be
    # written"; the hooks run ``python -I -S .../__main__.py``, which ignores
    # it and writes the bundle.
    import json
    env = dict(tree["env"], PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=str(tree["dir"]))
    proc = subprocess.run([PY, "-m", "retriever", "doctor", "--no-probe", "--format", "json",
                           "--index", str(tree["index"])], env=env, cwd=str(tree["dir"]),
                          capture_output=True, text=True, timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert json.loads(proc.stdout)["bundle"] == {"state": "missing", "path": str(tree["bundle"])}
    out, _ = _query(tree, exe="main")  # as a hook runs it, in the same environment
    assert "pdf-merge" in out and tree["bundle"].is_file()
