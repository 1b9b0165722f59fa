"""Guards that keep the house as designed.

- A query, and a hook, import exactly the modules they need (measured with
  ``python -X importtime`` on the real executable).
- No import cycle, counting imports inside functions, the way Mercurial's
  ``contrib/import-checker.py`` counts them; the core never imports a
  front end, and ``retriever`` never imports ``hermes_plugin``.
- ``-k`` has one rule, whichever door it comes through.
- Every ``SKILL_RETRIEVAL_*`` variable the code reads is in the settings
  table, ``--help`` and the table of docs/configuration.md.
"""

import ast
import json
import os
import re
from pathlib import Path

import pytest

from retriever import settings
from skillret_helpers import BIN, REPO, assert_clean, make_skill, run_cli

PY = str(REPO / ".venv" / "bin" / "python3") if (REPO / ".venv" / "bin" / "python3").exists() else None

# What answering needs, and nothing else: no argparse, re, os, json, numpy.
# The index was verified whole when it was built (store.verify), so no
# checksum is computed and zlib is not imported; the semantic tier is off
# (the test environment), so its package is not imported either.
QUERY_MODULES = {
    "retriever", "retriever.cli", "retriever.cli.entry", "retriever.locate", "retriever.settings",
    "retriever.store", "retriever.service", "retriever.tokenize", "retriever.analyze",
    "retriever.query", "retriever.decide", "retriever.render",
}
# With the semantic tier on and its warm helper answering: the stdlib
# client, which talks through FIFOs with ``posix`` alone (no ``_socket``,
# ``select`` or ``socket``), and the pure-Python fusion; never numpy.
SEMANTIC_CLIENT_MODULES = {"retriever.semantic", "retriever.semantic.client", "retriever.semantic.fuse"}
HOOK_MODULES = QUERY_MODULES | {
    "retriever.runners", "retriever.runners.registry", "retriever.runners.hook",
    "retriever.jsonlite", "_json",
}


@pytest.fixture(autouse=True, scope="module")
def _fresh_bundle():
    """The executable serves these modules from its bundle once one is
    written (tests/test_bundle.py); where there is none yet, the first run
    writes it and imports ``retriever.cli.bundle`` to do so.  Measure the
    steady state."""
    from retriever.cli import bundler
    bundler.write(str(REPO))


def test_the_bundle_holds_every_module_a_query_or_a_hook_imports():
    from retriever.cli import bundle
    ours = {m for m in QUERY_MODULES | HOOK_MODULES | SEMANTIC_CLIENT_MODULES if m.startswith("retriever")}
    assert ours <= set(bundle.HOT)


def test_the_bundled_modules_hold_no_assert_and_read_no_docstring():
    """The bundle compiles its modules as ``python -OO`` does (bundle.py
    says why): an ``assert`` there would be skipped, a ``__doc__`` None."""
    from retriever.cli import bundle, bundler
    found = []
    for name in bundle.HOT:
        src, _ = bundler._source(str(REPO), name)
        for node in ast.walk(ast.parse(Path(src).read_text(), src)):
            if isinstance(node, ast.Assert) or getattr(node, "attr", getattr(node, "id", None)) == "__doc__":
                found.append("%s:%d" % (src, node.lineno))
    assert found == []


# retriever/__main__.py is the executable of pip installs, like bin/skill-retrieve.
FRONT_ENDS = ("retriever.cli", "retriever.runners", "retriever.__main__")


def _tree(tmp_path):
    root = tmp_path / "skills"
    make_skill(root, "pdf-merge", {"name": "pdf-merge", "description": "Merge PDF files into one document"})
    make_skill(root, "k8s-certs", {"name": "k8s-certs", "description": "Rotate Kubernetes TLS certificates"})
    return root


