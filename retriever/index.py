"""Build BM25 postings from skill records: plain data in, plain data out.

Scoring is BM25F (Robertson, Zaragoza & Taylor 2004): a term's frequency in
each field is length-normalised per field and weighted, the fields are
summed, and only then saturated with k1.  With one field of weight 1 this is
exactly Okapi BM25.  IDF is Lucene's always-positive form.  The final
per-(term, skill) weight is computed here, at build time, so a query only
adds up precomputed numbers.
"""

import math
from collections import Counter
from operator import itemgetter

from retriever.analyze import analyze
from retriever.fields import field_texts

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


def idf(n_docs, df):
    """Lucene's IDF: ``log(1 + (N - df + 0.5) / (df + 0.5))``, always > 0."""
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


def field_norm(w, b, length, avglen):
    """What one occurrence of a term in a field of ``length`` terms adds to
    the combined term frequency: the field weight ``w``, length-normalised
    by ``b`` against the field's average length."""
    return w / (1.0 - b + b * length / avglen)


def saturate(idf_value, tfp, k1):
    """The BM25F weight of a term with combined frequency ``tfp``."""
    return idf_value * tfp * (k1 + 1.0) / (tfp + k1)


def build(skills, profile):
    """Compute the BM25F index of ``skills`` under ``profile``.

    Returns a dict: ``terms`` (sorted by UTF-8 bytes), ``postings`` (per term,
    a list of ``(doc, weight)`` with the highest weight first), ``idf`` (per
    term), ``n_docs`` and ``avglen`` (per field).
    """
    fields = profile["fields"]
    k1 = profile["k1"]
    n = len(skills)
    per_doc = []  # per doc: {field: (counts dict, length)}
    total_len = dict.fromkeys(fields, 0)
    df = Counter()
    for s in skills:
        ft = field_terms(s, profile)
        entry = {}
        seen = set()
        for f, terms in ft.items():
            counts = Counter(terms)
            entry[f] = (counts, len(terms))
            total_len[f] += len(terms)
            seen.update(counts)
        df.update(seen)
        per_doc.append(entry)
    avglen = {f: (total_len[f] / n if n else 0.0) or 1.0 for f in fields}

    idfs = {t: idf(n, d) for t, d in df.items()}
    postings = {t: [] for t in df}
    for doc, entry in enumerate(per_doc):
        acc = {}
        get = acc.get
        for f, (counts, length) in entry.items():
            w, b = fields[f]
            norm = field_norm(w, b, length, avglen[f])
            for t, c in counts.items():
                acc[t] = get(t, 0.0) + c * norm
        for t, tfp in acc.items():
            postings[t].append((doc, saturate(idfs[t], tfp, k1)))
    terms = sorted(df, key=lambda t: t.encode("utf-8"))
    plist = []
    by_weight = itemgetter(1)
    for t in terms:
        p = postings[t]
        # Appended in skill order, and the sort is stable: heaviest first,
        # ties by skill number.
        p.sort(key=by_weight, reverse=True)
        plist.append(p)
    return {
        "terms": terms,
        "postings": plist,
        "idf": [idfs[t] for t in terms],
        "n_docs": n,
        "avglen": avglen,
    }
