"""The command-line contract other tools rely on (issue 2, item 7)."""

import json
import os
import re

import pytest

from skillret_helpers import assert_clean, base_env, json_results, make_skill, run_cli

LINE = re.compile(r"^- \*\*(?P<name>.+?)\*\* \((?P<id>[^()]+)\): (?P<desc>.*)$")


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    """Eight skills about widgets plus a few others, indexed once; returns
    ``run(*args, input=None, env=None, timeout=60)`` bound to the library's
    root and index (``env`` entries are added to a clean environment)."""
    tmp = tmp_path_factory.mktemp("cli")
    root = tmp / "skills"
    for i in range(8):
        make_skill(root, "widgets/w%d" % i, {"name": "widget-%d" % i,
                                             "description": "Polish widget number %d%s" % (i, " widget" * (i % 3))})
    make_skill(root, "docs/pdf-extract", {"name": "pdf-extract", "description": "Extract text from scanned pdf files"})
    make_skill(root, "docs/long", {"name": "long-desc", "description": "Zebra " + "x" * 300})
    make_skill(root, "docs/exact", {"name": "exact-desc", "description": "Yak " + "y" * 196})
    make_skill(root, "ops/multi", {"name": "multi-line", "description": "Quokka line one\nline two\n\n  line three"})
    index = tmp / "cli.skr"
    # The count contract is tested on plain BM25 ranking: the quality
    # cut-offs (abstention, share of the best score) are tested elsewhere.
    base = dict(base_env(tmp), SKILL_RETRIEVAL_DECIDE="off")
    workdir = tmp / "cwd"
    workdir.mkdir()

    def run(*args, input=None, env=None, timeout=60):
        return run_cli(["--root", root, "--index", index, *args], dict(base, **(env or {})),
                       input=input, cwd=workdir, timeout=timeout)

    assert_clean(run_cli(["build", "--root", root, "--index", index], base))
    run.root = root
    run.index = index
    run.env = base
    return run


def parse_block(text):
    """The injected block as (heading, guidance, [(name, id, desc)])."""
    assert text.endswith("\n")
    lines = text[:-1].split("\n")
    assert len(lines) >= 3, text
    rows = []
    for line in lines[2:]:
        m = LINE.match(line)
        assert m, "not a result line: %r" % line
        rows.append((m["name"], m["id"], m["desc"]))
    return lines[0], lines[1], rows


# -- query forms -------------------------------------------------------------

def test_query_is_the_default_subcommand(lib):
    a = lib("extract", "text", "from", "pdf")
    b = lib("query", "extract", "text", "from", "pdf")
    assert_clean(a)
    assert_clean(b)
    assert a.stdout == b.stdout and "(docs/pdf-extract)" in a.stdout


def test_query_from_stdin_when_no_words(lib):
    words = lib("--format", "json", "extract text from pdf")
    piped = lib("--format", "json", input="extract text from pdf\n")
    assert json_results(piped) == json_results(words)
    assert json.loads(piped.stdout)["query"].strip() == "extract text from pdf"
    # The words win over stdin when both are given.
    both = lib("--format", "json", "polish", "widget", input="extract text from pdf\n")
    assert json.loads(both.stdout)["query"] == "polish widget"


def test_words_are_joined_with_spaces(lib):
    proc = lib("--format", "json", "extract", "text  from", "pdf")
    assert json.loads(proc.stdout)["query"] == "extract text  from pdf"


def test_a_query_may_start_with_a_subcommand_name_after_query_or_double_dash(lib):
    for args in (("query", "build", "pdf", "extract"), ("--", "build", "pdf", "extract")):
        res = json_results(lib("--format", "json", *args))
        assert res and res[0]["id"] == "docs/pdf-extract"


