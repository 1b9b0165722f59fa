"""The first hour with skill-retrieve: everyday mistakes a newcomer makes.

Each test is a surprise found by using the CLI as a new user does (in a
clean HOME): a typo in a flag or a runner's name, a file where a folder
belongs, a setting with a bad value, an install then an uninstall.  The
rule every one of them holds: one clear line naming the value and the
problem (with "did you mean" where it fits), exit 2, no traceback, and
nothing of the user's changed.
"""

import os

import pytest

from conftest import assert_clean, make_skill


def _skills(root):
    make_skill(root, "testing/flaky-test-triage", {
        "name": "flaky-test-triage", "description": "Diagnose and fix flaky tests that fail intermittently"})
    make_skill(root, "devops/kubernetes-certs", {
        "name": "kubernetes-certs", "description": "Rotate the TLS certificates of a Kubernetes control plane"})
    return root


# ------------------------------------------------ 1. did you mean, for flags


@pytest.mark.parametrize("args, meant, helpcmd", [
    (["--formt", "json", "fix", "a", "test"], "--format", "skill-retrieve query"),
    (["build", "--rot", "DIR"], "--root", "skill-retrieve build"),
    (["doctor", "--runer", "codex"], "--runner", "skill-retrieve doctor"),
    (["serve", "--stp"], "--stop", "skill-retrieve serve"),
    (["install", "codex", "--dryrun"], "--dry-run", "skill-retrieve install"),
])
def test_a_mistyped_option_gets_did_you_mean(cli, args, meant, helpcmd):
    proc = cli(*args)
    assert_clean(proc, 2)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert "did you mean %s?" % meant in lines[0]
    assert "(see %s --help)" % helpcmd in lines[0]


@pytest.mark.parametrize("args, meant", [
    (["install", "claud-code"], "claude-code"),
    (["install", "claude"], "claude-code"),
    (["install", "gemini-cli", "--dry-run"], "gemini"),
    (["uninstall", "codx"], "codex"),
    (["roots", "ad", "DIR"], "add"),
    (["doctor", "--runner", "opencod"], "opencode"),
    (["sync", "claude"], "claude-code"),
    (["install", "CODEX"], "codex"),  # a name in another case is the same name
    (["install", "Claude"], "claude-code"),
])
def test_a_mistyped_choice_gets_did_you_mean(cli, args, meant):
    proc = cli(*args)
    assert_clean(proc, 2)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert "did you mean '%s'?" % meant in lines[0]


def test_a_choice_far_from_every_name_gets_the_list_not_a_guess(cli):
    proc = cli("install", "vscode")
    assert_clean(proc, 2)
    assert "did you mean" not in proc.stderr
    assert "'claude-code'" in proc.stderr and "'vscode'" in proc.stderr


@pytest.mark.parametrize("args", [["--runner", "claud-code", "fix"], ["tokens", "--runner", "codx"]])
def test_a_mistyped_runner_flag_gets_did_you_mean(cli, args):
    proc = cli(*args)
    assert_clean(proc, 2)
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "did you mean '%s'?" % ("claude-code" if "claud-code" in args else "codex") in proc.stderr


# ------------------------------------- 2. a file where a folder belongs


def test_a_file_given_as_root_is_called_a_file_not_missing(cli, tmp_path):
    """``--root ~/skills/pdf/SKILL.md`` exists: "no such folder" sent the
    user looking for a typo that is not there."""
    root = _skills(tmp_path / "skills")
    md = root / "testing" / "flaky-test-triage" / "SKILL.md"
    for args, code in ((["--root", md, "fix", "a", "flaky", "test"], 2),
                       (["explain", "--root", md, "fix", "a", "flaky", "test"], 2),
                       (["tokens", "--root", md], 2),
                       (["roots", "add", md], 2),
                       (["build", "--root", md], 1)):
        proc = cli(*args)
        assert_clean(proc, code)
        assert "%s: a file, not a folder" % md in proc.stderr, (args, proc.stderr)
        assert "no such folder" not in proc.stderr, (args, proc.stderr)
        assert proc.stdout == "", (args, proc.stdout)
    assert cli("roots", "list").stdout.startswith("no folders named")


def test_roots_list_calls_a_file_a_file_not_missing(cli, tmp_path):
    """A folder named once (SKILL_RETRIEVAL_ROOTS or the roots file) that
    is now a file exists: "missing" sent the user looking for it."""
    md = _skills(tmp_path / "skills") / "testing" / "flaky-test-triage" / "SKILL.md"
    gone = tmp_path / "gone"
    proc = cli("roots", "list", env={"SKILL_RETRIEVAL_ROOTS": "%s:%s" % (md, gone)})
    assert_clean(proc)
    (file_line,) = [l for l in proc.stdout.splitlines() if l.startswith(str(md))]
    (gone_line,) = [l for l in proc.stdout.splitlines() if l.startswith(str(gone))]
    assert file_line.endswith("  a file, not a folder") and gone_line.endswith("  missing"), proc.stdout


@pytest.mark.parametrize("command", ["explain", "tokens"])
def test_explain_and_tokens_refuse_missing_roots_as_a_query_does(cli, tmp_path, command):
    """A query over only missing --root folders exits 2 with one line;
    explain went on over an empty index and tokens said "pass --root DIR"
    to someone who had."""
    typo = tmp_path / "skils"
    proc = cli(command, "--root", typo, *(["fix", "a", "test"] if command == "explain" else []))
    assert_clean(proc, 2)
    assert proc.stderr == "skill-retrieve: error: %s: no such folder; nothing searched\n" % typo
    assert proc.stdout == ""


