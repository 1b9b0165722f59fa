"""BM25 scores against a hand computation (issue 2, item 5).

The "seed" profile is the design we started from: one text per skill,
``"name: description"`` plus triggers and tags, lowercased and split on
punctuation, scored with Okapi BM25 (k1 = 1.5, b = 0.75) and Lucene's IDF
``log(1 + (N - df + 0.5) / (df + 0.5))``, summed over the unique query
terms.  The expected numbers below are computed from that definition alone,
independently of the product's code.
"""

import functools
import math
import re

import pytest

from retriever.query import top
from skillret_helpers import assert_clean, json_results, make_skill

K1 = 1.5
B = 0.75
# Scores are checked as computed: no abstention or relative cut-off in the way.
PLAIN_BM25 = {"SKILL_RETRIEVAL_DECIDE": "off"}

# id -> frontmatter.  Ids sort a-, b-, c-; names deliberately do not.
CORPUS = {
    "a-docs/pdf-tools": {
        "name": "pdf-tools",
        "description": "Extract text from PDF files and merge PDF pages",
        "triggers": ["split a pdf"],
        "tags": ["documents"],
    },
    "b-data/csv-report": {
        "name": "csv-report",
        "description": "Summarise CSV files into a weekly report",
        "tags": ["data", "report"],
    },
    "c-vcs/git-helper": {
        "name": "git-helper",
        "description": "Write commit messages and fix merge conflicts",
        "triggers": ["resolve a merge conflict", "Rebase_onto main"],
    },
}


def seed_text(fm):
    return " ".join([fm["name"] + ": " + fm["description"]] + fm.get("triggers", []) + fm.get("tags", []))


def tokens(text):
    # ASCII corpus: lowercase, split on anything that is not a letter or digit.
    return re.findall(r"[a-z0-9]+", text.lower())


def hand_scores(corpus, query):
    """Okapi BM25 by the book: {id: score} for every skill scoring > 0,
    with the average length on the index's grid of 2 ** (1/512) steps
    (index._avglen says why)."""
    docs = {sid: tokens(seed_text(fm)) for sid, fm in corpus.items()}
    n = len(docs)
    avgdl = 2.0 ** (round(math.log2(sum(len(t) for t in docs.values()) / n) * 512) / 512)
    out = {}
    for sid, toks in docs.items():
        s = 0.0
        for term in dict.fromkeys(tokens(query)):  # unique terms
            df = sum(1 for t in docs.values() if term in t)
            if not df:
                continue
            tf = toks.count(term)
            if not tf:
                continue
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            s += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * len(toks) / avgdl))
        if s > 0:
            out[sid] = s
    return out


def expected_order(scores):
    return sorted(scores, key=lambda sid: (-scores[sid], sid))


@pytest.fixture(scope="module")
def seed_index(tmp_path_factory):
    from skillret_helpers import base_env, run_cli
    tmp = tmp_path_factory.mktemp("bm25")
    root = tmp / "skills"
    for sid, fm in CORPUS.items():
        make_skill(root, sid, fm, body="# Body\n\nBody text is not part of the seed field: pdf merge csv.\n")
    env = base_env(tmp)
    env.update(PLAIN_BM25)
    index = tmp / "seed.skr"
    proc = run_cli(["build", "--profile", "seed", "--root", root, "--index", index], env)
    assert_clean(proc)

    def query(*words, extra=()):
        return json_results(run_cli(["--root", root, "--index", index, "--format", "json", "-k", "10",
                                     *extra, *words], env))

    return query, index


def test_the_index_records_the_seed_parameters(seed_index):
    from retriever import store
    header, f = store.read_header(str(seed_index[1]))
    f.close()
    assert header["params"]["profile"] == "seed"
    assert header["params"]["k1"] == K1
    assert header["n_docs"] == 3


def test_hand_computation_is_not_trivial():
    # Guard the test itself: the corpus exercises df 1 and 2, tf > 1 and
    # unequal lengths, so a wrong formula gives different numbers.
    lens = {sid: len(tokens(seed_text(fm))) for sid, fm in CORPUS.items()}
    assert len(set(lens.values())) == 3
    assert tokens(seed_text(CORPUS["a-docs/pdf-tools"])).count("pdf") == 4
    s = hand_scores(CORPUS, "merge")
    assert set(s) == {"a-docs/pdf-tools", "c-vcs/git-helper"}


