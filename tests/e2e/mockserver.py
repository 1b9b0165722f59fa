"""A local mock model API for the end-to-end tests.

``MockLLM`` is a stdlib ``ThreadingHTTPServer`` bound to 127.0.0.1 on a free
port. It runs in a background thread, logs every request (method, path,
parsed body, headers without credentials) and answers in the three wire
dialects the real clients speak, always with the fixed reply text ("OK" by
default):

* OpenAI chat-completions (Hermes): ``POST .../chat/completions``
* Anthropic Messages (Claude Code): ``POST /v1/messages`` (``?beta=true`` too)
  and ``POST /v1/messages/count_tokens``
* OpenAI Responses (Codex): ``POST .../responses``
* Gemini REST (Gemini CLI): ``POST .../models/<model>:generateContent`` and
  ``:streamGenerateContent`` (SSE with ``?alt=sse``), ``:countTokens``

``GET .../models`` gets a one-model list; any other GET or HEAD gets
``200 {}``; any other POST gets ``200 {}`` as well (and is still logged).
Streaming requests (``"stream": true``) get SSE; the others get one JSON reply.
Every response carries a Content-Length, so HTTP/1.1 keep-alive just works.

Usage::

    with MockLLM() as mock:
        ...  # point a client at mock.url (no /v1) or mock.base_url_v1
        assert "MARKER" in mock.body_text(mock.model_requests()[-1])

Run it standalone (``python mockserver.py [PORT]``) to poke at it by hand;
it prints the port and appends the requests as JSONL to ``$MOCK_LOG`` if set.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

__all__ = ["MockLLM", "body_text", "is_model_request"]

DEFAULT_MODEL = "mock-model"
# Request headers never written to the log.
_SECRET_HEADERS = {"authorization", "x-api-key", "proxy-authorization", "cookie"}


def body_text(request: dict) -> str:
    """The logged body as one searchable string (JSON-serialised if parsed)."""
    body = request.get("body") if isinstance(request, dict) else request
    if isinstance(body, str):
        return body
    return json.dumps(body, ensure_ascii=False)


def _route(path: str) -> str:
    """Classify a request path (query string already removed)."""
    p = path.rstrip("/")
    if ":" in p.rsplit("/", 1)[-1]:  # Gemini's /models/<model>:<method>
        method = p.rsplit(":", 1)[-1]
        if method in ("generateContent", "streamGenerateContent"):
            return "gemini"
        return "count_tokens" if method == "countTokens" else "other"
    if p.endswith("/messages/count_tokens"):
        return "count_tokens"
    if p.endswith("/chat/completions"):
        return "chat"
    if p.endswith("/messages"):
        return "anthropic"
    if p.endswith("/responses"):
        return "responses"
    if p.endswith("/models"):
        return "models"
    return "other"


def is_model_request(request: dict) -> bool:
    """True for a POST that asks the model for a reply (not count_tokens)."""
    return request.get("method") == "POST" and _route(
        urlsplit(request.get("path", "")).path
    ) in ("chat", "anthropic", "responses", "gemini")


def _sse(events) -> bytes:
    """Serialise [(event_name_or_None, payload)] as an SSE body."""
    out = []
    for name, payload in events:
        data = payload if isinstance(payload, str) else json.dumps(payload)
        if name:
            out.append(f"event: {name}\ndata: {data}\n\n")
        else:
            out.append(f"data: {data}\n\n")
    return "".join(out).encode("utf-8")


# --------------------------------------------------------------------- dialects


def _chat_reply(body: dict, text: str, stream: bool):
    model = body.get("model") or DEFAULT_MODEL
    created = int(time.time())
    rid = "chatcmpl-mock"
    usage = {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}
    if not stream:
        return "application/json", json.dumps({
            "id": rid, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                         "message": {"role": "assistant", "content": text}}],
            "usage": usage,
        }).encode()

    def chunk(delta, finish=None, **extra):
        c = {"id": rid, "object": "chat.completion.chunk", "created": created,
             "model": model,
             "choices": [{"index": 0, "delta": delta, "logprobs": None,
                          "finish_reason": finish}]}
        c.update(extra)
        return (None, c)

    return "text/event-stream", _sse([
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": text}),
        chunk({}, "stop", usage=usage),
        (None, "[DONE]"),
    ])


def _anthropic_reply(body: dict, text: str, stream: bool):
    model = body.get("model") or DEFAULT_MODEL
    mid = "msg_mock01"
    usage = {"input_tokens": 10, "output_tokens": 1,
             "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    if not stream:
        return "application/json", json.dumps({
            "id": mid, "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn", "stop_sequence": None, "usage": usage,
        }).encode()
    return "text/event-stream", _sse([
        ("message_start", {"type": "message_start", "message": {
            "id": mid, "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": dict(usage, output_tokens=0)}}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("ping", {"type": "ping"}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": text}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                           "usage": {"output_tokens": 1}}),
        ("message_stop", {"type": "message_stop"}),
    ])


def _anthropic_tool_use(body: dict, call: dict, stream: bool):
    """A reply calling tool ``call["name"]`` with ``call["input"]``."""
    model = body.get("model") or DEFAULT_MODEL
    usage = {"input_tokens": 10, "output_tokens": 5,
             "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    block = {"type": "tool_use", "id": "toolu_mock01", "name": call["name"], "input": call["input"]}
    if not stream:
        return "application/json", json.dumps({
            "id": "msg_mock02", "type": "message", "role": "assistant", "model": model,
            "content": [block], "stop_reason": "tool_use", "stop_sequence": None, "usage": usage,
        }).encode()
    return "text/event-stream", _sse([
        ("message_start", {"type": "message_start", "message": {
            "id": "msg_mock02", "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": dict(usage, output_tokens=0)}}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": dict(block, input={})}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "input_json_delta", "partial_json": json.dumps(call["input"])}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                           "usage": {"output_tokens": 5}}),
        ("message_stop", {"type": "message_stop"}),
    ])


def _responses_reply(body: dict, text: str, stream: bool):
    model = body.get("model") or DEFAULT_MODEL
    created = int(time.time())
    rid, iid = "resp_mock01", "msg_mock01"
    usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": 1, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": 11}
    part = {"type": "output_text", "text": text, "annotations": []}
    item_done = {"type": "message", "id": iid, "status": "completed",
                 "role": "assistant", "content": [part]}

    def response(status, output, with_usage):
        return {"id": rid, "object": "response", "created_at": created,
                "status": status, "model": model, "output": output,
                "usage": usage if with_usage else None,
                "error": None, "incomplete_details": None}

    if not stream:
        r = response("completed", [item_done], True)
        r["output_text"] = text
        return "application/json", json.dumps(r).encode()
    seq = iter(range(1000))
    ev = lambda name, **kw: (name, dict(type=name, sequence_number=next(seq), **kw))  # noqa: E731
    return "text/event-stream", _sse([
        ev("response.created", response=response("in_progress", [], False)),
        ev("response.in_progress", response=response("in_progress", [], False)),
        ev("response.output_item.added", output_index=0,
           item={"type": "message", "id": iid, "status": "in_progress",
                 "role": "assistant", "content": []}),
        ev("response.content_part.added", item_id=iid, output_index=0,
           content_index=0, part={"type": "output_text", "text": "", "annotations": []}),
        ev("response.output_text.delta", item_id=iid, output_index=0,
           content_index=0, delta=text),
        ev("response.output_text.done", item_id=iid, output_index=0,
           content_index=0, text=text),
        ev("response.content_part.done", item_id=iid, output_index=0,
           content_index=0, part=part),
        ev("response.output_item.done", output_index=0, item=item_done),
        ev("response.completed", response=response("completed", [item_done], True)),
    ])


def _responses_tool_call(body: dict, call: dict, stream: bool):
    """A Responses reply calling function ``call["name"]`` with ``call["input"]``."""
    model = body.get("model") or DEFAULT_MODEL
    usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": 15}
    item = {"type": "function_call", "id": "fc_mock01", "status": "completed", "call_id": "call_mock01",
            "name": call["name"], "arguments": json.dumps(call["input"])}
    resp = {"id": "resp_mock02", "object": "response", "created_at": int(time.time()), "status": "completed",
            "model": model, "output": [item], "usage": usage, "error": None, "incomplete_details": None}
    if not stream:
        return "application/json", json.dumps(resp).encode()
    seq = iter(range(1000))
    ev = lambda name, **kw: (name, dict(type=name, sequence_number=next(seq), **kw))  # noqa: E731
    return "text/event-stream", _sse([
        ev("response.created", response=dict(resp, status="in_progress", output=[], usage=None)),
        ev("response.output_item.added", output_index=0, item=dict(item, status="in_progress", arguments="")),
        ev("response.function_call_arguments.delta", item_id="fc_mock01", output_index=0,
           delta=item["arguments"]),
        ev("response.function_call_arguments.done", item_id="fc_mock01", output_index=0,
           arguments=item["arguments"]),
        ev("response.output_item.done", output_index=0, item=item),
        ev("response.completed", response=resp),
    ])


def _gemini_reply(text: str, stream: bool):
    reply = {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
                             "finishReason": "STOP", "index": 0}],
             "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 1,
                               "totalTokenCount": 11},
             "modelVersion": DEFAULT_MODEL}
    if not stream:
        return "application/json", json.dumps(reply).encode()
    return "text/event-stream", _sse([(None, reply)])


def _models_reply(model: str):
    return "application/json", json.dumps({
        "object": "list",
        "data": [{"id": model, "object": "model", "created": 0,
                  "owned_by": "mock", "context_length": 131072}],
    }).encode()


# ------------------------------------------------------------------ tool calls
# ``MockLLM(tool_call={"name": TOOL, "args": {...}})``: the first model
# request that offers TOOL is answered with a call to it (in that request's
# dialect); every other request gets the reply text.  The runner runs the
# tool and sends its result in the next request, where a test finds it.
# ``args`` may be a function of the request body giving the arguments, or
# None while that request does not hold what they are made from (a path
# the injected block gave): the call then waits for a later request.


def offered_tools(body: dict) -> list:
    """The tool names a model request offers (every dialect)."""
    names = []
    for t in body.get("tools") or ():
        if not isinstance(t, dict):
            continue
        if isinstance(t.get("name"), str):
            names.append(t["name"])
        fn = t.get("function")
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            names.append(fn["name"])
        for f in t.get("functionDeclarations") or ():
            if isinstance(f, dict) and isinstance(f.get("name"), str):
                names.append(f["name"])
    return names


def _anthropic_tool(body: dict, name: str, args: dict, tool_id: str = "toolu_mock01"):
    model = body.get("model") or DEFAULT_MODEL
    usage = {"input_tokens": 10, "output_tokens": 1,
             "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    return "text/event-stream", _sse([
        ("message_start", {"type": "message_start", "message": {
            "id": "msg_mock02", "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": dict(usage, output_tokens=0)}}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {
            "type": "tool_use", "id": tool_id, "name": name, "input": {}}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {
            "type": "input_json_delta", "partial_json": json.dumps(args)}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                           "usage": {"output_tokens": 1}}),
        ("message_stop", {"type": "message_stop"}),
    ])


def _responses_tool(body: dict, name: str, args: dict, namespace: str | None = None):
    model = body.get("model") or DEFAULT_MODEL
    usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": 1, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": 11}
    item = {"type": "function_call", "id": "fc_mock01", "call_id": "call_mock01", "name": name,
            "arguments": json.dumps(args), "status": "completed"}
    if namespace:  # a tool of a "namespace" tool group (Codex's MCP servers)
        item["namespace"] = namespace

    def response(status, output):
        return {"id": "resp_mock02", "object": "response", "created_at": int(time.time()),
                "status": status, "model": model, "output": output,
                "usage": usage if status == "completed" else None,
                "error": None, "incomplete_details": None}
    seq = iter(range(1000))
    ev = lambda n, **kw: (n, dict(type=n, sequence_number=next(seq), **kw))  # noqa: E731
    return "text/event-stream", _sse([
        ev("response.created", response=response("in_progress", [])),
        ev("response.output_item.added", output_index=0, item=dict(item, arguments="", status="in_progress")),
        ev("response.function_call_arguments.delta", item_id="fc_mock01", output_index=0,
           delta=item["arguments"]),
        ev("response.function_call_arguments.done", item_id="fc_mock01", output_index=0,
           arguments=item["arguments"]),
        ev("response.output_item.done", output_index=0, item=item),
        ev("response.completed", response=response("completed", [item])),
    ])


def _gemini_tool(name: str, args: dict, stream: bool):
    reply = {"candidates": [{"content": {"role": "model", "parts": [
                {"functionCall": {"name": name, "args": args}}]},
             "finishReason": "STOP", "index": 0}],
             "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 1, "totalTokenCount": 11},
             "modelVersion": DEFAULT_MODEL}
    if not stream:
        return "application/json", json.dumps(reply).encode()
    return "text/event-stream", _sse([(None, reply)])


def _chat_tool(body: dict, name: str, args: dict):
    model = body.get("model") or DEFAULT_MODEL
    created = int(time.time())

    def chunk(delta, finish=None):
        return (None, {"id": "chatcmpl-mock2", "object": "chat.completion.chunk", "created": created,
                       "model": model, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                                    "finish_reason": finish}]})
    call = {"index": 0, "id": "call_mock01", "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)}}
    return "text/event-stream", _sse([
        chunk({"role": "assistant", "content": None, "tool_calls": [call]}),
        chunk({}, "tool_calls"),
        (None, {"id": "chatcmpl-mock2", "object": "chat.completion.chunk", "created": created, "model": model,
                "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}}),
        (None, "[DONE]"),
    ])


def _tool_reply(route: str, path: str, body: dict, call: dict):
    name, args = call["name"], call.get("args") or {}
    if route == "anthropic":  # each call of a sequence needs an id of its own
        return _anthropic_tool(body, name, args, call.get("id", "toolu_mock01"))
    if route == "responses":
        return _responses_tool(body, name, args, call.get("namespace"))
    if route == "gemini":
        return _gemini_tool(name, args, "streamGenerateContent" in path)
    return _chat_tool(body, name, args)


# ----------------------------------------------------------------------- server


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "MockLLM/1.0"
    timeout = 30  # idle keep-alive connections are dropped after this

    def log_message(self, fmt, *args):  # keep pytest output quiet
        if self.server.mock.verbose:
            sys.stderr.write("mockllm: " + (fmt % args) + "\n")

    # -- helpers
    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            raw = b"".join(chunks)
        else:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        enc = self.headers.get("Content-Encoding", "").lower()
        try:
            if enc == "gzip":
                raw = gzip.decompress(raw)
            elif enc == "deflate":
                raw = zlib.decompress(raw)
            elif enc == "zstd":
                try:
                    import zstandard  # type: ignore
                    raw = zstandard.ZstdDecompressor().decompress(raw)
                except ImportError:
                    pass
        except Exception:
            pass
        return raw

    def _send(self, code: int, ctype: str, payload: bytes, head: bool = False):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(payload)))
        if ctype == "text/event-stream":
            self.send_header("Cache-Control", "no-cache")
        self.send_header("request-id", "req_mock")
        self.send_header("x-request-id", "req_mock")
        self.end_headers()
        if not head:
            self.wfile.write(payload)
            self.wfile.flush()

    def _log(self, raw: bytes) -> dict:
        text = raw.decode("utf-8", "replace")
        body = None
        if text:
            try:
                body = json.loads(text)
            except ValueError:
                body = text
        entry = {
            "method": self.command,
            "path": self.path,
            "body": body,
            "headers": {k.lower(): v for k, v in self.headers.items()
                        if k.lower() not in _SECRET_HEADERS},
            "time": time.time(),
        }
        self.server.mock._record(entry)
        return entry

    # -- verbs
    def do_HEAD(self):
        self._log(b"")
        self._send(200, "application/json", b"{}", head=True)

    def do_GET(self):
        self._log(b"")
        if _route(urlsplit(self.path).path) == "models":
            self._send(200, *_models_reply(self.server.mock.model))
        else:
            self._send(200, "application/json", b"{}")

    def do_POST(self):
        entry = self._log(self._read_body())
        body = entry["body"] if isinstance(entry["body"], dict) else {}
        stream = bool(body.get("stream"))
        text = self.server.mock.reply_text
        route = _route(urlsplit(self.path).path)
        call = self.server.mock._take_tool_call(route, body)
        if call is not None:
            self._send(200, *_tool_reply(route, self.path, body, call))
        elif route == "chat":
            self._send(200, *_chat_reply(body, text, stream))
        elif route == "anthropic":
            call = self.server.mock.call_due(body.get("messages"), "tool_result")
            self._send(200, *(_anthropic_tool_use(body, call, stream) if call else
                              _anthropic_reply(body, text, stream)))
        elif route == "responses":
            call = self.server.mock.call_due(body.get("input"), "function_call_output")
            self._send(200, *(_responses_tool_call(body, call, stream) if call else
                              _responses_reply(body, text, stream)))
        elif route == "gemini":
            # streamGenerateContent always streams (alt=sse); the body has no flag
            self._send(200, *_gemini_reply(text, "streamGenerateContent" in self.path))
        elif route == "count_tokens":
            n = max(1, len(body_text(entry)) // 4)
            self._send(200, "application/json",
                       json.dumps({"input_tokens": n, "totalTokens": n}).encode())
        else:
            self._send(200, "application/json", b"{}")

    do_PUT = do_PATCH = do_DELETE = do_POST


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr, mock):
        self.mock = mock
        super().__init__(addr, _Handler)


class MockLLM:
    """Mock model API in a background thread; a context manager.

    Attributes: ``port``, ``url`` (``http://127.0.0.1:PORT``), ``base_url_v1``
    (``url + "/v1"``), ``requests`` (list of dicts with ``method``, ``path``,
    ``body`` (parsed JSON, else text, else None), ``headers`` (lower-cased,
    credentials dropped) and ``time``), ``reply_text`` and ``model``.
    ``scripted_call`` (Anthropic and Responses dialects): ``{"marker",
    "name", "input"}`` makes a request whose messages hold ``marker`` and no
    tool result yet get a call of tool ``name`` instead of the reply text.
    """

    def __init__(self, reply_text: str = "OK", model: str = DEFAULT_MODEL,
                 port: int = 0, log_path: str | os.PathLike | None = None,
                 verbose: bool = False, tool_call: dict | None = None):
        self.reply_text = reply_text
        self.tool_call = tool_call  # {"name", "args"}: called once (see _tool_reply)
        self.tool_calls: list[dict] = []  # or these, in turn (see _take_tool_call)
        self.model = model
        self.scripted_call: dict | None = None  # {"marker", "name", "input"}: see call_due
        self.verbose = verbose
        self.log_path = log_path
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._want_port = port
        self.port: int = 0

    # -- lifecycle
    def start(self) -> "MockLLM":
        if self._server is None:
            self._server = _Server(("127.0.0.1", self._want_port), self)
            self.port = self._server.server_address[1]
            self._thread = threading.Thread(
                target=self._server.serve_forever, kwargs={"poll_interval": 0.1},
                name=f"MockLLM:{self.port}", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
            if self._thread is not None:
                self._thread.join(timeout=5)

    def __enter__(self) -> "MockLLM":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- addresses
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url_v1(self) -> str:
        return self.url + "/v1"

    def call_due(self, conversation, result_mark: str) -> dict | None:
        """``scripted_call`` when ``conversation`` (a request's messages)
        holds its marker and no tool result (``result_mark``) yet, else None."""
        text = json.dumps(conversation or [])
        call = self.scripted_call
        return call if call and call["marker"] in text and result_mark not in text else None

    # -- log
    def _record(self, entry: dict) -> None:
        with self._lock:
            self.requests.append(entry)
            if self.log_path:
                with open(self.log_path, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(entry, ensure_ascii=False) + "\n")

    def _take_tool_call(self, route: str, body: dict) -> dict | None:
        """The tool call to answer this request with, once per mock; or
        the next of ``tool_calls`` (a list, one per model request, each
        answered whatever the request offers: a deferred or namespaced
        tool is not listed by name)."""
        with self._lock:
            # (a request offering no tool at all, OpenCode's title request, is not the turn)
            if self.tool_calls and route in ("chat", "anthropic", "responses", "gemini") and body.get("tools"):
                return self.tool_calls.pop(0)
            call = self.tool_call
            if (call is None or route not in ("chat", "anthropic", "responses", "gemini")
                    or call["name"] not in offered_tools(body)):
                return None
            if callable(call.get("args")):
                args = call["args"](body)
                if args is None:
                    return None
                call = dict(call, args=args)
            self.tool_call = None
            return call

    def snapshot(self) -> list[dict]:
        with self._lock:
            return list(self.requests)

    def since(self, index: int) -> list[dict]:
        """Requests logged after the first ``index`` ones."""
        with self._lock:
            return list(self.requests[index:])

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()

    def model_requests(self, requests: list[dict] | None = None) -> list[dict]:
        """Only the POSTs that asked for a model reply."""
        reqs = self.snapshot() if requests is None else requests
        return [r for r in reqs if is_model_request(r)]

    body_text = staticmethod(body_text)


def _main(argv: list[str]) -> int:
    port = int(argv[1]) if len(argv) > 1 else 0
    mock = MockLLM(port=port, log_path=os.environ.get("MOCK_LOG"), verbose=True)
    mock.start()
    print(mock.port, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        mock.stop()
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv))
