"""Changes to the skills reach the answers (issue 2, item 6, freshness).

The guarantee under test:
* ``--fresh`` checks the skills (every SKILL.md at any depth and Hermes'
  config.yaml) before answering and rebuilds when anything changed;
* otherwise a query answers from the current index and, at most once per
  SKILL_RETRIEVAL_REVALIDATE seconds, starts a detached check that rebuilds
  it, so a later query sees the change.  The query that starts the check
  returns at once: the check never holds its stdout or stderr.
"""

import os
import shutil
import subprocess
import time

import pytest

from skillret_helpers import BIN, assert_clean, json_results, make_skill

POLL_SECONDS = 10


def fm(name, desc):
    return {"name": name, "description": desc}


@pytest.fixture
def lib(tmp_path, cli_env):
    """Skills at several depths plus a HERMES_HOME whose config applies."""
    root = tmp_path / "skills"
    hh = tmp_path / "hermes"
    hh.mkdir()
    (hh / "config.yaml").write_text("skills:\n  disabled: []\n")
    make_skill(root, "devops/k8s/k8s-certs", fm("k8s-certs", "Rotate kubernetes TLS certificates"))
    make_skill(root, "docs/pdf-extract", fm("pdf-extract", "Extract text from scanned pdf files"))
    make_skill(root, "git/commit-msg", fm("commit-msg", "Write conventional git commit messages"))
    env = dict(cli_env, HERMES_HOME=str(hh))
    return {"root": root, "hh": hh, "index": tmp_path / "fresh.skr", "env": env}


def keep_folder_mtimes(path, stop):
    """Snapshot the mtimes of ``path``'s folders up to ``stop``; returns a
    function restoring them (so only the file itself looks changed)."""
    saved = []
    d = path.parent
    while True:
        st = d.stat()
        saved.append((d, st.st_atime_ns, st.st_mtime_ns))
        if d == stop:
            break
        d = d.parent

    def restore():
        for folder, at, mt in saved:
            os.utime(folder, ns=(at, mt))
    return restore


def edit_deep(lib):
    md = lib["root"] / "devops/k8s/k8s-certs/SKILL.md"
    restore = keep_folder_mtimes(md, lib["root"])
    md.write_text(md.read_text().replace("Rotate kubernetes TLS certificates",
                                         "Renew the etcd backup snapshots nightly"))
    restore()


def edit_same_size(lib):
    md = lib["root"] / "devops/k8s/k8s-certs/SKILL.md"
    before = md.stat().st_size
    restore = keep_folder_mtimes(md, lib["root"])
    md.write_text(md.read_text().replace("Rotate", "Ignite"))
    restore()
    assert md.stat().st_size == before


def add_skill(lib):
    make_skill(lib["root"], "media/images/ocr", fm("ocr", "Optical character recognition of photos"))


def remove_skill(lib):
    shutil.rmtree(lib["root"] / "docs/pdf-extract")


def rename_folder(lib):
    os.rename(lib["root"] / "git/commit-msg", lib["root"] / "git/commit-writer")


def disable_in_config(lib):
    (lib["hh"] / "config.yaml").write_text("skills:\n  disabled: [pdf-extract]\n")


def enable_in_config(lib):
    (lib["hh"] / "config.yaml").write_text("skills:\n  disabled: []\n")


# (change, config.yaml before it, query, check on the ids answered after it)
CHANGES = [
    (edit_deep, None, "etcd backup snapshots", lambda ids: ids[:1] == ["devops/k8s/k8s-certs"]),
    (edit_same_size, None, "ignite", lambda ids: ids == ["devops/k8s/k8s-certs"]),
    (add_skill, None, "optical character recognition", lambda ids: ids[:1] == ["media/images/ocr"]),
    (remove_skill, None, "extract text from scanned pdf files", lambda ids: "docs/pdf-extract" not in ids),
    (rename_folder, None, "conventional git commit messages", lambda ids: ids[:1] == ["git/commit-writer"]),
    (disable_in_config, None, "extract text from scanned pdf files",
     lambda ids: "docs/pdf-extract" not in ids),
    (enable_in_config, "skills:\n  disabled: [pdf-extract]\n", "extract text from scanned pdf files",
     lambda ids: ids[:1] == ["docs/pdf-extract"]),
]
IDS = [c[0].__name__ for c in CHANGES]


def query_ids(lib, words, *extra, revalidate="off"):
    from skillret_helpers import run_cli
    env = dict(lib["env"], SKILL_RETRIEVAL_REVALIDATE=revalidate)
    proc = run_cli(["--root", lib["root"], "--index", lib["index"], "--format", "json", "-k", "10",
                    *extra, words], env)
    return [r["id"] for r in json_results(proc)], proc


