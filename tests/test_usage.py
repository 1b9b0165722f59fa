"""The usage record (``retriever.usage``), ``stats`` and ``last``.

The counts are checked through the real Claude Code hook command, with a
transcript file in tmp_path written the way Claude Code writes one (a
``Skill`` tool call); the record's own rules (0600, bounded, damaged
lines) on the file the hook writes, or on files the module writes in
tmp_path with a fake clock.
"""

import json
import os
import stat
import time
from pathlib import Path

import pytest

from retriever import query, store, usage
from skillret_helpers import make_skill
from test_hermes_plugin import hermes_home  # noqa: F401  (the fixture)


@pytest.fixture
def skills(tmp_path):
    root = tmp_path / "skills"
    make_skill(root, "pdf-merge", {"name": "pdf-merge", "description": "Merge PDF files into one document"})
    make_skill(root, "k8s-certs", {"name": "k8s-certs", "description": "Rotate Kubernetes TLS certificates"})
    make_skill(root, "git-bisect", {"name": "git-bisect", "description": "Find the commit that broke a test with git bisect"})
    return root


def record_of(cli_env):
    return Path(cli_env["XDG_CACHE_HOME"]) / "skill-retrieval" / usage.FILE


def log_of(cli_env):
    p = Path(cli_env["XDG_CACHE_HOME"]) / "skill-retrieval" / "skill-retrieval.log"
    return p.read_text() if p.exists() else ""


