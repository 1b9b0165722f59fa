"""The alternative index formats the product design named, for comparison.

``export`` turns a built (shipped, packed) index into a plain dict index,
``{term: [(doc, weight), ...]}`` plus per-term IDF and the skill records, and writes it with
pickle and with orjson.  The weights are the shipped file's own (f32 widened
to float), in the same order, so every format ranks identically and the
benchmark compares only load and query cost.  Run as a subprocess
(``python bench/formats.py export INDEX PICKLE ORJSON``) so the bench
process itself never holds the large object graph.
"""

import os
import sys


def plain_dict(index_path):
    """The shipped index at ``index_path`` as one plain dict: ``header``
    (the analyzer params only), ``index`` (term -> postings), ``idf``
    (term -> IDF, for the abstention check) and ``docs``."""
    from retriever import store
    # Whole, in memory: a query's load reads a large index's tables entry
    # by entry, and this reads every entry.
    with open(index_path, "rb") as f:
        idx = store.load_bytes(f.read())
    hdr = idx["header"]
    blob = idx["term_blob"]
    term_off = idx["term_off"].tolist()
    idf_all = idx["idf"].tolist()
    index = {}
    idf = {}
    for i in range(hdr["n_terms"]):
        term = blob[term_off[i]:term_off[i + 1]].decode("utf-8")
        index[term] = list(zip(*store.postings(idx, i)))
        idf[term] = idf_all[i]
    docs = [store.doc(idx, n) for n in range(hdr["n_docs"])]
    # n_docs: the decision puts IDF on the library's scale (decide.max_idf).
    return {"header": {"params": hdr["params"], "n_docs": hdr["n_docs"]}, "index": index, "idf": idf, "docs": docs}


def export(index_path, pickle_path, orjson_path):
    """Write the pickle (highest protocol) and orjson files atomically."""
    import gc
    import pickle
    import orjson
    gc.disable()
    obj = plain_dict(index_path)
    for path, dump in ((pickle_path, lambda o: pickle.dumps(o, protocol=pickle.HIGHEST_PROTOCOL)),
                       (orjson_path, orjson.dumps)):
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(dump(obj))
        os.replace(tmp, path)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if sys.argv[1:2] == ["export"] and len(sys.argv) == 5:
        export(*sys.argv[2:])
    else:
        sys.exit("usage: formats.py export INDEX PICKLE ORJSON")
