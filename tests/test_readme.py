"""The README tests itself (issue 11).

* Every ``console`` block of README.md runs, in order, in one temporary
  HOME with the repository as the working folder, and must print what the
  README shows: a line ``...`` stands for any number of lines, ``...``
  inside a line for any text.  After the last block (which removes
  everything) the HOME holds only what the session copied into it.
* Every subcommand, flag and ``SKILL_RETRIEVAL_*`` variable the code knows
  appears in ``--help`` and in the README.
* The troubleshooting list quotes words ``doctor`` really prints.
"""

import argparse
import os
import re
import shutil
import subprocess

import pytest

from conftest import BIN, REPO, base_env

README = (REPO / "README.md").read_text(encoding="utf-8")


def console_blocks(text):
    """``[(command, [expected lines])...]`` from every ```console block."""
    steps = []
    for block in re.findall(r"^```console\n(.*?)^```$", text, re.S | re.M):
        for line in block.splitlines():
            if line.startswith("$ "):
                steps.append((line[2:], []))
            else:
                steps[-1][1].append(line)
    return steps


def _line_re(expected):
    return re.compile("^" + ".*".join(re.escape(p) for p in expected.split("...")) + "$")


def matches(expected, actual):
    """True when ``actual`` lines fit ``expected`` (``...`` wildcards)."""
    def go(i, j):
        if i == len(expected):
            return j == len(actual)
        if expected[i] == "...":
            return any(go(i + 1, k) for k in range(j, len(actual) + 1))
        return j < len(actual) and bool(_line_re(expected[i]).match(actual[j])) and go(i + 1, j + 1)
    return go(0, 0)


def test_the_matcher():
    assert matches(["a", "...", "c ... e"], ["a", "x", "y", "c d e"])
    assert matches(["..."], [])
    assert not matches(["a"], ["a", "b"])
    assert not matches(["a ... b"], ["a x c"])


def _home_files(home):
    # Files only: ~/.cache and friends are there on any real machine.
    out = set()
    for d, _, files in os.walk(home):
        for n in files:
            out.add(os.path.relpath(os.path.join(d, n), home))
    return out


def test_readme_console_sessions_print_what_the_readme_shows(tmp_path):
    steps = console_blocks(README)
    assert len(steps) >= 8
    env = base_env(tmp_path)
    # The README describes the default places: no XDG overrides.
    for k in ("XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME"):
        env.pop(k, None)
    home = env["HOME"]
    for command, expected in steps:
        if "| jq" in command and not shutil.which("jq"):
            continue  # the README's pipe needs jq; the rest of the session does not
        proc = subprocess.run(["/bin/sh", "-c", command], cwd=str(REPO), env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=120)
        out = proc.stdout.decode("utf-8", "replace").splitlines()
        assert proc.returncode == 0, (command, out)
        assert matches(expected, out), "README shows for `%s`:\n%s\n\nbut it printed:\n%s" % (
            command, "\n".join(expected), "\n".join(out))
    # "Remove everything" removed everything but the copied skills.
    assert {f.split("/")[0] for f in _home_files(home)} == {"skills"}


# ------------------------------------------- every name in --help and README


def _parser():
    from retriever.cli import commands
    return commands.make_parser()


def _subparsers():
    for a in _parser()._actions:
        if isinstance(a, argparse._SubParsersAction):
            return a.choices
    raise AssertionError("no subcommands")


def _help(*args):
    proc = subprocess.run([str(BIN)] + list(args) + ["--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _cli_rows():
    table = README.split("### The CLI", 1)[1].split("\n\n", 2)[1]
    return [l for l in table.splitlines() if l.startswith("| `skill-retrieve")]


def _row_for(name):
    rows = _cli_rows()
    if name == "query":
        return [r for r in rows if r.startswith("| `skill-retrieve [query]")][0]
    hits = [r for r in rows if re.match(r"\| `skill-retrieve (\S+\\\|)?%s[ `\\]" % re.escape(name), r)]
    assert hits, "README's CLI table has no row for %s" % name
    return hits[0]


@pytest.mark.parametrize("name", list(_subparsers()))
def test_every_subcommand_and_flag_is_in_help_and_readme(name):
    assert name in _help()
    sub = _subparsers()[name]
    own_help = _help(name)
    row = _row_for(name)
    for action in sub._actions:
        if action.help == argparse.SUPPRESS:
            continue
        for flag in action.option_strings:
            if flag in ("-h", "--help"):
                continue
            assert flag in own_help, (name, flag)
            assert re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(flag), row), \
                "README's CLI row for %s lacks %s" % (name, flag)


def _variables_in_code():
    names = set()
    for folder in ("retriever", "hermes_plugin", "bin"):
        for d, _, files in os.walk(REPO / folder):
            for f in files:
                if f.endswith(".py") or folder == "bin":
                    text = open(os.path.join(d, f), encoding="utf-8").read()
                    names |= set(re.findall(r"SKILL_RETRIEVAL_[A-Z][A-Z_]*[A-Z]", text))
    return names


def test_every_setting_the_code_reads_is_in_help_and_readme():
    names = _variables_in_code()
    assert "SKILL_RETRIEVAL_ROOTS" in names and len(names) > 10
    helptext = _help()
    missing_help = sorted(n for n in names if n not in helptext)
    missing_readme = sorted(n for n in names if "`%s`" % n not in README)
    assert missing_help == [] and missing_readme == []


# --------------------------------------------------------- the day after


def test_troubleshooting_quotes_what_doctor_prints():
    section = README.split("## The day after", 1)[1].split("\n## ", 1)[0]
    causes = re.findall(r"^\d\. \*\*", section, re.M)
    assert len(causes) == 5
    quoted = re.findall(r"doctor:\s+((?:`[^`]+`(?:,\s*|\s+or\s+|\s*)?)+)", section)
    words = [w for q in quoted for w in re.findall(r"`([^`]+)`", q)]
    assert len(words) >= 7
    source = (REPO / "retriever" / "cli" / "doctor.py").read_text(encoding="utf-8")
    for w in words:
        assert w in source, "README quotes doctor saying %r; doctor.py never does" % w
    assert "export PATH=" in section
    for thing in ("hook", "plugin", "index", "log", "backups"):
        assert thing in section.split("**Remove everything**", 1)[1]


def test_the_examples_token_figures_are_what_tokens_measures(tmp_path):
    import json
    env = base_env(tmp_path)
    proc = subprocess.run([str(BIN), "tokens", "--root", str(REPO / "examples" / "skills"), "--format", "json"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    tok = lambda chars: int(round(chars / 4.0))  # noqa: E731 - the estimator tokens uses
    stock, names = tok(doc["hermes_block_chars"]), tok(doc["names_only_chars"])
    injection = tok(doc["injection_chars"]["mean"])
    saving = tok(doc["net_saving_chars"])
    text = " ".join(README.split("On the bundled `examples/skills`", 1)[1].split("\n\n", 1)[0].split())
    m = re.search(r"stock listing is only ([\d,]+) tokens, names-only (\d+) and the mean injection (\d+).*?"
                  r"net saving (\d+) tokens, (\d+)%", text)
    assert m, text
    assert [int(g.replace(",", "")) for g in m.groups()] == \
        [stock, names, injection, saving, int(round(100.0 * doc["net_saving_chars"] / doc["hermes_block_chars"]))]
