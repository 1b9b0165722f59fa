"""``skill-retrieve mcp``: the MCP server over stdio (issue 39).

Each test runs the real executable and talks JSON-RPC lines to it, as a
runner does: the handshake, the two tools, their refusals, bad input
(none ends the server or reaches stderr) and the official SDK's client as
the conformance check where a Python with it is at hand.
"""

import json
import os
import subprocess
from pathlib import Path

import pytest

from skillret_helpers import BIN, REPO, base_env, make_skill

INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def _library(tmp_path):
    root = tmp_path / "skills"
    make_skill(root, "pdf-merge", {"name": "pdf-merge", "description": "Merge PDF files into one document"},
               body="Use qpdf to merge.\n")
    make_skill(root, "k8s-certs", {"name": "k8s-certs", "description": "Rotate Kubernetes TLS certificates"})
    make_skill(root, "pdf-forms", {"name": "pdf-forms", "description": "Fill PDF forms"})
    return root


def call(name, args, mid=1):
    return {"jsonrpc": "2.0", "id": mid, "method": "tools/call", "params": {"name": name, "arguments": args}}


def session(tmp_path, lines, args=(), env=None, cwd=None, timeout=120):
    """Run ``skill-retrieve mcp args`` with ``lines`` (dicts, or bytes sent
    as they are) on stdin, closed after; returns (answers by id, all
    answers, the process)."""
    raw = b"".join(l if isinstance(l, bytes) else json.dumps(l).encode() + b"\n" for l in lines)
    e = base_env(tmp_path)
    e.update(env or {})
    proc = subprocess.run([str(BIN), "mcp"] + [str(a) for a in args], input=raw, env=e, capture_output=True,
                          timeout=timeout, cwd=str(cwd or tmp_path))
    answers = [json.loads(l) for l in proc.stdout.splitlines()]
    return {a.get("id"): a for a in answers}, answers, proc


def text_of(answer):
    assert "result" in answer, answer
    return answer["result"]["content"][0]["text"]


def test_the_two_tool_definitions_stay_under_800_characters():
    from retriever.runners import mcp_server
    assert len(mcp_server.tools_json()) < 800
    assert [t["name"] for t in mcp_server.TOOLS] == ["search_skills", "read_skill"]


def test_handshake_list_search_and_read(tmp_path):
    root = _library(tmp_path)
    by_id, answers, proc = session(tmp_path, [
        INIT, INITIALIZED, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
        call("search_skills", {"query": "merge two pdf files into one"}, 3),
        call("read_skill", {"name": "pdf-merge"}, 4),
    ], ["--root", root])
    assert proc.returncode == 0 and proc.stderr == b""
    assert len(answers) == 5  # the notification gets no answer
    init = by_id[0]["result"]
    assert init["protocolVersion"] == "2025-06-18" and "tools" in init["capabilities"]
    assert init["serverInfo"]["name"] == "skill-retrieval"
    from retriever.runners import mcp_server
    assert by_id[1]["result"]["tools"] == mcp_server.TOOLS
    assert by_id[2]["result"] == {}
    found = text_of(by_id[3])
    assert by_id[3]["result"]["isError"] is False
    assert found.index("pdf-merge") < found.index("pdf-forms") if "pdf-forms" in found else "pdf-merge" in found
    assert "k8s-certs" not in found
    assert str(root / "pdf-merge") in found and "ranked by bm25" in found
    body = text_of(by_id[4])
    assert "Use qpdf to merge." in body and body.startswith(str(root / "pdf-merge" / "SKILL.md"))


