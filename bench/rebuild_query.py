"""The rebuild-every-process baseline: parse every SKILL.md, build, query.

``python -I bench/rebuild_query.py ROOT... -- WORDS...`` (site enabled: the
build parses YAML with PyYAML, as the product's build does).  ``--ids``
first reads one query per stdin line and prints top ids (agreement check).
Uses the product's build code (skills.collect + index.build) and ranking
(bench/dict_search.py), in memory, with GC off and ``_exit``: the best case
for a hook that keeps no index.
"""

import gc
import posix
import sys

gc.disable()
_here = __file__ if __file__.startswith("/") else posix.getcwd() + "/" + __file__
sys.path.insert(0, _here.rsplit("/", 2)[0])  # the repo: retriever
sys.path.insert(0, _here.rsplit("/", 1)[0])  # bench/: dict_search

import dict_search  # noqa: E402
from retriever import index, skills  # noqa: E402

args = sys.argv[1:]
want_ids = args[:1] == ["--ids"]
if want_ids:
    args = args[1:]
cut = args.index("--")
roots, words = args[:cut], args[cut + 1:]
recs, _, _ = skills.collect([{"path": r, "prefix": "", "source": "root"} for r in roots])
recs.sort(key=lambda r: r["id"])
prof = index.PROFILES["default"]
built = index.build(recs, prof)
postings = dict(zip(built["terms"], built["postings"]))
idf = dict(zip(built["terms"], built["idf"]))
docs = [(r["id"], r["name"], r["path"], r["description"], r.get("vis")) for r in recs]
header = {"params": {"analyzer": prof["analyzer"]}, "n_docs": len(docs)}


def search(text):
    """Top 6 results, ranked as retriever.query.search ranks them."""
    return dict_search.search(postings, idf, docs, header, text)


dict_search.answer(search, ["--ids"] if want_ids else words)
