"""The bench's comparison formats answer as the shipped query does.

``make bench`` times a plain dict index loaded with pickle and with orjson
(bench/formats.py exports it from a built index; bench/dict_query.py
answers from it through bench/dict_search.py, which mirrors
``retriever.query.search``).  Those rows measure only the load if they
rank and decide as the product does: a drift (a key of the message the
decision reads, a header field, the weight of a pasted block) made every
dict run fail or answer otherwise, which the bench then only reported.
Here they must name the top skill ``bin/skill-retrieve`` names, with the
decision of what to inject on, as shipped.
"""

import json
import subprocess
import sys

import pytest
from skillret_helpers import BIN, REPO, base_env, make_skill

pytest.importorskip("orjson")

BENCH = REPO / "bench"
SKILLS = {
    "k8s-cert-rotation": ("Rotate TLS certificates of a Kubernetes cluster before they expire.",
                          "Run kubeadm certs renew all, then restart the control plane pods.\n"),
    "pdf-ocr": ("Extract the text of scanned PDF files with OCR.", "Uses tesseract on each page image.\n"),
    "csv-charts": ("Make bar and line charts from CSV data.", "Reads the CSV with pandas, plots with matplotlib.\n"),
    "docker-permissions": ("Fix docker build permission denied errors.",
                           "Check the user of the RUN step, chown the copied files, use --chown on COPY.\n"),
    "pytest-writer": ("Write pytest unit tests for Python functions.", "Fixtures, parametrize, tmp_path.\n"),
    "react-rerender": ("Find why a React component re-renders too often.", "useMemo, useCallback, React.memo.\n"),
}
QUERIES = [
    "rotate the kubernetes tls certificates",
    "my pdf is scanned, pull the text out of it with ocr",
    "make a bar chart of monthly sales from this csv",
    "write a pytest for this function",
    # A pasted block: its terms weigh less than the message's own words.
    "the docker build keeps failing, permission denied\n```\nStep 4/9 : RUN npm ci\n"
    "npm ERR! Error: EACCES: permission denied, mkdir '/app/node_modules'\n```",
    # Its own words name one skill, the log another: at full weight the
    # log's terms would win.
    "fix my docker build permission errors\n```\nFAILED write_unit_tests.py - pytest fixtures tmp_path\n"
    "python functions: pytest parametrize unit tests write fixtures\n```",
    "thanks, that is all for today",  # nothing fits: shipped abstains
]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """``(env, index, pickle file, orjson file)`` for the small tree."""
    tmp = tmp_path_factory.mktemp("formats")
    root = tmp / "skills"
    for name, (desc, body) in SKILLS.items():
        make_skill(root, name, {"name": name, "description": desc}, body=body)
    env = base_env(tmp)
    del env["SKILL_RETRIEVAL_DECIDE"]  # the decision on, as shipped and as the bench runs it
    idx, pkl, oj = str(tmp / "index.skr"), str(tmp / "index.pickle"), str(tmp / "index.orjson")
    subprocess.run([str(BIN), "build", "-q", "--root", str(root), "--index", idx], env=env, check=True,
                   capture_output=True, timeout=120)
    cp = subprocess.run([sys.executable, str(BENCH / "formats.py"), "export", idx, pkl, oj], env=env,
                        capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr
    return env, idx, pkl, oj


def _shipped_top1(env, idx, q):
    cp = subprocess.run([str(BIN), "--index", idx, "--format", "json", q], env=env, capture_output=True,
                        text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    results = json.loads(cp.stdout)["results"]
    return results[0]["id"] if results else None


# As make bench runs them: pickle under -I -S, orjson with site-packages.
FORMATS = [("pickle", ["-I", "-S"], 2), ("orjson", ["-I"], 3)]


@pytest.mark.parametrize("fmt,flags,which", FORMATS, ids=[f[0] for f in FORMATS])
def test_dict_format_names_the_shipped_top_skill(exported, fmt, flags, which):
    env, idx, pkl, oj = exported
    path = exported[which]
    shipped = [_shipped_top1(env, idx, q) for q in QUERIES]
    # Not a vacuous agreement: most queries inject, the last abstains.
    assert sum(s is not None for s in shipped) >= 4 and shipped[-1] is None, shipped
    assert shipped[0] == "k8s-cert-rotation" and shipped[4] == shipped[5] == "docker-permissions", shipped
    # --ids: one query per stdin line (a pasted block's newlines as spaces
    # would be another message, so each query runs on its own).
    for q, want in zip(QUERIES, shipped):
        cp = subprocess.run([sys.executable] + flags + [str(BENCH / "dict_query.py"), fmt, path, q], env=env,
                            capture_output=True, text=True, timeout=60)
        assert cp.returncode == 0 and "Traceback" not in cp.stderr, cp.stderr
        if want is None:
            assert cp.stdout.strip() == "", (q, cp.stdout)
        else:
            # The rendered block names the skill as "(id)", which the
            # bench's agreement check also reads of the hook's output.
            assert "(%s)" % want in cp.stdout, (q, want, cp.stdout)
    one_per_line = [q for q in QUERIES if "\n" not in q]
    cp = subprocess.run([sys.executable] + flags + [str(BENCH / "dict_query.py"), fmt, path, "--ids"],
                        input="\n".join(one_per_line), env=env, capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    top1 = [line.split("\t")[0] or None for line in cp.stdout.split("\n")[:len(one_per_line)]]
    assert top1 == [s for q, s in zip(QUERIES, shipped) if "\n" not in q]


def test_dict_block_is_the_shipped_block(exported):
    # Same ranking, same decision, same renderer: the same bytes.
    env, idx, pkl, oj = exported
    for q in QUERIES[:2]:
        shipped = subprocess.run([str(BIN), "--index", idx, q], env=env, capture_output=True, timeout=60)
        mine = subprocess.run([sys.executable, "-I", "-S", str(BENCH / "dict_query.py"), "pickle", pkl, q],
                              env=env, capture_output=True, timeout=60)
        assert shipped.returncode == 0 and mine.returncode == 0, (shipped.stderr, mine.stderr)
        assert mine.stdout == shipped.stdout