@pytest.mark.parametrize("args,meant", [
    (["biuld", "--root", "examples/skills"], "build"),
    (["doctr"], "doctor"),
    (["instal", "claude-code"], "install"),
    (["uninstal", "codex"], "uninstall"),
    (["qeury", "extract", "text", "from", "pdf"], "query"),
    (["explian", "extract", "pdf"], "explain"),
    (["tokns"], "tokens"),
    (["rerank-reprot"], "rerank-report"),
    # A word of its own ("rots"), but what follows is ``roots``' arguments.
    (["rots", "add", "somewhere"], "roots"),
])
def test_a_mistyped_subcommand_is_named_not_searched(cli, tmp_path, args, meant):
    # Issue 32: ``instal claude-code`` printed six skills and installed nothing.
    proc = cli(*args)
    assert_clean(proc, 2)
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [
        "skill-retrieve: unknown command '%s'; did you mean '%s'? (to search for it: skill-retrieve query %s ...)"
        % (args[0], meant, args[0])]
    assert not (tmp_path / "xdg-cache").exists() or not os.listdir(tmp_path / "xdg-cache")


@pytest.mark.parametrize("words", [
    ["server", "widget", "polish"],     # one edit from serve, and a word
    ["Build", "a", "polished", "widget"],  # capitalised: a sentence, not a command
    ["root", "cause", "of", "widget", "polish"],
    ["hooks", "for", "widget", "polish"],
    ["token", "widget", "polish"],
    ["jquery", "widget", "polish"],
    ["serde", "widget", "polish"],
    ["look", "polish", "widget"],
    ["built", "widget", "polish"],
    ["rootfs", "widget", "polish"],
    ["robots", "widget", "polish"],     # robots.txt: words of the skill corpora
    ["kserve", "widget", "polish"],
    ["installs", "widget", "polish"],
    ["polish", "widget"],               # nowhere near a subcommand
])
def test_a_query_starting_with_a_word_near_a_subcommand_still_searches(lib, words):
    proc = run_cli([*words, "--root", lib.root, "--index", lib.index], lib.env)
    assert_clean(proc)
    assert "widget-" in proc.stdout and proc.stderr == ""


def test_flags_may_follow_words_and_take_equals(lib):
    a = lib("pdf", "extract", "--format", "json", "-k", "1")
    b = lib("--format=json", "--k=1", "pdf extract")
    c = lib("-k1", "--format", "json", "pdf extract")
    assert json_results(a) == json_results(b) == json_results(c)
    assert len(json_results(a)) == 1


# -- json --------------------------------------------------------------------

def test_json_shape(lib):
    proc = lib("--format", "json", "polish widget")
    assert_clean(proc)
    assert proc.stdout.endswith("\n") and proc.stdout.count("\n") == 1
    doc = json.loads(proc.stdout)
    assert set(doc) == {"query", "query_chars", "tiers", "results"}
    assert doc["tiers"] == ["bm25"]
    assert doc["query"] == "polish widget"
    assert len(doc["results"]) == 6
    for r in doc["results"]:
        assert set(r) == {"id", "name", "path", "score", "description"}
        assert isinstance(r["id"], str) and isinstance(r["name"], str)
        assert isinstance(r["description"], str)
        assert isinstance(r["score"], float) and r["score"] > 0
        assert os.path.isabs(r["path"]) and os.path.isfile(os.path.join(r["path"], "SKILL.md"))
        assert r["path"] == str(lib.root / r["id"])
    scores = [r["score"] for r in doc["results"]]
    assert scores == sorted(scores, reverse=True)


def test_json_keeps_the_full_description(lib):
    res = json_results(lib("--format", "json", "zebra"))
    assert res[0]["description"] == "Zebra " + "x" * 300


def test_json_with_no_results_is_an_empty_list(lib):
    proc = lib("--format", "json", "qwertyuiop asdfghjkl")
    assert_clean(proc)
    assert json.loads(proc.stdout) == {"query": "qwertyuiop asdfghjkl", "query_chars": 20, "tiers": ["bm25"],
                                       "results": []}


# -- text block --------------------------------------------------------------

