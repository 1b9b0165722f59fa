"""Issue 41, a user's first day: what the injected block names must be
loadable in the runner that gets it, ``tokens`` says what its figures
rest on, and the command line says what a silent answer means.

Every test runs the real executable (``cli``) in a temporary HOME.
"""

import json
import os
import re
import sys

import pytest

from conftest import make_skill
from test_first_run import _on_a_terminal
from test_hooks import payload as _payload

ARXIV = {"name": "arxiv", "description": "Search and download arxiv papers by their id or title."}
PDF = {"name": "pdf-extract", "description": "Extract text and tables from PDF files, including scanned PDFs."}

# Where each runner reads the user's own skills (runners/skillsets.py;
# Hermes: $HERMES_HOME/skills).
OWN = {"claude-code": ".claude/skills", "codex": ".codex/skills", "gemini": ".gemini/skills",
       "cline": ".cline/skills", "opencode": ".config/opencode/skills", "hermes": ".hermes/skills"}


def payload(runner, prompt, cwd):
    """What ``runner`` sends its hook (OpenCode: what our plugin sends)."""
    if runner == "opencode":
        return {"prompt": prompt, "cwd": cwd, "session_id": "s-" + prompt}
    return _payload(runner, prompt, cwd=cwd)


def block_of(proc):
    """The injected text of a hook's output, whatever the runner's shape."""
    assert proc.returncode == 0 and proc.stderr == "" and proc.stdout, proc
    doc = json.loads(proc.stdout)
    return (doc.get("hookSpecificOutput") or {}).get("additionalContext") or doc.get("context") \
        or doc.get("contextModification")


# -------------------------------------------------------- defect 1: loadable


@pytest.mark.parametrize("runner", list(OWN))
def test_a_named_folders_skill_comes_with_its_path_and_the_runners_own_by_name(runner, cli, tmp_path):
    home = tmp_path / "home"
    mine = make_skill(home / "myskills", "arxiv", ARXIV)
    make_skill(home / OWN[runner], "pdf-extract", PDF)
    assert cli("roots", "add", home / "myskills").returncode == 0
    project = tmp_path / "project"
    project.mkdir()

    foreign = block_of(cli("hook", runner, input=json.dumps(payload(runner, "download the arxiv paper 2101.00001",
                                                                    cwd=str(project)))))
    line = [l for l in foreign.splitlines() if l.startswith("- **arxiv**")]
    assert line and str(mine / "SKILL.md") in line[0], foreign
    assert "read that file" in foreign.splitlines()[1]

    own = block_of(cli("hook", runner, input=json.dumps(payload(runner, "extract the text from my pdf files",
                                                                cwd=str(project)))))
    assert "- **pdf-extract** (pdf-extract): " in own and "SKILL.md path" not in own, own


def test_a_named_folder_the_runner_reads_itself_is_named_not_pathed(cli, tmp_path):
    # ~/.agents/skills is Codex's own folder but not Claude Code's: naming
    # it with `roots add` changes nothing for Codex.
    home = tmp_path / "home"
    folder = make_skill(home / ".agents/skills", "arxiv", ARXIV)
    assert cli("roots", "add", home / ".agents/skills").returncode == 0
    ask = json.dumps(payload("codex", "download the arxiv paper 2101.00001", cwd=str(tmp_path)))
    codex = block_of(cli("hook", "codex", input=ask))
    assert "- **arxiv** (arxiv): " in codex, codex
    claude = block_of(cli("hook", "claude-code", input=ask))
    assert str(folder / "SKILL.md") in claude, claude


def test_the_hermes_plugin_gives_a_named_folders_skill_its_path(tmp_path, monkeypatch):
    from retriever import render
    home = tmp_path / "home"
    mine = make_skill(home / "myskills", "arxiv", ARXIV)
    (home / ".hermes" / "skills").mkdir(parents=True)
    monkeypatch.setenv("SKILL_RETRIEVAL_ROOTS", str(home / "myskills"))
    monkeypatch.setenv("HERMES_HOME", str(home / ".hermes"))
    from hermes_plugin import runtime
    state = runtime.new_state(index_path=str(tmp_path / "plugin.skr"))
    results = runtime.retrieve(state, "download the arxiv paper 2101.00001")
    assert results and results[0].get("read") == str(mine / "SKILL.md")
    assert str(mine / "SKILL.md") in render.text_block(results, "with skill_view(name)")