@pytest.mark.parametrize("query", [
    "merge pdf files",
    "pdf",
    "merge",
    "weekly csv report",
    "resolve the merge conflict",
    "rebase onto main",
    "files",
    "a",
    "split the documents then write a report on merge conflicts",
])
def test_scores_match_hand_computed_okapi_bm25(seed_index, query):
    query_fn, _ = seed_index
    want = hand_scores(CORPUS, query)
    got = query_fn(query)
    assert [r["id"] for r in got] == expected_order(want)
    for r in got:
        assert r["score"] == pytest.approx(want[r["id"]], rel=1e-4)


def test_query_case_punctuation_and_repeats_do_not_change_scores(seed_index):
    query_fn, _ = seed_index
    base = query_fn("merge pdf")
    for variant in ("MERGE PDF", "merge, pdf!", "merge_pdf", "merge pdf pdf pdf merge", "(Merge) [PDF]?"):
        got = query_fn(variant)
        assert [(r["id"], r["score"]) for r in got] == [(r["id"], r["score"]) for r in base], variant


def test_only_matching_skills_are_returned(seed_index):
    query_fn, _ = seed_index
    got = query_fn("weekly")
    assert [r["id"] for r in got] == ["b-data/csv-report"]
    assert got[0]["score"] > 0
    assert query_fn("kubernetes zebra") == []
    # The body is not part of the seed text.
    assert query_fn("body") == []


def test_results_are_sorted_by_score(seed_index):
    query_fn, _ = seed_index
    got = query_fn("merge pdf files csv conflict")
    scores = [r["score"] for r in got]
    assert len(got) == 3
    assert scores == sorted(scores, reverse=True)


def test_ties_are_broken_by_id(tmp_path, cli):
    cli = functools.partial(cli, env=PLAIN_BM25)
    # Two skills with texts of equal length and the same term counts: equal
    # scores.  Id order (a1 < b1) is the reverse of name order.
    root = tmp_path / "skills"
    make_skill(root, "b1/alpha-tool", {"name": "alpha-tool", "description": "Same words here"})
    make_skill(root, "a1/zeta-tool", {"name": "zeta-tool", "description": "Same words here"})
    make_skill(root, "c1/other", {"name": "other", "description": "Nothing in common at all"})
    index = tmp_path / "seed.skr"
    assert_clean(cli("build", "--profile", "seed", "--root", root, "--index", index))
    got = json_results(cli("--root", root, "--index", index, "--format", "json", "same words"))
    assert [r["id"] for r in got] == ["a1/zeta-tool", "b1/alpha-tool"]
    assert got[0]["score"] == got[1]["score"] > 0
    # And -k 1 keeps the lower id.
    got = json_results(cli("--root", root, "--index", index, "--format", "json", "-k", "1", "same words"))
    assert [r["id"] for r in got] == ["a1/zeta-tool"]


@pytest.mark.parametrize("n", [10, 300, 3000, 6000, 20000])
def test_top_is_best_score_then_lowest_skill_number_at_every_size(n):
    """``query.top`` cuts small and large accumulators by different means
    (a sort of every score, or of those reaching a sample's k-th best);
    both must give the same order: score descending, ties by skill
    number, ties at the cut kept, whatever the sample misses."""
    import random
    rnd = random.Random(n)
    # Coarse scores make many ties, including at the cut.
    coarse = {d: rnd.randrange(40) / 4.0 for d in rnd.sample(range(3 * n), n)}
    # The best scores all where an evenly spaced sample does not look
    # (odd places), the rest one tie.
    hidden = {d: (5.0 + d % 7 if d % 2 else 1.0) for d in range(n)}
    for acc in (coarse, hidden):
        for k in (1, 6, 50):
            want = sorted(acc.items(), key=lambda x: (-x[1], x[0]))[:k]
            assert top(acc, k) == want