def test_text_block_format(lib):
    proc = lib("polish widget")
    assert_clean(proc)
    heading, guidance, rows = parse_block(proc.stdout)
    assert heading == "## Retrieved Skills"
    assert guidance.strip() and not guidance.startswith(("-", "#"))
    assert len(rows) == 6
    res = json_results(lib("--format", "json", "polish widget"))
    assert [(r["name"], r["id"], r["description"]) for r in res] == rows


def test_long_descriptions_are_cut_to_200_characters(lib):
    _, _, rows = parse_block(lib("zebra").stdout)
    desc = rows[0][2]
    assert len(desc) == 200
    assert desc == ("Zebra " + "x" * 300)[:197] + "..."
    _, _, rows = parse_block(lib("yak").stdout)
    assert rows[0][2] == "Yak " + "y" * 196  # exactly 200: unchanged


def test_descriptions_print_on_one_line(lib):
    _, _, rows = parse_block(lib("quokka").stdout)
    assert rows[0][1] == "ops/multi"
    assert rows[0][2] == "Quokka line one line two line three"


@pytest.mark.parametrize("query", ["qwertyuiop", "", "   ", "!!! ???", "the"])
def test_nothing_at_all_is_printed_without_results(lib, query):
    proc = lib(query) if query else lib(input=b"")
    assert_clean(proc)
    assert proc.stdout == ""


def test_empty_and_blank_stdin(lib):
    for data in (b"", b"\n", b"   \n\t\n"):
        proc = lib(input=data)
        assert_clean(proc)
        assert proc.stdout == "" and proc.stderr == ""
        proc = lib("--format", "json", input=data)
        assert json_results(proc) == []


def test_non_utf8_stdin(lib):
    proc = lib("--format", "json", input=b"\xff\xfe extract \x80text from pdf \xc3")
    res = json_results(proc)
    assert res[0]["id"] == "docs/pdf-extract"
    proc = lib(input=b"\xff\xfe extract \x80text from pdf \xc3")
    assert_clean(proc)
    assert "(docs/pdf-extract)" in proc.stdout


def test_non_utf8_words(lib):
    proc = lib("--format", "json", b"\xff\xfeextract", b"pdf")
    res = json_results(proc)
    assert res[0]["id"] == "docs/pdf-extract"
    assert_clean(lib(b"\xff\xfeextract", b"pdf"))


def test_one_megabyte_query(lib):
    big = "extract text from my scanned pdf. " + "lorem ipsum dolor sit amet " * 40000
    assert len(big) > 1_000_000
    proc = lib("--format", "json", input=big, timeout=60)
    res = json_results(proc)
    assert res and res[0]["id"] == "docs/pdf-extract"
    proc = lib(input=big.encode(), timeout=60)
    assert_clean(proc)
    parse_block(proc.stdout)


def test_one_megabyte_of_one_word(lib):
    proc = lib("--format", "json", input="a" * 1_048_576)
    assert json_results(proc) == []


# -- how many are printed ----------------------------------------------------

def count(proc):
    return len(json_results(proc))


@pytest.mark.parametrize("env, k, n", [
    ({}, None, 6),
    ({"SKILL_RETRIEVAL_TOP_K": "3"}, None, 3),
    ({"SKILL_RETRIEVAL_TOP_K": "20"}, None, 8),
    ({"SKILL_RETRIEVAL_INJECT_K": "2"}, None, 2),
    ({"SKILL_RETRIEVAL_TOP_K": "4", "SKILL_RETRIEVAL_INJECT_K": "2"}, None, 2),
    # INJECT_K is capped by TOP_K.
    ({"SKILL_RETRIEVAL_TOP_K": "3", "SKILL_RETRIEVAL_INJECT_K": "5"}, None, 3),
    ({"SKILL_RETRIEVAL_TOP_K": " 3 "}, None, 3),
    # -k overrides both.
    ({}, 2, 2),
    ({"SKILL_RETRIEVAL_TOP_K": "3"}, 7, 7),
    ({"SKILL_RETRIEVAL_INJECT_K": "1"}, 4, 4),
    ({}, 1000, 8),
])
def test_result_counts(lib, env, k, n):
    args = ("-k", str(k)) if k else ()
    proc = lib("--format", "json", *args, "polish widget", env=env)
    assert count(proc) == n
    assert proc.stderr == ""
    # The text block prints the same number of lines.
    text = lib(*args, "polish widget", env=env)
    assert len(parse_block(text.stdout)[2]) == n


