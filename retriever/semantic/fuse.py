"""Fusing BM25 with the sentence encoder's cosines (what is then injected
is ``retriever.decide``'s).  Pure Python: the per-prompt client fuses
with the cosines the helper sends back, without numpy.

Linear fusion (issue 16), with the weights chosen on the eval (the
external mixed rows, eval/cjk_queries.jsonl and
eval/multilingual_queries.jsonl): over BM25's top ``BM25_POOL`` plus the
encoder's top ``DENSE_POOL``, each candidate scores
``a * bm25 / bm25_max + (1 - a) * cosine``.  ``a``, BM25's share, follows
how much BM25 has to go on: ``ALPHA_FOREIGN`` for a query mostly in a
non-Latin script (English skills share no words with it), or in a
language the library is not written in (``query.foreign``); otherwise it
rises with the share of the query the best BM25 match covers, from
``ALPHA_LOW`` (no word matched: Spanish, German, French ...) to ``ALPHA``
at ``FULL_COVER`` and above.  A ramp rather than a step at half coverage:
a query covered 0.49 and one covered 0.51 are equally well understood by
BM25, and the step flipped their ranking.  Against the step: mixed R@5
0.870 -> 0.877, MRR@10 0.742 -> 0.753; multilingual R@5 0.896 -> 0.917;
CJK unchanged; own R@5 unchanged, own MRR@10 0.888 -> 0.874 (small
collections prefer less BM25 weight; docs/semantic-tier.md).  Raw cosines
beat cosines rescaled over the candidates on every query set (the rescale
turns a weak best match into a full-strength one).
"""

BM25_POOL = 50
DENSE_POOL = 10
ALPHA = 0.6          # BM25's share for a query it covers well (FULL_COVER or more)
ALPHA_LOW = 0.15     # ... for one it does not cover at all (the ramp's foot)
FULL_COVER = 0.8
ALPHA_FOREIGN = 0.2  # ... for a query mostly in a non-Latin script


def non_latin_share(text):
    """Share of the letters of ``text`` outside the Latin script."""
    letters = other = 0
    for ch in text:
        if ch.isalpha():
            letters += 1
            if ord(ch) > 0x24F:
                other += 1
    return other / letters if letters else 0.0


def alpha_for(text, coverage, foreign="", native=False):
    """BM25's weight for this query, given the share of it the best BM25
    match covers (see the module docstring); ``foreign``, the language of
    a message the library is not written in (``query.foreign``), gives
    ALPHA_FOREIGN as a non-Latin script does: the words BM25 matches in
    such a message are a few borrowed terms, not the request.  Unless
    ``native``: the best match holds the message's words as its own (the
    user's learnt words for it, or its name and description written in
    the message's script; ``semantic.native``), and its coverage counts
    as in the library's language, never under ALPHA_FOREIGN."""
    ramp = ALPHA_LOW + (ALPHA - ALPHA_LOW) * min(1.0, max(0.0, coverage) / FULL_COVER)
    if foreign or non_latin_share(text) > 0.3:
        return max(ALPHA_FOREIGN, ramp) if native else ALPHA_FOREIGN
    return ramp


def fuse(acc, bm_top, cos, alpha):
    """Fused ``[(skill number, fused score, cosine)]``, best first.

    ``acc`` maps skill numbers to BM25 scores, ``bm_top`` is BM25's pool
    (``[(skill, score)]``, best first), ``cos`` maps skill numbers to
    cosines (the pool's and the encoder's own top).  Ties break by skill
    number, as in BM25."""
    cand = set(d for d, _ in bm_top)
    cand.update(cos)
    bmax = bm_top[0][1] if bm_top and bm_top[0][1] > 0 else 1.0
    out = []
    for d in cand:
        c = cos.get(d, 0.0)
        out.append((d, alpha * acc.get(d, 0.0) / bmax + (1.0 - alpha) * c, c))
    out.sort(key=lambda x: (-x[1], x[0]))
    return out
