"""Write ``tests/data/upgrade_state.json``: a home and a state folder as an
install by the version before ``changes.json`` left them (three records:
``created.json``, ``installed.json``, ``listing.json``), for
``tests/test_upgrade.py``.

Run once, with that version checked out (``.venv/bin/python
tests/data/make_upgrade_state.py``): it installs Claude Code and Codex
(the hook, names-only and the MCP server) in a temporary home, then stores
every file that install wrote in the home and the state folder, with the
machine's paths as placeholders and each digest as the text it is the
digest of, so the test can rebuild the state anywhere:

- ``@HOME@``, ``@STATE@``, ``@REPO@``, ``@PY@``: the folders and the
  interpreter (``@HOME%@``, ``@STATE%@``: the same with ``/`` as ``%``,
  as backup names write them);
- ``@SHA256:<text>@`` in a record: the sha256 of that text (a file as
  install wrote it, on the way too, or a command).

``before`` holds the user's files as they were before install.
"""

import json
import os
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(REPO, "tests", "data", "upgrade_state.json")

# The user's own files before install: in the layout the installers write
# (two-space JSON), so taking our entries out gives them back byte for byte.
BEFORE = {
    "@HOME@/.claude/settings.json": json.dumps(
        {"model": "opus", "permissions": {"allow": ["Bash(ls:*)"]}}, indent=2) + "\n",
    "@HOME@/.claude.json": json.dumps(
        {"mcpServers": {"theirs": {"type": "stdio", "command": "/usr/bin/true", "args": [], "env": {}}},
         "numStartups": 3}, indent=2) + "\n",
    "@HOME@/.codex/config.toml": 'model = "o3"\n\n[profiles.fast]\nmodel = "o4-mini"\n',
}
SKILLS = ("@HOME@/.claude/skills/git-bisect/SKILL.md", "@HOME@/.agents/skills/csv-clean/SKILL.md")


def main():
    tmp = os.path.realpath(tempfile.mkdtemp(prefix="skillret-upgrade-"))
    home, state_home = os.path.join(tmp, "home"), os.path.join(tmp, "xdg-state")
    state = os.path.join(state_home, "skill-retrieval")
    py = os.path.join(REPO, ".venv", "bin", "python3")
    names = [("@STATE@", state), ("@HOME@", home), ("@PY@", py), ("@REPO@", REPO)]
    for key, text in list(BEFORE.items()) + [(k, "---\nname: %s\ndescription: %s for the upgrade test\n---\n"
                                              % (k.split("/")[-2], k.split("/")[-2])) for k in SKILLS]:
        _write(fill(key, names), text)
    os.environ.update(HOME=home, XDG_STATE_HOME=state_home, XDG_CACHE_HOME=os.path.join(tmp, "cache"),
                      SKILL_RETRIEVAL_SEMANTIC="off", SKILL_RETRIEVAL_PYTHON=py)
    os.chdir(home)
    sys.path.insert(0, REPO)
    from retriever import fileutil
    from retriever.cli import entry
    texts = {}
    digest = fileutil.digest

    def noting(data):  # every text install digests, by its digest
        texts[digest(data)] = data if isinstance(data, str) else data.decode("utf-8")
        return digest(data)

    fileutil.digest = noting
    for runner in ("claude-code", "codex"):
        try:
            entry.main(["install", runner])
        except SystemExit as exc:
            assert not exc.code, exc.code
    files = {}
    for root in (home, state):
        for d, _, found in os.walk(root):
            for n in found:
                path = os.path.join(d, n)
                key = template(path, names)
                text = open(path, encoding="utf-8").read()
                if n == "install.lock" or key in SKILLS or BEFORE.get(key) == text:
                    continue
                if key.startswith("@STATE@/") and key.endswith(".json"):
                    text = json.dumps(_walk(json.loads(text), names, texts), indent=1, sort_keys=True) + "\n"
                files[key] = template(text, names)
    with open(OUT, "w") as f:
        json.dump({"before": BEFORE, "skills": list(SKILLS), "after": files}, f, indent=1, sort_keys=True)
        f.write("\n")
    print("wrote %s (%d files)" % (OUT, len(files)))


def _walk(data, names, texts):
    # A record with each digest as the text it is the digest of.
    if isinstance(data, dict):
        return {k: _walk(v, names, texts) for k, v in data.items()}
    if isinstance(data, list):
        return [_walk(v, names, texts) for v in data]
    if isinstance(data, str) and data in texts:
        return "@SHA256:%s@" % template(texts[data], names)
    return data


def template(text, names):
    """``text`` with the machine's paths as placeholders."""
    for name, value in names:
        text = text.replace(value, name).replace(value.lstrip("/").replace("/", "%"), name[:-1] + "%@")
    return text


def fill(text, names):
    """``text`` with the placeholders as paths (digests aside)."""
    for name, value in names:
        text = text.replace(name[:-1] + "%@", value.lstrip("/").replace("/", "%")).replace(name, value)
    return text


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


if __name__ == "__main__":
    sys.exit(main())
