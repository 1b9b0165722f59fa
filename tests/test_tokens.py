"""``skill-retrieve tokens`` on a fixed five-skill corpus.

The expected blocks are written out by hand from Hermes' layout
(hermes-integration.md section 7: sorted categories, 4-space skill lines,
descriptions cut to 57 characters plus "...") and from the names-only form
the Hermes plugin leaves; their lengths are counted by hand too, so a
change in either format fails here.
"""

import json
from pathlib import Path

import pytest

from conftest import assert_clean, make_skill

from retriever import compact
from retriever.cli import tokens

LONG = "Rotate kubernetes TLS certificates on every node without downtime"  # 66 chars


@pytest.fixture
def corpus(tmp_path):
    root = tmp_path / "lib"
    make_skill(root, "devops/docker-debug", {"name": "docker-debug",
                                             "description": "Debug containers that exit early"})
    make_skill(root, "devops/k8s-certs", {"name": "k8s-certs", "description": LONG})
    make_skill(root, "git/git-bisect", {"name": "git-bisect",
                                        "description": "Find the commit that broke a test"})
    # No description in the frontmatter: Hermes lists the bare name.
    make_skill(root, "writing/readme", {"name": "readme-writer"}, body="Write READMEs.\n")
    # Directly under the root: Hermes uses the folder as the category.
    make_skill(root, "solo", {"name": "solo", "description": "'Quoted words'"})
    return root


HERMES = (
    "<available_skills>\n"
    "  devops:\n"
    "    - docker-debug: Debug containers that exit early\n"
    "    - k8s-certs: Rotate kubernetes TLS certificates on every node without ...\n"
    "  git:\n"
    "    - git-bisect: Find the commit that broke a test\n"
    "  solo:\n"
    "    - solo: Quoted words\n"
    "  writing:\n"
    "    - readme-writer\n"
    "</available_skills>"
)
# Line lengths with their newlines (the last has none):
# 19 + 10 + 53 + 78 + 7 + 52 + 8 + 25 + 11 + 20 + 19 = 302
HERMES_CHARS = 302

NOTE = ("(Names only: the skills relevant to a request are described after the "
        "user's message; skill_view(name) loads any listed skill.)")
# One line per top-level category, names sorted and comma-separated.
NAMES_ONLY = (
    "<available_skills>\n"
    "<!-- skill-retrieval:compact -->\n"
    "  devops [names only]: docker-debug, k8s-certs\n"
    "  git [names only]: git-bisect\n"
    "  solo [names only]: solo\n"
    "  writing [names only]: readme-writer\n"
    "</available_skills>\n" + NOTE
)
# 19 + 33 + 47 + 31 + 26 + 38 + 20 + 127 (note) = 341
NAMES_ONLY_CHARS = 341


def test_hand_counts_match_the_literals():
    # Guards the hand counts themselves (and the 60-char cut: 57 + "...").
    assert len(HERMES) == HERMES_CHARS
    assert len(NOTE) == 127
    assert len(NAMES_ONLY) == NAMES_ONLY_CHARS
    assert tokens.hermes_description(LONG) == LONG[:57] + "..."
    assert len(tokens.hermes_description(LONG)) == 60


def test_blocks_on_fixed_corpus(corpus, cli_env, monkeypatch):
    for k, v in cli_env.items():
        monkeypatch.setenv(k, v)
    m = tokens.measure([str(corpus)], queries=["rotate kubernetes certificates"])
    assert m["skills"] == 5
    assert m["blocks"]["hermes"] == HERMES
    assert m["hermes_block_chars"] == HERMES_CHARS
    assert m["blocks"]["names_only"] == NAMES_ONLY
    assert m["names_only_chars"] == NAMES_ONLY_CHARS
    # Claude Code lists every description in full (the README one is the
    # first paragraph, as our reader takes it).
    assert m["claude_listing_chars"] == sum(len("- %s: %s\n" % (n, d)) for n, d in [
        ("docker-debug", "Debug containers that exit early"), ("k8s-certs", LONG),
        ("git-bisect", "Find the commit that broke a test"), ("readme-writer", "Write READMEs."),
        ("solo", "'Quoted words'")])  # Hermes strips the quotes; Claude Code does not


