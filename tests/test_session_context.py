"""Follow-ups read in their session (issue 37): short sessions replayed
through the real Claude Code hook, one session id each, on a skill tree in
tmp_path, at the defaults (the calibrated decision, BM25 alone).

- a follow-up that names no tool is ranked within its session's topic: the
  session's skill is in context, and no near skill is added;
- a topic switch gets the new skill at once;
- task-adjacent chat ("give me 5 subject line options for email 1" after
  an email task) injects nothing new.
"""

import json

import pytest

from retriever import query, session
from skillret_helpers import make_skill

SESSION = "5e1d0c7a-37aa-4f0b-9d1e-0c3b7a2f9e11"


SKILLS = {
    "airflow-dags": "Write Apache Airflow DAGs that load files from S3 into Postgres: operators, "
                    "sensors, schedules, retries and backfills of data pipelines.",
    "home-sensors": "Read temperature and motion sensors at home and schedule smart home automations "
                    "instead of fixed timers.",
    "email-sequence": "Write onboarding and nurture email sequences for trial users: timing, "
                      "goals and copy of each email.",
    "cold-outreach": "Write cold sales outreach emails: subject line options, openers and follow-ups.",
    "docker-slim": "Shrink Docker images of a service with multi-stage builds, smaller base images "
                   "and a .dockerignore.",
}


@pytest.fixture
def skills(tmp_path):
    """Pairs of skills that share a follow-up's words: only the session's
    topic says which one a short turn is about."""
    root = tmp_path / "skills"
    for name, desc in SKILLS.items():
        make_skill(root, name, {"name": name, "description": desc})
    return root


@pytest.fixture
def hook(cli, skills, tmp_path):
    """``hook(prompt, session=SESSION)``: the skill names the Claude Code
    hook injects (None: it printed nothing)."""
    def run(prompt, session=SESSION):
        p = {"session_id": session, "transcript_path": str(tmp_path / "none.jsonl"), "cwd": str(tmp_path),
             "hook_event_name": "UserPromptSubmit", "prompt": prompt}
        proc = cli("hook", "claude-code", "--root", skills, input=json.dumps(p),
                   env={"SKILL_RETRIEVAL_DECIDE": None})
        assert (proc.returncode, proc.stderr) == (0, ""), proc
        if not proc.stdout:
            return None
        block = json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
        return [line.split("**")[1] for line in block.splitlines() if line.startswith("- **")]
    return run


AIRFLOW = ("need an airflow dag for the partner order drops: files land in s3 between 2 and 6am, "
           "load each one into postgres")
SENSOR = "would a sensor work here instead of just a fixed schedule?"
EMAILS = "write the onboarding email sequence for our 14-day trial users, five emails"


def test_a_follow_up_that_names_no_tool_gets_the_sessions_skill_in_context(hook):
    assert hook(AIRFLOW) == ["airflow-dags"]
    # Alone, its words are home automation's ...
    assert hook(SENSOR, session="alone") == ["home-sensors"]
    # ... in its session, the DAG's: airflow-dags, injected a turn ago, is
    # still in context, and no skill of another topic is added.
    assert hook(SENSOR) is None


def test_a_topic_switch_gets_the_new_skill_at_once(hook):
    assert hook(AIRFLOW) == ["airflow-dags"]
    assert hook("ok thanks") is None
    assert hook("different thing: the payments worker docker image is 2gb, shrink it with a multi-stage "
                "build") == ["docker-slim"]


def test_task_adjacent_chat_injects_nothing_new(hook):
    assert hook(EMAILS) == ["email-sequence"]
    chat = "give me 5 subject line options for email 1"
    assert hook(chat, session="alone") == ["cold-outreach"]  # what it gets without its session
    assert hook(chat) is None


def _index(tmp_path, skills):
    # An index of ``{name: description}`` skills, loaded.
    from retriever import build, store
    root = tmp_path / "skills"
    for name, desc in skills.items():
        make_skill(root, name, {"name": name, "description": desc})
    build.build(build.resolve([str(root)]), str(tmp_path / "i.skr"), "default")
    return store.load(str(tmp_path / "i.skr"))


def test_the_context_ranks_but_never_counts_as_the_messages_own_evidence(tmp_path):
    # The earlier prompts' terms add to the scores only: coverage, the
    # known share and the terms the decision sees are the message's own.
    idx = _index(tmp_path, {"airflow-dags": "Airflow DAGs, sensors, schedules",
                            "home-sensors": "Home sensors and schedules"})
    alone = query.parse(idx, "a sensor instead of a schedule?")
    ctx = {"prior": {"airflow": 1.0, "dag": 1.0}}
    within = query.parse(idx, "a sensor instead of a schedule?", ctx)
    assert (within["terms"], within["found"], within["known"]) == (alone["terms"], alone["found"], alone["known"])
    assert within["acc"] != alone["acc"]
    assert set(ctx["own"]) <= set(alone["found"])


