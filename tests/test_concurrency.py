"""Readers never see a torn index while builders replace it (issue 2, item 6).

Eight processes query in a loop while two others rebuild the same
``--index`` file again and again.  Every answer must succeed, be non-empty,
and come from a whole file: a reader that met a torn or half-written file
would have to rebuild it and say so on stderr.
"""

import os
import threading

from skillret_helpers import BIN, assert_clean, make_skill, run_cli

READERS = 8
BUILDS = 5  # per builder


def test_eight_readers_and_two_rebuilders(tmp_path, cli_env):
    root = tmp_path / "skills"
    for i in range(20):
        make_skill(root, "cat%d/skill-%02d" % (i % 5, i),
                   {"name": "skill-%02d" % i, "description": "Filler skill number %d about topic %d" % (i, i % 7),
                    "tags": ["filler", "t%d" % (i % 3)]})
    make_skill(root, "docs/pdf-extract", {"name": "pdf-extract", "description": "Extract text from scanned pdf files"})
    index = tmp_path / "shared.skr"
    assert_clean(run_cli(["build", "--root", root, "--index", index], cli_env))

    done = threading.Event()
    failures = []
    answers = []
    lock = threading.Lock()

    def builder():
        try:
            for _ in range(BUILDS):
                p = run_cli(["build", "--root", root, "--index", index], cli_env)
                if p.returncode != 0 or "Traceback" in p.stderr:
                    with lock:
                        failures.append(("build", p.returncode, p.stderr))
        finally:
            done.set()

    def reader(n):
        count = 0
        # Keep reading while building goes on, and at least a few times.
        while not done.is_set() or count < 3:
            p = run_cli(["--root", root, "--index", index, "--format", "json", "extract text from a pdf"],
                        cli_env)
            count += 1
            ok = p.returncode == 0 and '"id": "docs/pdf-extract"' in p.stdout and p.stderr == ""
            with lock:
                answers.append(n)
                if not ok:
                    failures.append(("reader %d" % n, p.returncode, p.stdout[:300], p.stderr))

    threads = [threading.Thread(target=builder) for _ in range(2)]
    threads += [threading.Thread(target=reader, args=(n,)) for n in range(READERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads)
    assert failures == []
    assert len(answers) >= READERS * 3
    assert sorted(set(answers)) == list(range(READERS))
    # Every builder cleaned up after itself.
    assert [f for f in os.listdir(tmp_path) if ".tmp" in f] == []


def test_concurrent_first_queries_all_answer(tmp_path, cli_env):
    """Several hook processes hit a missing index at the same moment: each
    answers (some rebuild it), none fails or returns nothing."""
    root = tmp_path / "skills"
    make_skill(root, "docs/pdf-extract", {"name": "pdf-extract", "description": "Extract text from scanned pdf files"})
    make_skill(root, "git/commit-msg", {"name": "commit-msg", "description": "Write git commit messages"})
    import subprocess
    procs = [subprocess.Popen([str(BIN), "--root", str(root), "--format", "json", "extract pdf text"],
                              env=cli_env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) for _ in range(READERS)]
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        assert b'"id": "docs/pdf-extract"' in out
        assert b"Traceback" not in err
    cache = os.path.join(cli_env["XDG_CACHE_HOME"], "skill-retrieval")
    assert [f for f in os.listdir(cache) if ".tmp" in f] == []


def test_builds_in_two_threads_of_one_process_equal_builds_alone(tmp_path):
    # An agent hosting the plugin may rebuild two indexes from two threads
    # at once.  With threads running the build never forks and analyses in
    # process: each build must keep its own term numbering, and give the
    # index it gives alone.
    import marshal

    from retriever import build as build_mod
    from retriever import store
    scopes, alone = [], []
    for k in range(2):
        root = tmp_path / ("skills%d" % k)
        for i in range(60):
            make_skill(root, "c%d/s%02d" % (i % 4, i),
                       {"name": "s%d-%02d" % (k, i), "description": "library %d skill %d about %s"
                        % (k, i, ("pdf", "docker", "sql", "charts")[(i + k) % 4])},
                       body=" ".join("word%d" % ((i * 7 + j + 100 * k) % 97) for j in range(200)))
        scopes.append(build_mod.resolve([str(root)], use_config=False))
        index = str(tmp_path / ("alone%d" % k) / "i.skr")
        build_mod.build(scopes[k], index)
        alone.append(index)

    def body(path):
        data = open(path, "rb").read()
        hlen = int.from_bytes(data[8:12], "little")
        header = marshal.loads(data[store._PREAMBLE:store._PREAMBLE + hlen])
        return header["n_terms"], data[store._PREAMBLE + hlen:]

    errors = []

    def run(k, n):
        try:
            for r in range(n):
                build_mod.build(scopes[k], str(tmp_path / ("t%d" % k) / ("i%d.skr" % r)))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
    threads = [threading.Thread(target=run, args=(k, 4)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for k in range(2):
        for r in range(4):
            assert body(str(tmp_path / ("t%d" % k) / ("i%d.skr" % r))) == body(alone[k])