def test_an_analysis_numbered_by_its_own_process_encodes_like_the_analysis():
    """Each process analysing files numbers the terms itself
    (``analyze.numbered_terms``, ``index.pack``); mapped through the build's
    number for each of that process's terms (``index.renumber``), a skill
    must come out exactly as ``encode`` numbers its groups, whatever order
    the two numberings gave the terms."""
    from retriever import index as index_mod
    from retriever.analyze import numbered_terms
    prof = index_mod.PROFILES["default"]
    skill = {"id": "a/pdf-tools", "name": "pdf-tools", "description": "Merge PDF files; not for images.",
             "triggers": ["merge pdfs"], "tags": ["pdf", "documents"], "category": "a",
             "body": "# PDF\n## When to use\n- merging PDF files\n## Steps\nRun the merge tool on files.\n"}
    analysis = index_mod.doc_terms(skill, prof)
    own = []
    lengths, (vecs, sizes, numbers) = index_mod.pack(
        index_mod.doc_terms(skill, prof, numbered_terms(prof["analyzer"], index_mod.term_ids(own))))
    # The build's terms: one known before, then these in another order.
    vocab = ["zzz-earlier"] + sorted(own)
    assert own != sorted(own)
    plain = index_mod.encode(analysis, index_mod.term_ids(list(vocab)))
    numbering = [vocab.index(t) for t in own]
    assert index_mod.renumber(lengths, vecs, sizes, numbers, numbering) == plain and len(plain[1][0]) > 1
    empty = ((0,) * len(analysis[0]), [])
    lengths, (vecs, sizes, numbers) = index_mod.pack(empty)
    assert index_mod.renumber(lengths, vecs, sizes, numbers, []) == (empty[0], ((), b""))
    assert index_mod.encode(empty, index_mod.term_ids([])) == (empty[0], ((), b""))


def _library_analysis(n=60):
    from retriever import index as index_mod
    prof = index_mod.PROFILES["default"]
    words = ["pdf", "merge", "docker", "image", "deploy", "kubernetes", "test", "lint", "git", "rebase", "sql",
             "query", "chart", "plot", "email", "send"]
    vocab = []
    ids = index_mod.term_ids(vocab)
    docs = []
    for i in range(n):
        body = " ".join(words[(i * 7 + j * 3) % len(words)] for j in range(5 + i % 11)) + " unique%d" % i
        skill = {"id": "s/%d" % i, "name": "skill-%d" % i, "description": "does %s" % words[i % len(words)],
                 "triggers": [], "tags": [], "category": "s", "body": body}
        docs.append(index_mod.encode(index_mod.doc_terms(skill, prof), ids))
    return docs, vocab, prof


def _same_build(a, b):
    return (a["terms"] == b["terms"] and a["idf"] == b["idf"] and a["post_off"] == b["post_off"]
            and a["post_doc"] == b["post_doc"] and a["post_w"].tobytes() == b["post_w"].tobytes()
            and a["layout"]["slot"] == b["layout"]["slot"] and a["layout"]["gslot"] == b["layout"]["gslot"])


def test_postings_dealt_in_two_processes_are_the_ones_dealt_in_one():
    from retriever import index as index_mod
    docs, vocab, prof = _library_analysis()
    one = index_mod.build_terms(docs, vocab, prof)
    two = index_mod.build_terms(docs, vocab, prof, fork=True)
    assert _same_build(one, two)
    # ... and as index.build (the in-memory postings) has them.
    mem = index_mod.build_terms(docs, vocab, prof, keep_postings=True, fork=True)
    assert _same_build(one, mem) and len(mem["postings"]) == len(one["terms"])


@pytest.mark.parametrize("shape", ["unused terms", "one common term", "two skills"])
def test_postings_split_by_term_between_two_processes_join_in_index_order(shape):
    # The two processes split the terms (in index order) where a sample of
    # the postings says half of them lie: however lopsided the library,
    # and with terms no skill uses any more in the vocabulary (a reuse
    # store's), the two halves join into the one-process result.
    from retriever import index as index_mod
    docs, vocab, prof = _library_analysis()
    if shape == "unused terms":
        vocab = vocab + ["aaa-gone", "zzz-gone", "mmm-gone"]
    elif shape == "one common term":
        skills = [{"id": "s/%d" % i, "name": "s%d" % i, "description": "pdf", "triggers": [], "tags": [],
                   "category": "s", "body": "pdf " * (1 + i % 5) + ("rare%d" % i if i % 9 == 0 else "")}
                  for i in range(50)]
        vocab = []
        ids = index_mod.term_ids(vocab)
        docs = [index_mod.encode(index_mod.doc_terms(sk, prof), ids) for sk in skills]
    else:
        docs = docs[:2]
    one = index_mod.build_terms(docs, vocab, prof)
    two = index_mod.build_terms(docs, vocab, prof, fork=True)
    assert _same_build(one, two) and one["terms"] == sorted(one["terms"])


