"""Answer one query from a plain dict index (pickle or orjson), one process.

``python -I -S bench/dict_query.py pickle FILE [--ids] WORDS...`` (orjson
needs site-packages, so ``-I`` without ``-S``).  Uses the product's own
analyzer, ranking (bench/dict_search.py) and renderer, so only the load differs from the
shipped format.  Given the same head start as the shipped executable and
more: GC off during the load and ``_exit`` to skip teardown.
"""

import gc
import posix
import sys

gc.disable()  # halves object-heavy loads (performance-facts.md section 8)
_here = __file__ if __file__.startswith("/") else posix.getcwd() + "/" + __file__
sys.path.insert(0, _here.rsplit("/", 2)[0])  # the repo: retriever
sys.path.insert(0, _here.rsplit("/", 1)[0])  # bench/: dict_search

fmt, path = sys.argv[1], sys.argv[2]
words = sys.argv[3:]
with open(path, "rb") as f:
    raw = f.read()
if fmt == "pickle":
    import pickle
    obj = pickle.loads(raw)
else:
    import orjson
    obj = orjson.loads(raw)
del raw

import dict_search  # noqa: E402


def search(text):
    """Top 6 results, ranked as retriever.query.search ranks them."""
    return dict_search.search(obj["index"], obj["idf"], obj["docs"], obj["header"], text)


dict_search.answer(search, words)
