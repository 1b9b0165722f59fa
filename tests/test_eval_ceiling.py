"""The ranking's ceiling on the session set (eval/sessions.py ``ceiling``):
what a perfect decision could reach with the ranking it is given."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "eval"))

import sessions  # noqa: E402


def _turn(turn, relevant, ranked, session="s1"):
    return {"id": "%s-t%02d" % (session, turn), "session": session, "turn": turn, "relevant": relevant,
            "acceptable": [], "ranked": ranked, "injected": ["noise"], "lang": "en", "kind": "task"}


def test_a_perfect_gate_injects_the_first_k_on_task_turns_only():
    recs = [_turn(1, ["a"], ["b", "a", "c"]), _turn(2, [], ["a", "b"]), _turn(3, ["d"], ["d", "e"])]
    first1, first2 = [m for _, m in sessions.ceiling(recs, ks=(1, 2))]
    assert first1["in context"] == 0.5 and first1["relevant share"] == 0.5
    assert first2["in context"] == 1.0 and first2["per task turn"] == 2.0 and first2["relevant share"] == 0.5
    assert first1["silent"] == first2["silent"] == 1.0  # the product's own injections are not counted


def test_a_skill_ranked_first_earlier_in_the_session_serves_a_follow_up_within_the_window():
    recs = [_turn(1, ["a"], ["a"]), _turn(2, ["a"], ["x"]),
            _turn(2 + sessions.WINDOW, ["a"], ["y"]), _turn(1, ["a"], ["z"], session="s2")]
    (_, m), = sessions.ceiling(recs, ks=(1,))
    assert m["in context"] == 0.5  # turns 1 and 2 of s1; not 2 + WINDOW, and not another session's