def prepare(lib, config=None, words=None, ok=None):
    """Build the index; with a check, assert it does not hold yet (so a
    passing test can only pass through a real rebuild)."""
    from skillret_helpers import run_cli
    if config:
        (lib["hh"] / "config.yaml").write_text(config)
    assert_clean(run_cli(["build", "--root", lib["root"], "--index", lib["index"]], lib["env"]))
    if ok is not None:
        ids, _ = query_ids(lib, words)
        assert not ok(ids), ids


@pytest.mark.parametrize("change, config, words, ok", CHANGES, ids=IDS)
def test_fresh_query_sees_the_change(lib, change, config, words, ok):
    prepare(lib, config, words, ok)
    change(lib)
    ids, proc = query_ids(lib, words, "--fresh")
    assert ok(ids), ids
    assert "rebuilt" in proc.stderr


def test_fresh_without_changes_does_not_rebuild(lib):
    prepare(lib)
    ids, proc = query_ids(lib, "rotate kubernetes certificates", "--fresh")
    assert ids[:1] == ["devops/k8s/k8s-certs"]
    assert proc.stderr == ""


def poll_until(lib, words, ok):
    deadline = time.monotonic() + POLL_SECONDS
    while True:
        ids, _ = query_ids(lib, words)
        if ok(ids) or time.monotonic() > deadline:
            return ids
        time.sleep(0.1)


def start_query(lib, words, revalidate):
    env = dict(lib["env"], SKILL_RETRIEVAL_REVALIDATE=revalidate)
    return subprocess.Popen([str(BIN), "--root", str(lib["root"]), "--index", str(lib["index"]),
                             "--format", "json", words], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.parametrize("change, config, words, ok", CHANGES, ids=IDS)
def test_background_check_brings_the_change_to_a_later_query(lib, change, config, words, ok):
    prepare(lib, config, words, ok)
    change(lib)
    # One query starts the detached check; it must return with its output
    # closed, whatever the check is doing.
    p = start_query(lib, words, revalidate="0")
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    assert out.startswith(b'{"query"') and b"Traceback" not in err
    # Later queries (which start no checks of their own) see the change.
    ids = poll_until(lib, words, ok)
    assert ok(ids), ids


def test_the_detached_check_does_not_hold_stdout(tmp_path, cli_env):
    """The query that starts a background check finishes, stdout and
    stderr closed (a runner waits for their EOF), while the check still
    runs.  The check inherits a pipe the test holds the other end of, so
    the test sees when it ends; 2,000 more skills make it rebuild for a
    while (about ten times the query's life here).  Hermes' config.yaml
    used to be a FIFO that blocked the check, but reads never block on a
    FIFO now (docs/hostile-input.md)."""
    import select
    from skillret_helpers import run_cli
    hh = tmp_path / "hermes"
    make_skill(hh / "skills", "ops/alpha", fm("alpha", "Rotate kubernetes TLS certificates"))
    make_skill(hh / "skills", "ops/beta", fm("beta", "Renew kubernetes ingress certificates"))
    for i in range(2000):
        make_skill(hh / "skills", "fill/f%d" % i, fm("f%d" % i, "filler number %d on topic%d" % (i, i)))
    cfg = hh / "config.yaml"
    cfg.write_text("skills:\n  disabled: []\n")
    env = dict(cli_env, HERMES_HOME=str(hh), SKILL_RETRIEVAL_REVALIDATE="off")
    workdir = tmp_path / "cwd"
    workdir.mkdir()

    def ids():
        proc = run_cli(["--format", "json", "kubernetes certificates"], env, cwd=workdir)
        return sorted(r["id"] for r in json_results(proc))

    assert ids() == ["ops/alpha", "ops/beta"]  # builds the default-roots index
    cfg.write_text("skills:\n  disabled: [alpha]\n")
    probe, held = os.pipe()
    try:
        p = subprocess.Popen([str(BIN), "--format", "json", "kubernetes certificates"],
                             env=dict(env, SKILL_RETRIEVAL_REVALIDATE="0"), cwd=workdir, pass_fds=(held,),
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        os.close(held)
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        assert b"ops/alpha" in out  # answered from the index it had
        # EOF on the probe only once every holder is gone: the check too.
        assert not select.select([probe], [], [], 0)[0], "the query's output ended only with its check"
        assert select.select([probe], [], [], 60)[0] and os.read(probe, 1) == b""
    finally:
        os.close(probe)
    assert ids() == ["ops/beta"]  # the check rebuilt without alpha
