"""Team jargon made of the library's own words, learnt from loads through
the real Claude Code hook with a transcript written as Claude Code writes
one (``retriever.learn``): each word of "the weekly numbers" is in some
skill's text, and none of them names the dashboard the agent loads after
it; the phrase does."""

import re
import time

import pytest

from skillret_helpers import make_skill
from test_learn import BM25, tables
from test_usage import Transcript, hook  # noqa: F401  (the fixture)


@pytest.fixture
def skills(tmp_path):
    root = tmp_path / "skills"
    for name, text in [("sales-dashboard", "Build a sales dashboard with charts of revenue per region"),
                       ("weekly-report", "Write a weekly status report for your team"),
                       ("number-format", "Format numbers, currencies and dates in spreadsheets"),
                       ("pdf-merge", "Merge PDF files into one document"),
                       ("k8s-certs", "Rotate Kubernetes TLS certificates"),
                       ("git-bisect", "Find the commit that broke a test with git bisect"),
                       ("pull-request", "Open a pull request and pull the latest changes"),
                       ("meeting-notes", "Write meeting notes and a brief summary of decisions")]:
        make_skill(root, name, {"name": name, "description": text})
    return root


def names(out):
    return re.findall(r"\*\*([^*]+)\*\*", out)


def test_a_phrase_of_common_words_is_learnt_as_a_phrase(hook, tmp_path, cli_env):
    """One session: "pull the weekly numbers", the agent loads
    sales-dashboard, the user goes on about them.  Each word is also
    another skill's ("pull", "weekly", "numbers"), so a word's evidence
    is diluted by the follow-ups that hold it; the pair "weekly
    numbers" is learnt as one more term, and names the dashboard."""
    msg = "pull the weekly numbers for today"
    assert names(hook(msg, "before", env=BM25)) == ["pull-request"]
    t = Transcript(tmp_path / "a.jsonl")
    hook("pull the weekly numbers", "a", t.path, env=BM25)
    t.load("sales-dashboard")
    for follow_up in ["add last year to the weekly numbers", "sort the weekly numbers by region"]:
        hook(follow_up, "a", t.path, env=BM25)
    hook("merge these pdf files", "a", t.path, env=BM25)
    t.load("pdf-merge")  # a later load: the record is folded again, follow-ups and all
    hook("thanks", "a", t.path, env=BM25)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not (tables(cli_env) and "\npdf\t" in tables(cli_env)[0].read_text()):
        time.sleep(0.05)
    assert names(hook(msg, "z", Transcript(tmp_path / "z.jsonl").path, env=BM25)) == ["sales-dashboard"]
    # The follow-ups held the phrase too, with the dashboard loaded
    # already: no evidence against it (``learn.evidence`` counts the
    # sessions holding a term, not its prompts), so the phrase alone
    # brings the dashboard too (after weekly-report, named "weekly").
    assert "sales-dashboard" in names(hook("weekly numbers again", "y", env=BM25))
    # A plain request in the same home is unharmed.
    assert names(hook("write the weekly status report", "p", env=BM25)) == ["weekly-report"]