def _imported(args, env, stdin=b""):
    import subprocess
    import sys
    py = PY or sys.executable
    proc = subprocess.run([py, "-I", "-S", "-X", "importtime", str(BIN)] + args, input=stdin,
                          env=env, capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    mods = set()
    for line in proc.stderr.decode().splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.split("|")[-1].strip()
            if name != "package":
                mods.add(name)
    floor = subprocess.run([py, "-I", "-S", "-X", "importtime", "-c", "pass"], capture_output=True).stderr.decode()
    base = {l.split("|")[-1].strip() for l in floor.splitlines() if "|" in l}
    return mods - base, proc.stdout


def test_a_query_imports_exactly_what_answering_needs(tmp_path):
    from skillret_helpers import base_env
    env = base_env(tmp_path)
    root = _tree(tmp_path)
    index = tmp_path / "i.skr"
    assert_clean(run_cli(["build", "--root", root, "--index", index], env))
    mods, out = _imported(["--root", str(root), "--index", str(index), "merge", "pdf"], env)
    assert b"pdf-merge" in out
    assert mods == QUERY_MODULES


def test_a_query_scoring_thousands_of_skills_imports_nothing_more(tmp_path):
    """Past 4,096 scored skills the top-k cut once imported heapq (0.45 ms
    a query, and nlargest loops in Python); it samples the scores now.
    A word every one of 4,200 skills holds must still import only what a
    small query does, and rank by score then id."""
    from skillret_helpers import base_env
    env = base_env(tmp_path)
    root = tmp_path / "skills"
    for i in range(4200):
        # More filler, lower score: skill 0 ranks first.
        (root / ("w%04d" % i)).mkdir(parents=True)
        (root / ("w%04d" % i) / "SKILL.md").write_text(
            "---\nname: w%04d\ndescription: widget %s\n---\n" % (i, "filler " * (i % 50)))
    index = tmp_path / "i.skr"
    assert_clean(run_cli(["build", "--root", root, "--index", index], env))
    mods, out = _imported(["--root", str(root), "--index", str(index), "-k", "3", "widget"], env)
    assert list(dict.fromkeys(re.findall(rb"w\d{4}", out))) == [b"w0000", b"w0050", b"w0100"]
    assert mods == QUERY_MODULES


def test_a_hook_imports_exactly_what_answering_needs(tmp_path):
    from skillret_helpers import base_env
    env = base_env(tmp_path)
    root = _tree(tmp_path)
    index = tmp_path / "i.skr"
    assert_clean(run_cli(["build", "--root", root, "--index", index], env))
    stdin = json.dumps({"prompt": "merge pdf files", "cwd": str(tmp_path)}).encode()
    mods, out = _imported(["hook", "claude-code", "--root", str(root), "--index", str(index)], env, stdin)
    assert b"pdf-merge" in out
    assert mods == HOOK_MODULES


def test_a_hook_with_a_session_adds_only_the_session_memory(tmp_path):
    """Claude Code, Codex and Gemini name a session and a transcript: the
    memory (retriever.session, served from the bundle) reads one small
    state file and the transcript's tail with modules already loaded, and
    the usage record (retriever.usage) appends one line."""
    from skillret_helpers import base_env
    env = base_env(tmp_path)
    root = _tree(tmp_path)
    index = tmp_path / "i.skr"
    assert_clean(run_cli(["build", "--root", root, "--index", index], env))
    transcript = tmp_path / "t.jsonl"
    transcript.write_text('{"type": "assistant", "message": {"content": [{"type": "tool_use", "name": "Skill", '
                          '"input": {"skill": "k8s-certs"}}]}}\n')
    stdin = json.dumps({"prompt": "merge pdf files", "cwd": str(tmp_path), "session_id": "s1",
                        "transcript_path": str(transcript)}).encode()
    # The steady state: the cache folder exists (the first prompt ever makes it).
    os.makedirs(os.path.join(env["XDG_CACHE_HOME"], "skill-retrieval"), mode=0o700, exist_ok=True)
    mods, out = _imported(["hook", "claude-code", "--root", str(root), "--index", str(index)], env, stdin)
    assert b"pdf-merge" in out
    # The usage record's one appended line: retriever.usage; and, as the
    # transcript shows a load, the fold of what is learnt, after the
    # answer, in a detached child (retriever.background).
    assert mods == HOOK_MODULES | {"retriever.session", "retriever.usage", "retriever.background"}


def test_a_build_finds_pyyaml_without_running_this_packages_editable_install_hook(tmp_path):
    """``make demo`` installs this package editable into .venv; under -S a
    build turns site-packages on for PyYAML, and that install's ``.pth``
    hook would import pathlib, urllib and importlib.util (15 ms) for a
    package already first on sys.path."""
    import glob
    import subprocess
    import sys
    from skillret_helpers import base_env
    py = PY or sys.executable
    site_dirs = subprocess.run([py, "-c", "import site; print('\\n'.join(site.getsitepackages()))"],
                               capture_output=True, text=True).stdout.split()
    if not any(glob.glob(d + "/__editable__.skill_retrieval-*.pth") for d in site_dirs):
        pytest.skip("this interpreter has no editable install of the package")
    root = tmp_path / "skills"
    make_skill(root, "yaml-only", raw="---\nname: yaml-only\ndescription: >\n  Folded YAML text that only\n"
                                      "  PyYAML reads whole\n---\nBody.\n")
    index = tmp_path / "i.skr"
    proc = subprocess.run([py, "-I", "-S", "-X", "importtime", str(BIN), "build", "-q", "--root", str(root),
                           "--index", str(index)], env=base_env(tmp_path), capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    mods = {line.split("|")[-1].strip() for line in proc.stderr.decode().splitlines() if "|" in line}
    assert "yaml" in mods
    assert not [m for m in mods if "editable" in m]
    out = run_cli(["--root", root, "--index", index, "--format", "json", "folded", "yaml", "text"], base_env(tmp_path))
    assert "Folded YAML text that only PyYAML reads whole" in out.stdout


def test_a_small_build_and_an_edits_rebuild_start_no_worker_machinery(tmp_path):
    """Under PARALLEL_MIN files to parse, the build parses in process; it
    must not import multiprocessing just to ask whether it could fork."""
    import subprocess
    import sys
    from skillret_helpers import base_env
    py = PY or sys.executable
    root = _tree(tmp_path)
    index = tmp_path / "i.skr"
    for step in ("cold", "edit"):
        if step == "edit":
            md = root / "pdf-merge" / "SKILL.md"
            md.write_text(md.read_text() + "\nEdited.\n")
        proc = subprocess.run([py, "-I", "-S", "-X", "importtime", str(BIN), "build", "-q", "--root", str(root),
                               "--index", str(index)], env=base_env(tmp_path), capture_output=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        mods = {line.split("|")[-1].strip() for line in proc.stderr.decode().splitlines() if "|" in line}
        assert "retriever.build" in mods, step
        assert "multiprocessing" not in mods, step


def test_an_index_changed_since_it_was_verified_is_checksummed_again(tmp_path):
    """The build's ``.verified`` memo spares queries the checksums only
    while the file is the one verified: any change to it (here a touch,
    which moves its ctime) makes the query check again (zlib).  A
    background freshness check is the other work a query may start, and
    it imports ``background`` only when its stamp is old."""
    import os
    from skillret_helpers import base_env
    env = base_env(tmp_path)
    root = _tree(tmp_path)
    index = tmp_path / "i.skr"
    assert_clean(run_cli(["build", "--root", root, "--index", index], env))
    assert (tmp_path / "i.skr.verified").is_file()
    os.utime(index)
    mods, out = _imported(["--root", str(root), "--index", str(index), "merge", "pdf"], env)
    assert b"pdf-merge" in out
    assert mods == QUERY_MODULES | {"zlib"}
    os.utime(tmp_path / "i.skr.checked", (1, 1))  # the freshness stamp is old: a check is due
    mods, out = _imported(["--root", str(root), "--index", str(index), "merge", "pdf"],
                          dict(env, SKILL_RETRIEVAL_REVALIDATE="2"))
    assert b"pdf-merge" in out
    assert "retriever.background" in mods
    import time
    deadline = time.time() + 30
    while (tmp_path / "i.skr.building").exists() and time.time() < deadline:
        time.sleep(0.05)  # the detached check ends by itself; leave nothing running
    # That check verified the file whole and remembered it: no checksum again.
    mods, out = _imported(["--root", str(root), "--index", str(index), "merge", "pdf"], env)
    assert mods == QUERY_MODULES


# ------------------------------------------------------------------ cycles


def _module_name(path):
    rel = path.relative_to(REPO).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _our_modules():
    out = {}
    for top in ("retriever", "hermes_plugin"):
        for p in sorted((REPO / top).rglob("*.py")):
            out[_module_name(p)] = p
    return out


def import_graph():
    """``{module: {imported module: line}}`` over retriever and
    hermes_plugin, counting every import statement wherever it stands
    (module level, functions, try blocks), relative imports resolved, and
    ``from pkg import name`` counted as the submodule when there is one."""
    mods = _our_modules()
    graph = {}
    for name, path in mods.items():
        is_pkg = path.name == "__init__.py"
        package = name if is_pkg else name.rpartition(".")[0]
        edges = {}
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[:len(base) - node.level + 1]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                targets = [mod + "." + a.name if (mod + "." + a.name) in mods else mod for a in node.names]
            for t in targets:
                # A submodule import also runs its packages' __init__.
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t != name:
                    edges.setdefault(t, node.lineno)
        graph[name] = edges
    return graph


def _cycles(graph):
    # Tarjan's strongly connected components; any with two or more
    # members is a cycle.
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _is_package_edge(src, dst):
    # ``import retriever.x`` runs retriever/__init__.py: a package's own
    # face is not a dependency on its contents.
    return src.startswith(dst + ".")


def test_no_import_cycles_counting_imports_inside_functions():
    graph = {m: {d: l for d, l in e.items() if not _is_package_edge(m, d)} for m, e in import_graph().items()}
    assert _cycles(graph) == []


def test_the_checker_sees_a_cycle_hidden_inside_functions(tmp_path):
    # The guard above must be able to fail: a cycle made only of imports
    # inside functions is found.
    graph = {"a": {"b": 3}, "b": {"c": 9}, "c": {"a": 12}, "d": {"a": 1}}
    assert _cycles(graph) == [["a", "b", "c"]]
    src = "def f():\n    from retriever import entry\n"
    found = [n for n in ast.walk(ast.parse(src)) if isinstance(n, ast.ImportFrom)]
    assert found and found[0].module == "retriever"


def test_the_core_never_imports_a_front_end_or_the_plugin():
    bad = []
    for mod, edges in import_graph().items():
        if not mod.startswith("retriever") or mod.startswith(FRONT_ENDS):
            continue
        for dst, line in edges.items():
            if dst.startswith(FRONT_ENDS) or dst.startswith("hermes_plugin"):
                bad.append("%s:%d imports %s" % (mod, line, dst))
    assert bad == []


def test_the_runners_never_import_the_cli_above_them():
    # The floors run core < runners < cli: doctor and tokens call the
    # runners' front end, never the other way (did_you_mean lives in the
    # core for that).
    bad = ["%s:%d imports %s" % (m, l, d) for m, e in import_graph().items() if m.startswith("retriever.runners")
           for d, l in e.items() if d.startswith("retriever.cli")]
    assert bad == []


def test_retriever_never_imports_hermes_plugin():
    bad = ["%s:%d" % (m, l) for m, e in import_graph().items() if m.startswith("retriever")
           for d, l in e.items() if d.startswith("hermes_plugin")]
    assert bad == []


def test_the_plugin_bench_helper_is_not_shipped_in_the_plugin():
    assert not (REPO / "hermes_plugin" / "bench.py").exists()
    assert (REPO / "bench" / "hermes_turn.py").exists()


# ------------------------------------------------------------------- -k


BAD_K = ["0", "-1", "1001", "5000", "x", "2.5", ""]


@pytest.mark.parametrize("k", BAD_K)
def test_k_has_one_rule_whichever_door(tmp_path, k):
    from skillret_helpers import base_env
    env = base_env(tmp_path)
    root = _tree(tmp_path)
    want = "-k must be a whole number from 1 to 1000, not %r" % k
    forms = [["--root", root, "-k", k, "pdf"],           # the fast path
             ["--root", root, "-k=" + k, "pdf"],
             ["query", "--fresh", "--root", root, "-k", k, "pdf"],
             ["explain", "--root", root, "-k", k, "pdf"]]  # argparse
    if k.lstrip("-").isdigit():
        forms.append(["--root", root, "-k" + k, "pdf"])
    for args in forms:
        proc = run_cli(args, env)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert want in proc.stderr and "Traceback" not in proc.stderr, (args, proc.stderr)
    # A hook never blocks the prompt: it answers empty and logs the rule.
    proc = run_cli(["hook", "claude-code", "--root", root, "-k", k], env,
                   input=json.dumps({"prompt": "merge pdf", "cwd": str(tmp_path)}))
    assert_clean(proc)
    assert proc.stdout == ""
    log = (Path(env["XDG_CACHE_HOME"]) / "skill-retrieval" / "skill-retrieval.log").read_text()
    assert want in log


@pytest.mark.parametrize("k", ["1", "6", "1000"])
def test_k_in_range_is_accepted_everywhere(tmp_path, k):
    from skillret_helpers import base_env
    env = base_env(tmp_path)
    root = _tree(tmp_path)
    for args in (["--root", root, "-k", k, "merge pdf"], ["--root", root, "-k" + k, "merge pdf"],
                 ["query", "--root", root, "-k", k, "merge pdf"]):
        proc = run_cli(args, env)
        assert_clean(proc)
        assert "pdf-merge" in proc.stdout


def test_top_k_setting_uses_the_same_range(tmp_path):
    from skillret_helpers import base_env
    env = dict(base_env(tmp_path), SKILL_RETRIEVAL_TOP_K="5000")
    root = _tree(tmp_path)
    proc = run_cli(["--root", root, "merge pdf"], env)
    assert_clean(proc)
    assert "SKILL_RETRIEVAL_TOP_K='5000' (expected a whole number from 1 to 1000); using 6" in proc.stderr
    assert proc.stderr.count("SKILL_RETRIEVAL_TOP_K") == 1  # once per process


# -------------------------------------------------------------- settings


def _names_read_in_code():
    names = set()
    for top in ("retriever", "hermes_plugin", "bin", "hooks"):
        for p in (REPO / top).rglob("*"):
            if p.is_file() and p.suffix in (".py", "") and "__pycache__" not in p.parts:
                names |= set(re.findall(r"SKILL_RETRIEVAL_[A-Z_]*[A-Z]", p.read_text(errors="replace")))
    return names


def test_every_setting_the_code_reads_is_in_the_table():
    assert _names_read_in_code() <= set(settings.TABLE)
    assert len(settings.TABLE) >= 14


def test_help_lists_every_setting(tmp_path):
    from skillret_helpers import base_env
    proc = run_cli(["--help"], base_env(tmp_path))
    assert_clean(proc)
    for name in settings.TABLE:
        assert name in proc.stdout, name


def test_docs_settings_table_comes_from_the_table():
    page = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert settings.markdown_table() in page


@pytest.mark.parametrize("name,raw,value,warns", [
    ("SKILL_RETRIEVAL_TOP_K", "8", 8, False),
    ("SKILL_RETRIEVAL_TOP_K", "0", 6, True),
    ("SKILL_RETRIEVAL_DECIDE", "off", False, False),
    ("SKILL_RETRIEVAL_DECIDE", "sometimes", True, True),
    ("SKILL_RETRIEVAL_REVALIDATE", "off", None, False),
    ("SKILL_RETRIEVAL_REVALIDATE", "0", 0.0, False),
    ("SKILL_RETRIEVAL_REVALIDATE", "inf", 2.0, True),
    ("SKILL_RETRIEVAL_HOOK_WAIT", "-1", 3.0, True),
    ("SKILL_RETRIEVAL_COMPACT", "0", False, False),
    ("SKILL_RETRIEVAL_COMPACT", "maybe", True, True),
    ("SKILL_RETRIEVAL_RERANK", "JEV", "jev", False),
    ("SKILL_RETRIEVAL_RERANK", "yes", "", True),
    ("SKILL_RETRIEVAL_SEMANTIC_SOCKET", "/run/s.sock", "/run/s.sock", False),
    ("SKILL_RETRIEVAL_SEMANTIC_SOCKET", "run/s.sock", "", True),  # relative: refused
])
def test_one_reader_for_every_setting(name, raw, value, warns):
    said = []
    assert settings.get(name, warn=said.append, raw=raw) == value
    assert len(said) == (1 if warns else 0)
    settings.get(name, warn=said.append, raw=raw)
    assert len(said) == (1 if warns else 0)  # once per process and value
