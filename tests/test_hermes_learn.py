"""``SKILL_RETRIEVAL_LEARN=off`` in the Hermes plugin (issue 40): the
plugin still serves its turns, but folds nothing and ranks with nothing
learnt (tests/test_learn.py has the plugin learning when it is on)."""

from hermes_plugin import runtime
from retriever import learn
from test_hermes_plugin import hermes_home, injected, start, turn_kwargs  # noqa: F401  (the fixture)

JARGON = "grab the morning brief"


def loaded(ask, skill):
    """The conversation Hermes passes after the agent loaded ``skill``
    for ``ask`` and the user thanked it."""
    return [{"role": "user", "content": ask},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {
                "name": "skill_view", "arguments": '{"name": "%s"}' % skill}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "# %s ..." % skill},
            {"role": "user", "content": "thanks"}]


def test_with_learning_off_the_hermes_plugin_learns_nothing(hermes_home, monkeypatch, tmp_path):
    monkeypatch.setenv("SKILL_RETRIEVAL_SEMANTIC", "off")
    monkeypatch.setenv("SKILL_RETRIEVAL_LEARN", "off")
    ctx, state = start()
    hook = ctx.hook()
    for n in range(3):
        sid = "off%d" % n
        hook(**turn_kwargs(JARGON, session_id=sid))
        hook(**turn_kwargs("thanks", session_id=sid, conversation_history=loaded(JARGON, "meeting-notes")))
    assert runtime.wait_idle(state)  # a fold, had one been started
    assert not list((tmp_path / "cache" / "skill-retrieval").glob(learn.PREFIX + "*"))
    assert injected(hook(**turn_kwargs(JARGON + " for today"))) == []
