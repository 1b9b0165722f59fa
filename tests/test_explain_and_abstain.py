"""explain and the decision of what to inject, as a user meets them (issues 5 and 29)."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from skillret_helpers import assert_clean, json_results, make_skill

REPO = Path(__file__).resolve().parent.parent

SKILLS = {
    "docs/pdf-extract": {"name": "pdf-extract",
                         "description": "Extract text from scanned PDF files with OCR."},
    "devops/k8s-certs": {"name": "k8s-certs",
                         "description": "Rotate the TLS certificates of a Kubernetes cluster."},
    "vcs/pr-review": {"name": "pr-review",
                      "description": "Review a pull request and leave inline comments."},
    "data/csv-clean": {"name": "csv-clean",
                       "description": "Clean a messy CSV file: encodings, delimiters, dates.",
                       "tags": ["csv", "data"]},
}


@pytest.fixture
def lib(tmp_path):
    root = tmp_path / "skills"
    for sid, fm in SKILLS.items():
        body = "# %s\n\n## When to use\n- %s\n" % (fm["name"], fm["description"])
        make_skill(root, sid, fm, body=body)
    return root, tmp_path / "idx.skr"


@pytest.fixture
def built(cli, lib):
    root, index = lib
    assert_clean(cli("build", "--root", root, "--index", index))
    return lib


def test_explain_splits_each_score_by_term_and_field(cli, lib):
    root, index = lib
    words = ["extract", "text", "from", "my", "scanned", "pdf"]
    res = json_results(cli("--root", root, "--index", index, "--format", "json", *words))
    proc = cli("explain", "--root", root, "--index", index, *words)
    assert_clean(proc)
    out = proc.stdout
    assert "query terms (after stopwords and stemming): extract text scan pdf" in out
    block = out.split("#1 pdf-extract (docs/pdf-extract)")[1].split("\n\n")[0]
    score = float(re.search(r"score ([0-9.]+)", block).group(1))
    assert score == pytest.approx(res[0]["score"], rel=1e-3)
    term_lines = [l for l in block.splitlines()[1:] if l.strip()]
    total = sum(float(l.split()[1]) for l in term_lines)
    # The per-term contributions add up to the score the query prints.
    assert total == pytest.approx(res[0]["score"], rel=1e-3)
    # Each term names the fields it came from.
    assert any("description" in l and "name" not in l.split("(")[0] for l in term_lines)


def test_explain_says_why_a_named_skill_is_missing(cli, lib):
    root, index = lib
    proc = cli("explain", "--root", root, "--index", index, "--skill", "k8s-certs",
               "extract", "text", "from", "a", "scanned", "pdf")
    assert_clean(proc)
    assert "k8s-certs (devops/k8s-certs) is not listed: it shares no term with the query" in proc.stdout
    proc = cli("explain", "--root", root, "--index", index, "--skill", "no-such-skill", "pdf")
    assert_clean(proc)
    assert "no-such-skill: no such skill in this index" in proc.stdout


DECIDE = {"SKILL_RETRIEVAL_DECIDE": None}  # the default: the calibrated decision (conftest turns it off)


def test_small_talk_injects_nothing(cli, lib):
    root, index = lib
    for msg in ("thanks!", "ok, go ahead", "Perfect, thank you", "thanks, that worked!",
                "can you make that last answer a bit shorter?"):
        proc = cli("--root", root, "--index", index, msg, env=DECIDE)
        assert_clean(proc)
        assert proc.stdout == "", msg
    # With the decision off, the same words are ranked like any other query.
    proc = cli("--root", root, "--index", index, "--format", "json", "ok", "pdf",
               env={"SKILL_RETRIEVAL_DECIDE": "off"})
    assert json_results(proc)[0]["id"] == "docs/pdf-extract"


def test_one_clear_winner_is_injected_alone(cli, lib):
    root, index = lib
    words = ["extract", "the", "text", "of", "my", "scanned", "pdf", "file"]
    on = json_results(cli("--root", root, "--index", index, "--format", "json", *words, env=DECIDE))
    assert [r["id"] for r in on] == ["docs/pdf-extract"]
    # The ranking itself lists more: the decision chose one.
    off = json_results(cli("--root", root, "--index", index, "--format", "json", *words,
                           env={"SKILL_RETRIEVAL_DECIDE": "off"}))
    assert off[0]["id"] == "docs/pdf-extract" and len(off) >= 2


def test_two_copies_of_one_skill_take_one_slot_and_k_stays_a_maximum(cli, tmp_path):
    root = tmp_path / "skills"
    # Two copies of one skill from two collections, and one unrelated.
    # Both fit; they are one group of copies (retriever/copies.py), so the
    # decision gives them one slot (issue 37: before, both were injected).
    for coll in ("team-a", "team-b"):
        make_skill(root, coll + "/pdf-ocr", {"name": "pdf-ocr-" + coll,
                   "description": "Extract the text of scanned PDF files with OCR (tesseract)."},
                   body="# PDF OCR\n\nRun tesseract on each page image of a scanned PDF.\n")
    make_skill(root, "ops/k8s-certs", {"name": "k8s-certs",
               "description": "Rotate the TLS certificates of a Kubernetes cluster."})
    index = tmp_path / "i.skr"
    q = ["ocr", "the", "text", "out", "of", "this", "scanned", "pdf", "with", "tesseract"]
    ranked = json_results(cli("--root", root, "--index", index, "--format", "json", *q,
                              env={"SKILL_RETRIEVAL_DECIDE": "off"}))
    assert sorted(r["id"] for r in ranked[:2]) == ["team-a/pdf-ocr", "team-b/pdf-ocr"]
    got = json_results(cli("--root", root, "--index", index, "--format", "json", *q, env=DECIDE))
    assert [r["id"] for r in got] == [ranked[0]["id"]]  # a tie: the copy the ranking puts first
    one = json_results(cli("--root", root, "--index", index, "--format", "json", "-k", "1", *q, env=DECIDE))
    assert len(one) == 1 and one[0]["id"] in ("team-a/pdf-ocr", "team-b/pdf-ocr")


@pytest.mark.parametrize("value", ["high", "-1", "2"])
def test_a_bad_decide_value_warns_and_uses_the_default(cli, built, value):
    root, index = built
    proc = cli("--root", root, "--index", index, "--format", "json", "extract", "text", "from", "a",
               "scanned", "pdf", env={"SKILL_RETRIEVAL_DECIDE": value})
    assert proc.returncode == 0
    assert [r["id"] for r in json_results(proc)] == ["docs/pdf-extract"]
    assert "SKILL_RETRIEVAL_DECIDE" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_explain_shows_the_decision_that_was_made(cli, lib):
    root, index = lib
    words = ["extract", "the", "text", "of", "my", "scanned", "pdf", "file"]
    injected = json_results(cli("--root", root, "--index", index, "--format", "json", *words, env=DECIDE))
    proc = cli("explain", "--root", root, "--index", index, *words, env=DECIDE)
    assert_clean(proc)
    out = proc.stdout
    assert re.search(r"decision \(bm25 model, docs/decision.md\): the gate gives [01]\.\d\d that this turn "
                     r"needs a skill \(threshold 0\.\d\d\): the best candidate is injected", out)
    assert "gate features: coverage 1.000" in out
    marked = re.findall(r"^  #\d+ \S+ \((\S+)\)  score [0-9.]+  (injected|not injected)", out, re.M)
    assert [sid for sid, verdict in marked if verdict == "injected"] == [r["id"] for r in injected]
    assert len(marked) >= 2 and "features: score / best" in out
    # Small talk: explain says the gate said no, and nothing is marked injected.
    out = cli("explain", "--root", root, "--index", index, "thanks, that worked!", env=DECIDE).stdout
    assert "injected" not in out.replace("not injected", "").replace("nothing is injected", "")


def test_the_guidance_line_names_each_runners_way_to_load_a_skill(cli, lib):
    import json as _json
    from retriever import render
    from retriever.runners import registry
    root, index = lib
    prompt = "extract the text of my scanned pdf"
    block = cli("--root", root, "--index", index, prompt, env=DECIDE).stdout
    assert block.splitlines()[1] == render.guidance()
    want = {"claude-code": "Skill tool", "codex": "SKILL.md", "gemini": "activate_skill",
            "hermes": "skill_view(name)", "opencode": "skill tool"}
    for runner, words in want.items():
        rec = registry.RUNNERS[runner]
        payload = dict(rec["payload"])
        node = payload
        for key in rec["prompt"][:-1]:
            node = node.setdefault(key, {})
        node[rec["prompt"][-1]] = prompt
        proc = cli("hook", runner, "--root", root, "--index", index, input=_json.dumps(payload), env=DECIDE)
        assert proc.returncode == 0 and proc.stderr == ""
        assert words in render.guidance(rec["load"]) and render.guidance(rec["load"]) in \
            proc.stdout.encode().decode("unicode_escape"), runner
    # Every runner says where each description comes from.
    assert "quoted from that skill's SKILL.md" in render.guidance()


def test_make_eval_harness_prints_the_table(tmp_path):
    """The eval harness drives the real retriever over a labelled set."""
    corpora = tmp_path / "corpora"
    for sid, fm in SKILLS.items():
        make_skill(corpora / "tiny", sid, fm, body="")
    ev = tmp_path / "eval" / "tiny"
    ev.mkdir(parents=True)
    rows = [
        {"id": "p1", "query": "extract the text of a scanned pdf", "expected_skills": ["pdf-extract"],
         "should_trigger": True, "target_skill": "pdf-extract", "not_skills": [], "corpus": "tiny"},
        {"id": "p2", "query": "rotate kubernetes tls certificates", "expected_skills": ["k8s-certs"],
         "should_trigger": True, "target_skill": "k8s-certs", "not_skills": [], "corpus": "tiny"},
        {"id": "n1", "query": "thanks!", "expected_skills": [], "should_trigger": False,
         "target_skill": "pr-review", "not_skills": [], "corpus": "tiny"},
    ]
    (ev / "normalized.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, str(REPO / "eval" / "run_eval.py"), "--eval-dir", str(tmp_path / "eval"),
                           "--corpora", str(corpora), "--cache", str(tmp_path / "c"), "--report", str(report)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "| own | seed-style | 2 |" in proc.stdout
    own = json.loads(report.read_text())["results"]["default"]["own"]
    assert own["R@1"] == 1.0 and own["neg silent"] == 1.0


def test_keep_filters_before_the_cut_and_the_decision(cli, lib):
    """query.search(keep=...): candidates failing ``keep`` take no top-k
    place and decide nothing; keep=None is unchanged."""
    from retriever import store
    from retriever.query import search
    root, index = lib
    assert_clean(cli("build", "--root", root, "--index", index))
    idx = store.load(str(index))
    q = "extract text from scanned pdf files with ocr, then rotate the kubernetes tls certificates"
    for k in (1, 2, 6):
        assert search(idx, q, k) == search(idx, q, k, keep=lambda r: True)
    allr = search(idx, q, 6, decide=False)
    assert len(allr) >= 3 and allr[1]["score"] < allr[0]["score"]
    best, second = allr[0]["name"], allr[1]["name"]
    hide = lambda r: r["name"] != best
    # Hidden first: the next match takes the one place, and what is hidden
    # is never returned.
    assert [r["name"] for r in search(idx, q, 1, keep=hide, decide=False)] == [second]
    assert best not in [r["name"] for r in search(idx, q, 6, keep=hide)]
    assert search(idx, q, 6, keep=hide)[0]["name"] == second


HERMES = REPO.parent / "shared" / "corpora" / "hermes-agent"
PDF_THEN_ISSUE = "extract the text from these scanned pdf invoices with ocr, then file it with github-issues"


@pytest.fixture(scope="module")
def hermes(tmp_path_factory):
    """The 172 real skills of the hermes-agent collection, indexed."""
    if not HERMES.is_dir():
        pytest.skip("../shared/corpora is not present")
    from retriever import build
    index = tmp_path_factory.mktemp("hermes") / "index.skr"
    scope = build.resolve([str(HERMES.resolve())])
    scope["disabled"] = set()
    build.build(scope, str(index))
    return HERMES.resolve(), index


@pytest.mark.parametrize("text,want", [
    ("use systematic-debugging to figure out what's wrong", ["systematic-debugging"]),
    # Two named: both, and none of the skills ranked between them.
    ("run test-driven-development on this feature, then requesting-code-review",
     ["requesting-code-review", "test-driven-development"]),
    # Han and kana touch the name: a boundary all the same.
    ("用systematic-debugging帮我查一下这个bug", ["systematic-debugging"]),
    ("try one-three-one-rule", ["one-three-one-rule"]),
    # The named skill ranks #7, past the shortlist of 6 (an OCR skill is
    # first): it is found by its name, and only it is injected.
    (PDF_THEN_ISSUE, ["github-issues"]),
])
def test_a_skill_the_message_names_is_injected(cli, hermes, text, want):
    root, index = hermes
    got = json_results(cli("--root", root, "--index", index, "--format", "json", text, env=DECIDE))
    assert sorted(r["name"] for r in got) == want
    if text != PDF_THEN_ISSUE:
        return
    out = cli("explain", "--root", root, "--index", index, text, env=DECIDE).stdout
    assert "the message names a skill: what it names is injected, and nothing else" in out
    assert re.search(r"^  #1 ocr-and-documents .*  not injected \(the message names another skill\)$", out, re.M)
    assert re.search(r"^  #7 github-issues .*  injected \(the message names it\)$", out, re.M)


def test_only_a_skills_identifier_forces_it_in(cli, tmp_path):
    """A skill is named only by its identifier (words joined by - or _,
    five characters or more), written exactly: an untrusted skill named
    help-me is not forced into every "help me with ..."."""
    from retriever import decide
    root = tmp_path / "skills"
    make_skill(root, "misc/help-me", {"name": "help-me", "description": "A friendly general assistant persona."})
    make_skill(root, "ops/k8s-certs", {"name": "k8s-certs",
                                      "description": "Rotate the TLS certificates of a Kubernetes cluster."})
    make_skill(root, "data/csv-cleaner", {"name": "CSV Cleaner",
                                         "description": "Clean messy CSV files: encodings, delimiters, dates."})
    index = tmp_path / "i.skr"

    def names(*words):
        proc = cli("--root", root, "--index", index, "--format", "json", *words, env=DECIDE)
        assert_clean(proc)
        return [r["name"] for r in json_results(proc)]
    ask = "rotate the kubernetes tls certificates of the cluster"
    assert names("help me", ask) == ["k8s-certs"]
    # A named skill takes the place of what ranks first, and only it; the
    # folder names a skill too (Claude Code calls skills by it).
    assert names("use csv-cleaner, then", ask) == ["CSV Cleaner"]
    assert "CSV Cleaner" not in names("use csv cleaner, then", ask)
    assert "CSV Cleaner" not in names("use CSV-Cleaner, then", ask)  # not as it is written
    assert "CSV Cleaner" not in names("use my-csv-cleaner-tool, then", ask)  # inside another identifier
    # The rule itself.
    for word, ok in [("help-me", True), ("csv_clean", True), ("3-statement-model", True), ("ab-c", False),
                     ("pdf", False), ("help me", False), ("-help-", False), ("a--b-c", False)]:
        assert decide.identifier(word) is ok, word
    r = {"id": "dev/systematic-debugging", "name": "systematic-debugging"}
    for text, ok in [("use systematic-debugging now", True), ("(`systematic-debugging`)", True),
                     # Bare, a two-part name is a word of the sentence (decide.meant).
                     ("(systematic-debugging)", False),
                     ("use systematic debugging now", False), ("use Systematic-Debugging now", False),
                     ("systematic-debugging-v2", False), ("my_systematic-debugging", False),
                     ("用systematic-debugging调试", True)]:
        assert decide.names(text, r) is ok, text


def _term_sum(lines):
    return sum(float(l.split()[1]) for l in lines)


@pytest.mark.skipif(not __import__("retriever.semantic", fromlist=["x"]).installed(),
                    reason="the semantic extra is not installed")
def test_explain_with_the_tier_splits_each_bm25_score_by_term(cli, lib):
    """With the tier, each candidate's fused score heads its block and its
    BM25 score stands under it, split by term: the split adds up to that
    BM25 score (the one BM25 alone prints), and ``--skill`` compares a
    skill that is not listed with the last listed one score for score."""
    root, index = lib
    words = ["extract", "the", "text", "of", "my", "scanned", "pdf", "and", "clean", "the", "csv"]
    bm25 = {r["id"]: r["score"] for r in json_results(cli("--root", root, "--index", index, "--format", "json",
                                                          *words))}
    assert len(bm25) >= 2
    tier = {"SKILL_RETRIEVAL_SEMANTIC": "on", "SKILL_RETRIEVAL_DECIDE": None}
    proc = cli("explain", "--root", root, "--index", index, *words, env=tier, timeout=300)
    assert_clean(proc)
    out = proc.stdout
    assert "ranking: BM25 fused with the encoder" in out
    blocks = re.findall(r"^#\d+ \S+ \((\S+)\)  fused score ([0-9.]+), cosine [0-9.]+  \[[a-z ]+\]\n"
                        r"  BM25 score ([0-9.]+), by term:\n((?:    .*\n)*)", out, re.M)
    # Every skill is a candidate (the encoder's top 10); those that share
    # no word with the message have a BM25 score of 0, and no term.
    assert {b[0] for b in blocks} >= set(bm25) and len(blocks) == 4
    for sid, fused, score, terms in blocks:
        assert float(score) == pytest.approx(bm25.get(sid, 0.0), abs=2e-3)
        assert _term_sum(terms.splitlines()) == pytest.approx(float(score), abs=5e-3)
        if sid in bm25:
            assert float(fused) < 1.0 < float(score)  # a fused score is no BM25 score
    # One listed (TOP_K 1): csv-clean is explained on request, fused score
    # against the last listed one's fused score, BM25 against BM25.
    proc = cli("explain", "--root", root, "--index", index, "--skill", "csv-clean", *words,
               env=dict(tier, SKILL_RETRIEVAL_TOP_K="1"), timeout=300)
    assert_clean(proc)
    out = proc.stdout
    first = re.search(r"^#1 \S+ \((\S+)\)  fused score ([0-9.]+), cosine", out, re.M)
    line = re.search(r"^csv-clean \(data/csv-clean\) is not listed: it ranks #\d+ in the fused ranking with fused "
                     r"score ([0-9.]+); the last listed scores ([0-9.]+)\. By BM25 alone it ranks #\d+ with BM25 "
                     r"score ([0-9.]+); the last listed has BM25 score ([0-9.]+)\.$", out, re.M)
    assert first and line, out
    assert float(line.group(2)) == pytest.approx(float(first.group(2)), abs=1e-3)
    assert float(line.group(3)) == pytest.approx(bm25["data/csv-clean"], abs=2e-3)
    assert float(line.group(4)) == pytest.approx(bm25[first.group(1)], abs=2e-3)
    block = out.split(line.group(0) + "\n")[1].split("\n\n")[0].splitlines()
    assert block[0].startswith("#%s csv-clean (data/csv-clean)  fused score %s, cosine "
                               % (re.search(r"it ranks #(\d+) in the fused", line.group(0)).group(1), line.group(1)))
    assert block[1] == "  BM25 score %.3f, by term:" % bm25["data/csv-clean"]
    assert _term_sum(block[2:]) == pytest.approx(bm25["data/csv-clean"], abs=5e-3)
