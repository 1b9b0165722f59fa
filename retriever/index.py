"""Build BM25 postings from skill records: plain data in, plain data out.

Scoring is BM25F (Robertson, Zaragoza & Taylor 2004): a term's frequency in
each field is length-normalised per field and weighted, the fields are
summed, and only then saturated with k1.  With one field of weight 1 this is
exactly Okapi BM25.  IDF is Lucene's always-positive form.  The final
per-(term, skill) weight is computed here, at build time, so a query only
adds up precomputed numbers.

A weight is ``idf * saturation(tf')``: the saturated frequency depends on
the skill only, so the build computes it once per group of a skill's terms
with the same per-field counts.
"""

import math
from operator import mul, neg

from retriever.analyze import analyze, count_terms
from retriever.fields import FIELDS, field_texts

# Field name -> (weight, b).  "seed" reproduces the design we started from:
# one text of "name: description" plus triggers and tags.
PROFILES = {
    "seed": {
        "k1": 1.5,
        "analyzer": {"stopwords": False, "stem": "none"},
        "fields": {"seed": (1.0, 0.75)},
    },
    "default": {
        # Chosen with eval/tune.py on the external trigger set; see README
        # "How it works" for what each lever was worth.
        "k1": 1.5,
        "analyzer": {"stopwords": 2, "stem": "light"},
        "fields": {
            "name": (4.0, 0.5),
            "description": (2.0, 0.3),
            "triggers": (2.0, 0.75),
            "tags": (1.5, 0.5),
            "category": (1.0, 0.5),
            "usage": (1.0, 0.75),
            "body": (0.15, 0.75),
        },
    },
}


def field_terms(skill, profile):
    """``{field: [terms]}`` for one skill, analysed as the profile says."""
    opts = profile["analyzer"]
    return {f: analyze(t, opts) for f, t in field_texts(skill, profile).items()}


def field_order(profile):
    """The profile's fields in the order a term's contributions are summed."""
    return tuple(f for f in FIELDS if f in profile["fields"])


def doc_terms(skill, profile):
    """What the index needs of one skill, compact: ``(lengths, groups)``.

    ``lengths`` is the term count of each field (``field_order``);
    ``groups`` a list of ``(counts, terms)``: the skill's distinct terms
    grouped by their per-field counts.  Terms of one group get the same
    weight in this skill, so the weights are computed per group, and a
    skill holds a few dozen groups for a few hundred terms.
    """
    opts = profile["analyzer"]
    texts = field_texts(skill, profile)
    order = field_order(profile)
    width = len(order)
    per_field = [count_terms(texts.get(f, ""), opts) for f in order]
    lengths = tuple(n for _, n in per_field)
    if not per_field:
        return lengths, []
    # Most terms occur in one field only, nearly all of them in the largest
    # (the body): those go straight to a group; only terms seen in two or
    # more fields need a per-term count vector.
    big = max(range(width), key=lambda i: len(per_field[i][0]))
    vecs = {}
    for i, (counts, _) in enumerate(per_field):
        if i == big:
            continue
        for t, c in counts.items():
            v = vecs.get(t)
            if v is None:
                v = vecs[t] = [0] * width
            v[i] = c
    groups = {}
    single = {}
    for t, c in per_field[big][0].items():
        v = vecs.get(t)
        if v is not None:
            v[big] = c
            continue
        g = single.get(c)
        if g is None:
            single[c] = [t]
        else:
            g.append(t)
    for c, ts in single.items():
        v = [0] * width
        v[big] = c
        groups[tuple(v)] = ts
    for t, v in vecs.items():
        v = tuple(v)
        g = groups.get(v)
        if g is None:
            groups[v] = [t]
        else:
            g.append(t)
    return lengths, [(v, tuple(ts)) for v, ts in groups.items()]


def idf(n_docs, df):
    """Lucene's IDF: ``log(1 + (N - df + 0.5) / (df + 0.5))``, always > 0."""
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


def field_norm(w, b, length, avglen):
    """What one occurrence of a term in a field of ``length`` terms adds to
    the combined term frequency: the field weight ``w``, length-normalised
    by ``b`` against the field's average length."""
    return w / (1.0 - b + b * length / avglen)


def saturation(tfp, k1):
    """The saturated term frequency: what a weight is ``idf`` times."""
    return tfp * (k1 + 1.0) / (tfp + k1)


def saturate(idf_value, tfp, k1):
    """The BM25F weight of a term with combined frequency ``tfp``."""
    return idf_value * saturation(tfp, k1)


def build(skills, profile):
    """Compute the BM25F index of ``skills`` (records) under ``profile``.

    Returns what ``build_terms`` returns, plus ``postings``: per term, a
    list of ``(doc, weight)``, highest weight first (for in-memory use).
    """
    vocab = []
    ids = term_ids(vocab)
    docs = [encode(doc_terms(s, profile), ids) for s in skills]
    return build_terms(docs, vocab, profile, keep_postings=True)


def term_ids(vocab):
    """A dict ``term -> number`` that numbers unseen terms as it meets them,
    appending them to the list ``vocab``."""
    class _Ids(dict):
        def __missing__(self, t):
            i = self[t] = len(vocab)
            vocab.append(t)
            return i

    ids = _Ids()
    ids.update((t, i) for i, t in enumerate(vocab))
    return ids


