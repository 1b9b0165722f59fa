"""``retriever.query.search`` over a plain dict index, for the comparison
formats (pickle, orjson, rebuild-every-process).

Mirrors the shipped ranking step by step (same analyzer, same summation
order, same top-k and the same abstention rules when the query module has
them), so the formats differ only in how the index reaches memory.  The
benchmark checks top-1 agreement, so a drift between the two shows up.
"""

from retriever import query


def search(index, idf, docs, header, text, k=6):
    """Top ``k`` result dicts for ``text``.  ``index`` maps term ->
    [(doc, weight)], ``idf`` term -> IDF, ``docs`` doc -> (id, name, path,
    description, vis) and ``header`` carries the analyzer params.  The
    scoring loop is the format under test; every rule around it (top-k,
    abstention, the relative floor) is the query module's own."""
    min_score = query.min_score_setting()
    min_ratio = query.min_ratio_setting()
    if min_score > 0 and query.is_chitchat(text):
        return []
    terms = query.query_terms({"header": header}, text)
    acc = {}
    get = acc.get
    found = {}
    for t in terms:
        plist = index.get(t)
        if plist is None:
            continue
        # query.confidence reads idx["idf"][key] for each (key, docs): the
        # term itself is the key here.
        found[t] = (t, [d for d, _ in plist])
        for d, w in plist:
            acc[d] = get(d, 0.0) + w
    best = query.top(acc, k)
    if not best or best[0][1] <= 0.0:
        return []
    if min_score > 0 and query.confidence({"idf": idf}, found, best[0][0],
                                          query.n_scored(terms, found)) < min_score:
        return []
    floor = best[0][1] * min_ratio
    out = []
    for n, s in best:
        if s <= 0.0 or s < floor:
            break
        rid, name, path, desc, vis = docs[n]
        out.append({"id": rid, "name": name, "path": path, "score": s, "description": desc})
    return out


def answer(search_fn, words):
    """The script body both dict-format loaders share: ``--ids`` answers one
    query per stdin line with its ids (the agreement check), otherwise
    ``words`` is one query printed as the injected block."""
    import posix
    import sys
    from retriever.render import text_block
    if words[:1] == ["--ids"]:
        out = "".join("\t".join(r["id"] for r in search_fn(line)) + "\n"
                      for line in sys.stdin.read().split("\n") if line)
    else:
        out = text_block(search_fn(" ".join(words)))
    sys.stdout.buffer.write(out.encode("utf-8", "replace"))
    sys.stdout.flush()
    posix._exit(0)
