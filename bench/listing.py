"""What each runner's first model request costs, with the real CLIs.

    .venv/bin/python bench/listing.py [--corpus DIR] [--runner NAME ...]

For each runner (the versions the Makefile pins; ``make e2e-env`` installs
them) one turn runs against the loopback mock from tests/e2e, four times:
no skills, the corpus as the user's skills (stock), the hook alone
(``install --no-compact --no-mcp``), and ``install`` as it is by default
(names only, the hook and the MCP server's tools).  The figures are the characters of the first model
request that carries the turn; "grows" is how much of what the stock
listing adds is left after install (the issue-30 budgets: Claude Code
2.1.332 at most 30%, the others 40%).  Prints a Markdown table
(docs/runners.md holds the last one).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.e2e import runners as R  # noqa: E402
from tests.e2e.mockserver import MockLLM  # noqa: E402

CORPUS = REPO.parent / "shared" / "corpora" / "hermes-agent"
BIN = REPO / "bin" / "skill-retrieve"
PROMPT = "pull the text out of my scanned pdf invoice"
HEADING = "## Retrieved Skills"
BUDGET = {"claude-code 2.1.332": 30, "codex 0.171.0": 45}  # issue 39: with the MCP server


def link_skills(corpus, dest):
    """Each skill folder of ``corpus`` linked as ``dest/<folder>`` (the
    runners read one level deep); a repeated folder name gets its
    parent's name in front."""
    dest.mkdir(parents=True, exist_ok=True)
    seen = set()
    for md in sorted(corpus.rglob("SKILL.md")):
        d = md.parent
        name = d.name if d.name not in seen else "%s-%s" % (d.parent.name, d.name)
        seen.add(name)
        os.symlink(d, dest / name)
    return len(seen)


def skill_dir(runner, home):
    return {"claude-code": home / ".claude" / "skills", "codex": home / ".agents" / "skills",
            "gemini": home / ".gemini" / "skills",
            "opencode": home / ".config" / "opencode" / "skills", "cline": home / ".cline" / "skills"}[runner]


def install(runner, home, extra_env, *args):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LC_ALL": "C.UTF-8",
           "SKILL_RETRIEVAL_REVALIDATE": "off", "SKILL_RETRIEVAL_SEMANTIC": "off", **extra_env}
    cp = subprocess.run([str(BIN), "install", runner, *args], capture_output=True, text=True, env=env,
                        cwd=str(home), timeout=300)
    if cp.returncode != 0:
        raise SystemExit("install %s failed: %s" % (runner, cp.stderr))


def turn(runner, version, home, tmp, mode):
    """Characters of the turn's first model request, and whether the block is in it."""
    env = {"SKILL_RETRIEVAL_REVALIDATE": "off"}
    with MockLLM() as mock:
        if runner == "claude-code":
            cp, reqs = R.run_claude(PROMPT, None, mock, home=home, cwd=tmp / "project", version=version,
                                    extra_env=env, timeout=180)
        elif runner == "codex":
            cfg = tmp / "codex-home" / "config.toml"  # written for port 0 before install
            cfg.write_text(cfg.read_text().replace("127.0.0.1:0/", "127.0.0.1:%d/" % mock.port))
            cp, reqs = R.run_codex(PROMPT, tmp / "codex-home", mock, cwd=tmp / "project", home=home,
                                   write_config=False, extra_env=env, timeout=180)
        elif runner == "gemini":
            cp, reqs = R.run_gemini(PROMPT, home, mock, tmp / "project", extra_env=env, timeout=180,
                                    extra_args=["--yolo"])
        elif runner == "cline":
            cp, reqs = R.run_cline(PROMPT, home, mock, tmp / "project", extra_env=env, timeout=180)
        else:
            cfg = home / ".config" / "opencode" / "opencode.json"  # written for port 0 before install
            cfg.write_text(cfg.read_text().replace("127.0.0.1:0/", "127.0.0.1:%d/" % mock.port))
            cp, reqs = R.run_opencode(PROMPT, home, mock, tmp / "project", extra_env=env, timeout=180)
        bodies = [r["body"] for r in mock.model_requests(reqs)
                  if runner != "opencode" or (isinstance(r["body"], dict) and r["body"].get("tools"))]
    if not bodies:
        raise SystemExit("%s %s (%s): no model request\n%s" % (runner, version, mode, cp.stderr[-2000:]))
    text = json.dumps(bodies[0], ensure_ascii=False)
    return len(text), HEADING in text


def measure(runner, version, corpus):
    out = {}
    for mode in ("none", "stock", "hook", "installed"):
        with tempfile.TemporaryDirectory(prefix="skr-listing-") as t:
            tmp = Path(t)
            home = tmp / "home"
            home.mkdir()
            extra = {}
            if runner == "codex":
                R.write_codex_config(tmp / "codex-home", 0)  # turn() sets the mock's port
                extra["CODEX_HOME"] = str(tmp / "codex-home")
            if runner == "gemini":
                R.write_gemini_settings(home)
            if runner == "opencode":  # before install, which merges its MCP server into it
                R.write_opencode_config(home, 0)
            if mode != "none":
                out["skills"] = link_skills(corpus, skill_dir(runner, home))
            if mode == "hook":
                install(runner, home, extra, "--no-compact", "--no-mcp")
            elif mode == "installed":
                install(runner, home, extra)
            out[mode] = turn(runner, version, home, tmp, mode)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--runner", action="append", choices=("claude-code", "codex", "gemini", "opencode", "cline"))
    args = ap.parse_args(argv)
    if not any(args.corpus.rglob("SKILL.md")):
        ap.error("no SKILL.md below %s (pass --corpus DIR)" % args.corpus)
    todo = []
    for r in args.runner or ("claude-code", "codex", "gemini", "opencode", "cline"):
        if r == "claude-code":
            todo += [(r, v) for v in reversed(R.CLAUDE_VERSIONS)]
        else:
            todo.append((r, {"codex": R.VERSIONS["CODEX_VERSION"], "gemini": R.VERSIONS["GEMINI_CLI_VERSION"],
                             "opencode": R.VERSIONS["OPENCODE_VERSION"], "cline": R.VERSIONS["CLINE_VERSION"]}[r]))
    rows = []
    for runner, version in todo:
        m = measure(runner, version, args.corpus)
        none, stock, hook, inst = m["none"][0], m["stock"][0], m["hook"][0], m["installed"][0]
        grows = 100.0 * (inst - none) / (stock - none) if stock > none else float("nan")
        label = "%s %s" % (runner, version)
        share = ("%.0f%% (budget %d%%)" % (grows, BUDGET.get(label, 40)) if runner != "cline"
                 else "%.0f%% (already names only; the block is all install adds)" % grows)
        rows.append("| %s | %s | %s | %s (+%s) | %s | %s | %s |" % (
            label, _n(none), _n(stock), _n(hook), _n(hook - stock), _n(inst), share,
            "yes" if m["installed"][1] else "NO"))
        print("measured %s: %s" % (label, rows[-1]), file=sys.stderr)
    print("%d skills (%s), first model request of the turn, characters; "
          "Gemini CLI runs with --yolo.\n" % (m.get("skills", 0), args.corpus.name))
    print("| runner | no skills | stock listing | hook alone (`--no-compact --no-mcp`) | after `install` "
          "| growth over no skills, share of the stock listing's | block delivered |")
    print("|---|---:|---:|---:|---:|---:|---|")
    print("\n".join(rows))
    return 0


def _n(x):
    return "{:,}".format(x)


if __name__ == "__main__":
    sys.exit(main())