# ------------------------------------------------------- defect 3: tokens

ZOO = {"zebra-care": "Groom and feed the zebra herd before the show.",
       "llama-shearing": "Shear the llamas in spring and bag the wool.",
       "owl-banding": "Ring the barn owls and log each band number."}


def zoo(root):
    for name, desc in ZOO.items():
        make_skill(root, name, {"name": name, "description": desc})
    return root


def test_tokens_says_when_the_built_in_prompts_do_not_fit_the_library(cli, tmp_path):
    out = cli("tokens", "--root", zoo(tmp_path / "zoo"))
    assert out.returncode == 0, out
    empty = re.search(r"nothing injected for (\d+) of 20 queries", out.stdout).group(1)
    assert int(empty) > 10
    assert "the 20 built-in prompts do not fit these skills (nothing injected for %s of them)" % empty in out.stdout
    assert "--queries FILE" in out.stdout
    # With the user's own prompts there is nothing to warn about.
    qfile = tmp_path / "q.txt"
    qfile.write_text("groom the zebra herd\n")
    assert "built-in" not in cli("tokens", "--root", tmp_path / "zoo", "--queries", qfile).stdout


def test_tokens_accounts_for_every_skill_it_found(cli, tmp_path):
    root = zoo(tmp_path / "lib")
    make_skill(root, "mac-only", {"name": "mac-only", "description": "Tidy the macOS dock.",
                                  "platforms": ["windows"]})
    make_skill(root, "z-again", {"name": "zebra-care", "description": "A second zebra skill."})
    out = cli("tokens", "--root", root)
    assert out.returncode == 0, out
    line = [l for l in out.stdout.splitlines() if l.startswith("not in the stock listing")]
    assert line and "of 5 skills found" in line[0], out.stdout
    assert "mac-only (platforms: windows, not this OS)" in line[0]
    assert "zebra-care/SKILL.md (duplicate name 'zebra-care'; shadowed by" in line[0]
    doc = json.loads(cli("tokens", "--root", root, "--format", "json").stdout)
    assert doc["found"] == 5 and len(doc["not_listed"]) == 2


def test_tokens_runner_subtracts_the_injection_like_the_default_table(cli, tmp_path):
    zoo(tmp_path / "home" / ".claude" / "skills")
    qfile = tmp_path / "q.txt"
    qfile.write_text("groom and feed the zebra herd\nshear the llamas\n")
    proc = cli("tokens", "--runner", "claude-code", "--queries", qfile, "--format", "json")
    assert proc.returncode == 0, proc
    c = json.loads(proc.stdout)
    assert c["queries"] == 2 and c["injection_chars"]["mean"] > 0
    assert c["net_saving_chars"] == round(c["stock"] - c["names_only"] - c["injection_chars"]["mean"], 1)
    text = cli("tokens", "--runner", "claude-code", "--queries", qfile).stdout
    assert "| mean injection per message (2 queries) |" in text
    assert "| net saving per turn (stock - names only - mean injection) |" in text


# ------------------------------------------- frictions 4, 5, 6: say so


def test_at_a_terminal_an_empty_answer_says_no_skill_fitted(cli_env, tmp_path):
    root = zoo(tmp_path / "zoo")
    code, out, shown = _on_a_terminal(["--root", root, "read a DICOM file in python"], cli_env, tmp_path)
    assert (code, out) == (0, "")
    assert shown.splitlines()[-1] == ("skill-retrieve: no skill fitted this message; to see why: "
                                      "skill-retrieve explain 'read a DICOM file in python'"), shown
    # A hit says nothing more.
    code, out, shown = _on_a_terminal(["--root", root, "groom the zebra herd"], cli_env, tmp_path)
    assert "zebra-care" in out and "no skill fitted" not in shown


