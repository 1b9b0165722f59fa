"""``skill-retrieve mcp [--root DIR] [RUNNER]``: the pull half, an MCP
server over stdio the agent can search mid-task.

The hook pushes the few skills a user message needs; between messages,
after reading code or hitting an error, the agent has only names.  This
server answers two tools (``TOOLS``): ``search_skills`` ranks the runner's
own skill set as the hook does (BM25, fused with the semantic tier when
its helper is warm) but without the chat gate, since the agent is asking;
``read_skill`` returns the SKILL.md of one skill of that set, and never a
file the index does not name.

The protocol is JSON-RPC 2.0, one message a line on stdin and stdout
(the MCP stdio transport).  Written on the standard library: the official
SDK needs Python 3.10 and brings a web stack, and docs/mcp.md has the
figures that chose this.  Rules a runner relies on: stdout carries only
protocol lines (anything else printed is diverted), nothing reaches
stderr (some runners show it to the user; warnings go to the log), bad
input gets an error answer and never ends the server, and the server
exits when stdin closes.

Never imported by the per-prompt hook or a query (tests/test_architecture.py).
"""

import json
import sys

from retriever import locate

SERVER_NAME = "skill-retrieval"
# Newest first: an initialize asking for one of these gets it back, any
# other gets the newest (the client then decides whether it can go on).
PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
# A line longer than this is refused whole (a 1 MB query fits).
MAX_LINE = 4 << 20
MAX_K = 20
# Results under this share of the best score are left out: the relative
# floor the hook's decision replaced, kept here where no gate applies.
FLOOR_SHARE = 0.3
# A SKILL.md is returned up to this many bytes (cut at a line, said so).
MAX_READ = 256 << 10
NEAREST = 5

# The two definitions ride on every model request the runner makes: kept
# short on purpose (under 800 characters together, tests/test_mcp.py).
TOOLS = [
    {"name": "search_skills",
     "description": "Find installed skills for a task: name, description, how to load, path.",
     "inputSchema": {"type": "object", "properties": {
         "query": {"type": "string", "description": "the task or error, in words"},
         "k": {"type": "integer", "minimum": 1, "maximum": MAX_K, "default": 3}},
         "required": ["query"]},
     "annotations": {"readOnlyHint": True}},
    {"name": "read_skill",
     "description": "Read one skill's SKILL.md by the name search_skills gave.",
     "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}},
                     "required": ["name"]},
     "annotations": {"readOnlyHint": True}},
]


def tools_json():
    """The ``tools/list`` definitions as the compact JSON a client
    receives (what ``tokens`` and the 800-character budget count)."""
    return json.dumps(TOOLS, separators=(",", ":"), ensure_ascii=False)


class ToolError(Exception):
    """A tool's refusal: returned as an ``isError`` result, one line."""