@pytest.mark.parametrize("var", ["SKILL_RETRIEVAL_TOP_K", "SKILL_RETRIEVAL_INJECT_K"])
@pytest.mark.parametrize("value", ["abc", "0", "-3", "2.5", "1e3", "99999", "6 apples"])
def test_invalid_limits_warn_and_use_the_default(lib, var, value):
    proc = lib("--format", "json", "polish widget", env={var: value})
    assert_clean(proc)
    assert count(proc) == 6
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and var in lines[0]


def test_empty_limit_is_the_default_without_warning(lib):
    proc = lib("--format", "json", "polish widget", env={"SKILL_RETRIEVAL_TOP_K": ""})
    assert count(proc) == 6 and proc.stderr == ""


# -- usage errors ------------------------------------------------------------

@pytest.mark.parametrize("args", [
    ["-k", "0", "x"],
    ["-k", "abc", "x"],
    ["-k", "-1", "x"],
    ["-k", "1001", "x"],
    ["-k"],
    ["--k="],
    ["--format", "xml", "x"],
    ["--format=yaml", "x"],
    ["--format"],
    ["--bogus", "x"],
    ["query", "--bogus", "x"],
    ["--index"],
    ["--root"],
    ["--platform"],
    ["build", "--bogus"],
    ["build", "--profile", "nope"],
    ["build", "--index"],
])
def test_usage_errors_exit_2_with_one_line(cli, tmp_path, args):
    proc = cli(*args)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("skill-retrieve")
    assert "Traceback" not in proc.stderr
    # A usage error never builds anything.
    cache = tmp_path / "xdg-cache" / "skill-retrieval"
    assert not cache.exists() or not any(f.endswith(".skr") for f in os.listdir(cache))


@pytest.mark.parametrize("args,meant", [(["--format", "jsn", "x"], "json"), (["query", "--format=txt", "x"], "text"),
                                       (["--format", "xml", "x"], None), (["-k", "0", "x"], None)])
def test_a_bad_query_flag_points_at_the_help_that_lists_it(cli, args, meant):
    # "see skill-retrieve --help" sent the user to a page without --format
    # or -k; a near miss ("jsn") now gets the value meant.
    proc = cli(*args)
    assert_clean(proc, 2)
    assert proc.stderr.endswith("(see skill-retrieve query --help)\n"), proc.stderr
    assert ("did you mean %s?" % meant in proc.stderr) if meant else "did you mean" not in proc.stderr
    helptext = cli("query", "--help").stdout
    assert "--format" in helptext and "-k N" in helptext


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["query", "--help"], ["build", "--help"]])
def test_help_exits_0(cli, args):
    proc = cli(*args)
    assert_clean(proc)
    assert "usage:" in proc.stdout and "skill-retrieve" in proc.stdout


def test_help_documents_the_environment(cli):
    out = cli("--help").stdout
    for var in ("SKILL_RETRIEVAL_TOP_K", "SKILL_RETRIEVAL_INJECT_K", "XDG_CACHE_HOME", "HERMES_HOME"):
        assert var in out


def test_version(cli):
    proc = cli("--version")
    assert_clean(proc)
    assert proc.stdout.startswith("skill-retrieve ")


def test_build_reports_what_it_did(cli, tmp_path):
    root = tmp_path / "skills"
    make_skill(root, "a", {"name": "a", "description": "first"})
    make_skill(root, "b", {"name": "b", "description": "second"})
    proc = cli("build", "--root", root, "--index", tmp_path / "i.skr")
    assert_clean(proc)
    assert re.match(r"^built .*i\.skr: 2 skills from 1 root, 0 disabled, 0 shadowed, 0 problems, ", proc.stdout)
    assert proc.stdout.count("\n") == 1