def test_in_a_pipe_an_empty_answer_stays_silent(cli, tmp_path):
    assert cli("build", "--root", zoo(tmp_path / "zoo")).returncode == 0
    proc = cli("--root", tmp_path / "zoo", "read a DICOM file in python")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


def test_at_a_terminal_a_bm25_only_answer_says_the_tier_was_not_ready(cli_env, tmp_path):
    from retriever import semantic
    if not semantic.installed():
        pytest.skip("the semantic tier is not installed")
    root = zoo(tmp_path / "zoo")
    import tempfile
    rt = tempfile.mkdtemp(prefix="skr-rt-")  # short: a socket path holds 108 bytes
    # A helper was just started (the stamp says so), and none answers:
    # the query does not start another, and BM25 alone answers.
    os.makedirs(rt + "/skill-retrieval", mode=0o700)
    open(rt + "/skill-retrieval/semantic.spawned", "w").close()
    env = dict(cli_env, SKILL_RETRIEVAL_SEMANTIC="on", XDG_RUNTIME_DIR=rt)
    try:
        code, out, shown = _on_a_terminal(["--root", root, "groom the zebra herd"], env, tmp_path)
    finally:
        import shutil
        shutil.rmtree(rt, ignore_errors=True)
    assert code == 0 and "zebra-care" in out
    assert "the semantic tier was not ready" in shown and "BM25 alone answered this" in shown, shown


def test_explain_says_the_query_is_empty(cli, tmp_path):
    proc = cli("explain", "--root", zoo(tmp_path / "zoo"), "  ")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == "skill-retrieve: error: the query is empty; nothing to explain " \
                          "(skill-retrieve explain WORDS...)\n"


def test_explain_says_why_the_first_candidate_was_not_injected(cli, tmp_path):
    from conftest import REPO
    proc = cli("explain", "--root", REPO / "examples" / "skills", "make it shorter",
               env={"SKILL_RETRIEVAL_DECIDE": None})
    assert proc.returncode == 0, proc
    first = [l for l in proc.stdout.splitlines() if l.startswith("  #1 ")]
    assert first and "nothing is injected" in proc.stdout, proc.stdout
    assert "not injected (the gate gives " in first[0] and "no skill fits this turn)" in first[0], first


@pytest.mark.parametrize("argv, fixed", [
    (["how", "do", "I", "use", "-k", "in", "grep"], "skill-retrieve -- how do I use -k in grep"),
    (["--format", "json", "what", "does", "-k", "do"], "skill-retrieve --format json -- what does -k do"),
])
def test_words_that_look_like_flags_get_how_to_search_for_them(cli, argv, fixed):
    proc = cli(*argv)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "quote them or put -- before them: " + fixed in proc.stderr, proc.stderr


# ------------------------------------------------- friction 11: the usual


def test_dash_capital_v_prints_the_version(cli):
    short, long_ = cli("-V"), cli("--version")
    assert short.returncode == 0 and short.stdout == long_.stdout and short.stdout.startswith("skill-retrieve ")


def test_rerank_report_takes_format_json_and_keeps_json(cli, tmp_path):
    log = tmp_path / "ab.jsonl"
    log.write_text(json.dumps({"reranked": True, "latency_ms": 120, "fallback": None,
                               "bm25_top": ["a", "b"], "reranked_top": ["b", "a"]}) + "\n")
    new = cli("rerank-report", "--format", "json", log)
    old = cli("rerank-report", "--json", log)
    assert new.returncode == 0 and new.stdout == old.stdout, (new, old)
    assert json.loads(new.stdout)["log"] == str(log)
    assert not cli("rerank-report", "--format", "text", log).stdout.startswith("{")


