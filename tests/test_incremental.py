"""Incremental builds (issue 14): a rebuild reuses the parse and analysis of
unchanged files from the reuse store beside the index, and must write
exactly the index a cold build of the same tree writes.

"Exactly" is byte for byte, except the two header fields that record when
and how fast a build ran.
"""

import marshal
import os
import pathlib
import shutil
import subprocess
import sys
import threading

import pytest

from retriever import index as index_mod
from retriever import reuse, store
from skillret_helpers import BIN, REPO, assert_clean, make_skill, run_cli

VOLATILE = ("built_at", "build_seconds")


def index_bytes(path):
    """The index file with its volatile header fields blanked: header dict
    and every byte after the header."""
    data = path.read_bytes()
    hlen = int.from_bytes(data[8:12], "little")
    start = store._PREAMBLE  # magic, header length, header CRC (which covers the volatile fields)
    header = marshal.loads(data[start:start + hlen])
    for k in VOLATILE:
        header.pop(k)
    return header, data[start + hlen:]


@pytest.mark.parametrize("child", ["writes", "dies"])
def test_the_store_is_written_beside_the_index_and_never_lost(tmp_path, monkeypatch, child):
    # A large library's store is written by a forked child while the build
    # writes and checks the index.  A child that dies first leaves the work
    # to the build itself: either way the store is there, whole, and the
    # next edit's rebuild takes every other file from it.
    from retriever import build as build_mod
    if build_mod.can_fork() < 2:
        pytest.skip("one core: the build never forks here")
    monkeypatch.setattr(build_mod, "DEAL_FORK_MIN", 4)  # "large"
    root = tmp_path / "skills"
    library(root)
    parent = os.getpid()
    savers = tmp_path / "savers"
    real = reuse.save

    def save(*args):
        with open(savers, "a") as f:
            f.write("%d\n" % os.getpid())
        if child == "dies" and os.getpid() != parent:
            os._exit(7)
        return real(*args)
    monkeypatch.setattr(reuse, "save", save)
    index = str(tmp_path / "idx" / "index.skr")
    scope = build_mod.resolve([str(root)], use_config=False)
    header, _ = build_mod.build(scope, index)
    pids = [int(p) for p in savers.read_text().split()]
    assert pids[0] != parent and pids[1:] == ([parent] if child == "dies" else [])
    make_skill(root, "cat1/skill-07", {"name": "skill-07", "description": "edited after the first build"})
    header, _ = build_mod.build(scope, index)
    assert header["reused"] == 14 and header["updated"]


def library(root, n=12):
    """A small but varied library: several fields, repeated and rare words,
    a CJK skill, a broken one and a shadowed duplicate."""
    for i in range(n):
        make_skill(root, "cat%d/skill-%02d" % (i % 3, i),
                   {"name": "skill-%02d" % i,
                    "description": "Handles topic %d and files of kind %d; not for topic %d." % (i, i % 4, i + 1),
                    "tags": ["t%d" % (i % 5), "shared"], "triggers": ["when topic %d appears" % i]},
                   body="# Skill %d\n\n## When to use\n- asked about topic %d\n\nBody words %s.\n"
                        % (i, i, " ".join("w%d" % (j % 7) for j in range(i + 3))))
    make_skill(root, "cjk/translate", {"name": "translate", "description": "翻译文档 into English"})
    make_skill(root, "broken/bad-yaml", "name: bad-yaml\ndescription: has: an unquoted colon: here")
    make_skill(root, "dupes/skill-00", {"name": "skill-00", "description": "a duplicate, shadowed"})


def build(root, index, env, *extra):
    proc = run_cli(["build", "--root", root, "--index", index] + list(extra), env)
    assert_clean(proc)
    return proc


def cold_equals(root, index, env, tmp_path):
    """Build the same tree cold into a fresh folder and compare."""
    cold = tmp_path / ("cold-%d" % len(os.listdir(tmp_path))) / "index.skr"
    cold.parent.mkdir()
    build(root, cold, env)
    assert index_bytes(index) == index_bytes(cold)


