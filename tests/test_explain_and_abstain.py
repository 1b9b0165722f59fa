"""explain, abstention and the relative floor, as a user meets them (issue 5)."""

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


def test_small_talk_injects_nothing(cli, lib):
    root, index = lib
    for msg in ("thanks!", "ok, go ahead", "Perfect, thank you"):
        proc = cli("--root", root, "--index", index, msg)
        assert_clean(proc)
        assert proc.stdout == ""
    # With abstention off, the same words are ranked like any other query.
    proc = cli("--root", root, "--index", index, "--format", "json", "ok", "pdf",
               env={"SKILL_RETRIEVAL_MIN_SCORE": "0"})
    assert json_results(proc)[0]["id"] == "docs/pdf-extract"


def test_weak_coverage_abstains_and_zero_disables_it(cli, lib):
    root, index = lib
    # One word of six known to the library, shared by a single skill.
    words = ["bake", "sourdough", "bread", "overnight", "without", "pdf"]
    on = cli("--root", root, "--index", index, "--format", "json", *words,
             env={"SKILL_RETRIEVAL_MIN_SCORE": "0.9"})
    assert json_results(on) == []
    off = cli("--root", root, "--index", index, "--format", "json", *words,
              env={"SKILL_RETRIEVAL_MIN_SCORE": "0"})
    assert [r["id"] for r in json_results(off)] == ["docs/pdf-extract"]


def test_relative_floor_drops_the_tail(cli, lib):
    root, index = lib
    words = ["clean", "the", "csv", "data", "then", "review", "it"]
    full = json_results(cli("--root", root, "--index", index, "--format", "json", *words,
                            env={"SKILL_RETRIEVAL_MIN_SCORE_RATIO": "0"}))
    assert len(full) >= 2 and full[0]["id"] == "data/csv-clean"
    cut = json_results(cli("--root", root, "--index", index, "--format", "json", *words,
                           env={"SKILL_RETRIEVAL_MIN_SCORE_RATIO": "0.99"}))
    assert [r["id"] for r in cut] == ["data/csv-clean"]


@pytest.mark.parametrize("name", ["SKILL_RETRIEVAL_MIN_SCORE", "SKILL_RETRIEVAL_MIN_SCORE_RATIO"])
@pytest.mark.parametrize("value", ["high", "-1", "2"])
def test_bad_thresholds_warn_and_use_the_default(cli, built, name, value):
    root, index = built
    proc = cli("--root", root, "--index", index, "--format", "json", "scanned", "pdf",
               env={name: value})
    assert proc.returncode == 0
    assert json_results(proc)[0]["id"] == "docs/pdf-extract"
    assert name in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


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


def test_keep_filters_before_the_cut_the_floor_and_abstention(cli, lib):
    """query.search(keep=...): candidates failing ``keep`` take no top-k
    place, set no floor and decide no abstention; keep=None is unchanged."""
    from retriever import store
    from retriever.query import search
    root, index = lib
    assert_clean(cli("build", "--root", root, "--index", index))
    idx = store.load(str(index))
    q = "extract text from scanned pdf files with ocr, then rotate the kubernetes tls certificates"
    for k in (1, 2, 6):
        assert search(idx, q, k, 0.3, 0.3) == search(idx, q, k, 0.3, 0.3, keep=lambda r: True)
    allr = search(idx, q, 6, 0, 0)
    assert len(allr) >= 3 and allr[1]["score"] < allr[0]["score"]
    best, second = allr[0]["name"], allr[1]["name"]
    hide = lambda r: r["name"] != best
    # Hidden first: the next match takes the one place, and what is hidden
    # is never returned.
    assert [r["name"] for r in search(idx, q, 1, 0, 0, keep=hide)] == [second]
    assert best not in [r["name"] for r in search(idx, q, 6, 0, 0, keep=hide)]
    # Without keep, the hidden best sets a floor the next match is under.
    floor = (1 + allr[1]["score"] / allr[0]["score"]) / 2
    assert [r["name"] for r in search(idx, q, 6, 0, floor)] == [best]
    assert [r["name"] for r in search(idx, q, 6, 0, floor, keep=hide)][0] == second
