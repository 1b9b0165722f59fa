"""Learnt words and the gate, through the real Claude Code hook with a
transcript written as Claude Code writes one (``retriever.learn``,
``retriever.decide``): a request in the team's words, half of them
words of other skills, is the learnt skill's to pass the gate."""

import time

import pytest

from skillret_helpers import make_skill
from test_learn import BM25, tables
from test_learn_jargon import names
from test_usage import Transcript, hook  # noqa: F401  (the fixture)

# Everyday words of a library's descriptions: "partner" and "drops" among
# them, so the team's "partner order drops" are no rare words.
WORDS = ("report team data numbers weekly sales region chart feed returns deal order invoice customer product "
         "price stock email slack page table file export import sync build deploy test review partner drops").split()


@pytest.fixture
def skills(tmp_path):
    root = tmp_path / "skills"
    make_skill(root, "airflow-dags", {"name": "airflow-dags",
                                      "description": "Write Airflow DAGs that load files into Postgres on a schedule"})
    make_skill(root, "recsys-feeds", {"name": "recsys-feeds",
                                      "description": "Design recommendation feeds and returns ranking for a product deal page"})
    for i in range(40):
        ws = [WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(6)]
        make_skill(root, "skill-%02d" % i, {"name": "skill-%02d" % i,
                                             "description": "Handle the %s for %s" % (" ".join(ws[:3]), " ".join(ws[3:]))})
    return root


def test_the_users_words_for_a_skill_name_it_for_the_gate(hook, tmp_path, cli_env):
    """The agent loaded airflow-dags after "the partner order drops"; "same
    deal as the partner order drops but for the returns feed" ranks it
    first on what was learnt, with "deal", "returns" and "feed" in other
    skills' text.  The user's learnt words are their name for the skill:
    the gate's "rare term in the name" reads them as it reads the skill's
    own name (without, the gate gave 0.53 against a threshold of 0.54)."""
    t = Transcript(tmp_path / "a.jsonl")
    hook("need a dag for the partner order drops, load each file into postgres", "a", t.path, env=BM25)
    t.load("airflow-dags")
    hook("thanks", "a", t.path, env=BM25)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not tables(cli_env):
        time.sleep(0.05)
    msg = "same deal as the partner order drops but for the returns feed"
    assert names(hook(msg, "b", Transcript(tmp_path / "b.jsonl").path, env=BM25))[:1] == ["airflow-dags"]
