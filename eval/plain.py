"""The plain-requests set: eval/plain_requests.jsonl (issue 38).

Plain, unambiguous requests as users type them, over two real libraries
on their own (hermes-agent, 172 skills; k-dense-scientific-skills, 129),
each labelled with the skill folders that serve it, and chat turns
("thanks, that worked!") that need none.  Written for this project, not
taken from ../shared/eval.

The set is split in half once, by file order, before anything was
fitted (``half``): within each kind (task, chat), the rows at even
positions are the **fit** half (``make calibrate`` adds them to the
calibration turns), the others the **held-out** half, which only
``make eval`` scores.  The file alternates the two libraries' requests,
so the rule put hermes-agent's 46 requests in the fit half and
k-dense's 40 (with 6 of hermes-agent's) in the held-out one: the
held-out half mostly measures a library the fit never saw.
"""

import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
PLAIN = os.path.join(HERE, "plain_requests.jsonl")


def load(path=PLAIN):
    """Every row of the set, in file order, each with its ``half``
    ("fit" or "held")."""
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    seen = {}
    for r in rows:
        k = seen.get(r["kind"], 0)
        seen[r["kind"]] = k + 1
        r["half"] = "fit" if k % 2 == 0 else "held"
    return rows


def half(name, path=PLAIN):
    """The rows of one half: "fit" or "held"."""
    return [r for r in load(path) if r["half"] == name]
