"""Score a query against a loaded index and pick the top skills.

Hot path: imports only the analyzer and the store.  Scores are sums of the
precomputed per-(term, skill) weights over the query's unique terms.
"""

from retriever.analyze import analyze
from retriever.store import doc, find_term

# A pasted log or a whole file should not drown the request around it: keep
# the head and the tail, where people put what they want.
_HEAD = 6000
_TAIL = 2000
MAX_QUERY_TERMS = 64


def clean_query(text):
    """Shorten very long input and drop URLs, which are noise to BM25."""
    if len(text) > _HEAD + _TAIL:
        text = text[:_HEAD] + "\n" + text[-_TAIL:]
    if "://" in text:
        text = " ".join(w for w in text.split() if "://" not in w)
    return text


def query_terms(idx, text):
    """The unique analysed terms of ``text``, in order of first appearance."""
    opts = idx["header"]["params"]["analyzer"]
    seen = {}
    for t in analyze(clean_query(text), opts):
        if t not in seen:
            seen[t] = None
            if len(seen) >= MAX_QUERY_TERMS:
                break
    return list(seen)


def score(idx, terms):
    """``({skill number: score}, {term: term number})`` for the given terms."""
    post_off = idx["post_off"]
    post_doc = idx["post_doc"]
    post_w = idx["post_w"]
    acc = {}
    found = {}
    get = acc.get
    for t in terms:
        i = find_term(idx, t)
        if i < 0:
            continue
        found[t] = i
        a = post_off[i]
        b = post_off[i + 1]
        for d, w in zip(post_doc[a:b].tolist(), post_w[a:b].tolist()):
            acc[d] = get(d, 0.0) + w
    return acc, found


def top(acc, k):
    """The ``k`` best ``(skill number, score)`` pairs: score descending,
    ties by skill number (skills are numbered in id order)."""
    if k <= 0 or not acc:
        return []
    if len(acc) > 4 * k + 256:
        import heapq
        return heapq.nsmallest(k, acc.items(), key=lambda x: (-x[1], x[0]))
    return sorted(acc.items(), key=lambda x: (-x[1], x[0]))[:k]


def search(idx, text, k):
    """Rank skills for ``text``.  Returns a list of result dicts (id, name,
    path, score, description, vis), best first; scores are > 0."""
    terms = query_terms(idx, text)
    if not terms:
        return []
    acc, _ = score(idx, terms)
    out = []
    for n, s in top(acc, k):
        if s <= 0.0:
            break
        rid, name, path, desc, vis = doc(idx, n)
        out.append({"id": rid, "name": name, "path": path, "score": round(s, 6),
                    "description": desc, "vis": vis})
    return out
