"""Where a query's time goes: import times and a cProfile of the hot path.

``python bench/hotspots.py INDEX [QUERY...]`` prints the slowest imports
(``-X importtime`` of one real ``bin/skill-retrieve`` run) and a cProfile
of ``retriever.entry.main`` run in-process once per query (first call
included, so module imports show up too).  ``build_profile`` does the same
for an index build (phase timings, then cProfile).
"""

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = os.path.join(REPO, ".venv", "bin", "python")

_PROFILE = r"""
import cProfile, io, pstats, sys, time
sys.path.insert(0, %(repo)r)
index, queries = %(index)r, %(queries)r
sys.stdout = io.TextIOWrapper(open('/dev/null', 'wb'))
pr = cProfile.Profile()
t0 = time.perf_counter()
pr.enable()
from retriever.cli.entry import main
for q in queries:
    main(['--index', index, q])
pr.disable()
total = time.perf_counter() - t0
sys.stdout = sys.__stdout__
print('in-process entry.main over %%d queries: %%.1f ms total, %%.1f ms/query (first includes imports)'
      %% (len(queries), total * 1e3, total * 1e3 / len(queries)))
for key in ('tottime', 'cumulative'):
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats(key).print_stats(18)
    text = s.getvalue()
    print('--- by %%s ---' %% key)
    print(text[text.find('   ncalls'):].rstrip())
"""


def importtime(index, query, env):
    """The slowest imports of one real query process, as text lines."""
    r = subprocess.run([PY, "-X", "importtime", "-I", "-S", os.path.join(REPO, "bin", "skill-retrieve"),
                        "--index", index, query], capture_output=True, env=env)
    rows = []
    for line in r.stderr.decode("utf-8", "replace").splitlines():
        parts = line[len("import time:"):].split("|", 2) if line.startswith("import time:") else []
        if len(parts) == 3 and parts[0].strip().isdigit():
            rows.append((int(parts[1]), int(parts[0]), parts[2].rstrip()))
    out = ["-X importtime (cumulative us, self us, module), top 15 by cumulative:"]
    for c, s, n in sorted(rows, reverse=True)[:15]:
        out.append("  %7d %7d %s" % (c, s, n))
    out.append("  modules imported: %d, self time total %.1f ms" % (len(rows), sum(s for _, s, _ in rows) / 1e3))
    return "\n".join(out)


def cprofile(index, queries, env):
    """cProfile text of entry.main over ``queries`` in one process (-I -S)."""
    code = _PROFILE % {"repo": REPO, "index": index, "queries": list(queries)}
    r = subprocess.run([PY, "-I", "-S", "-c", code], capture_output=True, env=env)
    return (r.stdout + r.stderr).decode("utf-8", "replace")


_BUILD_PROFILE = r"""
import cProfile, io, pstats, sys, time
sys.path.insert(0, %(repo)r)
from retriever import build
scope = build.resolve([%(root)r])
pr = cProfile.Profile()
t0 = time.perf_counter()
pr.enable()
build.build(scope, %(out)r)
pr.disable()
print('build.build of %%s under cProfile: %%.2f s' %% (%(root)r, time.perf_counter() - t0))
s = io.StringIO()
pstats.Stats(pr, stream=s).sort_stats('tottime').print_stats(15)
text = s.getvalue()
print(text[text.find('   ncalls'):].rstrip())
"""

_BUILD_PHASES = r"""
import sys, time
sys.path.insert(0, %(repo)r)
from retriever import build, index, skills, store
scope = build.resolve([%(root)r])
t = time.perf_counter(); build.signature(scope); sig = time.perf_counter() - t
t = time.perf_counter(); recs, _, _ = skills.collect(scope['roots'], scope['disabled']); col = time.perf_counter() - t
recs.sort(key=lambda r: r['id'])
prof = index.PROFILES['default']
t = time.perf_counter(); [index.field_terms(r, prof) for r in recs]; ana = time.perf_counter() - t
t = time.perf_counter(); built = index.build(recs, prof); bld = time.perf_counter() - t
print('phases (no profiler): signature walk %%.2f s, collect (read + YAML) %%.2f s, '
      'index.build %%.2f s of which analyze (tokenize + stopwords + stem) ~%%.2f s' %% (sig, col, bld, ana))
"""


def build_profile(root, scratch):
    """Phase timings and a cProfile of one build of ``root`` (site on: the
    build needs PyYAML), as text."""
    out = os.path.join(scratch, "profile-build.skr")
    parts = []
    for code in (_BUILD_PHASES, _BUILD_PROFILE):
        r = subprocess.run([PY, "-I", "-c", code % {"repo": REPO, "root": root, "out": out}],
                           capture_output=True)
        parts.append((r.stdout + r.stderr).decode("utf-8", "replace").rstrip())
    for p in (out, out + ".checked"):
        if os.path.exists(p):
            os.unlink(p)
    return "\n".join(parts)


def main(argv=None):
    """Print both reports for INDEX."""
    argv = sys.argv[1:] if argv is None else argv
    index = argv[0]
    queries = argv[1:] or ["rotate my kubernetes TLS certificates"]
    env = dict(os.environ, SKILL_RETRIEVAL_REVALIDATE="off")
    print(importtime(index, queries[0], env))
    print(cprofile(index, queries, env))


if __name__ == "__main__":
    main()
