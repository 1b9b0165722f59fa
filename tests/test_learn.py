"""Learning from what the agent loads (``retriever.learn``), through the
real Claude Code hook with a transcript written as Claude Code writes one
(a ``Skill`` tool call): team jargon no skill's text holds comes to name
the skill the agent loads after it."""

import re
import time
from pathlib import Path

import pytest

from retriever import learn, usage
from skillret_helpers import make_skill
from test_hermes_plugin import hermes_home  # noqa: F401  (the fixture)
from test_usage import Transcript, hook  # noqa: F401  (the fixture)


@pytest.fixture
def skills(tmp_path):
    root = tmp_path / "skills"
    make_skill(root, "rss-digest", {"name": "rss-digest",
                                    "description": "Summarize RSS and Atom feeds into a daily digest of new posts"})
    make_skill(root, "pdf-merge", {"name": "pdf-merge", "description": "Merge PDF files into one document"})
    make_skill(root, "k8s-certs", {"name": "k8s-certs", "description": "Rotate Kubernetes TLS certificates"})
    make_skill(root, "meeting-notes", {"name": "meeting-notes",
                                       "description": "Write meeting notes and a brief summary of decisions"})
    return root


# The decision on (the test environment turns it off): the gate decides.
BM25 = {"SKILL_RETRIEVAL_SEMANTIC": "off", "SKILL_RETRIEVAL_DECIDE": "on"}


def tables(cli_env):
    return sorted((Path(cli_env["XDG_CACHE_HOME"]) / "skill-retrieval").glob(learn.PREFIX + "*"))


def teach(hook, tmp_path, cli_env, env=None, tag="a", prompt="grab the morning brief", skill="rss-digest"):
    """Three sessions: ``prompt``, the agent loads ``skill``, the user
    says thanks; then wait for the background fold."""
    for s in range(3):
        sid = "%s%d" % (tag, s)
        t = Transcript(tmp_path / (sid + ".jsonl"))
        hook(prompt, sid, t.path, env=env)
        t.load(skill)
        assert hook("thanks", sid, t.path, env=env) == ""
    if env and env.get("SKILL_RETRIEVAL_LEARN") == "off":
        return
    deadline = time.monotonic() + 20
    while not tables(cli_env) and time.monotonic() < deadline:
        time.sleep(0.05)


def test_jargon_learnt_from_loads_gets_the_skill_injected(hook, tmp_path, cli_env):
    env = BM25
    assert "rss-digest" not in hook("grab the morning brief for today", "before", env=env)
    teach(hook, tmp_path, cli_env, env=env)
    assert len(tables(cli_env)) == 1
    assert "rss-digest" in hook("grab the morning brief for today", "s9", Transcript(tmp_path / "t9").path, env=env)
    # A plain request in the same home is unharmed.
    out = hook("merge these pdf files into one", "s10", env=env)
    assert "pdf-merge" in out and "rss-digest" not in out


def test_jargon_in_chinese_learnt_passes_the_gate(hook, tmp_path, cli_env):
    """A CJK message's bigrams that no skill holds are left out of its
    word count (most are not words); once learnt they count as known
    words, and "known" stays a share: counted before they joined, it
    came to 8.0 here, and the gate, which weighs it against injecting,
    silenced the skill they named."""
    msg = "抓一下今天的晨报 feed"  # "grab today's morning brief", with one word the library has
    teach(hook, tmp_path, cli_env, env=BM25, prompt=msg)
    assert "rss-digest" in hook(msg, "s9", Transcript(tmp_path / "t9").path, env=BM25)
    out = hook("merge these pdf files into one", "s10", env=BM25)
    assert "pdf-merge" in out and "rss-digest" not in out


def test_a_phrase_in_another_language_is_learnt_as_its_query_reads_it(hook, tmp_path, cli_env):
    """A Spanish phrase over English skills: its ranking leaves out the
    Spanish function words ("el", "de", "la"), so its pair is "informe
    mañana", and that is what is learnt.  Each word alone is the user's
    everyday word (forty sessions hold both and load nothing), so only
    the pair names the skill: learnt from terms with the function words
    kept ("informe de", "la mañana"), no query ever formed it, and the
    prompt got nothing."""
    msg = "el informe de la mañana"
    for n in range(40):
        hook("revisa el informe de ventas de esta mañana", "n%d" % n, Transcript(tmp_path / ("n%d" % n)).path,
             env=BM25)
    assert "rss-digest" not in hook(msg, "before", env=BM25)
    teach(hook, tmp_path, cli_env, env=BM25, prompt=msg)
    assert hook(msg, "s9", Transcript(tmp_path / "t9").path, env=BM25).split("**")[1:2] == ["rss-digest"]
    table = tables(cli_env)[0].read_text()
    assert "\ninforme mañana\t" in table and not re.search(r"\n(el|de|la)[ \t]", table)


