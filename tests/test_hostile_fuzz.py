"""Seeded, bounded fuzzing of frontmatter, tokenizer, build, render and
index loading (issue 15): at least 2,000 generated skill files and 1,000
index mutations, with 0 crashes, hangs, damaged files, forged lines and
silent wrong answers.

The campaigns run in a child process capped at 2 GiB of address space and
a wall-clock timeout, so a regression shows as a failed count or a killed
child, never as a stuck or swapping test run.  ``pytest -s`` prints the
table; ``python tests/hostile_fuzz.py`` prints it alone.
"""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def _limit_memory():
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def test_fuzz_skills_and_index_mutations():
    proc = subprocess.run([sys.executable, os.path.join(HERE, "hostile_fuzz.py"), "--json",
                           "--skills", "2000", "--mutations", "1000", "--seed", "15"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=900,
                          preexec_fn=_limit_memory)
    assert proc.returncode == 0, proc.stderr.decode("utf-8", "replace")[-3000:]
    results = json.loads(proc.stdout)
    sys.path.insert(0, HERE)
    from hostile_fuzz import table
    print("\n" + table(results) + "\n(seed 15, %ss)" % results["seconds"])
    skills, index = results["skills"], results["index"]
    assert skills["trials"] >= 2000 and index["trials"] >= 1000
    failures = {k: v for part in (skills, index) for k, v in part.items()
                if k in ("crashes", "hangs", "files damaged", "forged lines", "silent wrong answers") and v}
    assert failures == {}, (failures, results["notes"])


# -- round two (issue 31): side files and the warm helper ------------------------

ROUND_TWO_FAILURES = ("crashes", "hangs", "files damaged", "poisoned answers", "stuck freshness",
                      "temps left behind", "status not answered", "answers lost", "helper died", "two helpers",
                      "stray reply FIFOs")


def _round_two(campaign, *args):
    proc = subprocess.run([sys.executable, os.path.join(HERE, "hostile_fuzz.py"), "--json", "--seed", "31",
                           "--campaigns", campaign] + list(args),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600, preexec_fn=_limit_memory)
    assert proc.returncode == 0, proc.stderr.decode("utf-8", "replace")[-3000:]
    results = json.loads(proc.stdout)
    sys.path.insert(0, HERE)
    from hostile_fuzz import table
    print("\n" + table(results) + "\n(seed 31, %ss)" % results["seconds"])
    counts = results[campaign]
    failures = {k: v for k, v in counts.items() if k in ROUND_TWO_FAILURES and v}
    assert failures == {}, (failures, results["notes"])
    return counts


def test_fuzz_side_files():
    """Planted, truncated and foreign-owned reuse stores, memos, locks,
    stamps and temp files (in a shared sticky folder and the user's own),
    and builds killed at random moments: no poisoned answer, no stopped
    freshness check, no file removed that is not ours, no temp left."""
    counts = _round_two("sidefiles", "--side-files", "40")
    assert counts["trials"] >= 48


def test_fuzz_the_helper():
    """Slow, silent, huge and garbage clients, clients killed at random
    moments, the helper killed mid-answer and two started at once:
    ``serve --status`` and fused queries are answered throughout."""
    import pytest
    from retriever import semantic
    if not semantic.installed():
        pytest.skip("the semantic extra is not installed")
    counts = _round_two("helper", "--helper", "10")
    assert counts["trials"] >= 11


def test_fuzz_installers():
    """Issue 31: the installers against re-installs after user edits,
    dotfiles links and concurrent writers (200 edit trials, 50 link trials,
    5 rounds of racing writers; ``hostile_fuzz.fuzz_installers``)."""
    proc = subprocess.run([sys.executable, os.path.join(HERE, "hostile_fuzz.py"), "--json", "--campaigns", "installers",
                           "--installers", "200", "--seed", "31"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600, preexec_fn=_limit_memory)
    assert proc.returncode == 0, proc.stderr.decode("utf-8", "replace")[-3000:]
    results = json.loads(proc.stdout)
    sys.path.insert(0, HERE)
    from hostile_fuzz import INSTALL_FAILURES, install_table
    print("\n" + install_table(results["installers"]) + "\n(seed 31, %ss)" % results["seconds"])
    counts = results["installers"]
    assert counts["trials"] >= 250
    failures = {k: counts[k] for k in INSTALL_FAILURES if counts[k]}
    assert failures == {}, (failures, results["notes"])
