"""Smoke tests for the e2e plumbing: mock API + real runners + a trivial hook.

The hook is a tiny script written into tmp_path that prints a fixed marker in
each runner's context format. Each runner must deliver the marker to the mock
model API; each control (no hook / ``--bare`` / untrusted hook) must not.
"""

from __future__ import annotations

import http.client
import json

import pytest

from .runners import (
    body_text, require_claude, require_codex, require_hermes, run_claude, run_codex,
    run_hermes, write_claude_settings, write_codex_hooks, write_context_hook,
    write_hermes_config,
)

MARKER = "MARKER-123"
PROMPT = "say hi"
UPS_OUTPUT = {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
                                     "additionalContext": MARKER}}


def _model_posts(reqs, path_part):
    posts = [r for r in reqs if r["method"] == "POST" and path_part in r["path"]
             and "count_tokens" not in r["path"]]
    assert posts, f"no model request to {path_part!r}; got {[(r['method'], r['path']) for r in reqs]}"
    return posts


def _diag(cp):
    return f"rc={cp.returncode}\nstdout:\n{cp.stdout[-2000:]}\nstderr:\n{cp.stderr[-2000:]}"


# ------------------------------------------------------------------ mock alone


def _call(mock, method, path, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", mock.port, timeout=10)
    try:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json", "Authorization": "Bearer secret",
                   "x-api-key": "secret"}
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.getheader("Content-Type"), resp.read().decode()
    finally:
        conn.close()


def _sse_data(text):
    return [line[6:] for line in text.splitlines() if line.startswith("data: ")]


def _sse_events(text):
    return [line[7:] for line in text.splitlines() if line.startswith("event: ")]


def test_mock_dialects(mock_llm):
    m = mock_llm
    assert m.url == f"http://127.0.0.1:{m.port}" and m.port > 0

    st, ct, txt = _call(m, "POST", "/v1/chat/completions",
                        {"model": "x", "stream": True, "messages": [{"role": "user", "content": "hi"}]})
    assert st == 200 and ct == "text/event-stream"
    data = _sse_data(txt)
    assert data[-1] == "[DONE]"
    chunks = [json.loads(d) for d in data[:-1]]
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks) == "OK"
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"

    st, ct, txt = _call(m, "POST", "/v1/chat/completions", {"model": "x", "messages": []})
    assert json.loads(txt)["choices"][0]["message"]["content"] == "OK"

    st, ct, txt = _call(m, "POST", "/v1/messages?beta=true", {"model": "c", "stream": True})
    assert _sse_events(txt) == ["message_start", "content_block_start", "ping",
                                "content_block_delta", "content_block_stop",
                                "message_delta", "message_stop"]
    st, ct, txt = _call(m, "POST", "/v1/messages", {"model": "c"})
    assert json.loads(txt)["content"][0]["text"] == "OK"
    st, ct, txt = _call(m, "POST", "/v1/messages/count_tokens", {"messages": []})
    assert isinstance(json.loads(txt)["input_tokens"], int)

    st, ct, txt = _call(m, "POST", "/v1/responses", {"model": "g", "stream": True})
    events = [json.loads(d)["type"] for d in _sse_data(txt)]
    for e in ("response.created", "response.output_item.added", "response.output_text.delta",
              "response.output_item.done", "response.completed"):
        assert e in events
    st, ct, txt = _call(m, "POST", "/v1/responses", {"model": "g"})
    assert json.loads(txt)["output"][0]["content"][0]["text"] == "OK"

    st, ct, txt = _call(m, "GET", "/v1/models")
    assert [d["id"] for d in json.loads(txt)["data"]] == ["mock-model"]
    assert _call(m, "GET", "/anything")[2] == "{}"
    assert _call(m, "HEAD", "/")[0] == 200

    assert len(m.requests) == 10
    assert m.requests[0]["body"]["messages"][0]["content"] == "hi"
    assert all("authorization" not in r["headers"] and "x-api-key" not in r["headers"]
               for r in m.requests)
    assert len(m.model_requests()) == 6  # count_tokens is not a model request


# --------------------------------------------------------------------- Hermes