def test_the_skills_a_session_was_just_given_rank_its_short_turns(tmp_path):
    # A short edit ("run it on pushes to main too") shares no word with the
    # CI skill the session was given a turn ago: the skill prior ranks it,
    # so the turn continues the session's work instead of bringing a near
    # skill; the message's own evidence is untouched.
    from retriever import store
    idx = _index(tmp_path, {"gha-ci": "GitHub Actions workflows: restore, build, test",
                            "git-pushes": "Push branches to main, open pull requests"})
    ci = next(store.doc(idx, n)[0] for n in range(2) if store.doc(idx, n)[1] == "gha-ci")
    text = "run it on pushes to main too"
    alone = query.parse(idx, text)
    assert [store.doc(idx, d)[1] for d in alone["acc"]] == ["git-pushes"]
    within = query.parse(idx, text, {"prior": {}, "skills": {ci: 1.0, "gone/skill": 1.0}})
    assert (within["found"], within["known"]) == (alone["found"], alone["known"])
    assert sorted(store.doc(idx, d)[1] for d in within["acc"]) == ["gha-ci", "git-pushes"]
    # At a share of the message's own best: it reorders, it does not outweigh.
    assert max(within["acc"].values()) == max(alone["acc"].values())


def test_the_session_gives_its_recent_skills_to_the_next_turn_s_context():
    store = {}
    for n, ids in enumerate((["a/one"], [], ["a/two"])):
        memo = session.begin("s", "claude-code", store=store)
        req = {}
        session.contextualize(req, memo)
        req["context"]["own"] = ["t%d" % n]
        session.record(memo, [{"id": i, "name": i, "path": "/p", "score": 1.0} for i in ids])
    memo = session.begin("s", "claude-code", store=store)
    req = {}
    session.contextualize(req, memo)
    assert req["context"]["skills"] == {"a/two": 1.0, "a/one": session.CONTEXT_DECAY ** 2}


def test_the_context_kept_per_session_is_bounded(tmp_path):
    # The prompts that were given a skill set the topic; at most
    # CONTEXT_PROMPTS of them are kept, the older ones weigh less.
    store = {}
    for n in range(10):
        memo = session.begin("s", "claude-code", store=store)
        req = {}
        session.contextualize(req, memo)
        req["context"]["own"] = ["term%d" % n]
        session.record(memo, [{"id": "s/x%d" % n, "name": "x%d" % n, "path": "/p", "score": 1.0}])
    entry = next(iter(store["sessions"].values()))
    assert [p[1] for p in entry["p"]] == [["term7"], ["term8"], ["term9"]]
    memo = session.begin("s", "claude-code", store=store)
    req = {}
    session.contextualize(req, memo)
    assert req["context"]["prior"] == {"term9": 1.0, "term8": session.CONTEXT_DECAY,
                                       "term7": session.CONTEXT_DECAY ** 2}


def test_a_turn_given_nothing_leaves_no_context(tmp_path):
    # Chat does not set the session's topic, and a silent turn with nothing
    # to count down writes no state file.
    path = tmp_path / "sessions.json"
    memo = session.begin("s", "claude-code", path=str(path))
    req = {}
    session.contextualize(req, memo)
    req["context"]["own"] = ["thanks"]
    session.record(memo, [])
    assert not path.exists()


@pytest.fixture(scope="module")
def tier_index(tmp_path_factory):
    """``(idx, index path, provider)``: the pairs of ``skills`` built, with
    the encoder in process (as the eval and the Hermes plugin run it)."""
    from retriever import build, store
    from retriever.semantic import inproc
    base = tmp_path_factory.mktemp("tier")
    root = base / "skills"
    for name in ("airflow-dags", "home-sensors", "docker-slim"):
        make_skill(root, name, {"name": name, "description": SKILLS[name]})
    index = str(base / "index.skr")
    scope = build.resolve([str(root)])
    scope["disabled"] = set()
    build.build(scope, index)
    idx = store.load(index)
    p = inproc.Provider()
    assert p.wait(index, idx, timeout=120), p.status
    return idx, index, p


ARRIVES = "start when something arrives?"


def _tier_turn(tier_index, store, text, sid=SESSION):
    # One turn through session memory and the fused ranking (decision
    # off); the first place is recorded as injected.
    from retriever import semantic
    idx, index, provider = tier_index
    memo = session.begin(sid, "claude-code", store=store)
    req = {}
    session.contextualize(req, memo)
    results, tiers = semantic.search(idx, index, text, 3, provider, decide=False, context=req["context"])
    assert tiers == ("bm25", "semantic")
    session.record(memo, results[:1])
    return results