def rebuild_equals_cold(root, index, env, tmp_path, reused):
    """Rebuild ``index`` in place: it reports ``reused`` ("N files
    unchanged") and equals a cold build of the same tree."""
    proc = build(root, index, env)
    assert reused in proc.stdout
    cold_equals(root, index, env, tmp_path)


def test_incremental_build_is_byte_identical_to_a_cold_build(tmp_path, cli_env):
    root = tmp_path / "skills"
    library(root)
    index = tmp_path / "idx" / "index.skr"
    build(root, index, cli_env)
    assert reuse.path_for(str(index)) and os.path.exists(reuse.path_for(str(index)))

    # Nothing changed: everything reused, same index.
    rebuild_equals_cold(root, index, cli_env, tmp_path, "15 files unchanged")

    # An edit (same size would do too: mtime and inode are in the key).
    make_skill(root, "cat1/skill-04", {"name": "skill-04", "description": "Now about kubernetes certificates"},
               body="Rotate TLS certificates.\n")
    # Ten additions, with words no other skill has.
    for i in range(10):
        make_skill(root, "new/added-%d" % i, {"name": "added-%d" % i, "description": "fresh zebra%d words" % i})
    # A deletion, and a rename (same file, new folder: a new id).
    shutil.rmtree(root / "cat2" / "skill-05")
    os.rename(root / "cat0" / "skill-03", root / "cat0" / "skill-03-renamed")
    rebuild_equals_cold(root, index, cli_env, tmp_path, "files unchanged")

    # Renaming a root's parent changes every id under it: nothing reused
    # wrongly (the entries record the root they were made under).
    moved = tmp_path / "moved"
    os.rename(root, moved)
    build(moved, index, cli_env)
    cold_equals(moved, index, cli_env, tmp_path)


def test_store_drops_terms_no_skill_uses_and_stays_exact(tmp_path, cli_env):
    root = tmp_path / "skills"
    library(root)
    index = tmp_path / "idx" / "index.skr"
    # A skill with 12,000 words of its own, then deleted: its terms stay
    # numbered in the store until they are most of it, then are dropped.
    make_skill(root, "big/wordy", {"name": "wordy", "description": "many words"},
               body=" ".join("uniqueword%05d" % i for i in range(12000)))
    build(root, index, cli_env)
    shutil.rmtree(root / "big")
    build(root, index, cli_env)
    vocab, entries, _ = reuse.load(reuse.path_for(str(index)), _store_key(index))
    assert entries and len(vocab) < 1000
    make_skill(root, "cat1/skill-01", {"name": "skill-01", "description": "edited after the compaction"})
    rebuild_equals_cold(root, index, cli_env, tmp_path, "14 files unchanged")


def _postings(index, term):
    idx = store.load(str(index))
    i = store.find_term(idx, term)
    assert i >= 0
    docs, weights = store.postings(idx, i)
    return list(docs), list(weights)


def test_an_edit_that_reranks_other_skills_postings_stays_exact(tmp_path, cli_env):
    # Every weight depends on the library's average field lengths: a long
    # body added to one skill lowers the body's part of every other
    # skill's weights, so "zork" in a body falls behind "zork" in a
    # description.  The rebuild remakes every weight from the stored
    # postings; a term's postings stay in skill order, whatever the weights.
    root = tmp_path / "skills"
    for i in range(8):
        make_skill(root, "body/b%d" % i, {"name": "b%d" % i, "description": "plain skill %d" % i},
                   body=" ".join(["zork"] * (i + 1) + ["filler%d" % j for j in range(30)]))
        make_skill(root, "desc/d%d" % i, {"name": "d%d" % i, "description": "zork and %s" % ("word " * i)},
                   body="short body %d" % i)
    make_skill(root, "grow/g", {"name": "g", "description": "grows"}, body="tiny")
    index = tmp_path / "idx" / "index.skr"
    build(root, index, cli_env)
    docs, before = _postings(index, "zork")
    make_skill(root, "grow/g", {"name": "g", "description": "grows"},
               body=" ".join("long%d" % (j % 50) for j in range(3000)))
    proc = build(root, index, cli_env)
    assert "16 files unchanged" in proc.stdout
    docs_after, after = _postings(index, "zork")
    assert docs_after == docs == sorted(docs)

    def ranking(w):
        return sorted(range(len(w)), key=lambda k: (-w[k], k))
    assert ranking(after) != ranking(before)  # the edit did rerank them
    cold_equals(root, index, cli_env, tmp_path)
    # One edit alone, the common case (skill numbers stand), and a new
    # term in it.
    make_skill(root, "body/b3", {"name": "b3", "description": "plain skill 3"}, body="zork quux " * 5)
    rebuild_equals_cold(root, index, cli_env, tmp_path, "16 files unchanged")


