"""The README and docs/ test themselves (issues 11 and 32).

* Every ``console`` block runs and must print what the page shows: a line
  ``...`` stands for any number of lines, ``...`` inside a line for any
  text.  README.md is one session, in order, in one temporary HOME with
  the repository as the working folder; after its last block (which
  removes everything) the HOME holds only what the session copied into it.
  Each ``docs/*.md`` page with console blocks is a session of its own, in
  a fresh HOME (a page that needs skills copies them first).
* README.md stays a five-minute read (at most 300 lines), and every link
  in it and in docs/ to another page, or to a heading of one, resolves.
* Every subcommand and flag the code knows appears in ``--help`` and in
  docs/cli.md; every ``SKILL_RETRIEVAL_*`` variable in ``--help`` and in
  docs/configuration.md.
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
DOCS = REPO / "docs"
README_MAX_LINES = 300


def _doc(name):
    return (DOCS / name).read_text(encoding="utf-8")


def _doc_pages():
    return sorted(p.name for p in DOCS.glob("*.md"))


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


def _session_env(tmp_path):
    env = base_env(tmp_path)
    # The pages describe the default places and settings: no XDG
    # overrides, and the calibrated decision on.
    for k in ("XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "SKILL_RETRIEVAL_DECIDE"):
        env.pop(k, None)
    return env


def run_session(steps, env, page):
    """Run ``steps`` as a user would, in order, and hold each to what
    ``page`` shows."""
    for command, expected in steps:
        if "| jq" in command and not shutil.which("jq"):
            continue  # the page's pipe needs jq; the rest of the session does not
        proc = subprocess.run(["/bin/sh", "-c", command], cwd=str(REPO), env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=120)
        out = proc.stdout.decode("utf-8", "replace").splitlines()
        assert proc.returncode == 0, (page, command, out)
        assert matches(expected, out), "%s shows for `%s`:\n%s\n\nbut it printed:\n%s" % (
            page, command, "\n".join(expected), "\n".join(out))


def test_readme_console_sessions_print_what_the_readme_shows(tmp_path):
    steps = console_blocks(README)
    assert len(steps) >= 8
    env = _session_env(tmp_path)
    run_session(steps, env, "README.md")
    # "Remove everything" removed everything but the copied skills.
    assert {f.split("/")[0] for f in _home_files(env["HOME"])} == {"skills"}


def test_some_docs_pages_have_console_sessions():
    assert len([p for p in _doc_pages() if console_blocks(_doc(p))]) >= 2


@pytest.mark.parametrize("page", [p for p in _doc_pages() if console_blocks(_doc(p))])
def test_docs_console_sessions_print_what_the_page_shows(page, tmp_path):
    run_session(console_blocks(_doc(page)), _session_env(tmp_path), "docs/" + page)


# ------------------------------------------------ a five-minute README, links


def test_the_readme_is_a_five_minute_read():
    assert len(README.splitlines()) <= README_MAX_LINES


def slug(heading):
    """The anchor GitHub gives a heading: lower case, punctuation other than
    ``-`` and ``_`` dropped, spaces as ``-``."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text):
    """Every heading anchor of a markdown page (repeats get ``-1``, ``-2``)."""
    seen, out = {}, set()
    text = re.sub(r"^```.*?^```$", "", text, flags=re.S | re.M)  # no headings inside code
    for h in re.findall(r"^#{1,6} (.+)$", text, re.M):
        a = slug(h)
        n = seen.get(a, 0)
        seen[a] = n + 1
        out.add(a if n == 0 else "%s-%d" % (a, n))
    return out


def broken_links(path):
    """Relative links of the page at ``path`` whose file or heading is missing."""
    text = path.read_text(encoding="utf-8")
    prose = re.sub(r"^```.*?^```$", "", text, flags=re.S | re.M)
    bad = []
    for target in re.findall(r"\]\(([^)\s]+)\)", prose):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not checked here
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            bad.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text(encoding="utf-8")):
            bad.append(target)
    return bad


