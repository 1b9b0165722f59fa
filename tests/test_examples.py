"""The bundled example library (examples/skills) behaves as ``make demo`` shows.

The examples are built once per module into a temporary index with the real
executable, then queried the way the Makefile's demo queries them.  If an
edit to the examples or to the retriever breaks the demo, these fail.
"""

from pathlib import Path

import pytest

from skillret_helpers import REPO, assert_clean, base_env, index_docs, json_results, run_cli, warning_lines

EXAMPLES = REPO / "examples" / "skills"
MALFORMED = EXAMPLES / "misc" / "quick-notes" / "SKILL.md"


def _example_ids():
    """Skill ids the examples should produce: each SKILL.md's folder, relative to the root."""
    return sorted(md.parent.relative_to(EXAMPLES).as_posix() for md in EXAMPLES.rglob("SKILL.md"))


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """Build the examples once: returns a dict with ``index``, ``env``, ``cwd`` and
    the build's CompletedProcess ``build``."""
    tmp = tmp_path_factory.mktemp("examples")
    env = base_env(tmp)
    cwd = tmp / "cwd"
    cwd.mkdir()
    index = tmp / "demo.skr"
    proc = run_cli(["build", "--root", EXAMPLES, "--index", index], env, cwd=cwd)
    return {"index": index, "env": env, "cwd": cwd, "build": proc}


def _query(demo, *args, input=None):
    return run_cli(["--root", EXAMPLES, "--index", demo["index"], *args], demo["env"],
                   input=input, cwd=demo["cwd"])


def _first_text_result(stdout):
    """The ``- **name** (id): ...`` line of the best result in the text block."""
    lines = [l for l in stdout.splitlines() if l.startswith("- **")]
    assert lines, stdout
    return lines[0]


def test_every_example_is_indexed(demo):
    assert_clean(demo["build"])
    expected = _example_ids()
    # A library big enough to show ranking, spread over several categories.
    assert len(expected) >= 12
    assert len({i.split("/")[0] for i in expected}) >= 5
    assert "built %s: %d skills from 1 root," % (demo["index"], len(expected)) in demo["build"].stdout
    docs = index_docs(demo["index"])
    assert sorted(d[0] for d in docs) == expected
    for sid, name, _path, desc, _vis in docs:
        assert name == sid.rsplit("/", 1)[-1], (sid, name)  # frontmatter name = folder name
        assert desc, sid


def test_category_description_is_not_a_skill(demo):
    text = (EXAMPLES / "devops" / "DESCRIPTION.md").read_text(encoding="utf-8")
    assert text.startswith("---\ndescription: ")
    assert not any("DESCRIPTION" in d[2] for d in index_docs(demo["index"]))


def test_the_malformed_example_warns_once_and_is_still_indexed(demo):
    warnings = warning_lines(demo["build"].stderr)
    assert len(warnings) == 1, demo["build"].stderr
    assert str(MALFORMED) in warnings[0]
    assert "invalid YAML" in warnings[0]
    assert "1 problem," in demo["build"].stdout
    # The lenient parser keeps the whole description, including the part after ": ".
    docs = {d[0]: d for d in index_docs(demo["index"])}
    assert "decisions, open questions and links" in docs["misc/quick-notes"][3]


def test_demo_pdf_query_from_stdin(demo):
    proc = _query(demo, input="my pdf is scanned, pull the text out of it\n")
    assert_clean(proc)
    assert proc.stdout.startswith("## Retrieved Skills\n")
    assert _first_text_result(proc.stdout).startswith(
        "- **pdf-text-extraction** (documents/pdf-text-extraction): ")


def test_demo_kubernetes_query_as_json(demo):
    results = json_results(_query(demo, "--format", "json", "-k", "2",
                                  "rotate", "the", "kubernetes", "TLS", "certificates"))
    assert 1 <= len(results) <= 2
    assert results[0]["id"] == "devops/kubernetes-certs"
    assert results[0]["path"] == str(EXAMPLES / "devops" / "kubernetes-certs")


def test_chinese_query_finds_the_translation_skill(demo):
    results = json_results(_query(demo, "--format", "json", "把这段文档翻译成中文"))
    assert [r["name"] for r in results][:1] == ["translation-zh"]


@pytest.mark.parametrize("how", ["args", "stdin"])
def test_small_talk_prints_nothing(demo, how):
    proc = _query(demo, "thanks!") if how == "args" else _query(demo, input="thanks!\n")
    assert_clean(proc)
    assert proc.stdout == ""


def test_the_editable_install_of_make_demo_prints_no_setuptools_banner(tmp_path):
    # Issue 32: `make demo` showed setuptools' boxed "Editable installation"
    # warning.  The Makefile's own command, run by a venv of the test's own:
    # pip run by the project's .venv (even with --prefix) would first
    # uninstall the editable install there.
    import re
    import subprocess
    import sys
    text = (REPO / "Makefile").read_text()
    line = next(l.strip() for l in text.splitlines() if "pip install" in l and " -e ." in l)
    quiet = re.search(r"^EDITABLE_QUIET\s*:=\s*(.*)$", text, re.M)
    venv = tmp_path / "venv"
    made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True, timeout=300)
    if made.returncode != 0:
        pytest.skip("no venv with pip here: %s" % made.stderr.strip()[-300:])
    line = line.replace("$(EDITABLE_QUIET)", quiet.group(1) if quiet else "").replace("$(PY)", str(venv / "bin" / "python"))
    env = dict(base_env(tmp_path), TMPDIR=str(tmp_path))
    proc = subprocess.run(["sh", "-c", line], cwd=str(REPO), env=env, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        pytest.skip("pip could not build the package here: %s" % proc.stderr.strip()[-300:])
    assert "Editable installation" not in proc.stderr and "!!" not in proc.stderr, proc.stderr