def test_an_edit_that_keeps_every_fields_length_stays_exact(tmp_path, cli_env):
    # Other words, as many in each field: the average lengths stay, so the
    # rebuild keeps the untouched terms' stored weights.
    root = tmp_path / "skills"
    library(root)
    index = tmp_path / "idx" / "index.skr"
    build(root, index, cli_env)
    make_skill(root, "cat1/skill-04",
               {"name": "skill-04", "description": "Handles topic 9 and files of kind 7; not for topic 3.",
                "tags": ["t1", "shared"], "triggers": ["when topic 9 appears"]},
               body="# Skill 4\n\n## When to use\n- asked about topic 4\n\nBody words w6 w5 w4 w3 w2 w1 w0.\n")
    rebuild_equals_cold(root, index, cli_env, tmp_path, "14 files unchanged")


def test_a_few_edits_update_the_stored_postings(tmp_path, cli_env):
    # In process, to see which way the postings were made: after an edit,
    # an addition and a deletion they are updated from the store (a layout
    # that silently failed to fit would still give the right index, only
    # as slowly as before).
    from retriever import build as build_mod
    root = tmp_path / "skills"
    library(root)
    index = str(tmp_path / "idx" / "index.skr")
    header, _ = build_mod.build(build_mod.resolve([str(root)], use_config=False), index)
    assert not header["updated"]
    make_skill(root, "cat1/skill-04", {"name": "skill-04", "description": "now about certificates"})
    make_skill(root, "new/added", {"name": "added", "description": "fresh zebra words"})
    shutil.rmtree(root / "cat2" / "skill-05")
    for n, reused in enumerate((13, 14)):  # the second build: from a store an update wrote
        scope = build_mod.resolve([str(root)], use_config=False)
        header, _ = build_mod.build(scope, index)
        assert header["updated"] and header["reused"] == reused
        cold = str(tmp_path / ("cold%d.skr" % n))
        build_mod.build(scope, cold)
        assert index_bytes(tmp_path / "idx" / "index.skr") == index_bytes(tmp_path / ("cold%d.skr" % n))
        make_skill(root, "cat0/skill-06", {"name": "skill-06", "description": "edited again"})


def test_a_store_whose_postings_do_not_fit_still_gives_the_exact_index(tmp_path, cli_env):
    # Checksummed and keyed, but the stored postings are cut short: the
    # rebuild deals every posting out afresh from the (sound) entries.
    root = tmp_path / "skills"
    library(root)
    index = tmp_path / "idx" / "index.skr"
    build(root, index, cli_env)
    path = str(tmp_path / "idx" / "index.skr.reuse")
    vocab, entries, layout = reuse.load(path, _store_key(index))
    layout["doc"] = bytes(layout["doc"][:-8])
    assert reuse.save(path, _store_key(index), vocab, entries, layout)
    make_skill(root, "cat1/skill-07", {"name": "skill-07", "description": "edited after the first build"})
    rebuild_equals_cold(root, index, cli_env, tmp_path, "files unchanged")
    # ... and the store that build wrote is whole again.
    from retriever import build as build_mod
    make_skill(root, "cat1/skill-08", {"name": "skill-08", "description": "edited once more"})
    header, _ = build_mod.build(build_mod.resolve([str(root)], use_config=False), str(index))
    assert header["updated"]