def _bash_complete(script, *words):
    import subprocess
    line = "source %s; COMP_WORDS=(%s); COMP_CWORD=%d; _skill_retrieve; printf '%%s\\n' \"${COMPREPLY[@]}\"" % (
        script, " ".join("'%s'" % w for w in words), len(words) - 1)
    proc = subprocess.run(["bash", "--norc", "-c", line], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc
    return proc.stdout.split()


def test_bash_completion_comes_from_the_argparse_definitions(cli, tmp_path):
    proc = cli("completion", "bash")
    assert proc.returncode == 0 and proc.stderr == ""
    script = tmp_path / "skill-retrieve.bash"
    script.write_text(proc.stdout)
    assert _bash_complete(script, "skill-retrieve", "ins") == ["install"]
    assert _bash_complete(script, "skill-retrieve", "install", "cl") == ["claude-code", "cline"]
    assert _bash_complete(script, "skill-retrieve", "tokens", "--que") == ["--queries"]
    assert _bash_complete(script, "skill-retrieve", "rerank-report", "--format", "j") == ["json"]
    assert _bash_complete(script, "skill-retrieve", "completion", "") == ["bash", "zsh", "fish"]


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_completion_name_every_subcommand_and_flag(cli, shell):
    from retriever.cli import completion
    proc = cli("completion", shell)
    assert proc.returncode == 0 and proc.stderr == ""
    top, cmds = completion.spec()
    for name, _, opts, _ in cmds:
        assert name in proc.stdout
        for flags, _, _, _ in opts:
            for f in flags:
                spelled = f if shell == "zsh" else ("-l " + f[2:] if f.startswith("--") else "-s " + f[1:])
                assert spelled in proc.stdout, (name, f)


# ------------------------------------------------ friction 8: clean up


class FakeHelper:
    """A stand-in for the semantic helper on its socket: it answers every
    request "ok" and keeps what it was asked."""

    def __init__(self):
        import socket
        import tempfile
        import threading
        self.folder = tempfile.mkdtemp(prefix="skr-h-")  # mode 0700, short enough for a socket
        self.path = self.folder + "/semantic.sock"
        self.asked = []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(4)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        from retriever.semantic import client
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                self.asked.append(client.read_frame(conn).decode())
                conn.sendall(client.frame(b"ok"))

    def close(self):
        import shutil
        self.sock.close()
        shutil.rmtree(self.folder, ignore_errors=True)


@pytest.fixture
def helper():
    h = FakeHelper()
    yield h
    h.close()


def test_uninstalling_the_last_runner_stops_the_helper(cli, helper, tmp_path):
    make_skill(tmp_path / "home" / ".claude" / "skills", "zebra-care", {"name": "zebra-care", "description": "x"})
    env = {"SKILL_RETRIEVAL_SEMANTIC_SOCKET": helper.path}
    for runner in ("claude-code", "codex"):
        assert cli("install", runner, env=env).returncode == 0
    first = cli("uninstall", "codex", env=env)
    assert first.returncode == 0 and helper.asked == [] and "stopped" not in first.stdout
    last = cli("uninstall", "claude-code", env=env)
    assert last.returncode == 0 and helper.asked == ["stop"], (last, helper.asked)
    assert last.stdout.splitlines()[-1] == "no runner has skill-retrieve installed now: stopped the semantic helper"


def test_uninstall_all_removes_every_runners_install(cli, tmp_path):
    home = tmp_path / "home"
    runners = ("claude-code", "codex", "gemini", "cline", "opencode")
    for runner in runners:
        assert cli("install", runner).returncode == 0
    before = {p for p in home.rglob("*") if p.is_file()}
    proc = cli("uninstall", "--all")
    assert proc.returncode == 0, proc
    for runner in runners:
        assert "removed the %s hook" % runner in proc.stdout, (runner, proc.stdout)
    from conftest import state_home
    left = json.loads((state_home(tmp_path) / "skill-retrieval" / "changes.json").read_text())
    assert {p: f for p, f in left.items() if f.get("changes")} == {}
    assert not [p for p in before if p.exists() and "skill-retrieval" in p.name]


def test_uninstall_all_purge_lists_what_it_deletes_then_deletes_it(cli, tmp_path):
    from conftest import state_home
    home = tmp_path / "home"
    make_skill(home / "myskills", "zebra-care", {"name": "zebra-care", "description": "Groom the zebras."})
    assert cli("roots", "add", home / "myskills").returncode == 0
    assert cli("install", "claude-code").returncode == 0
    cache, state = tmp_path / "xdg-cache" / "skill-retrieval", state_home(tmp_path) / "skill-retrieval"
    roots = home / ".config" / "skill-retrieval" / "roots"
    assert cache.is_dir() and state.is_dir() and roots.is_file()

    dry = cli("uninstall", "--all", "--purge", "--dry-run")
    assert dry.returncode == 0 and cache.is_dir() and state.is_dir() and roots.is_file()
    assert "would delete %s (the skill folders you named)" % roots in dry.stdout

    proc = cli("uninstall", "--all", "--purge")
    assert proc.returncode == 0, proc
    listed = [l for l in proc.stdout.splitlines() if l.startswith("deleting ")]
    assert listed == ["deleting %s (indexes, vectors, the log and the usage record)" % cache,
                      "deleting %s (install backups and records)" % state,
                      "deleting %s (the skill folders you named)" % roots], proc.stdout
    assert not cache.exists() and not state.exists() and not roots.parent.exists()
    assert (home / "myskills" / "zebra-care" / "SKILL.md").is_file()  # never the user's skills


@pytest.mark.parametrize("args", [["uninstall"], ["uninstall", "codex", "--all"], ["uninstall", "codex", "--purge"]])
def test_uninstall_needs_a_runner_or_all(cli, args):
    proc = cli(*args)
    assert proc.returncode == 2 and proc.stdout == "" and proc.stderr.count("\n") == 1, proc


# ------------------------------------- friction 10: side effects, said


@pytest.mark.parametrize("dry", [False, True], ids=["install", "dry-run"])
def test_install_codex_says_it_sets_the_global_warning_switch(cli, tmp_path, dry):
    if sys.version_info < (3, 11):
        pytest.skip("editing config.toml needs tomllib (3.11+)")
    proc = cli("install", "codex", *(["--dry-run"] if dry else []))
    assert proc.returncode == 0, proc
    line = [l for l in proc.stdout.splitlines() if l.startswith("codex: install")]
    assert line and "suppress_unstable_features_warning = true" in line[0], proc.stdout
    assert ("install would also set " in line[0]) == dry


def test_install_hermes_says_it_creates_the_hermes_home(cli, tmp_path):
    home = tmp_path / "home"
    dry = cli("install", "hermes", "--dry-run")
    assert dry.returncode == 0 and "(creating it: no Hermes home is there yet)" in dry.stdout, dry
    assert not (home / ".hermes").exists()
    proc = cli("install", "hermes")
    assert proc.returncode == 0, proc
    assert proc.stdout.startswith("created %s (no Hermes home was there" % (home / ".hermes")), proc.stdout
    again = cli("install", "hermes")
    assert "created" not in again.stdout  # only the first time, when it was made


def test_dry_run_prints_a_unified_diff_of_the_change(cli, tmp_path):
    settings = tmp_path / "home" / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    mine = '{\n  "model": "opus",\n' + "".join('  "k%02d": %d,\n' % (i, i) for i in range(30)) + '  "z": 1\n}\n'
    settings.write_text(mine)
    proc = cli("install", "claude-code", "--no-compact", "--dry-run")
    assert proc.returncode == 0, proc
    out = proc.stdout
    assert "would write %s:\n--- %s\n+++ %s\n@@ " % (settings, settings, settings) in out, out
    assert '"k05": 5' not in out  # lines far from the change are not printed
    from conftest import apply_diff
    # Only this file's diff: install writes the MCP server's file next.
    said = out.split("would write %s:\n" % settings, 1)[1].split("would write ", 1)[0]
    assert cli("install", "claude-code", "--no-compact").returncode == 0
    assert apply_diff(mine, said) == settings.read_text()


# ------------------------------------------- defect 2: doctor's fixes fix


def findings(cli, *args):
    """``[(finding, fix command or None)]`` of the warnings and errors
    ``doctor --no-probe`` prints."""
    out = cli("doctor", "--no-probe", *args).stdout.split("\nFindings\n", 1)
    if len(out) < 2:
        return []
    found = []
    for line in out[1].splitlines():
        if re.match(r"  (warn|error|!!)\s", line, re.I):
            found.append([line.split(None, 1)[1], None])
        elif line.strip().startswith("fix: ") and found:
            found[-1][1] = line.strip()[len("fix: "):]
    return [tuple(f) for f in found]


def test_doctor_does_not_ask_for_names_only_when_claude_code_lists_none(cli, tmp_path):
    # Issue 41's user: their skills in a folder named with `roots add`;
    # Claude Code's own folders hold none, so there is nothing to list by
    # name, and `install claude-code` (doctor's fix) could change nothing.
    home = tmp_path / "home"
    make_skill(home / "myskills", "arxiv", ARXIV)
    assert cli("roots", "add", home / "myskills").returncode == 0
    assert cli("install", "claude-code").returncode == 0
    assert not [f for f in findings(cli, "--runner", "claude-code") if "names-only" in f[0]]
    out = cli("doctor", "--no-probe", "--runner", "claude-code").stdout
    assert "names only: nothing to list: none of its own folders holds a skill" in out


@pytest.mark.parametrize("runner", ["claude-code", "codex", "gemini", "opencode"])
def test_every_fix_doctor_prints_for_a_runner_fixes_what_it_warned_about(cli, cli_env, tmp_path, runner):
    import subprocess
    home = tmp_path / "home"
    make_skill(home / ".claude" / "skills", "pdf-extract", PDF)
    make_skill(home / ".agents" / "skills", "arxiv", ARXIV)
    assert cli("install", runner, "--no-compact").returncode == 0
    before = findings(cli, "--runner", runner)
    assert before and all(fix for _, fix in before), before
    for finding, fix in before:
        proc = subprocess.run(["/bin/sh", "-c", fix], env=cli_env, cwd=str(tmp_path), capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 0, (fix, proc)
    after = [f for f, _ in findings(cli, "--runner", runner)]
    assert not [f for f, _ in before if f in after], (before, after)


# ------------------------------------- friction 9: doctor and roots say it


def test_doctor_names_the_files_with_problems(cli, tmp_path):
    home = tmp_path / "home"
    make_skill(home / "my", "arxiv", ARXIV)
    bad = make_skill(home / "my", "broken", "name: broken\ndescription: a: b: c")
    assert cli("roots", "add", home / "my").returncode == 0
    out = cli("doctor", "--no-probe").stdout
    line = [l for l in out.splitlines() if "with problems" in l]
    assert line and "invalid YAML (1): ~/my/broken/SKILL.md" in line[0], out
    assert bad.is_dir()


def test_roots_add_of_a_folder_inside_a_named_one_says_so(cli, tmp_path):
    home = tmp_path / "home"
    make_skill(home / "my" / "sub", "arxiv", ARXIV)
    assert cli("roots", "add", home / "my").returncode == 0
    proc = cli("roots", "add", home / "my" / "sub")
    assert proc.returncode == 0
    assert proc.stderr == ("skill-retrieve: warning: %s is inside %s, already named: its skills are found there "
                           "(to drop it: skill-retrieve roots remove %s)\n" % (home / "my" / "sub", home / "my",
                                                                                home / "my" / "sub"))
    out = cli("doctor", "--no-probe").stdout
    assert "~/my/sub  0 skills" in out and "inside ~/my, listed above: its skills count there" in out, out


def test_re_adding_a_root_does_not_say_now_use_them(cli, tmp_path):
    home = tmp_path / "home"
    make_skill(home / "my", "arxiv", ARXIV)
    assert cli("roots", "add", home / "my").returncode == 0
    again = cli("roots", "add", home / "my")
    assert again.returncode == 0 and again.stdout == "already there: %s\nnothing added\n" % (home / "my")