def test_with_the_tier_a_follow_up_is_ranked_with_the_last_prompts_cosines(tier_index, monkeypatch):
    # The encoder's side of the context alone (the terms' and the skills'
    # sides off): the
    # follow-up, none of whose words BM25 knows, reads as home automation
    # on its own by a hair, as the DAG's work in its session; the cosines
    # the decision reads stay the message's own.
    from retriever import semantic
    monkeypatch.setattr(query, "CONTEXT_WEIGHT", 0.0)
    monkeypatch.setattr(query, "SKILL_PRIOR", 0.0)
    store = {}
    assert _tier_turn(tier_index, store, AIRFLOW)[0]["name"] == "airflow-dags"
    alone = _tier_turn(tier_index, {}, ARRIVES)
    assert alone[0]["name"] == "home-sensors"
    within = _tier_turn(tier_index, store, ARRIVES)
    assert within[0]["name"] == "airflow-dags"
    own = {r["name"]: r["cosine"] for r in alone}
    assert all(r["cosine"] == own[r["name"]] for r in within if r["name"] in own)
    # What the session keeps: the first prompt's best cosines, compact (the
    # follow-up, no word of which BM25 knows, sets no topic).
    entry = next(iter(store["sessions"].values()))
    assert entry["v"][0] == 1 and len(entry["v"][2]) <= 2 * session.MAX_COS
    # Off, the same turn is ranked as alone.
    monkeypatch.setattr(semantic, "CONTEXT_COS_WEIGHT", 0.0)
    store = {}
    _tier_turn(tier_index, store, AIRFLOW)
    assert _tier_turn(tier_index, store, ARRIVES)[0]["name"] == "home-sensors"


def test_with_the_tier_a_new_request_is_ranked_on_its_own_words(tier_index):
    store = {}
    _tier_turn(tier_index, store, AIRFLOW)
    switch = ("different thing: the payments worker docker image is 2gb, shrink it with a multi-stage build")
    assert _tier_turn(tier_index, store, switch)[0]["name"] == "docker-slim"


def test_a_damaged_vector_context_is_dropped():
    entry = {"t": 1.0, "n": 3, "g": [], "l": [], "x": None, "p": []}
    for bad in ([9, "k", [1, 500]], [1, "k", ["x"]], [1, "k", list(range(2 * session.MAX_COS + 2))],
                [1, "k", [1]], "v"):
        assert session._clean(dict(entry, v=bad))["v"] is None
    assert session._clean(dict(entry, v=[2, "k", [1, 500]]))["v"] == [2, "k", [1, 500]]


NEW_TOOL_SKILLS = {
    "incident-postmortem": "Write blameless incident postmortems: timeline, root cause, impact and action items "
                           "with owners and due dates.",
    "jira-tickets": "Create and triage Jira tickets: projects, assignees, due dates and action items.",
    "email-sequence": SKILLS["email-sequence"],
    "docker-slim": SKILLS["docker-slim"],
    "airflow-dags": SKILLS["airflow-dags"],
    "home-sensors": SKILLS["home-sensors"],
}


def test_a_turn_that_names_a_new_tool_gets_it_though_it_continues_the_session(cli, tmp_path):
    root = tmp_path / "own-skills"
    for name, desc in NEW_TOOL_SKILLS.items():
        make_skill(root, name, {"name": name, "description": desc})

    def hook(prompt):
        p = {"session_id": SESSION, "transcript_path": str(tmp_path / "none.jsonl"), "cwd": str(tmp_path),
             "hook_event_name": "UserPromptSubmit", "prompt": prompt}
        proc = cli("hook", "claude-code", "--root", root, input=json.dumps(p), env={"SKILL_RETRIEVAL_DECIDE": None})
        assert (proc.returncode, proc.stderr) == (0, ""), proc
        block = json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"] if proc.stdout else ""
        return [line.split("**")[1] for line in block.splitlines() if line.startswith("- **")]

    assert hook("write the postmortem of yesterday's checkout outage: timeline, root cause, impact, "
                "action items") == ["incident-postmortem"]
    # Still the postmortem's work, but it asks for Jira by name: the Jira
    # skill comes in (the postmortem one, a turn ago, is not given again).
    assert hook("now the jira tickets for the postmortem action items") == ["jira-tickets"]


def test_the_session_keeps_its_skills_numbers_so_a_turn_searches_for_none(tmp_path, monkeypatch):
    # The skill prior found each recent skill by a binary search over the
    # index's records, on every turn: 0.7 ms of a deep prompt at 3,741
    # skills.  The session keeps their numbers, for that index build only.
    idx = _index(tmp_path, {"gha-ci": "GitHub Actions workflows: restore, build, test",
                            "git-pushes": "Push branches to main, open pull requests"})
    searched = []
    real = query._doc_number
    monkeypatch.setattr(query, "_doc_number", lambda i, rid: searched.append(rid) or real(i, rid))
    store = {}

    def turn(text, inject=True):
        memo = session.begin("s", "claude-code", store=store)
        req = {}
        session.contextualize(req, memo)
        results = query.search(idx, text, 3, decide=False, context=req["context"])
        session.record(memo, results[:1] if inject else [])
        return results

    assert turn("set up github actions ci: restore, build, test")[0]["name"] == "gha-ci"
    assert turn("run it on pushes to main too", inject=False) and searched == []
    # Another build of the index (a skill added): its numbers are not trusted.
    entry = next(iter(store["sessions"].values()))
    entry["k"][0] = "another build"
    turn("and on tags", inject=False)
    assert searched == [entry["g"][0][1]]
    # A number out of range (a hand-edited state file) is searched for too.
    entry["k"] = [query.build_key(idx["header"]), {entry["g"][0][1]: 10 ** 6}]
    turn("and on tags", inject=False)
    assert len(searched) == 2