class RpcError(Exception):
    """A JSON-RPC error answer: ``code`` and one-line message."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


# ------------------------------------------------------------- the tools


class Server:
    """One session's state: the scope of its skill set (``--root`` folders
    or RUNNER's folders from the working directory, else the CLI's default
    roots)."""

    def __init__(self, runner=None, roots=(), cwd=None):
        import posix
        self.runner = runner or None
        self.roots = list(roots)
        self.cwd = cwd or posix.getcwd()

    # -- scope

    def request(self):
        """A ``service.answer`` request for this session's skill set.
        ToolError when the runner reads no existing skill folder."""
        req = {"roots": list(self.roots), "quiet": True, "label": "mcp", "decide": False}
        runner = self.runner
        if runner == "hermes":
            from retriever.visibility import make_view, visible
            view = make_view(locate.env("HERMES_PLATFORM") or "")
            req["keep"] = lambda r: visible(r, view)  # what Hermes hides is never offered
            if not self.roots:
                req["only_hermes"] = True
        elif runner and not self.roots:
            from retriever.runners.skillsets import skill_set
            req["roots"] = skill_set(runner, {"cwd": self.cwd, "workspaceRoots": [self.cwd]})
            if not req["roots"]:
                raise ToolError("%s reads no skill folder from %s: no skills to search" % (runner, self.cwd))
        return req

    def load_hint(self):
        """How the model loads a skill in this runner."""
        from retriever import render
        from retriever.runners.registry import RUNNERS
        return (RUNNERS.get(self.runner) or {}).get("load") or render.LOAD

    # -- search_skills

    def search(self, query, k=3):
        """The text of a ``search_skills`` answer: the top ``k`` skills for
        ``query`` above the score floor, one entry each, or one line
        saying there is none."""
        from retriever import render, service
        req = self.request()
        req["k"] = k
        results, path = service.answer(query, req)
        if path:
            # A server lives for the whole session: skills added or edited
            # meanwhile reach it as they reach a hook, by the freshness
            # check (a stat while its stamp is young, else a detached
            # rebuild that the next call reads).
            service.maybe_revalidate(path)
        if results:
            best = max(r["score"] for r in results)
            results = [r for r in results if r["score"] >= FLOOR_SHARE * best and r["score"] > 0]
        if not results:
            return "No skill matches %r." % render.short(query, 80)
        lines = ["Skills for this (ranked by %s); load one %s." % ("+".join(req.get("tiers") or ("bm25",)),
                                                                   self.load_hint())]
        for r in results:
            lines.append("- %s: %s\n  path: %s" % (render.one_line(r["name"]), render.short(r["description"]),
                                                   render.one_line(r["path"])))
        return "\n".join(lines)

    # -- read_skill

    def records(self):
        """Every skill of the set the caller may see: ``(name, id, path)``."""
        from retriever import service, store
        req = self.request()
        idx, _ = service.open_index(req)
        keep = req.get("keep")
        out = []
        for n in range(idx["header"]["n_docs"]):
            rid, name, path, desc, vis = store.doc(idx, n)
            if keep is None or keep({"id": rid, "name": name, "path": path, "description": desc, "vis": vis}):
                out.append((name, rid, path))
        return out

    def read(self, name):
        """The SKILL.md of the skill named ``name`` in this set (its name
        or id).  ToolError for a path-like name, or an unknown one with
        the nearest names."""
        if not name.strip():
            raise ToolError("give a skill name, as search_skills lists it")
        if "/" in name or "\\" in name or ".." in name or "\0" in name or name.startswith("~"):
            raise ToolError("a skill name, not a path: %r" % name[:80])
        recs = self.records()
        hit = [r for r in recs if r[0] == name] or [r for r in recs if r[1] == name] \
            or [r for r in recs if r[0].casefold() == name.casefold()]
        if not hit:
            raise ToolError("no skill named %r%s" % (name[:80], _nearest(name, [r[0] for r in recs])))
        # The index names the skill's folder; its file is always SKILL.md
        # (discover.py), so nothing else can be read through a name.
        path = hit[0][2].rstrip("/") + "/SKILL.md"
        data, cut = _read_file(path)
        text = data.decode("utf-8", "replace")
        if cut:
            text += "\n[... cut at %d KiB; the whole file is %s]" % (MAX_READ >> 10, path)
        return "%s\n\n%s" % (path, text)


def _nearest(name, names):
    # "; nearest: a, b, c" by spelling, then names holding the word.
    import difflib
    low = {n.casefold(): n for n in names}
    got = difflib.get_close_matches(name.casefold(), list(low), NEAREST, 0.5)
    if len(got) < NEAREST:
        word = name.casefold()
        got += [k for k in low if (word in k or k in word) and k not in got][:NEAREST - len(got)]
    return "; nearest: " + ", ".join(low[k] for k in got) if got else ""


def _read_file(path):
    # (bytes, cut?) of a regular file named by the index, at most MAX_READ.
    import os
    import stat
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ToolError("%s is not a regular file" % path)
        data = os.read(fd, MAX_READ + 1)
    finally:
        os.close(fd)
    if len(data) <= MAX_READ:
        return data, False
    return data[:data.rfind(b"\n", 0, MAX_READ) + 1 or MAX_READ], True


# --------------------------------------------------------------- protocol


def _arguments(params):
    args = params.get("arguments")
    if args is None:
        return {}
    if not isinstance(args, dict):
        raise ToolError("arguments must be an object")
    return args


def call_tool(server, params):
    """The ``tools/call`` result for ``params``: text content, with
    ``isError`` for a refusal.  RpcError for an unknown tool."""
    name = params.get("name")
    try:
        args = _arguments(params)
        if name == "search_skills":
            query, k = args.get("query"), args.get("k", 3)
            if not isinstance(query, str):
                raise ToolError("query must be a string")
            if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
                raise ToolError("k must be a whole number from 1 to %d" % MAX_K)
            if not query.strip():
                raise ToolError("query is empty")
            text = server.search(query, k)
        elif name == "read_skill":
            skill = args.get("name")
            if not isinstance(skill, str):
                raise ToolError("name must be a string")
            text = server.read(skill)
        else:
            raise RpcError(-32602, "unknown tool %r (tools: search_skills, read_skill)" % str(name)[:80])
    except ToolError as exc:
        return {"content": [{"type": "text", "text": str(exc)}], "isError": True}
    return {"content": [{"type": "text", "text": text}], "isError": False}


def handle(server, msg):
    """The answer (a dict) to one parsed message, or None for a
    notification.  Never raises."""
    if not isinstance(msg, dict):
        return _error(None, -32600, "a request is a JSON object")
    mid = msg.get("id")
    method = msg.get("method")
    is_request = "id" in msg
    if not isinstance(method, str):
        # A request needs one; a line without id is a notification or a
        # client's answer to us (we ask nothing): no reply.
        return _error(mid, -32600, "no method") if is_request else None
    if not is_request:
        return None  # notifications/initialized, cancelled, ...: nothing to answer
    if isinstance(mid, (bool, dict, list)) or mid is None:
        return _error(None, -32600, "id must be a string or a number")
    params = msg.get("params")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        return _error(mid, -32602, "params must be an object")
    try:
        if method == "initialize":
            asked = params.get("protocolVersion")
            from retriever import __version__
            result = {"protocolVersion": asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0],
                      "capabilities": {"tools": {"listChanged": False}},
                      "serverInfo": {"name": SERVER_NAME, "version": __version__}}
        elif method == "ping":
            result = {}
        elif method == "tools/list":
            result = {"tools": TOOLS}
        elif method == "tools/call":
            result = call_tool(server, params)
        else:
            return _error(mid, -32601, "method not found: %s" % method[:80])
    except RpcError as exc:
        return _error(mid, exc.code, str(exc))
    except Exception as exc:  # a bug or a broken index: this call fails, the server goes on
        locate.log("mcp: %s: %s: %s" % (method, type(exc).__name__, exc))
        return _error(mid, -32603, "%s: %s" % (type(exc).__name__, " ".join(str(exc).split())[:200]))
    return {"jsonrpc": "2.0", "id": mid, "result": result}


def _error(mid, code, message):
    return {"jsonrpc": "2.0", "id": mid, "error": {"code": code, "message": message}}


def answer_line(server, line):
    """The answer line (bytes, newline-terminated) for one input line, or
    b"" when none is due."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _dump(_error(None, -32700, "not UTF-8 (byte %d)" % exc.start))
    if not text.strip():
        return b""
    try:
        msg = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return _dump(_error(None, -32700, "not JSON: %s" % " ".join(str(exc).split())[:120]))
    out = handle(server, msg)
    return _dump(out) if out is not None else b""


