"""The "first prompt of a session" row's model of the helper's life (issue 38)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "eval"))

import sessions  # noqa: E402


def _rows(n_sessions=3, turns=3):
    return [{"id": "s%d-t%d" % (s, t), "session": "s%d" % s, "turn": t}
            for s in range(n_sessions) for t in range(1, turns + 1)]


def test_a_session_start_hook_has_the_helper_ready_for_the_first_prompt():
    tier = sessions.day(_rows())
    assert all(tier.values())


def test_without_one_each_first_prompt_after_a_break_gets_bm25_alone():
    tier = sessions.day(_rows(), warm_at_start=False)
    assert [k for k, v in tier.items() if not v] == ["s0-t1", "s1-t1", "s2-t1"]


def test_sessions_closer_than_the_lifetime_find_the_helper_still_there():
    tier = sessions.day(_rows(), warm_at_start=False, gap=sessions.LIFETIME / 2)
    assert [k for k, v in tier.items() if not v] == ["s0-t1"]


def test_a_load_longer_than_the_first_prompt_s_delay_misses_it_even_when_warmed():
    tier = sessions.day(_rows(), load=sessions.FIRST_PROMPT + 1.0)
    assert [k for k, v in tier.items() if not v] == ["s0-t1", "s1-t1", "s2-t1"]