def _store_key(index):
    return reuse.key(index_mod.PROFILES["default"])


def test_the_index_is_flushed_to_disk_before_it_replaces_the_old_one(tmp_path, monkeypatch):
    # The index is fsynced before its rename: after a crash the old index
    # or the new one is there, whole.  The reuse store and the verified
    # memo are not (every reader checks them whole, and damage only costs a
    # full build or a checksum pass), which saves a rebuild most of its
    # write time on large libraries.
    from retriever import build as build_mod
    root = tmp_path / "skills"
    library(root)
    synced = []
    real = os.fsync

    def fsync(fd):
        synced.append(os.readlink("/proc/self/fd/%d" % fd))
        return real(fd)
    monkeypatch.setattr(os, "fsync", fsync)
    index = str(tmp_path / "idx" / "index.skr")
    build_mod.build(build_mod.resolve([str(root)], use_config=False), index)
    assert [os.path.basename(p).split(".tmp.")[0] for p in synced] == ["index.skr"]
    assert os.path.exists(reuse.path_for(index)) and os.path.exists(store.memo_path(index))


def test_a_build_parsed_in_worker_processes_equals_one_parsed_in_process(tmp_path, monkeypatch):
    # Past PARALLEL_MIN files, worker processes parse and analyse, each
    # numbering its terms itself, and the parent maps every worker's numbers
    # to its own (new terms numbered in sorted order): the index and the
    # reuse store must be exactly those of a build parsed in process, and
    # the next edit's rebuild must find the store usable.  Small chunks
    # interleave the workers' results.
    from retriever import build as build_mod
    if build_mod.can_fork() < 2:
        pytest.skip("one core: the build never starts workers here")
    root = tmp_path / "skills"
    words = ["pdf", "merge", "docker", "image", "deploy", "kubernetes", "test", "lint", "git", "rebase", "sql",
             "query", "chart", "plot", "email", "send", "翻译", "文档"]
    n = build_mod.PARALLEL_MIN + 40
    for i in range(n):
        make_skill(root, "c%d/s%03d" % (i % 9, i),
                   {"name": "s%03d" % i, "description": "does %s and %s" % (words[i % 18], words[(i * 5) % 18]),
                    "tags": [words[(i * 7) % 18]]},
                   body=" ".join(words[(i * 3 + j) % 18] for j in range(i % 23)) + " unique%d" % i)
    scope = build_mod.resolve([str(root)], use_config=False)
    parallel, serial = str(tmp_path / "p" / "i.skr"), str(tmp_path / "s" / "i.skr")
    import multiprocessing.pool
    handed = []
    real = multiprocessing.pool.Pool.imap

    def imap(pool, func, jobs, chunksize=1):
        jobs = list(jobs)
        handed.extend(jobs)
        return real(pool, func, jobs, 8)
    monkeypatch.setattr(multiprocessing.pool.Pool, "imap", imap)
    workers = []
    real_number = build_mod._number

    def number(results, fresh, vocab, by_worker):
        workers.extend(results[i][9][3] for i in fresh if len(results[i]) == 10)
        return real_number(results, fresh, vocab, by_worker)
    monkeypatch.setattr(build_mod, "_number", number)
    header, _ = build_mod.build(scope, parallel)
    assert header["n_docs"] == n and len(handed) == n
    assert len(workers) == n and len(set(workers)) >= 2  # every result numbered by a worker, two at least
    monkeypatch.setattr(build_mod, "PARALLEL_MIN", n + 1)
    build_mod.build(scope, serial)
    assert index_bytes(pathlib.Path(parallel)) == index_bytes(pathlib.Path(serial))
    key = reuse.key(index_mod.PROFILES["default"])
    # Compared loaded: marshal's bytes depend on which equal strings are one object.
    assert reuse.load(reuse.path_for(parallel), key) == reuse.load(reuse.path_for(serial), key)
    md = root / "c0" / "s000" / "SKILL.md"
    md.write_text(md.read_text() + "\nEdited: chart plot.\n")
    header, _ = build_mod.build(scope, parallel)
    assert header["reused"] == n - 1 and header["updated"]