def _dump(obj):
    # One line; a lone surrogate from a \\ud800 escape becomes "?".
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8", "replace")


class _Quiet:
    # sys.stdout and sys.stderr while serving: stray prints would corrupt
    # the protocol (stdout) or reach the user (stderr); they go to the log.
    def __init__(self):
        self.buf = []

    def write(self, s):
        self.buf.append(str(s))
        if "\n" in s:
            self.flush()
        return len(s)

    def flush(self):
        text = " ".join("".join(self.buf).split())
        self.buf = []
        if text:
            locate.log("mcp: " + text[:500])

    def isatty(self):
        return False


def serve(server, stdin=None, stdout_fd=None):
    """Answer lines from ``stdin`` (a binary file; default fd 0) until it
    closes.  Returns 0."""
    import os
    if stdin is None:
        stdin = sys.stdin.buffer
    if stdout_fd is None:
        stdout_fd = os.dup(1)
    real = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = _Quiet()
    try:
        while True:
            try:
                line = stdin.readline(MAX_LINE + 1)
            except (OSError, ValueError):
                break
            if not line:
                break
            if len(line) > MAX_LINE and not line.endswith(b"\n"):
                while True:  # drop the rest of the line
                    more = stdin.readline(MAX_LINE)
                    if not more or more.endswith(b"\n"):
                        break
                out = _dump(_error(None, -32600, "message longer than %d MiB" % (MAX_LINE >> 20)))
            else:
                out = answer_line(server, line)
            if out and not _write_all(stdout_fd, out):
                break  # the runner went away
    except KeyboardInterrupt:
        pass
    finally:
        sys.stdout.flush()
        sys.stdout, sys.stderr = real
    return 0


def _write_all(fd, data):
    import os
    try:
        while data:
            data = data[os.write(fd, data):]
        return True
    except OSError:
        return False


# ------------------------------------------------------------ command line


def add_arguments(parser):
    """Arguments of ``skill-retrieve mcp``."""
    from retriever.runners.registry import NAMES
    parser.description = ("Serve search_skills and read_skill over MCP (stdio, JSON-RPC): the agent's way "
                          "to search its skills mid-task. Runners start it; install registers it.")
    parser.add_argument("runner", nargs="?", choices=NAMES, metavar="RUNNER",
                        help="search this runner's own skill set (%s); default: the default folders"
                             % ", ".join(NAMES))
    parser.add_argument("--root", action="append", default=[], metavar="DIR",
                        help="skill folder to search instead (repeatable)")


def run(args):
    """``skill-retrieve mcp``: serve until stdin closes."""
    import os
    roots = [locate.abspath(r) for r in args.root]
    # The protocol gets its own copy of stdout; fd 1 and fd 2 then point
    # at /dev/null, so nothing a child process (a rebuild, the semantic
    # helper) or C code writes can corrupt a message or reach the user.
    out = os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)
    return serve(Server(args.runner, roots, os.getcwd()), stdout_fd=out)
