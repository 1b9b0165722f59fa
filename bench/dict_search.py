"""``retriever.query.search`` over a plain dict index, for the comparison
formats (pickle, orjson, rebuild-every-process).

Mirrors the shipped ranking step by step (same analyzer, same summation
order, same top-k and the same decision of what to inject), so the formats
differ only in how the index reaches memory.  The benchmark checks top-1
agreement, so a drift between the two shows up.
"""

from retriever import query


def search(index, idf, docs, header, text, k=6):
    """Top ``k`` result dicts for ``text``.  ``index`` maps term ->
    [(doc, weight)], ``idf`` term -> IDF, ``docs`` doc -> (id, name, path,
    description, vis) and ``header`` carries the analyzer params.  The
    scoring loop is the format under test; every rule around it (top-k,
    the decision) is the query and decide modules' own."""
    from retriever import decide
    weights = {}  # a pasted block's terms count less (query.PASTED_WEIGHT), as in query.parse
    terms, (words, pasted, prose, lang, out, _) = query._terms({"header": header}, query.clean_query(text), weights)
    acc = {}
    get = acc.get
    found = {}
    for t in terms:
        plist = index.get(t)
        if plist is None:
            continue
        # decide.confidence reads idx["idf"][key] for each (key, docs): the
        # term itself is the key here.
        found[t] = (t, [d for d, _ in plist])
        tw = weights.get(t, 1.0)
        for d, w in plist:
            acc[d] = get(d, 0.0) + w * tw
    cands = []
    for n, s in query.top(acc, k):
        if s <= 0.0:
            break
        rid, name, path, desc, vis = docs[n]
        cands.append({"n": n, "score": s, "result": {"id": rid, "name": name, "path": path, "score": s,
                                                     "description": desc}})
    n_scored = query.n_scored(terms, found) + out  # a foreign message's left-out words stay uncovered
    # ``prose``: the decision injects a skill the message names (among
    # the candidates here: query.named reads the packed index).
    q = {"found": found, "n_scored": n_scored, "words": words, "pasted": pasted, "prose": prose,
         "known": len(found) / n_scored if n_scored else 0.0, "lang": lang}
    return decide.choose({"idf": idf, "header": header}, q, cands, k)


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