# ------------------------------------------------ 3. tokens --queries FILE


@pytest.mark.parametrize("what", ["missing", "folder", "binary"])
def test_tokens_queries_that_cannot_be_read_get_one_line(cli, tmp_path, what):
    root = _skills(tmp_path / "skills")
    path = tmp_path / "queries.txt"
    if what == "folder":
        path.mkdir()
    elif what == "binary":
        path.write_bytes(b"\xff\xfe fix a test\n\x80\x81\n")
    proc = cli("tokens", "--root", root, "--queries", path)
    if what == "binary":  # undecodable bytes are replaced, as in a query
        assert_clean(proc)
        return
    assert_clean(proc, 2)
    assert proc.stderr.startswith("skill-retrieve: error: --queries %s: " % path), proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and "Error" not in proc.stderr, proc.stderr


# ----------------------------------------- 4. a bad setting names its default


@pytest.mark.parametrize("name, raw, default", [
    ("SKILL_RETRIEVAL_DECIDE", "maybe", "on"),
    ("SKILL_RETRIEVAL_REVALIDATE", "soon", "2"),
    ("SKILL_RETRIEVAL_INJECT_K", "abc", "TOP_K"),
    ("SKILL_RETRIEVAL_INJECT_K", "-1", "TOP_K"),
])
def test_a_bad_setting_says_the_default_it_uses_as_the_docs_write_it(cli, tmp_path, name, raw, default):
    """"using True" / "using 2.0" was Python talking; --help and
    docs/configuration.md call these defaults on, 2, TOP_K.  (Not
    SKILL_RETRIEVAL_SEMANTIC: its default, on, would start a helper.)"""
    root = _skills(tmp_path / "skills")
    proc = cli("--root", root, "fix", "a", "flaky", "test", env={name: raw})
    assert_clean(proc)
    assert "ignoring %s=%r (" % (name, raw) in proc.stderr
    assert "); using %s\n" % default in proc.stderr, proc.stderr
    assert "flaky-test-triage" in proc.stdout


# ------------------------------------ 5. uninstall hermes leaves no folders


def _tree(folder):
    return sorted(os.path.relpath(os.path.join(d, n), folder)
                  for d, dirs, files in os.walk(folder) for n in dirs + files)


@pytest.mark.parametrize("had_hermes", [False, True])
def test_uninstall_hermes_removes_the_folders_install_made(cli, cli_env, had_hermes):
    """install made ~/.hermes/plugins (and ~/.hermes); uninstall left them."""
    home = cli_env["HOME"]
    if had_hermes:
        os.makedirs(os.path.join(home, ".hermes"))
        with open(os.path.join(home, ".hermes", "config.yaml"), "w") as f:
            f.write("model:\n  default: foo  # mine\n")
    before = _tree(home)
    assert_clean(cli("install", "hermes"))
    assert os.path.islink(os.path.join(home, ".hermes", "plugins", "skill-retrieval"))
    assert_clean(cli("uninstall", "hermes"))
    assert _tree(home) == before
    if had_hermes:
        with open(os.path.join(home, ".hermes", "config.yaml")) as f:
            assert f.read() == "model:\n  default: foo  # mine\n"


def test_uninstall_hermes_keeps_a_plugins_folder_that_holds_others(cli, cli_env):
    home = cli_env["HOME"]
    assert_clean(cli("install", "hermes"))
    other = os.path.join(home, ".hermes", "plugins", "other")
    os.makedirs(other)
    assert_clean(cli("uninstall", "hermes"))
    assert os.path.isdir(other)


# ---------------------------------------- 6. install --project with a typo


@pytest.mark.parametrize("runner", ["claude-code", "codex", "opencode"])
@pytest.mark.parametrize("what", ["missing", "file"])
def test_install_project_must_name_an_existing_folder(cli, tmp_path, runner, what):
    """`install --project ~/src/ap` (a typo) made ~/src/ap/.claude/... out
    of nothing; a file there gave "cannot update ...: Not a directory",
    exit 1."""
    project = tmp_path / "src" / "ap"
    if what == "file":
        project.parent.mkdir(parents=True)
        project.write_text("not a folder\n")
    for args in (["install", runner, "--project", project],
                 ["install", runner, "--project", project, "--dry-run"],
                 ["uninstall", runner, "--project", project]):
        proc = cli(*args)
        assert_clean(proc, 2)
        assert proc.stderr.startswith("skill-retrieve: error: --project %s: " % project), proc.stderr
        assert len(proc.stderr.splitlines()) == 1 and proc.stdout == "", (proc.stdout, proc.stderr)
    assert os.path.exists(project) == (what == "file")
    assert not os.path.isdir(project)


# ------------------------------------------------- 7. --help says what is


def test_help_explains_k_without_pointing_at_text_that_is_not_there(cli):
    """The epilog said "(the relative floor and abstention above)": no such
    text is above it; and hook's -k said "number of skills injected",
    though -k is a maximum everywhere."""
    top = cli("--help").stdout
    assert "abstention above" not in top and "SKILL_RETRIEVAL_DECIDE above" in top
    assert "-k is a maximum" in top
    hook = " ".join(cli("hook", "--help").stdout.split())
    assert "number of skills injected" not in hook
    assert "-k N most skills injected" in hook