def test_a_first_build_analysing_while_it_walks_equals_one_that_walks_first(tmp_path, monkeypatch):
    # A first build hands each SKILL.md to the workers as the walk finds it
    # (in no set order); duplicates reached through a symlinked folder and
    # through a second root, and skills below a root's max_depth, must come
    # out exactly as a build that walks first and parses in process.
    from retriever import build as build_mod
    if build_mod.can_fork() < 2:
        pytest.skip("one core: the build never starts workers here")
    root = tmp_path / "skills"
    n = build_mod.PARALLEL_MIN + 60
    for i in range(n):
        make_skill(root, "c%d/d%d/s%03d" % (i % 7, i % 3, i),
                   {"name": "s%03d" % i, "description": "handles %s files, case %d" % (("pdf", "csv", "log")[i % 3], i)},
                   body="Steps for case %d. " % i + "word%d " % (i % 50) * (i % 5))
    (root / "linked").symlink_to(root / "c1" / "d1" / "s001")  # a skill folder linked in twice
    other = tmp_path / "other"
    other.mkdir()
    (other / "c2").symlink_to(root / "c2")  # a second root holding a link into the first
    make_skill(other, "own/extra", {"name": "extra", "description": "the second root's own skill"})
    scope = build_mod.resolve([str(root), str(other)], use_config=False)
    scope["roots"][1]["max_depth"] = 2  # its deeper skills are left out
    walking, serial = str(tmp_path / "w" / "i.skr"), str(tmp_path / "s" / "i.skr")
    early = []
    real = build_mod._analyse_walking

    def spy(*a):
        got = real(*a)
        early.append(len(got))
        return got
    monkeypatch.setattr(build_mod, "_analyse_walking", spy)
    header, problems = build_mod.build(scope, walking)
    assert early[0] > n  # every file, the linked ones again
    monkeypatch.setattr(build_mod, "PARALLEL_MIN", 10 * n)
    header2, problems2 = build_mod.build(scope, serial)
    assert early[1] == 0
    assert index_bytes(pathlib.Path(walking)) == index_bytes(pathlib.Path(serial))
    assert header["n_docs"] == header2["n_docs"] and sorted(problems) == sorted(problems2)
    key = reuse.key(index_mod.PROFILES["default"])
    assert reuse.load(reuse.path_for(walking), key) == reuse.load(reuse.path_for(serial), key)


def test_answers_follow_the_edit(tmp_path, cli_env):
    root = tmp_path / "skills"
    library(root)
    index = tmp_path / "index.skr"
    build(root, index, cli_env)
    make_skill(root, "cat2/skill-02", {"name": "skill-02", "description": "Extract text from scanned pdf files"})
    build(root, index, cli_env)
    proc = run_cli(["--root", root, "--index", index, "--format", "json", "extract text from a scanned pdf"],
                   cli_env)
    assert_clean(proc)
    assert '"id": "cat2/skill-02"' in proc.stdout


