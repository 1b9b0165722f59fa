"""The prebuilt index file: round trip, location, atomic writes, and recovery
from missing, corrupt, truncated, foreign-version and mismatched files
(issue 2, item 6)."""

import os
import random

import pytest

from retriever import store
from skillret_helpers import assert_clean, index_ids, json_results, make_skill


@pytest.fixture
def lib(tmp_path):
    root = tmp_path / "skills"
    make_skill(root, "devops/k8s-certs", {"name": "k8s-certs", "description": "Rotate kubernetes TLS certificates"})
    make_skill(root, "docs/pdf-extract", {"name": "pdf-extract", "description": "Extract text from scanned pdf files"})
    make_skill(root, "git/commit-msg", {"name": "commit-msg", "description": "Write conventional git commit messages"})
    return root, tmp_path / "index" / "skills.skr"


def ask(cli, root, index, words="extract text from my scanned pdf", *extra):
    return cli("--root", root, "--index", index, "--format", "json", *extra, words)


def read_header(path):
    header, f = store.read_header(str(path))
    f.close()
    return header


def test_round_trip(cli, lib):
    root, index = lib
    proc = cli("build", "--root", root, "--index", index)
    assert_clean(proc)
    assert proc.stdout.startswith("built %s: 3 skills" % index)
    with open(index, "rb") as f:
        assert f.read(len(store.MAGIC)) == store.MAGIC
    h = read_header(index)
    assert h["version"] == store.FORMAT_VERSION
    assert h["n_docs"] == 3
    assert h["explicit"] is True
    assert [r["path"] for r in h["roots"]] == [str(root)]
    assert h["params"]["profile"] == "default" and h["params"]["k1"] == 1.5
    assert isinstance(h["signature"], str) and h["signature"]
    assert h["built_at"] > 0
    assert index_ids(index) == ["devops/k8s-certs", "docs/pdf-extract", "git/commit-msg"]
    q = ask(cli, root, index)
    res = json_results(q)
    assert res[0]["id"] == "docs/pdf-extract"
    assert res[0]["path"] == str(root / "docs/pdf-extract")
    assert res[0]["description"] == "Extract text from scanned pdf files"
    assert q.stderr == ""  # answered from the file, nothing rebuilt


def test_seed_profile_round_trip(cli, lib):
    root, index = lib
    assert_clean(cli("build", "--profile", "seed", "--root", root, "--index", index))
    assert read_header(index)["params"]["profile"] == "seed"
    q = ask(cli, root, index)
    assert json_results(q)[0]["id"] == "docs/pdf-extract"
    assert q.stderr == ""
    assert read_header(index)["params"]["profile"] == "seed"


def test_default_location_is_the_xdg_cache(cli, cli_env, lib, tmp_path):
    root, _ = lib
    proc = cli("build", "--root", root)
    assert_clean(proc)
    cache = os.path.join(cli_env["XDG_CACHE_HOME"], "skill-retrieval")
    files = [f for f in os.listdir(cache) if f.endswith(".skr")]
    assert len(files) == 1
    assert os.path.join(cache, files[0]) in proc.stdout
    # A query for the same roots answers from that file without rebuilding.
    q = cli("--root", root, "--format", "json", "rotate kubernetes certificates")
    assert json_results(q)[0]["id"] == "devops/k8s-certs"
    assert q.stderr == ""
    # Other roots get their own file; the first one is left alone.
    other = tmp_path / "other"
    make_skill(other, "x", {"name": "x", "description": "Unrelated skill"})
    assert_clean(cli("--root", other, "unrelated"))
    assert len([f for f in os.listdir(cache) if f.endswith(".skr")]) == 2


def test_without_xdg_cache_home_the_index_goes_to_dot_cache(cli, lib, tmp_path):
    root, _ = lib
    proc = cli("build", "--root", root, env={"XDG_CACHE_HOME": None})
    assert_clean(proc)
    cache = tmp_path / "home" / ".cache" / "skill-retrieval"
    assert any(f.endswith(".skr") for f in os.listdir(cache))


