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
    description, vis) and ``header`` carries the analyzer params."""
    min_score = query.min_score_setting() if hasattr(query, "min_score_setting") else 0.0
    if min_score > 0 and hasattr(query, "is_chitchat") and query.is_chitchat(text):
        return []
    acc = {}
    get = acc.get
    found = []
    for t in query.query_terms({"header": header}, text):
        plist = index.get(t)
        if plist is None:
            continue
        found.append(t)
        for d, w in plist:
            acc[d] = get(d, 0.0) + w
    best = query.top(acc, k)
    if not best or best[0][1] <= 0.0:
        return []
    if min_score > 0 and hasattr(query, "confidence"):
        bd = best[0][0]
        total = covered = 0.0
        for t in found:
            w = idf[t]
            total += w
            if any(d == bd for d, _ in index[t]):
                covered += w
        if (covered / total if total > 0 else 0.0) < min_score:
            return []
    out = []
    for n, s in best:
        if s <= 0.0:
            break
        rid, name, path, desc, vis = docs[n]
        out.append({"id": rid, "name": name, "path": path, "score": s, "description": desc})
    return out