@pytest.mark.parametrize("with_hook", [True, False], ids=["hook", "control-no-hook"])
def test_hermes_shell_hook_context(mock_llm, tmp_path, with_hook):
    require_hermes()
    stdin_copy = tmp_path / "hook-stdin.json"
    hook = write_context_hook(tmp_path / "hook.py", {"context": MARKER}, stdin_copy=stdin_copy)
    hermes_home = tmp_path / "hermes-home"
    write_hermes_config(hermes_home, mock_llm.port,
                        shell_hooks=[str(hook)] if with_hook else None)

    cp, reqs = run_hermes(PROMPT, hermes_home, mock_llm)

    posts = _model_posts(reqs, "/chat/completions")
    assert len(posts) == 1, _diag(cp)
    body = posts[0]["body"]
    assert body["stream"] is True and body["model"] == "mock-model"
    assert body["messages"][0]["role"] == "system"
    last = body["messages"][-1]
    assert last["role"] == "user"
    if with_hook:
        assert MARKER in body_text(posts[0]), _diag(cp)
        assert last["content"] == f"{PROMPT}\n\n{MARKER}"
        hook_in = json.loads(stdin_copy.read_text())
        assert hook_in["hook_event_name"] == "pre_llm_call"
        assert hook_in["extra"]["user_message"] == PROMPT
    else:
        assert MARKER not in body_text(posts[0])
        assert last["content"] == PROMPT
        assert not stdin_copy.exists()
    assert cp.stdout.strip() == "OK", _diag(cp)


# ---------------------------------------------------------------- Claude Code


@pytest.mark.parametrize("bare", [False, True], ids=["hook", "control-bare"])
def test_claude_user_prompt_submit_context(mock_llm, tmp_path, bare):
    require_claude()
    stdin_copy = tmp_path / "hook-stdin.json"
    hook = write_context_hook(tmp_path / "hook.py", UPS_OUTPUT, stdin_copy=stdin_copy)
    settings = write_claude_settings(tmp_path / "settings.json", [str(hook)])

    cp, reqs = run_claude(PROMPT, settings, mock_llm, home=tmp_path / "home",
                          cwd=tmp_path / "project", bare=bare)

    posts = _model_posts(reqs, "/v1/messages")
    assert len(posts) == 1, _diag(cp)
    text = body_text(posts[0])
    assert PROMPT in text
    if not bare:
        assert MARKER in text, _diag(cp)
        assert f"UserPromptSubmit hook additional context: {MARKER}" in text
        hook_in = json.loads(stdin_copy.read_text())
        assert hook_in["hook_event_name"] == "UserPromptSubmit" and hook_in["prompt"] == PROMPT
    else:
        assert MARKER not in text
        assert not stdin_copy.exists()
    assert json.loads(cp.stdout)["result"] == "OK", _diag(cp)


# ---------------------------------------------------------------------- Codex


@pytest.mark.parametrize("trust", [True, False], ids=["hook", "control-untrusted"])
def test_codex_user_prompt_submit_context(mock_llm, tmp_path, trust):
    require_codex()
    stdin_copy = tmp_path / "hook-stdin.json"
    hook = write_context_hook(tmp_path / "hook.py", UPS_OUTPUT, stdin_copy=stdin_copy)
    codex_home = tmp_path / "codex-home"
    write_codex_hooks(codex_home, [str(hook)])

    cp, reqs = run_codex(PROMPT, codex_home, mock_llm, cwd=tmp_path / "project",
                         trust_hooks=trust)

    posts = _model_posts(reqs, "/responses")
    assert len(posts) == 1, _diag(cp)
    items = posts[0]["body"]["input"]
    user_idx = max(i for i, it in enumerate(items)
                   if it.get("role") == "user"
                   and any(c.get("text") == PROMPT for c in it.get("content", [])))
    if trust:
        assert MARKER in body_text(posts[0]), _diag(cp)
        dev = items[user_idx + 1]
        assert dev["role"] == "developer"
        assert dev["content"] == [{"type": "input_text", "text": MARKER}]
        hook_in = json.loads(stdin_copy.read_text())
        assert hook_in["hook_event_name"] == "UserPromptSubmit" and hook_in["prompt"] == PROMPT
    else:
        assert MARKER not in body_text(posts[0])
        assert not stdin_copy.exists()
    assert cp.returncode == 0 and cp.stdout.strip() == "OK", _diag(cp)