def test_weights_made_in_two_processes_after_an_edit_are_the_ones_made_in_one():
    from array import array
    from retriever import index as index_mod
    docs, vocab, prof = _library_analysis()
    first = index_mod.build_terms(docs, vocab, prof)
    skill = {"id": "s/5", "name": "skill-5", "description": "now a much longer description of merging pdf files",
             "triggers": [], "tags": [], "category": "s", "body": "pdf merge " * 40 + "fresh words here"}
    edited = index_mod.encode(index_mod.doc_terms(skill, prof), index_mod.term_ids(vocab))
    new_docs = docs[:5] + [edited] + docs[6:]
    old_of = [-1 if j == 5 else j for j in range(len(docs))]
    cold = index_mod.build_terms(new_docs, vocab, prof)
    for fork in (False, True):
        # As the reuse store gives the layout back: its arrays as bytes.
        prev = {k: v.tobytes() if isinstance(v, array) else v for k, v in first["layout"].items()}
        got = index_mod.update_terms(new_docs, vocab, prof, prev, old_of, [(5, docs[5][1])], fork=fork)
        assert [got[k] for k in ("terms", "idf", "post_off", "post_doc")] == \
            [cold[k] for k in ("terms", "idf", "post_off", "post_doc")]
        assert got["post_w"].tobytes() == cold["post_w"].tobytes()


def test_an_edit_that_keeps_the_average_lengths_keeps_the_other_terms_weights():
    # The average lengths sit on a grid: an edit that leaves them where
    # they were (here: as many words in each field) keeps the stored
    # weights of every term it does not touch and makes only the touched
    # terms' again.  The result is the cold build's, byte for byte.
    from array import array
    from retriever import index as index_mod
    docs, vocab, prof = _library_analysis()
    first = index_mod.build_terms(docs, vocab, prof)
    skill = {"id": "s/5", "name": "skill-5", "description": "does chart", "triggers": [], "tags": [],
             "category": "s", "body": "plot email send sql query lint git rebase test pdf unique5"}
    edited = index_mod.encode(index_mod.doc_terms(skill, prof), index_mod.term_ids(vocab))
    assert edited[0] == docs[5][0]  # the same length in every field
    new_docs = docs[:5] + [edited] + docs[6:]
    old_of = [-1 if j == 5 else j for j in range(len(docs))]
    cold = index_mod.build_terms(new_docs, vocab, prof)
    assert cold["avglen"] == first["avglen"]

    from retriever import store

    def update(weights):
        prev = {k: v.tobytes() if isinstance(v, array) else v for k, v in first["layout"].items()}
        prev["w"] = weights.tobytes()
        prev["crc"] = store.post_crcs(first).tobytes()  # as the build keeps them
        return index_mod.update_terms(new_docs, vocab, prof, prev, old_of, [(5, docs[5][1])])
    got = update(first["layout"]["w"])
    assert [got[k] for k in ("terms", "idf", "post_off", "post_doc")] == \
        [cold[k] for k in ("terms", "idf", "post_off", "post_doc")]
    assert got["post_w"].tobytes() == cold["post_w"].tobytes()
    # The untouched terms' checksums are carried, the touched ones made.
    crcs, redo = got["post_crc"]
    assert 0 < len(redo) < len(crcs)
    assert store.post_crcs(got) == store.post_crcs(cold)
    # The untouched terms' weights are the stored ones: other stored
    # weights come out as they went in.
    other = update(array("f", [w + 1.0 for w in first["layout"]["w"]]))
    changed = [a != b for a, b in zip(other["post_w"], cold["post_w"])]
    assert any(changed) and not all(changed)



@pytest.mark.parametrize("fails", [False, True])
def test_work_split_in_two_processes_survives_a_failed_child(fails):
    import os
    from array import array
    from retriever import index as index_mod
    parent = os.getpid()

    def work(lo, hi):
        if fails and os.getpid() != parent:
            os._exit(5)
        return array("I", range(lo, hi)), array("f", [x / 2 for x in range(lo, hi)])

    assert index_mod._in_two(work, 11, "If") == [list(work(0, 5)), list(work(5, 11))]
    assert index_mod._in_two(work, 11, "If", 9) == [list(work(0, 9)), list(work(9, 11))]
