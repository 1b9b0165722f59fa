"""The MCP server's figures (issue 39): start-up to the first ``tools/list``
answer, ``search_skills`` latency in a warm server and its RSS, over the
3,741 real skills of ../shared/corpora (BM25 path: the semantic tier off).

``--sdk PYTHON`` measures the same two tools served by the official SDK
(``mcp``, its ``MCPServer``) under PYTHON, which must have it, and the
install size the SDK adds to that venv: the figures docs/mcp.md chose by.

Budgets (issue 39): search <= 20 ms, start-up <= 500 ms, RSS <= 60 MiB.
Run by ``make bench``; exits 1 when a budget is missed.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)
sys.path.insert(0, HERE)
BIN = os.path.join(REPO, "bin", "skill-retrieve")
BUDGETS = {"search_ms": 20.0, "startup_ms": 500.0, "rss_mib": 60.0}
QUERIES = ["merge two pdf files", "rotate kubernetes tls certificates", "my pytest run is flaky",
           "write a changelog from git history", "deploy to aws lambda", "parse a csv with pandas",
           "review this pull request", "resize images in a folder"]

# The same two tools on the official SDK, delegating to this product's
# Server so only the transport differs.
SDK_SERVER = r"""
import sys
sys.path.insert(0, sys.argv[1])
from mcp.server.mcpserver import MCPServer
from retriever.runners.mcp_server import Server
core = Server(None, sys.argv[2:])
app = MCPServer("skill-retrieval")

@app.tool()
def search_skills(query: str, k: int = 3) -> str:
    "Find installed skills for a task: name, description, how to load, path."
    return core.search(query, k)

@app.tool()
def read_skill(name: str) -> str:
    "Read one skill's SKILL.md by the name search_skills gave."
    return core.read(name)

app.run()
"""


def _line(proc):
    line = proc.stdout.readline()
    if not line:
        raise SystemExit("the server ended: %s" % proc.stderr.read().decode(errors="replace")[-2000:])
    return json.loads(line)


def _send(proc, obj):
    proc.stdin.write(json.dumps(obj).encode() + b"\n")
    proc.stdin.flush()


INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}


def start(cmd, env):
    """``(process, ms from spawn to the tools/list answer)``."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    _send(proc, INIT)
    _line(proc)
    _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    _send(proc, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    _line(proc)
    return proc, (time.perf_counter() - t0) * 1000


def rss_mib(pid):
    """The resident set of ``pid`` now, in MiB."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def measure(cmd, env, starts=7, calls=80):
    """Median start-up, search latency (median, p95) and RSS after the calls."""
    ups = []
    for _ in range(starts):
        proc, ms = start(cmd, env)
        ups.append(ms)
        proc.stdin.close()
        proc.wait(30)
    proc, _ = start(cmd, env)
    lat = []
    for i in range(calls + len(QUERIES)):
        t0 = time.perf_counter()
        _send(proc, {"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call",
                     "params": {"name": "search_skills", "arguments": {"query": QUERIES[i % len(QUERIES)]}}})
        ans = _line(proc)
        if i >= len(QUERIES):  # the first round warms the page cache
            lat.append((time.perf_counter() - t0) * 1000)
        assert ans["result"]["isError"] is False and "path: " in ans["result"]["content"][0]["text"], ans
    rss = rss_mib(proc.pid)
    proc.stdin.close()
    proc.wait(30)
    ups.sort()
    lat.sort()
    return {"startup_ms": ups[len(ups) // 2], "search_ms": lat[len(lat) // 2],
            "search_p95_ms": lat[int(len(lat) * 0.95)], "rss_mib": rss}


def site_size_mib(python):
    """What the packages installed into ``python``'s venv take beyond pip's own."""
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True).stdout.strip()
    total = 0
    for d, _, files in os.walk(site):
        rel = os.path.relpath(d, site).split(os.sep)[0]
        if rel.startswith(("pip", "setuptools", "_distutils_hack")):
            continue
        total += sum(os.lstat(os.path.join(d, f)).st_size for f in files)
    return total / (1 << 20)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sdk", metavar="PYTHON", help="also measure the official SDK's server under PYTHON")
    ap.add_argument("--calls", type=int, default=80)
    args = ap.parse_args()
    import corpus
    roots = corpus.collections()
    tmp = tempfile.mkdtemp(prefix="skr-bench-mcp-")
    env = dict(os.environ, HOME=tmp, XDG_CACHE_HOME=tmp + "/cache", SKILL_RETRIEVAL_SEMANTIC="off",
               SKILL_RETRIEVAL_REVALIDATE="off")
    rootargs = [a for r in roots for a in ("--root", r)]
    subprocess.run([BIN, "build", "-q"] + rootargs, env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    rows = [("stdlib server (skill-retrieve mcp)", measure([BIN, "mcp"] + rootargs, env, calls=args.calls), None)]
    if args.sdk:
        script = os.path.join(tmp, "sdk_server.py")
        with open(script, "w") as f:
            f.write(SDK_SERVER)
        rows.append(("official SDK (mcp MCPServer)",
                     measure([args.sdk, script, REPO] + roots, env, calls=args.calls), site_size_mib(args.sdk)))
    from retriever import discover
    files = sum(len(discover.walk_skill_files(r)) for r in roots)
    print("MCP server over %d SKILL.md files (%d roots; %d skills once shadowed names are dropped), BM25 path"
          % (files, len(roots), len(corpus.real_skills())))
    print("| server | start-up to tools/list | search_skills median (p95) | RSS | installs |")
    print("|---|---|---|---|---|")
    for name, m, size in rows:
        print("| %s | %.0f ms | %.1f ms (%.1f) | %.1f MiB | %s |" % (
            name, m["startup_ms"], m["search_ms"], m["search_p95_ms"], m["rss_mib"],
            "nothing" if size is None else "%.0f MiB" % size))
    from retriever.runners import mcp_server
    print("tool definitions: %d characters" % len(mcp_server.tools_json()))
    ours = rows[0][1]
    missed = ["%s %.1f > %.0f" % (k, ours[k], v) for k, v in BUDGETS.items() if ours[k] > v]
    print("budgets (search <= 20 ms, start-up <= 500 ms, RSS <= 60 MiB): %s"
          % ("missed: " + ", ".join(missed) if missed else "met"))
    import shutil
    shutil.rmtree(tmp, ignore_errors=True)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
