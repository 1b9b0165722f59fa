"""The suite keeps out of the user's files (issue 32).

A developer who followed the README has run ``skill-retrieve roots add
~/skills``: their roots file, their SKILL_RETRIEVAL_* variables and their
~/.cache must neither change what an in-process test sees nor be written
by one.  ``make test`` failed 15 tests for such a developer.
"""

import os
import subprocess
import sys

from retriever import locate, userroots
from skillret_helpers import REPO, make_skill


def test_in_process_code_sees_the_test_home_only(tmp_path):
    assert locate.home() == str(tmp_path / "home")
    assert userroots.path().startswith(str(tmp_path) + "/")
    assert userroots.remembered(existing=False) == []
    assert locate.cache_dir().startswith(str(tmp_path) + "/")
    assert sorted(k for k in os.environ if k.startswith("SKILL_RETRIEVAL_")) == ["SKILL_RETRIEVAL_DECIDE",
                                                                              "SKILL_RETRIEVAL_SEMANTIC"]


def _snapshot(folder):
    # Every path below ``folder`` with its bytes (files) or None (folders).
    out = {}
    for d, dirs, files in os.walk(folder):
        for n in dirs:
            out[os.path.join(d, n)] = None
        for n in files:
            with open(os.path.join(d, n), "rb") as f:
                out[os.path.join(d, n)] = f.read()
    return out


# In-process tests that read the default roots, the cache and the log.
PROBES = [
    "tests/test_isolation.py::test_in_process_code_sees_the_test_home_only",
    "tests/test_hermes_plugin.py::test_no_skills_warning",
    "tests/test_hermes_plugin.py::test_index_error_warns_and_injects_nothing",
]


def test_the_suite_ignores_and_keeps_a_users_saved_roots(tmp_path):
    user = tmp_path / "user"
    mine = user / "skills"
    make_skill(mine, "kubernetes-certs", {"name": "kubernetes-certs",
                                          "description": "Rotate the TLS certificates of Kubernetes"})
    config = user / ".config" / "skill-retrieval"
    config.mkdir(parents=True)
    (config / "roots").write_text(str(mine) + "\n")
    (user / ".cache" / "skill-retrieval").mkdir(parents=True)
    before = _snapshot(user)
    env = dict(os.environ, HOME=str(user), XDG_CONFIG_HOME=str(user / ".config"),
               XDG_CACHE_HOME=str(user / ".cache"), SKILL_RETRIEVAL_ROOTS=str(mine),
               SKILL_RETRIEVAL_SEMANTIC="on")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"] + PROBES,
                          cwd=str(REPO), env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "%d passed" % len(PROBES) in proc.stdout
    assert _snapshot(user) == before