def test_the_link_checker():
    assert slug("doctor: is it working?") == "doctor-is-it-working"
    assert slug("Small modules, one file at start-up") == "small-modules-one-file-at-start-up"
    assert anchors("# A\n## B c\n## B c\n```\n# not\n```\n") == {"a", "b-c", "b-c-1"}


def test_every_docs_link_in_the_readme_resolves():
    links = re.findall(r"\]\((docs/[^)\s]+)\)", README)
    assert len({l.split("#")[0] for l in links}) >= 8, links
    assert broken_links(REPO / "README.md") == []


@pytest.mark.parametrize("page", ["docs/" + p for p in _doc_pages()] + ["hooks/README.md"])
def test_every_link_in_docs_resolves(page):
    assert broken_links(REPO / page) == []


# -------------------------------------- every name in --help and the docs


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
    table = _doc("cli.md").split("## Commands", 1)[1].split("\n\n", 2)[1]
    return [l for l in table.splitlines() if l.startswith("| `skill-retrieve")]


def _row_for(name):
    rows = _cli_rows()
    if name == "query":
        return [r for r in rows if r.startswith("| `skill-retrieve [query]")][0]
    hits = [r for r in rows if re.match(r"\| `skill-retrieve (\S+\\\|)?%s[ `\\]" % re.escape(name), r)]
    assert hits, "docs/cli.md has no row for %s" % name
    return hits[0]


@pytest.mark.parametrize("name", list(_subparsers()))
def test_every_subcommand_and_flag_is_in_help_and_docs(name):
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
                "docs/cli.md's row for %s lacks %s" % (name, flag)


def _variables_in_code():
    names = set()
    for folder in ("retriever", "hermes_plugin", "bin"):
        for d, _, files in os.walk(REPO / folder):
            for f in files:
                if f.endswith(".py") or folder == "bin":
                    text = open(os.path.join(d, f), encoding="utf-8").read()
                    names |= set(re.findall(r"SKILL_RETRIEVAL_[A-Z][A-Z_]*[A-Z]", text))
    return names


def test_every_setting_the_code_reads_is_in_help_and_docs():
    names = _variables_in_code()
    assert "SKILL_RETRIEVAL_ROOTS" in names and len(names) > 10
    helptext = _help()
    page = _doc("configuration.md")
    missing_help = sorted(n for n in names if n not in helptext)
    missing_docs = sorted(n for n in names if "`%s`" % n not in page)
    assert missing_help == [] and missing_docs == []


# ------------------------------------------------------ troubleshooting


def test_troubleshooting_quotes_what_doctor_prints():
    section = README.split("## Nothing is injected?", 1)[1].split("\n## ", 1)[0]
    causes = re.findall(r"^\d\. \*\*", section, re.M)
    assert len(causes) == 5
    quoted = re.findall(r"doctor:\s+((?:`[^`]+`(?:,\s*|\s+or\s+|\s*)?)+)", section)
    words = [w for q in quoted for w in re.findall(r"`([^`]+)`", q)]
    assert len(words) >= 7
    # doctor's own lines, and the shared reader's that it prints for a
    # settings file it cannot parse (install.parse_settings).
    source = "".join((REPO / "retriever" / f).read_text(encoding="utf-8") for f in ("cli/doctor.py", "runners/install.py"))
    for w in words:
        assert w in source, "README quotes doctor saying %r; doctor never does" % w
    assert "export PATH=" in README
    removal = README.split("## Remove everything", 1)[1].split("\n## ", 1)[0]
    for thing in ("hook", "plugin", "index", "log", "backups"):
        assert thing in removal


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
    text = " ".join(_doc("tokens.md").split("On the bundled `examples/skills`", 1)[1].split("\n\n", 1)[0].split())
    m = re.search(r"stock listing is only ([\d,]+) tokens, names-only (\d+) and the mean injection (\d+).*?"
                  r"net saving (\d+) tokens, (\d+)%", text)
    assert m, text
    assert [int(g.replace(",", "")) for g in m.groups()] == \
        [stock, names, injection, saving, int(round(100.0 * doc["net_saving_chars"] / doc["hermes_block_chars"]))]