def test_search_has_no_chat_gate_but_a_score_floor(tmp_path):
    """The agent asked: a terse query the hook's decision would drop still
    gets its best matches; k caps them; nothing relevant says so in one
    line."""
    root = _library(tmp_path)
    by_id, _, proc = session(tmp_path, [
        INIT, call("search_skills", {"query": "pdf", "k": 1}, 1),
        call("search_skills", {"query": "pdf"}, 2),
        call("search_skills", {"query": "bake sourdough bread"}, 3),
    ], ["--root", root], env={"SKILL_RETRIEVAL_DECIDE": "on"})
    assert proc.stderr == b""
    one = text_of(by_id[1])
    assert one.count("\n- ") + one.startswith("- ") == 1
    assert "pdf-" in one
    both = text_of(by_id[2])
    assert "pdf-merge" in both and "pdf-forms" in both
    assert text_of(by_id[3]) == "No skill matches 'bake sourdough bread'."


def test_read_skill_never_leaves_the_index(tmp_path):
    root = _library(tmp_path)
    (tmp_path / "secret").write_text("top secret\n")
    names = ["../secret", str(tmp_path / "secret"), "pdf-merge/../../secret", "..", "~/x", "a\\b", "", "pdf-merg"]
    by_id, _, proc = session(tmp_path, [INIT] + [call("read_skill", {"name": n}, i + 1) for i, n in enumerate(names)],
                             ["--root", root])
    assert proc.stderr == b""
    for i, n in enumerate(names):
        a = by_id[i + 1]
        assert a["result"]["isError"] is True, (n, a)
        assert "top secret" not in text_of(a)
    assert "not a path" in text_of(by_id[1])
    assert text_of(by_id[8]).startswith("no skill named 'pdf-merg'; nearest: pdf-merge")


def test_the_runner_picks_its_own_skill_set_and_load_hint(tmp_path):
    """``mcp claude-code`` searches Claude Code's folders under its names
    (folder names) and says how Claude Code loads a skill; a skill only in
    ``.agents/skills``, which Claude Code does not read, is not offered."""
    home = tmp_path / "home"
    make_skill(home / ".claude" / "skills", "pdf-tool", {"name": "Fancy PDF", "description": "Merge PDF files"})
    make_skill(home / ".agents" / "skills", "pdf-agents", {"name": "pdf-agents", "description": "Merge PDF files"})
    by_id, _, proc = session(tmp_path, [INIT, call("search_skills", {"query": "merge pdf files"}, 1),
                                        call("read_skill", {"name": "pdf-agents"}, 2)], ["claude-code"])
    assert proc.stderr == b""
    found = text_of(by_id[1])
    assert "- pdf-tool:" in found and "pdf-agents" not in found
    assert "with the Skill tool" in found
    assert by_id[2]["result"]["isError"] is True


def test_a_runner_without_skill_folders_says_so(tmp_path):
    by_id, _, proc = session(tmp_path, [INIT, call("search_skills", {"query": "merge pdf"}, 1)], ["codex"])
    assert proc.stderr == b"" and by_id[1]["result"]["isError"] is True
    assert "codex reads no skill folder" in text_of(by_id[1])


def test_bad_input_gets_error_answers_and_never_ends_the_server(tmp_path):
    root = _library(tmp_path)
    big = "merge pdf " + "x" * (1 << 20)
    lines = [
        INIT,
        call("search_skills", {"query": big}, 1),                       # a 1 MB query
        b"\xff\xfe{\"jsonrpc\": \"2.0\"}\n",                            # not UTF-8
        call("no_such_tool", {}, 3),
        call("search_skills", {"query": 5}, 4),                         # wrong types
        call("search_skills", {"query": "pdf", "k": "3"}, 5),
        call("search_skills", {"query": "pdf", "k": 0}, 6),
        call("search_skills", {"query": "pdf", "k": True}, 7),
        call("read_skill", {"name": ["pdf-merge"]}, 8),
        {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "read_skill", "arguments": "x"}},
        {"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": []},
        {"jsonrpc": "2.0", "id": 11, "method": "no/such/method"},
        b"{not json\n", b"[]\n", b"42\n", b"\n",
        {"jsonrpc": "2.0", "id": {"x": 1}, "method": "ping"},
        call("search_skills", {"query": "\ud800 pdf"}, 12),              # a lone surrogate
        {"jsonrpc": "2.0", "id": 13, "method": "ping"},                 # still answering
    ]
    by_id, answers, proc = session(tmp_path, lines, ["--root", root])
    assert proc.returncode == 0 and proc.stderr == b""
    assert "pdf-merge" in text_of(by_id[1])
    for i in (4, 5, 6, 7, 8, 9):
        assert by_id[i]["result"]["isError"] is True, by_id[i]
    assert by_id[3]["error"]["code"] == -32602 and "unknown tool" in by_id[3]["error"]["message"]
    assert by_id[10]["error"]["code"] == -32602
    assert by_id[11]["error"]["code"] == -32601
    nulls = [a["error"]["code"] for a in answers if a.get("id") is None]
    assert nulls == [-32700, -32700, -32600, -32600, -32600]
    assert "result" in by_id[12]
    assert by_id[13]["result"] == {}
    assert "Traceback" not in proc.stdout.decode()