def _damage(kind, path):
    data = path.read_bytes()
    if kind == "truncated":
        path.write_bytes(data[:len(data) // 2])
    elif kind == "flipped":
        mid = len(data) // 2
        path.write_bytes(data[:mid] + bytes([data[mid] ^ 0xFF]) + data[mid + 1:])
    elif kind == "garbage":
        path.write_bytes(b"not a store at all")
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "other-key":
        # Whole and checksummed, but made under another key (older code).
        reuse.save(str(path), "another key", [], {})
    elif kind == "wrong-shape":
        # Checksummed and keyed, but the entries do not fit the vocabulary:
        # term numbers beyond it.
        key = reuse.key(index_mod.PROFILES["default"])
        vocab, entries, layout = reuse.load(str(path), key)
        entries = {p: e[:9] + ((e[9][0], b"\xff\xff\xff\x7f" * (len(e[9][1]) // 4)),) if len(e) == 10 else e
                   for p, e in entries.items()}
        assert reuse.save(str(path), key, vocab[:1], entries, layout)


@pytest.mark.parametrize("kind", ["truncated", "flipped", "garbage", "empty", "other-key", "wrong-shape"])
def test_a_damaged_reuse_store_means_a_correct_full_build(tmp_path, cli_env, kind):
    root = tmp_path / "skills"
    library(root)
    index = tmp_path / "idx" / "index.skr"
    build(root, index, cli_env)
    make_skill(root, "cat1/skill-07", {"name": "skill-07", "description": "edited after the first build"})
    store_file = tmp_path / "idx" / "index.skr.reuse"
    _damage(kind, store_file)
    proc = build(root, index, cli_env)
    assert "files unchanged" not in proc.stdout  # nothing was taken from it
    cold_equals(root, index, cli_env, tmp_path)
    # ... and the store written by that build is whole again.
    again = build(root, index, cli_env)
    assert "15 files unchanged" in again.stdout


def test_two_concurrent_builders_leave_a_valid_index_and_store(tmp_path, cli_env):
    root = tmp_path / "skills"
    library(root, n=30)
    index = tmp_path / "idx" / "index.skr"
    build(root, index, cli_env)
    make_skill(root, "cat0/skill-00", {"name": "skill-00", "description": "changed before the race"})
    procs = []

    def run():
        procs.append(run_cli(["build", "--root", root, "--index", index], cli_env))

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for p in procs:
        assert_clean(p)
    assert [f for f in os.listdir(index.parent) if ".tmp" in f] == []
    store.load(str(index))  # whole
    cold_equals(root, index, cli_env, tmp_path)
    # The store either builder left is whole and current: all reused.
    rebuild_equals_cold(root, index, cli_env, tmp_path, "33 files unchanged")


def test_a_store_under_another_profile_is_not_reused(tmp_path, cli_env):
    root = tmp_path / "skills"
    library(root)
    index = tmp_path / "index.skr"
    build(root, index, cli_env)
    proc = build(root, index, cli_env, "--profile", "seed")
    assert "files unchanged" not in proc.stdout


# -- progress ------------------------------------------------------------------

_PROGRESS_RUN = ("import sys; sys.path.insert(0, %r)\n"
                 "from retriever import progress\nfrom retriever.cli import commands\n"
                 "progress.AFTER_SECONDS = 0.0  # the tiny library builds in well under a second\n"
                 "sys.exit(commands.main(sys.argv[1:]))\n" % str(REPO))


def _build_with_stderr(args, env, stderr_tty):
    """Run a build with stderr on a pseudo-terminal or a pipe; returns
    (exit code, stderr text)."""
    import pty
    argv = [sys.executable, "-c", _PROGRESS_RUN] + [str(a) for a in args]
    if not stderr_tty:
        p = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60)
        return p.returncode, p.stderr.decode("utf-8", "replace")
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave)
        os.close(slave)
        chunks = []
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:  # EIO: the child closed its end
                break
            if not data:
                break
            chunks.append(data)
        p.stdout.read()
        p.stdout.close()
        code = p.wait(timeout=60)
    finally:
        os.close(master)
    return code, b"".join(chunks).decode("utf-8", "replace")


def test_progress_on_a_terminal_and_silence_otherwise(tmp_path, cli_env):
    root = tmp_path / "skills"
    library(root)
    index = tmp_path / "index.skr"
    args = ["build", "--root", root, "--index", index]
    code, err = _build_with_stderr(args, cli_env, stderr_tty=True)
    assert code == 0, err
    assert "building index:" in err and "15 files read" in err and "14 skills indexed" in err, err
    assert err.endswith("\n")  # the line is ended, not left for the next output to overwrite

    code, err = _build_with_stderr(args, cli_env, stderr_tty=False)
    assert code == 0
    assert "building index" not in err

    code, err = _build_with_stderr(args + ["-q"], cli_env, stderr_tty=True)
    assert code == 0
    assert "building index" not in err