def test_counts_agree_with_their_nouns(cli, tmp_path):
    # Issue 32: "1 skills", "1 files".
    one, two = tmp_path / "one", tmp_path / "two"
    for root in (one, two):
        make_skill(root, "a", {"name": "a", "description": "Merge PDF files"})
    make_skill(two, "b", "name: b\ndescription: [unclosed")  # one problem, still indexed
    proc = cli("build", "--root", one, "--index", tmp_path / "i.skr")
    assert_clean(proc)
    assert re.match(r"^built .*i\.skr: 1 skill from 1 root, 0 disabled, 0 shadowed, 0 problems, ", proc.stdout)
    proc = cli("build", "--root", one, "--root", two, "--index", tmp_path / "i.skr")
    assert re.match(r"^built .*i\.skr: 2 skills from 2 roots, 0 disabled, 1 shadowed, 2 problems, .*s, "
                    r"1 file unchanged$", proc.stdout)
    q = cli("--root", two, "--index", tmp_path / "j.skr", "merge", "pdf")
    assert_clean(q)
    assert "rebuilt it (2 skills, 1 file with problems, " in q.stderr
    doc = cli("doctor", "--root", one, "--root", two, "--no-probe")
    assert re.search(r"one  1 skill  \[", doc.stdout) and "1 file with problems" in doc.stdout, doc.stdout


def test_a_missing_root_is_not_a_crash(cli, tmp_path):
    proc = cli("--root", tmp_path / "does-not-exist", "--format", "json", "anything")
    assert_clean(proc, 2)
    assert proc.stdout == ""
    proc = cli("build", "--root", tmp_path / "does-not-exist", "--index", tmp_path / "i.skr")
    assert_clean(proc, 1)
    assert "none of the --root folders exists" in proc.stderr


def test_closed_stdout_is_not_an_error(lib):
    """``skill-retrieve ... | head -0``: a broken pipe is not a traceback."""
    import subprocess
    from skillret_helpers import BIN
    p = subprocess.Popen([str(BIN), "--root", str(lib.root), "--index", str(lib.index), "polish widget"],
                         env=lib.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    p.stdout.close()
    err = p.stderr.read()
    assert p.wait(timeout=30) in (0, 1)
    assert b"Traceback" not in err


def test_a_root_that_is_not_a_folder_is_named_not_silently_empty(cli, tmp_path):
    missing = tmp_path / "no-such-skills"
    index = tmp_path / "idx.skr"
    proc = cli("build", "--root", missing, "--index", index)
    # A typo is not an empty library: exit 1, name it, write nothing.
    assert proc.returncode == 1
    assert "%s: no such folder" % missing in proc.stderr
    assert proc.stdout == ""
    assert not index.exists() and not missing.exists()



@pytest.mark.parametrize("query", [[], ["query"]], ids=["words", "query"])
def test_a_query_over_a_missing_root_is_a_usage_error_and_writes_nothing(cli, tmp_path, query):
    # Issue 32: it warned, "rebuilt it (0 skills ...)", exited 0 and
    # cached an index for the typo.
    missing = tmp_path / "no-such-skills"
    q = cli(*query, "--root", missing, "fix", "a", "flaky", "test")
    assert_clean(q, 2)
    assert q.stdout == ""
    assert q.stderr == "skill-retrieve: error: %s: no such folder; nothing searched\n" % missing
    assert not (tmp_path / "xdg-cache" / "skill-retrieval").exists()
    assert not missing.exists()
    # One of several missing is a warning: the others are searched.
    there = tmp_path / "skills"
    make_skill(there, "flaky", {"name": "flaky-tests", "description": "Fix a flaky test"})
    q = cli(*query, "--root", missing, "--root", there, "fix", "a", "flaky", "test")
    assert_clean(q)
    assert "flaky-tests" in q.stdout and "%s: no such folder" % missing in q.stderr