def test_learning_off_neither_learns_nor_uses_it(hook, tmp_path, cli_env):
    off = dict(BM25, SKILL_RETRIEVAL_LEARN="off")
    teach(hook, tmp_path, cli_env, env=off)
    assert tables(cli_env) == []
    assert "rss-digest" not in hook("grab the morning brief for today", "s9", env=off)
    # Learnt with learning on, then turned off: not used.
    teach(hook, tmp_path, cli_env, env=BM25, tag="b")
    assert "rss-digest" not in hook("grab the morning brief for today", "s10", env=off)
    assert "rss-digest" in hook("grab the morning brief for today", "s11", env=BM25)


def test_forget_deletes_what_was_learnt(hook, cli, tmp_path, cli_env):
    teach(hook, tmp_path, cli_env, env=BM25)
    assert tables(cli_env)
    assert cli("stats", "--forget").returncode == 0
    assert tables(cli_env) == []
    assert "rss-digest" not in hook("grab the morning brief for today", "s9", env=BM25)


def test_explain_shows_the_learnt_share_of_a_score(hook, cli, skills, tmp_path, cli_env):
    teach(hook, tmp_path, cli_env, env=BM25)
    out = cli("explain", "--root", skills, "grab", "the", "morning", "brief", "for", "today", env=BM25).stdout
    block = out[out.index("rss-digest (") if "rss-digest (" in out else 0:]
    line = next(x for x in block.splitlines() if "learnt from loads" in x)
    assert "% of the score" in line
    off = cli("explain", "--root", skills, "grab", "the", "morning", "brief",
              env=dict(BM25, SKILL_RETRIEVAL_LEARN="off")).stdout
    assert "learnt from loads" not in off


def _entry(session, t, terms, injected=(), loaded=(), runner="claude-code"):
    return {"t": t, "runner": runner, "session": session, "injected": [[x] for x in injected],
            "tier": "bm25", "loaded": None if loaded is None else list(loaded), "prompt": None,
            "terms": list(terms) if terms is not None else None}


NOW = 1_800_000_000


def test_a_load_of_an_offered_skill_is_weaker_evidence_than_an_unoffered_one():
    unoffered = learn.evidence([_entry("a", NOW, ["brief"]), _entry("a", NOW, ["thank"], loaded=["rss"])], NOW)
    offered = learn.evidence([_entry("b", NOW, ["brief"], injected=["rss"]),
                              _entry("b", NOW, ["thank"], loaded=["rss"])], NOW)
    assert unoffered["brief"]["rss"] == learn.UNOFFERED
    assert offered["brief"]["rss"] == learn.FOLLOWED < learn.UNOFFERED


def test_an_offered_skill_never_loaded_loses_a_little_only_where_loads_show():
    shown = learn.evidence([_entry("a", NOW, ["brief"], injected=["pdf"]), _entry("a", NOW, ["ok"], loaded=[])], NOW)
    assert shown["brief"]["pdf"] == -learn.IGNORED
    # Cline shows no loads (loaded None): nothing is learnt either way.
    unknown = learn.evidence([_entry("a", NOW, ["brief"], injected=["pdf"], runner="cline"),
                              _entry("a", NOW, ["ok"], loaded=None, runner="cline")], NOW)
    assert unknown == {}


def test_evidence_decays_and_everyday_words_learn_little():
    old = learn.evidence([_entry("a", NOW - learn.HALF_LIFE_S, ["brief"]),
                          _entry("a", NOW, ["ok"], loaded=["rss"])], NOW)
    assert old["brief"]["rss"] == pytest.approx(learn.UNOFFERED / 2)
    # "today" is in ten prompts, one of them followed by the load.
    rows = [_entry("s%d" % k, NOW, ["today", "x%d" % k]) for k in range(9)]
    rows += [_entry("a", NOW, ["today", "brief"]), _entry("a", NOW, ["ok"], loaded=["rss"])]
    ev = learn.evidence(rows, NOW)
    assert ev["brief"]["rss"] == learn.UNOFFERED and ev["today"]["rss"] == pytest.approx(0.1)


def test_learnt_scores_are_bounded_and_a_damaged_line_costs_only_its_term():
    idx = {"idf": [2.0, 3.0], "header": {"n_docs": 3}}
    table = learn.encode({"brief": [1, {"2": 1000.0}], "morning": [0, {"2": 1000.0}], "bad": [0, {"x": "y"}]}) \
        + b"\nworse\tnot a row\n"
    acc, found = {}, {}
    added, heads = learn.apply(idx, table, ["morning", "brief", "bad", "worse", "none"], acc, found)
    assert acc == added and acc[2] == pytest.approx(learn.WEIGHT * (2.0 + 3.0), rel=1e-3)
    assert heads == {2: {"morning", "brief"}} and found == {"morning": (0, [2]), "brief": (1, [2])}