class Transcript:
    """A Claude Code transcript (JSONL), appended to as the session goes."""

    def __init__(self, path):
        self.path = path
        path.write_text("")

    def load(self, skill):
        rec = {"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "Skill", "input": {"skill": skill}}]}}
        with open(self.path, "a") as f:
            f.write(json.dumps(rec) + "\n")


@pytest.fixture
def hook(cli, skills, tmp_path):
    """``hook(prompt, session, transcript, runner="claude-code", env=None)``:
    the hook's stdout."""
    def run(prompt, session="s1", transcript=None, runner="claude-code", env=None):
        if runner == "cline":
            p = {"hookName": "UserPromptSubmit", "taskId": session, "userPromptSubmit": {"prompt": prompt}}
        else:
            p = {"session_id": session, "transcript_path": str(transcript) if transcript else None,
                 "hook_event_name": "UserPromptSubmit", "prompt": prompt, "cwd": str(tmp_path)}
        proc = cli("hook", runner, "--root", skills, input=json.dumps(p), env=env)
        assert (proc.returncode, proc.stderr) == (0, ""), proc
        return proc.stdout
    return run


def stats(cli, *args):
    proc = cli("stats", "--format", "json", *args)
    assert (proc.returncode, proc.stderr) == (0, ""), proc
    return json.loads(proc.stdout)


def test_stats_counts_prompts_followed_and_loaded_unoffered(hook, cli, tmp_path):
    t1 = Transcript(tmp_path / "t1.jsonl")
    t1.load("k8s-certs")  # loaded before anything was offered: unoffered
    assert "pdf-merge" in hook("merge these pdf files", "s1", t1.path)
    t1.load("pdf-merge")  # the injected skill, loaded: followed
    assert hook("thanks, that worked", "s1", t1.path) == ""
    assert "git-bisect" in hook("find the commit that broke the test with git bisect", "s1", t1.path)
    # git-bisect was never loaded: offered, not followed.
    t2 = Transcript(tmp_path / "t2.jsonl")
    assert "pdf-merge" in hook("merge two pdf files", "s2", t2.path)
    assert hook("ok", "s2", t2.path) == ""  # offered, not loaded
    got = stats(cli)
    assert list(got) == ["claude-code"]
    r = got["claude-code"]
    assert (r["prompts"], r["silent"], r["offered"], r["followed"], r["loaded_unoffered"]) == (5, 2, 3, 1, 1)
    assert r["top"]["offered"][0] == {"skill": "pdf-merge", "count": 2}
    assert r["top"]["followed"] == [{"skill": "pdf-merge", "count": 1}]
    assert r["top"]["loaded_unoffered"] == [{"skill": "k8s-certs", "count": 1}]
    text = cli("stats").stdout
    assert "claude-code: 5 prompts, 2 silent; 3 skills offered, 1 followed (33%); 1 loaded unoffered" in text
    assert stats(cli, "--runner", "codex") == {}


def test_a_runner_that_shows_no_loads_says_so(hook, cli):
    hook("merge these pdf files", "task-1", runner="cline")
    r = stats(cli)["cline"]
    assert (r["prompts"], r["offered"], r["followed"], r["loaded_unoffered"]) == (1, 1, None, None)
    assert "shows no loads" in r["loads"]
    assert "loads unknown" in cli("stats").stdout


def test_the_record_is_private_and_forget_deletes_it(hook, cli, cli_env):
    hook("merge these pdf files")
    path = record_of(cli_env)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    proc = cli("stats", "--forget")
    assert proc.returncode == 0 and "deleted the usage record" in proc.stdout
    assert not path.exists()
    assert stats(cli) == {}
    assert "no usage record at" in cli("stats", "--forget").stdout


def test_learning_off_keeps_counts_without_terms_or_prompt(hook, cli, cli_env):
    hook("merge these pdf files")
    hook("merge two pdf files", "s2", env={"SKILL_RETRIEVAL_LEARN": "off"})
    on, off = [json.loads(x) for x in record_of(cli_env).read_text().splitlines()]
    assert on[7] == "merge these pdf files" and "pdf" in on[8].split()
    assert off[7] is None and off[8] is None
    assert off[4] == [["pdf-merge"]]
    assert stats(cli)["claude-code"]["prompts"] == 2
    assert "(prompt not kept: learning off)" in cli("last").stdout


def test_learning_keeps_the_terms_the_ranking_read_of_a_foreign_message(hook, cli_env):
    """A Spanish message over English skills: its ranking leaves out the
    Spanish function words (``query.foreign``), and so does the record
    learning reads; it kept "para" and "una", learnt as the user's words
    for a skill, and pairs such as "informe de" that no query forms."""
    msg = "necesito una herramienta para unir los archivos pdf de la semana"
    hook(msg)
    terms = json.loads(record_of(cli_env).read_text().splitlines()[-1])[8].split()
    idx = store.load(str(next((record_of(cli_env).parent).glob("index-*.skr"))))
    q = query.parse(idx, msg)
    assert q["lang"] == "es" and terms == q["terms"]
    assert not set(terms) & {"una", "para", "los", "de", "la"} and "pdf" in terms


def test_learning_keeps_no_term_of_a_pasted_block(hook, cli_env):
    """A pasted log's terms help rank the message, a few and weighed
    down (``query.PASTED_WEIGHT``); they are not the user's words for
    the skill loaded after it (an id or a path held by one session
    would be learnt at full strength)."""
    log = "\n".join("    E0917 kubelet zzqx%d certificate expired for node-%d" % (n, n) for n in range(30))
    hook("rotate the certs, this is what I get:\n" + log)
    terms = json.loads(record_of(cli_env).read_text().splitlines()[-1])[8].split()
    assert "rotat" in terms or "rotate" in terms
    assert not [t for t in terms if t.startswith("zzqx") or t == "kubelet"]


def test_a_damaged_record_never_breaks_a_prompt(hook, cli, cli_env):
    path = record_of(cli_env)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x00garbage\xff{not json\n[1,\"x\"]\n")
    os.chmod(path, 0o600)
    assert "pdf-merge" in hook("merge these pdf files")
    assert "pdf-merge" in hook("merge two pdf files", "s2")
    lines = [x for x in log_of(cli_env).splitlines() if "usage record" in x]
    assert len(lines) == 1 and "2 damaged lines dropped" in lines[0]
    assert stats(cli)["claude-code"]["prompts"] == 2


def test_a_record_that_is_not_a_file_of_ours_is_left_alone(hook, cli_env, tmp_path):
    path = record_of(cli_env)
    path.parent.mkdir(parents=True, exist_ok=True)
    target = tmp_path / "elsewhere"
    target.write_text("")
    path.symlink_to(target)
    assert "pdf-merge" in hook("merge these pdf files")
    assert target.read_text() == ""


def test_the_record_stays_bounded(tmp_path, monkeypatch):
    where = str(tmp_path / "c" / usage.FILE)
    os.makedirs(os.path.dirname(where), mode=0o700)
    monkeypatch.setattr(usage, "STEP", 4096)
    monkeypatch.setattr(usage, "MAX_PROMPTS", 50)
    now = 2_000_000_000
    for n in range(400):
        usage.append(usage.line("claude-code", "s%d" % n, [["pdf-merge"]], "bm25", [], "merge pdf %d" % n,
                                ["merg", "pdf"], now=now + n), where, now=now + n)
    data = Path(where).read_bytes()
    assert len(data) < 2 * 4096 + 50 * 200  # compacted as it grew
    entries, bad = usage.read(where, now=now + 400)
    assert len(entries) == 50 and bad == 0
    assert entries[-1]["prompt"] == "merge pdf 399"
    # 92 days on (a day of slack), the next prompt's append sweeps every older line.
    later = now + 92 * 86400
    usage.append(usage.line("codex", "", [], "bm25", None, now=later), where, now=later)
    assert [e["runner"] for e in usage.read(where, now=later)[0]] == ["codex"]
    assert len(Path(where).read_bytes().splitlines()) == 1
    assert stat.S_IMODE(os.stat(where).st_mode) == 0o600


def test_last_shows_what_the_last_prompts_got(hook, cli):
    hook("merge these pdf files")
    hook("thanks")
    out = cli("last", "1").stdout.splitlines()
    assert len(out) == 1 and "claude-code" in out[0] and "thanks" in out[0] and out[0].rstrip().endswith("-")
    rows = json.loads(cli("last", "--format", "json").stdout)
    assert [(r["prompt"], r["injected"], r["tier"]) for r in rows] == [
        ("merge these pdf files", ["pdf-merge"], "bm25"), ("thanks", [], "bm25")]


def test_last_and_stats_are_still_query_words(cli, skills):
    proc = cli("last", "commit", "that", "broke", "git", "bisect", "--root", skills)
    assert proc.returncode == 0 and "git-bisect" in proc.stdout
    proc = cli("list", "the", "pdf", "merge", "skills", "--root", skills)
    assert proc.returncode == 0 and "pdf-merge" in proc.stdout


def test_a_prompt_without_a_session_is_not_recorded(hook, cli_env):
    """doctor's probe names no session: it must not count as a prompt."""
    assert "pdf-merge" in hook("merge these pdf files", session=None)
    assert not record_of(cli_env).exists()


def test_doctor_gives_one_line_of_stats(hook, cli, tmp_path):
    t = Transcript(tmp_path / "t.jsonl")
    hook("merge these pdf files", "s1", t.path)
    t.load("pdf-merge")
    hook("thanks", "s1", t.path)
    out = cli("doctor", "--no-probe").stdout
    assert "claude-code 2 prompts, 1 of 1 offered skills loaded, 0 loaded unoffered" in out


def test_tokens_measures_on_the_users_own_recent_prompts(hook, cli, skills):
    """Issue 41, item 3: the generic prompts did not fit the user's
    library; the record's own prompts do."""
    mine = ["merge these pdf files", "merge the two scanned pdf files", "rotate the kubernetes tls certificates",
            "git bisect the commit that broke the test", "thanks", "merge the invoices into one pdf"]
    for n, text in enumerate(mine):
        hook(text, "s%d" % n)
    proc = cli("tokens", "--root", skills, "--format", "json")
    assert proc.returncode == 0, proc
    m = json.loads(proc.stdout)
    assert (m["queries"], m["queries_from"]) == (6, "recent")
    assert m["sample"] == "queries: your 6 most recent prompts, from the usage record (skill-retrieve last)"
    assert m["injection_chars"]["empty"] == 1  # only "thanks"
    # Learning off: no prompt kept, so the sample is generic again, and says so.
    cli("stats", "--forget")
    for n, text in enumerate(mine):
        hook(text, "t%d" % n, env={"SKILL_RETRIEVAL_LEARN": "off"})
    m = json.loads(cli("tokens", "--root", skills, "--format", "json").stdout)
    assert (m["queries"], m["queries_from"]) == (20, "generic")
    assert "built-in prompts" in m["sample"] or m["sample"].startswith("the sample is generic")


def test_tokens_for_one_runner_measures_with_that_runners_prompts_only(cli, cli_env, tmp_path):
    """``tokens --runner R`` samples R's own recent prompts: another
    runner's (here Codex's small talk) would change R's injection figures."""
    make_skill(tmp_path / "home" / ".claude" / "skills", "pdf-merge",
               {"name": "pdf-merge", "description": "Merge PDF files into one document"})
    where = str(record_of(cli_env))
    os.makedirs(os.path.dirname(where), mode=0o700, exist_ok=True)
    now = int(time.time())
    mine = ["merge these pdf files", "merge the two scanned pdf files", "merge the invoices into one pdf",
            "join two pdf documents", "combine the pdf reports"]
    theirs = ["thanks", "ok", "great", "looks good", "fine", "sure"]
    for n, (runner, text) in enumerate([("claude-code", t) for t in mine] + [("codex", t) for t in theirs]):
        usage.append(usage.line(runner, "s%d" % n, [], "bm25", None, text, now=now - 100 + n), where)
    proc = cli("tokens", "--runner", "claude-code", "--format", "json")
    assert proc.returncode == 0, proc
    c = json.loads(proc.stdout)
    assert (c["queries"], c["queries_from"]) == (5, "recent")
    assert c["injection_chars"]["empty"] == 0  # none of Codex's "thanks"


def test_the_hermes_plugin_records_its_turns_and_the_loads_in_the_conversation(hermes_home):
    from test_hermes_plugin import injected, start, turn_kwargs
    ctx, _ = start()
    hook = ctx.hook()
    pdf = "extract the text of my scanned pdf with ocr"
    assert injected(hook(**turn_kwargs(pdf, session_id="a")))[0] == "pdf-ocr"
    history = [{"role": "user", "content": pdf},
               {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {
                   "name": "skill_view", "arguments": '{"name": "pdf-ocr"}'}}]},
               {"role": "tool", "tool_call_id": "c1", "content": "# pdf-ocr ..."},
               {"role": "user", "content": "thanks"}]
    hook(**turn_kwargs("thanks", session_id="a", conversation_history=history))
    from retriever.cli import usage_stats
    r = usage_stats.summarize(usage.read()[0])["hermes"]
    assert (r["prompts"], r["offered"], r["followed"], r["loaded_unoffered"]) == (2, 1, 1, 0)