def encode(analysis, ids):
    """A ``doc_terms`` result with each group's terms (a sequence, or one
    string of newline-separated terms) as the native-order uint32 bytes of
    their numbers in ``ids`` (see ``term_ids``): compact to keep, and read
    back in C."""
    from array import array
    lengths, groups = analysis
    return lengths, [(v, array("I", map(ids.__getitem__, ts.split("\n") if isinstance(ts, str) else ts))
                      .tobytes()) for v, ts in groups]


def build_terms(docs, vocab, profile, progress=None, keep_postings=False):
    """Compute the BM25F index from ``encode``d ``doc_terms`` results, in
    skill order; ``vocab[i]`` is term number ``i`` (it may hold terms no
    skill uses any more).

    Only this pass depends on the whole library (document frequencies,
    average field lengths, hence every weight); the per-skill analysis
    before it is what a rebuild reuses.  Returns a dict: ``terms`` (sorted
    by UTF-8 bytes), ``idf`` (per term), ``n_docs``, ``avglen`` (per field)
    and the postings as arrays: ``post_off`` (each term's slice),
    ``post_doc`` (skill numbers) and ``post_w`` (float32 weights), each
    term's postings heaviest first, ties by skill number.
    ``progress(done)`` is called now and then with the skills done.
    """
    from array import array
    from collections import deque
    from itertools import accumulate, chain, compress, repeat

    consume = deque
    fields = profile["fields"]
    k1 = profile["k1"]
    order = field_order(profile)
    n = len(docs)
    totals = [sum(col) for col in zip(*[d[0] for d in docs])] or [0] * len(order)
    total_len = dict.fromkeys(fields, 0)
    total_len.update(zip(order, totals))
    avglen = {f: (total_len[f] / n if n else 0.0) or 1.0 for f in fields}
    wb = [(fields[f][0], fields[f][1], avglen[f]) for f in order]

    # One entry per (skill, group): its saturated tf, negated so that
    # ascending order is heaviest first.
    gneg = []
    gdoc = []
    gterms = []
    nonzero = {}  # count vector -> its (field, count) pairs with count > 0
    for doc, (lengths, groups) in enumerate(docs):
        norms = [field_norm(w, b, length, avg) for (w, b, avg), length in zip(wb, lengths)]
        for counts, terms in groups:
            nz = nonzero.get(counts)
            if nz is None:  # a few thousand distinct count vectors in all
                nz = nonzero[counts] = tuple((i, c) for i, c in enumerate(counts) if c)
            tfp = 0.0
            for i, c in nz:
                tfp = tfp + c * norms[i]
            gneg.append(-saturation(tfp, k1))
            gdoc.append(doc)
            gterms.append(terms)
        if progress is not None and not doc & 1023:
            progress(doc)
    if progress is not None:
        progress(n)

    # Heaviest group first; the sort is stable, so equal weights keep skill
    # order (a term is in one group per skill).  Dealing the groups' terms
    # out in this order leaves every term's postings in index order: no
    # per-term sort, and no object per posting, two array slots instead.
    # (Per-term sorts of shared (weight, skill) tuples, then reading them
    # back, were 3/4 of a 100k rebuild: every access a cache miss.)
    order = sorted(range(len(gneg)), key=gneg.__getitem__)
    pdocs = [array("I") for _ in repeat(None, len(vocab))]
    pnegs = [array("d") for _ in repeat(None, len(vocab))]
    get_docs = pdocs.__getitem__
    get_negs = pnegs.__getitem__
    push = array.append
    for g in order:
        ids = array("I", gterms[g])
        consume(map(push, map(get_docs, ids), repeat(gdoc[g])), 0)
        consume(map(push, map(get_negs, ids), repeat(gneg[g])), 0)
    del order, gneg, gdoc, gterms

    # The terms in use, in code-point order (which is UTF-8 byte order).
    used = sorted(compress(range(len(vocab)), pdocs), key=vocab.__getitem__)
    terms = list(map(vocab.__getitem__, used))
    dfs = [len(pdocs[i]) for i in used]
    by_df = {}
    idfs = [by_df.get(df) or by_df.setdefault(df, idf(n, df)) for df in dfs]
    post_off = array("I", accumulate(dfs, initial=0))
    post_doc = array("I")
    for i in used:
        post_doc += pdocs[i]
    # weight = idf * saturated tf; (-idf) * (-sat) is exactly that.
    # (operator.mul is a plain builtin: twice as fast to call as float.__mul__.)
    negs = list(map(get_negs, used))
    post_w = array("f", map(mul, chain.from_iterable(map(repeat, map(neg, idfs), dfs)), chain.from_iterable(negs)))
    out = {
        "terms": terms,
        "idf": idfs,
        "n_docs": n,
        "avglen": avglen,
        "post_off": post_off,
        "post_doc": post_doc,
        "post_w": post_w,
    }
    if keep_postings:
        out["postings"] = [list(zip(pdocs[i], map(mul, repeat(-w), ns))) for i, w, ns in zip(used, idfs, negs)]
    return out