def test_injection_row_matches_the_cli(corpus, cli, tmp_path):
    qfile = tmp_path / "q.jsonl"
    qfile.write_text('{"query": "rotate kubernetes certificates"}\n'
                     '{"query": "zebra quilting marmalade"}\n\n', encoding="utf-8")
    proc = cli("tokens", "--root", corpus, "--queries", qfile, "--format", "json")
    assert_clean(proc)
    m = json.loads(proc.stdout)
    assert m["queries"] == 2
    # What the query path prints for the same message is what gets injected.
    hit = cli("--root", corpus, "rotate kubernetes certificates")
    assert_clean(hit)
    assert "k8s-certs" in hit.stdout
    inj = m["injection_chars"]
    assert inj["empty"] == 1
    assert inj["mean"] == len(hit.stdout) / 2
    assert inj["p95"] == inj["max"] == len(hit.stdout)
    assert m["net_saving_chars"] == HERMES_CHARS - NAMES_ONLY_CHARS - len(hit.stdout) / 2


def test_text_table(corpus, cli, tmp_path):
    qfile = tmp_path / "q.txt"
    qfile.write_text("find the commit that broke a test\nthanks\n", encoding="utf-8")
    proc = cli("tokens", "--root", corpus, "--queries", qfile)
    assert_clean(proc)
    out = proc.stdout
    assert "≈ tokens (chars/4)" in out
    rows = {l.split("|")[1].strip(): l for l in out.splitlines() if l.startswith("| ") and "---" not in l}
    stock = [r for k, r in rows.items() if k.startswith("stock listing")][0]
    assert "| %d | %d |" % (round(HERMES_CHARS / 4), HERMES_CHARS) in stock
    names = [r for k, r in rows.items() if k.startswith("names-only")][0]
    assert "| %d | %d |" % (NAMES_ONLY_CHARS / 4, NAMES_ONLY_CHARS) in names
    assert any(k.startswith("mean injection") for k in rows)
    assert any(k.startswith("net saving") for k in rows)
    assert "nothing injected for 1 of 2 queries" in out
    assert "names-only block: %.0f%% of the stock listing; 5 of its 5 skill names kept" \
        % (100.0 * NAMES_ONLY_CHARS / HERMES_CHARS) in out


def test_no_skills_exits_1(cli, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = cli("tokens", "--root", empty)
    assert_clean(proc, 1)
    assert "no skills" in proc.stderr
    # No table of an empty library (it would show a negative saving).
    assert proc.stdout == ""


HERMES_AGENT = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "hermes-agent"


@pytest.mark.skipif(not HERMES_AGENT.is_dir(), reason="../shared/corpora/hermes-agent is not present")
def test_names_only_block_is_a_fifth_of_stock_on_the_hermes_agent_library(cli_env, monkeypatch):
    # Issue 10: at most 20% of the stock listing, every listed name kept
    # (skill_view(name) takes exactly these), the same bytes on every pass.
    for k, v in cli_env.items():
        monkeypatch.setenv(k, v)
    m = tokens.measure([str(HERMES_AGENT)], queries=list(tokens.DEFAULT_QUERIES))
    stock, names = m["blocks"]["hermes"], m["blocks"]["names_only"]
    assert m["names_only_chars"] <= 0.20 * m["hermes_block_chars"], (m["names_only_chars"], m["hermes_block_chars"])
    assert compact.block_names(names) == compact.block_names(stock) and len(compact.block_names(stock)) > 150
    assert m["names_kept"] == m["names_listed"] == len(compact.block_names(stock))
    assert tokens.names_only_block(stock) == names and compact.compact_text(names) is None
    assert tokens.estimate(m["injection_chars"]["mean"]) <= 350