def test_the_hermes_plugin_records_the_terms_its_ranking_read(hermes_home):
    from hermes_plugin import runtime
    from test_hermes_plugin import start, turn_kwargs
    ctx, state = start()
    msg = "necesito sacar el texto de un pdf escaneado para la empresa"
    ctx.hook()(**turn_kwargs(msg, session_id="a"))
    terms = usage.read()[0][-1]["terms"]
    assert terms == query.parse(runtime.ensure_index(state), msg)["terms"]
    assert "pdf" in terms and not set(terms) & {"el", "de", "un", "para", "la"}


def test_a_resumed_sessions_history_is_not_parsed_on_its_first_silent_prompt(hook, cli, tmp_path, cli_env):
    """The first prompt of a session that injects nothing does not parse
    the transcript it comes with (a resumed session's, up to 512 KiB: about
    3 ms on every such prompt); it starts the session's reading at its
    end, and a load after it is counted on the next prompt."""
    t = Transcript(tmp_path / "resumed.jsonl")
    for _ in range(2000):
        t.load("k8s-certs")  # the history of a resumed session
    size = t.path.stat().st_size
    assert hook("thanks", "r1", t.path) == ""
    state = json.loads((Path(cli_env["XDG_CACHE_HOME"]) / "skill-retrieval" / "sessions.json").read_text())
    (entry,) = state["sessions"].values()
    assert entry["x"][2] == size and entry["l"] == []
    t.load("pdf-merge")
    assert hook("ok", "r1", t.path) == ""
    assert stats(cli)["claude-code"]["loaded_unoffered"] == 1