def test_builds_leave_no_temporary_files(cli, lib):
    root, index = lib
    for _ in range(3):
        assert_clean(cli("build", "--root", root, "--index", index))
    assert_clean(ask(cli, root, index))
    leftovers = [f for f in os.listdir(index.parent) if ".tmp" in f or f.endswith("~")]
    assert leftovers == []


# -- recovery ----------------------------------------------------------------

def _section(index, name):
    return read_header(index)["sections"][name]


def damage(kind, index):
    data = index.read_bytes()
    if kind == "deleted":
        index.unlink()
    elif kind == "empty":
        index.write_bytes(b"")
    elif kind == "truncated-half":
        index.write_bytes(data[: len(data) // 2])
    elif kind == "truncated-sections":
        # The header survives whole; the sections after it are cut short.
        hlen = int.from_bytes(data[8:12], "little")
        index.write_bytes(data[: 12 + hlen + (len(data) - 12 - hlen) // 2])
    elif kind == "truncated-tiny":
        index.write_bytes(data[:5])
    elif kind == "truncated-after-magic":
        index.write_bytes(data[:10])
    elif kind == "extra-bytes":
        index.write_bytes(data + b"\0" * 64)
    elif kind == "garbage":
        index.write_bytes(random.Random(7).randbytes(len(data)))
    elif kind == "text":
        index.write_text("this is not an index\n")
    elif kind == "wrong-magic":
        index.write_bytes(b"NOTANIDX" + data[8:])
    elif kind == "corrupt-header":
        index.write_bytes(data[:12] + b"\xff" * 40 + data[52:])
    elif kind == "wrong-version":
        import marshal
        header = read_header(index)
        header["version"] = store.FORMAT_VERSION + 1
        hb = marshal.dumps(header)
        import zlib
        index.write_bytes(store.MAGIC + len(hb).to_bytes(4, "little") + zlib.crc32(hb).to_bytes(4, "little") + hb)
    elif kind == "damaged-records":
        # A well-formed header over unreadable skill records.
        off, ln = _section(index, "doc_blob")
        index.write_bytes(data[:off] + b"\xff" * ln + data[off + ln:])
    elif kind == "damaged-postings":
        off, ln = _section(index, "post_doc")
        index.write_bytes(data[:off] + b"\xff" * ln + data[off + ln:])
    else:
        raise AssertionError(kind)


# Damage that leaves our magic in place: still one of our indexes, repaired
# wherever it is.  Damage that erases it leaves a file that is no longer
# recognisably ours: a user's --index is then refused (issue 15), the cache's
# own slots are repaired.
KINDS = ["deleted", "truncated-half", "truncated-sections", "truncated-after-magic", "extra-bytes",
         "corrupt-header", "wrong-version", "damaged-records", "damaged-postings"]
FOREIGN = ["empty", "truncated-tiny", "garbage", "text", "wrong-magic"]


@pytest.mark.parametrize("kind", FOREIGN)
def test_foreign_content_at_index_is_refused_not_overwritten(cli, lib, kind):
    root, index = lib
    assert_clean(cli("build", "--root", root, "--index", index))
    damage(kind, index)
    before = index.read_bytes()
    q = ask(cli, root, index)
    assert_clean(q, 2)
    assert q.stdout == "" and len(q.stderr.splitlines()) == 1 and "not a skill-retrieval index" in q.stderr
    assert index.read_bytes() == before


@pytest.mark.parametrize("kind", FOREIGN)
def test_foreign_content_in_the_cache_is_repaired(cli, lib, tmp_path, kind):
    root, _ = lib
    assert_clean(cli("build", "--root", root))
    [index] = (tmp_path / "xdg-cache" / "skill-retrieval").glob("index-*.skr")
    damage(kind, index)
    q = cli("--root", root, "--format", "json", "extract text from my scanned pdf")
    assert json_results(q)[0]["id"] == "docs/pdf-extract"
    assert "rebuilt" in q.stderr


@pytest.mark.parametrize("kind", KINDS)
def test_query_recovers_from_a_broken_index(cli, lib, kind):
    root, index = lib
    assert_clean(cli("build", "--root", root, "--index", index))
    damage(kind, index)
    q = ask(cli, root, index)
    res = json_results(q)
    assert res and res[0]["id"] == "docs/pdf-extract"
    assert "rebuilt" in q.stderr
    assert str(index) in q.stderr
    assert len(q.stderr.splitlines()) == 1
    # The rebuilt file is whole again: the next query is silent.
    q2 = ask(cli, root, index, "rotate kubernetes certificates")
    assert json_results(q2)[0]["id"] == "devops/k8s-certs"
    assert q2.stderr == ""


@pytest.mark.parametrize("kind", ["deleted", "corrupt-header", "wrong-version", "truncated-half"])
def test_text_format_recovers_too(cli, lib, kind):
    root, index = lib
    assert_clean(cli("build", "--root", root, "--index", index))
    damage(kind, index)
    q = cli("--root", root, "--index", index, "extract text from my scanned pdf")
    assert_clean(q)
    assert "(docs/pdf-extract)" in q.stdout
    assert "rebuilt" in q.stderr


def test_truncated_index_is_rebuilt_for_the_roots_its_header_names(cli, lib):
    """A query without --root still knows which skills a damaged file held."""
    root, index = lib
    assert_clean(cli("build", "--root", root, "--index", index))
    damage("truncated-sections", index)
    q = cli("--index", index, "--format", "json", "extract text from my scanned pdf")
    assert json_results(q)[0]["id"] == "docs/pdf-extract"
    assert "rebuilt" in q.stderr


def test_an_unwritable_index_location_answers_from_memory(cli, lib, tmp_path):
    """The index path cannot be created: the query is answered from an
    index built in memory, with one warning line and no traceback (issue 15)."""
    root, _ = lib
    blocker = tmp_path / "file"
    blocker.write_text("x")
    q = cli("--root", root, "--index", blocker / "sub" / "i.skr", "--format", "json", "extract text from my scanned pdf")
    assert json_results(q)[0]["id"] == "docs/pdf-extract"
    (line,) = q.stderr.strip().splitlines()
    assert "cannot write index" in line and "in memory" in line


def test_index_built_for_other_roots_is_rebuilt(cli, lib, tmp_path):
    root, index = lib
    other = tmp_path / "other"
    make_skill(other, "music/playlist", {"name": "playlist", "description": "Make a spotify playlist"})
    assert_clean(cli("build", "--root", other, "--index", index))
    q = ask(cli, root, index)
    assert json_results(q)[0]["id"] == "docs/pdf-extract"
    assert "rebuilt" in q.stderr and "roots" in q.stderr
    assert [r["path"] for r in read_header(index)["roots"]] == [str(root)]


def test_stale_index_is_rebuilt_on_fresh_query(cli, lib):
    root, index = lib
    assert_clean(cli("build", "--root", root, "--index", index))
    make_skill(root, "media/ocr", {"name": "ocr", "description": "Optical character recognition of scanned images"})
    q = cli("--root", root, "--index", index, "--format", "json", "--fresh", "optical character recognition")
    assert json_results(q)[0]["id"] == "media/ocr"
    assert "rebuilt" in q.stderr
    # Nothing changed since: --fresh answers without rebuilding.
    q = cli("--root", root, "--index", index, "--format", "json", "--fresh", "optical character recognition")
    assert json_results(q)[0]["id"] == "media/ocr"
    assert q.stderr == ""


def test_no_traceback_from_build_into_a_bad_location(cli, lib, tmp_path):
    root, _ = lib
    blocker = tmp_path / "file"
    blocker.write_text("x")
    proc = cli("build", "--root", root, "--index", blocker / "i.skr")
    assert "Traceback" not in proc.stderr
    assert proc.returncode != 0
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.fixture(scope="module")
def big_index(tmp_path_factory):
    """A verified index over 1 MiB: queries read its tables entry by entry."""
    from skillret_helpers import base_env, run_cli
    tmp = tmp_path_factory.mktemp("big")
    root = tmp / "skills"
    for i in range(600):
        make_skill(root, "s%03d" % i, {"name": "s%03d" % i, "description": "topic%d and shared%d" % (i, i % 9)},
                   body="\n".join("word%dx%d line" % (i, j) for j in range(60)))
    index = tmp / "big.skr"
    assert_clean(run_cli(["build", "--root", root, "--index", index], base_env(tmp)))
    assert index.stat().st_size > store._READ_WHOLE_BELOW
    return index


def test_a_verified_large_index_reads_entries_and_answers_as_the_whole_file(big_index):
    """A query's load no longer reads the vocabulary-sized tables whole
    (1 to 2 ms at 20,000 skills): it finds a term through the header's
    every-64th term and reads that block.  Every term, first and last of
    a block, the first and last of all, and words before, between and
    after them must be found or missed exactly as in the whole file."""
    lazy = store.load(str(big_index))
    whole = store.load_bytes(big_index.read_bytes())
    assert "term_blob" not in lazy and len(lazy["term_heads"]) == -(-lazy["header"]["n_terms"] // store.HEAD_EVERY)
    blob, off = whole["term_blob"], whole["term_off"]
    terms = [blob[off[i]:off[i + 1]].decode() for i in range(len(off) - 1)]
    assert len(terms) > 3 * store.HEAD_EVERY
    for i, t in enumerate(terms):
        assert store.find_term(lazy, t) == i
        assert store.postings(lazy, i) == store.postings(whole, i)
        assert lazy["idf"][i] == whole["idf"][i] and store.df(lazy, i) == store.df(whole, i)
    for miss in ("", "0", terms[0][:-1], terms[-1] + "z", "\uffff", terms[store.HEAD_EVERY] + "\x00"):
        assert store.find_term(lazy, miss) == store.find_term(whole, miss) == -1
    n = lazy["header"]["n_docs"]
    assert [store.doc(lazy, d) for d in range(n)] == [store.doc(whole, d) for d in range(n)]
    for bad in (-1, n):
        with pytest.raises(IndexError):
            store.doc(lazy, bad)
    from retriever import query
    for q in ("topic17 shared3", "word5x7 line", "shared4"):
        assert query.search(lazy, q, 5, decide=False) == query.search(whole, q, 5, decide=False)


def test_an_index_not_known_good_still_reads_and_checks_its_tables_whole(big_index, tmp_path):
    """Entry by entry is for files verified whole since their last change;
    a copy (another file: no memo) is checked as before."""
    copy = tmp_path / "copy.skr"
    copy.write_bytes(big_index.read_bytes())
    idx = store.load(str(copy))
    assert "term_blob" in idx and idx["post_crc"] is not None
    assert store.find_term(idx, "topic17") >= 0


def test_a_header_whose_term_heads_do_not_fit_is_refused(big_index, tmp_path):
    import marshal
    import zlib
    data = big_index.read_bytes()
    hlen = int.from_bytes(data[8:12], "little")
    header = marshal.loads(data[16:16 + hlen])
    header["term_heads"] = header["term_heads"][:-1]
    hb = marshal.dumps(header).ljust(hlen, b"\0")[:hlen]
    bad = tmp_path / "heads.skr"
    bad.write_bytes(data[:12] + zlib.crc32(hb).to_bytes(4, "little") + hb + data[16 + hlen:])
    with pytest.raises(store.IndexError_, match="term_heads"):
        store.load(str(bad))


def test_a_vocabulary_too_large_for_heads_in_the_header_reads_its_tables_whole(big_index, tmp_path, monkeypatch):
    from retriever import build, query
    monkeypatch.setattr(store, "MAX_HEADS_BYTES", 0)
    index = tmp_path / "noheads.skr"
    build.build(build.resolve([str(big_index.parent / "skills")]), str(index))
    assert "term_heads" not in read_header(index)
    idx = store.load(str(index))
    assert "term_blob" in idx and idx["post_crc"] is None  # whole, and known good
    whole = store.load_bytes(big_index.read_bytes())
    assert query.search(idx, "topic17 shared3", 5, decide=False) == query.search(whole, "topic17 shared3", 5, decide=False) != []
