"""The decision's weights are what `make calibrate` fits (issue 29): the
shipped block of retriever/decide.py is refitted from the shipped features,
exactly, so nobody hand-tunes a number and every weight has its data."""

import json
import sys
from pathlib import Path

from retriever import decide

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "eval"))

import calibrate  # noqa: E402


def _rows():
    with open(calibrate.FEATURES, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def test_the_shipped_weights_are_the_fit_of_the_shipped_features():
    models = calibrate.fit_all(_rows())
    assert models["bm25"] == decide.BM25
    assert models["fused"] == decide.FUSED


def test_the_features_are_the_products_own_and_the_bank_holds_every_no_skill_turn():
    rows = _rows()
    turns = calibrate.load_turns()
    assert [r["id"] for r in rows] == [t["id"] for t in turns]
    for r in rows:
        for mode, width in (("bm25", len(decide.GATE_NAMES + decide.GATE_BM25)),
                            ("fused", len(decide.GATE_NAMES + decide.GATE_SEM))):
            if r[mode]:
                assert len(r[mode][0]["x"]) == width
    bank = (REPO / "retriever" / "semantic" / "no_skill_turns.txt").read_text(encoding="utf-8").splitlines()
    assert len([b for b in bank if not b.startswith("#")]) == sum(t["kind"] != "task" for t in turns)


def test_no_calibration_turn_is_a_row_of_the_held_out_sets():
    shared = REPO.parent / "shared" / "eval"
    held = set()
    for path in list((shared / "turns").glob("*.jsonl")) + list((shared / "external").glob("*/normalized.jsonl")):
        held.update(json.loads(line)["query"].strip().lower() for line in path.open(encoding="utf-8") if line.strip())
    import plain
    ours = {t["query"].strip().lower() for t in calibrate.load_turns() + plain.load()}
    assert not ours & held


def test_the_logistic_needs_no_math_module():
    assert abs(decide.sigmoid(0.0) - 0.5) < 1e-12
    assert abs(decide.sigmoid(2.0) - 0.8807970779778823) < 1e-12
    assert abs(decide._ln(1051.0) - 6.957497370876951) < 1e-9


def test_the_plain_requests_fit_half_is_fitted_and_the_held_out_half_never():
    import plain
    ids = {r["id"] for r in _rows()}
    fit, held = plain.half("fit"), plain.half("held")
    assert {r["id"] for r in fit} <= ids
    assert not {r["id"] for r in held} & ids
    # Both halves hold requests and chat turns; the held-out requests are
    # over both libraries (the file alternates them, so the fit half's
    # are hermes-agent's: k-dense is a library the fit never saw).
    for rows in (fit, held):
        assert sum(r["kind"] == "chat" for r in rows) >= 15 and sum(r["kind"] == "task" for r in rows) >= 40
    assert {r["library"] for r in held if r["kind"] == "task"} == {"hermes-agent", "k-dense-scientific-skills"}