def test_a_burst_of_1000_calls_is_answered_in_order(tmp_path):
    root = _library(tmp_path)
    lines = [INIT] + [call("search_skills", {"query": "merge pdf"}, i) if i % 2 else
                      {"jsonrpc": "2.0", "id": i, "method": "ping"} for i in range(1, 1001)]
    _, answers, proc = session(tmp_path, lines, ["--root", root], timeout=300)
    assert proc.returncode == 0 and proc.stderr == b""
    assert [a["id"] for a in answers] == list(range(0, 1001))
    assert all("pdf-merge" in text_of(a) for a in answers[1::2])


def test_it_exits_when_stdin_closes_even_mid_line(tmp_path):
    root = _library(tmp_path)
    _, answers, proc = session(tmp_path, [INIT, b'{"jsonrpc": "2.0", "id": 5, "meth'], ["--root", root], timeout=60)
    assert proc.returncode == 0 and proc.stderr == b""
    assert answers[0]["id"] == 0 and answers[-1]["error"]["code"] == -32700


def test_a_line_past_the_limit_is_refused_whole(tmp_path):
    from retriever.runners import mcp_server
    root = _library(tmp_path)
    huge = b'{"x": "' + b"a" * (mcp_server.MAX_LINE + 10) + b'"}\n'
    _, answers, proc = session(tmp_path, [INIT, huge, {"jsonrpc": "2.0", "id": 2, "method": "ping"}],
                               ["--root", root])
    assert proc.stderr == b""
    assert [a.get("id") for a in answers] == [0, None, 2]
    assert answers[1]["error"]["code"] == -32600