def test_one_word_of_a_taught_phrase_is_not_the_phrase(hook, tmp_path, cli_env):
    """After "grab the morning brief" taught rss-digest, a message that
    shares one of its words gets nothing from it: "good morning!" and
    "grab my coffee" were given rss-digest."""
    teach(hook, tmp_path, cli_env, env=BM25)
    assert "rss-digest" in hook("grab the morning brief for today", "s9", Transcript(tmp_path / "t9").path, env=BM25)
    for n, msg in enumerate(["good morning!", "grab my coffee", "morning all"]):
        assert hook(msg, "c%d" % n, Transcript(tmp_path / ("c%d" % n)).path, env=BM25) == "", msg


def test_every_term_of_a_table_is_found_and_no_other():
    """``_row`` searches the sorted lines; words, pairs, prefixes of one
    another and non-ASCII terms alike."""
    terms = ["a", "a b", "ab", "brief", "morning", "morning brief", "résumé", "晨报", "z", "zz"]
    table = b"learnt 1 x" + learn.encode({t: [k, {str(k): 1.0}] for k, t in enumerate(terms)})
    assert [learn._row(table, t) for t in terms] == [(k, {k: 1.0}) for k in range(len(terms))]
    assert [learn._row(table, t) for t in ["", "b", "a c", "morning b", "zzz", "résume", "晨"]] == [None] * 7


def test_a_fold_reads_the_idf_table_once_and_only_for_a_word_the_library_lacks(cli, skills, tmp_path):
    """A word the library lacks is learnt on its rarest term; finding that
    term read the IDF table one term at a time (a ``pread`` each: 100 ms
    a fold at 3,741 skills, in the child every prompt after a load starts)."""
    from retriever import store
    index = tmp_path / "i.skr"
    assert cli("build", "--root", skills, "--index", index).returncode == 0
    idx = store.load(str(index))
    idf = idx["idf"]
    reads = []

    class Counted:
        def __len__(self):
            return len(idf)

        def __getitem__(self, i):
            reads.append(i)
            return idf[i]

    idx["idf"] = Counted()
    rows = [_entry("a", NOW, ["digest"]), _entry("a", NOW, ["ok"], loaded=["rss-digest"])]
    assert list(learn.fold(idx, rows, NOW)) == ["digest"] and reads == []
    rows = [_entry("a", NOW, ["zzjargon"]), _entry("a", NOW, ["ok"], loaded=["rss-digest"])]
    table = learn.fold(idx, rows, NOW)
    rarest = max(range(len(idf)), key=idf.__getitem__)
    assert table["zzjargon"][0] == rarest and len(reads) == 1


def test_a_rebuilt_index_has_what_was_learnt_folded_again(hook, cli, skills, tmp_path, cli_env):
    teach(hook, tmp_path, cli_env, env=BM25)
    # A new skill sorts first: every skill number changes, and the hook's
    # freshness check rebuilds its index in the background.
    make_skill(skills, "aaa-first", {"name": "aaa-first", "description": "Plan a garden"})
    env = dict(BM25, SKILL_RETRIEVAL_REVALIDATE="0")
    deadline = time.monotonic() + 30
    while "aaa-first" not in hook("plan a garden", "g", env=env) and time.monotonic() < deadline:
        time.sleep(0.1)  # until the background rebuild is in
    got = []
    while time.monotonic() < deadline:
        # The first prompt finds the table folded for the old build and
        # folds it again; until then nothing learnt is used (never a
        # skill by its old number).
        out = hook("grab the morning brief for today", "r%d" % len(got), env=env)
        got.append("aaa-first" if "aaa-first" in out else "rss-digest" if "rss-digest" in out else "")
        if got[-1]:
            break
        time.sleep(0.1)
    assert got[-1] == "rss-digest" and "aaa-first" not in got


def test_the_hermes_plugin_learns_from_the_skills_it_sees_loaded(hermes_home, tmp_path):
    """The plugin records each turn and the ``skill_view`` calls in the
    conversation Hermes passes; it also folds the record after a turn
    that saw loads and ranks with what was learnt, as a hook does."""
    from hermes_plugin import runtime
    from test_hermes_plugin import injected, start, turn_kwargs
    ctx, state = start()
    hook = ctx.hook()
    msg = "grab the morning brief"
    assert "meeting-notes" not in injected(hook(**turn_kwargs(msg + " for today")))
    for n in range(3):
        sid = "h%d" % n
        hook(**turn_kwargs(msg, session_id=sid))
        history = [{"role": "user", "content": msg},
                   {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {
                       "name": "skill_view", "arguments": '{"name": "meeting-notes"}'}}]},
                   {"role": "tool", "tool_call_id": "c1", "content": "# meeting-notes ..."},
                   {"role": "user", "content": "thanks"}]
        hook(**turn_kwargs("thanks", session_id=sid, conversation_history=history))
    assert runtime.wait_idle(state)  # the folds, one at a time, the last after the last load
    assert injected(hook(**turn_kwargs(msg + " for today"))) == ["meeting-notes"]
    assert injected(hook(**turn_kwargs("extract the text of my scanned pdf with ocr"))) == ["pdf-ocr"]