def test_a_skill_added_while_it_runs_is_found(tmp_path):
    """The server outlives many edits: the freshness check that keeps a
    hook's index current keeps its index current too."""
    import time
    root = _library(tmp_path)
    env = base_env(tmp_path)
    env["SKILL_RETRIEVAL_REVALIDATE"] = "0"  # check on every call
    proc = subprocess.Popen([str(BIN), "mcp", "--root", str(root)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=str(tmp_path))
    try:
        def ask(i):
            proc.stdin.write(json.dumps(call("search_skills", {"query": "zebra grooming"}, i)).encode() + b"\n")
            proc.stdin.flush()
            return text_of(json.loads(proc.stdout.readline()))
        assert ask(1).startswith("No skill matches")
        make_skill(root, "zebra-care", {"name": "zebra-care", "description": "Zebra grooming and care"})
        found, deadline, i = "", time.monotonic() + 60, 2
        while "zebra-care" not in found and time.monotonic() < deadline:
            time.sleep(0.2)
            found, i = ask(i), i + 1
        assert "zebra-care" in found
    finally:
        proc.stdin.close()
        assert proc.wait(30) == 0
        assert proc.stderr.read() == b""
        proc.stdout.close()
        proc.stderr.close()


def test_stray_prints_go_to_the_log_not_the_protocol(tmp_path, monkeypatch):
    """A warning printed while answering (a bad setting here) must reach
    neither stdout, which carries only protocol lines, nor stderr."""
    root = _library(tmp_path)
    by_id, answers, proc = session(tmp_path, [INIT, call("search_skills", {"query": "merge pdf"}, 1)],
                                   ["--root", root], env={"SKILL_RETRIEVAL_TOP_K": "zero"})
    assert proc.stderr == b"" and len(answers) == 2
    assert "pdf-merge" in text_of(by_id[1])
    log = (tmp_path / "xdg-cache" / "skill-retrieval" / "skill-retrieval.log").read_text()
    assert "SKILL_RETRIEVAL_TOP_K" in log


def test_a_query_starting_with_mcp_is_still_a_search(tmp_path):
    """Only the server's own command line (a runner, --root, --help)
    starts it: "mcp pdf merge" searches, as it did before the subcommand."""
    from skillret_helpers import run_cli
    root = _library(tmp_path)
    proc = run_cli(["mcp", "merge", "pdf", "--root", root], base_env(tmp_path))
    assert proc.returncode == 0 and "pdf-merge" in proc.stdout, proc.stderr
    helped = run_cli(["mcp", "--help"], base_env(tmp_path))
    assert helped.returncode == 0 and "search_skills" in helped.stdout


def test_the_per_prompt_path_never_imports_the_server():
    from test_architecture import HOOK_MODULES, QUERY_MODULES, import_graph
    assert "retriever.runners.mcp_server" not in HOOK_MODULES | QUERY_MODULES
    graph = import_graph()
    hot = {m for m in HOOK_MODULES | QUERY_MODULES if m in graph}
    assert not [m for m in hot if "retriever.runners.mcp_server" in graph[m]]
    from retriever.cli import bundle
    assert "retriever.runners.mcp_server" not in bundle.HOT


# ------------------------------------------- the official SDK's client


def sdk_python():
    """A Python with the official ``mcp`` SDK: $SKR_MCP_SDK_PYTHON, else
    .cache/mcp-sdk-venv (``make mcp-sdk``); None when neither has it."""
    py = os.environ.get("SKR_MCP_SDK_PYTHON")
    if py and Path(py).exists():
        return py
    venv = REPO / ".cache" / "mcp-sdk-venv"
    return str(venv / "bin" / "python") if (venv / ".installed").exists() else None


SDK_CLIENT = r"""
import asyncio, json, os, sys
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

def get(obj, *names):  # SDK 1.x camelCase, 2.x snake_case
    return next(getattr(obj, n) for n in names if hasattr(obj, n))

async def main():
    # The SDK passes only a few variables on by default; the test's own
    # (HOME, the cache, the semantic tier off) must reach the server.
    params = StdioServerParameters(command=sys.argv[1], args=sys.argv[2:], env=dict(os.environ))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as s:
            init = await s.initialize()
            tools = await s.list_tools()
            found = await s.call_tool("search_skills", {"query": "merge pdf files", "k": 2})
            read_ = await s.call_tool("read_skill", {"name": "pdf-merge"})
            bad = await s.call_tool("read_skill", {"name": "../x"})
            await s.send_ping()
            print(json.dumps({"server": get(init, "serverInfo", "server_info").name,
                              "tools": [t.name for t in tools.tools],
                              "found": found.content[0].text, "found_error": get(found, "isError", "is_error"),
                              "read": read_.content[0].text, "bad": get(bad, "isError", "is_error")}))

asyncio.run(main())
"""


def test_the_official_sdk_client_talks_to_it(tmp_path):
    py = sdk_python()
    if py is None:
        pytest.skip("no Python with the mcp SDK (make mcp-sdk, or SKR_MCP_SDK_PYTHON)")
    root = _library(tmp_path)
    env = base_env(tmp_path)
    proc = subprocess.run([py, "-c", SDK_CLIENT, str(BIN), "mcp", "--root", str(root)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["server"] == "skill-retrieval" and out["tools"] == ["search_skills", "read_skill"]
    assert "pdf-merge" in out["found"] and out["found_error"] is False
    assert "Use qpdf to merge." in out["read"] and out["bad"] is True
