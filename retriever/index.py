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
        # Chosen with eval/tune.py on the external trigger set; see
        # docs/architecture.md, "What we tried", for what each lever was worth.
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


def doc_terms(skill, profile, table=None):
    """What the index needs of one skill, compact: ``(lengths, groups)``.

    ``lengths`` is the term count of each field (``field_order``);
    ``groups`` a list of ``(counts, terms)``: the skill's distinct terms
    grouped by their per-field counts.  Terms of one group get the same
    weight in this skill, so the weights are computed per group, and a
    skill holds a few dozen groups for a few hundred terms.  With
    ``table`` (``analyze.numbered_terms``) the terms are their numbers.
    """
    opts = profile["analyzer"]
    texts = field_texts(skill, profile)
    order = field_order(profile)
    width = len(order)
    per_field = [count_terms(texts.get(f, ""), opts, table) for f in order]
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


def idfs(n_docs, dfs):
    """``idf(n_docs, df)`` for each df of ``dfs``, each distinct df computed
    once (a library has a few thousand distinct dfs for ~70k terms)."""
    by_df = {}
    return [by_df.get(df) or by_df.setdefault(df, idf(n_docs, df)) for df in dfs]


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
    list of ``(doc, weight)`` in skill order (for in-memory use).
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

    return _Ids(zip(vocab, range(len(vocab))))  # C-level: 70k terms in a few ms


def pack(analysis):
    """A ``doc_terms`` result whose terms are numbers (the analysing
    process's own: see ``analyze.numbered_terms``) as a build's analysis
    hands it on: ``(lengths, (count vectors, group sizes, term numbers))``,
    the numbers as uint32 bytes.  A pool worker's strings then cross the
    pipe once per worker, not once per skill, and the build looks each
    string up once per process, not once per posting (``renumber``)."""
    from array import array
    from itertools import chain
    lengths, groups = analysis
    return lengths, ([v for v, _ in groups], [len(ts) for _, ts in groups],
                     array("I", chain.from_iterable(ts for _, ts in groups)).tobytes())


def renumber(lengths, vecs, sizes, numbers, numbering):
    """A ``pack`` result in the form ``encode`` gives: its term
    numbers are places in ``numbering``, the list of the build's number for
    each term of the process that analysed it (in that process's order)."""
    from array import array
    local = array("I")
    local.frombytes(numbers)
    return lengths, (tuple(zip(vecs, sizes)), array("I", map(numbering.__getitem__, local)).tobytes())


def encode(analysis, ids):
    """A ``doc_terms`` result numbered in ``ids`` (see ``term_ids``):
    ``(lengths, (pairs, data))``, ``pairs`` a tuple of ``(counts, number
    of terms)`` per group and ``data`` the native-order uint32 bytes of
    every group's term numbers, group after group.  One bytes object a
    skill, not one a group: a group is mostly a single term, and its own
    objects cost ten times its data (at 100k skills, about 300 MB held
    through the build and written to the reuse store)."""
    from array import array
    from itertools import chain
    lengths, groups = analysis
    return lengths, (tuple((v, len(ts)) for v, ts in groups),
                     array("I", map(ids.__getitem__, chain.from_iterable(ts for _, ts in groups))).tobytes())


def _avglen(docs, profile):
    """Per field: the average length (1.0 for an empty or unused field),
    on a grid of steps of 2 ** (1/512), 0.14 %.

    Why a grid: every weight depends on the average lengths, so with exact
    averages any edit changes every weight of the library.  On the grid,
    one edited skill moves a library's averages by millionths and almost
    never off their step; a rebuild then keeps every weight of the terms
    the edit did not touch (``update_terms``).  The grid moves the length
    normalisation by at most 0.07 %, far below what separates two skills'
    scores (``make eval`` is unchanged by it)."""
    from math import log2
    fields = profile["fields"]
    order = field_order(profile)
    n = len(docs)
    totals = [sum(col) for col in zip(*[d[0] for d in docs])] or [0] * len(order)
    total_len = dict.fromkeys(fields, 0)
    total_len.update(zip(order, totals))
    exact = {f: (total_len[f] / n if n else 0.0) or 1.0 for f in fields}
    return {f: 2.0 ** (round(log2(v) * 512) / 512) for f, v in exact.items()}


def _group_negs(docs, profile, avglen, progress=None):
    """Each (skill, group)'s saturated tf, negated (the weight is then
    ``(-idf) * neg``), in skill and group order: the one loop over every
    group a build runs in Python (a few hundred thousand at 20k)."""
    fields = profile["fields"]
    k1 = profile["k1"]
    k1p1 = k1 + 1.0  # saturation(): tfp * (k1 + 1.0) / (tfp + k1), same operations
    wb = [(fields[f][0], fields[f][1], avglen[f]) for f in field_order(profile)]
    nonzero = {}  # count vector -> its (field, count) pairs with count > 0 (a few thousand in all)
    gneg = []
    append = gneg.append
    for doc, (lengths, groups) in enumerate(docs):
        norms = [field_norm(w, b, length, avg) for (w, b, avg), length in zip(wb, lengths)]
        for counts, _ in groups[0]:
            nz = nonzero.get(counts)
            if nz is None:
                nz = nonzero[counts] = tuple((i, c) for i, c in enumerate(counts) if c)
            tfp = 0.0
            for i, c in nz:
                tfp = tfp + c * norms[i]
            append(-(tfp * k1p1 / (tfp + k1)))
        if progress is not None and not doc & 1023:
            progress(doc)
    if progress is not None:
        progress(len(docs))
    return gneg


def _negs(docs, profile, avglen, progress=None, fork=False):
    """``_group_negs`` as one array "d"; with ``fork``, the second half of
    the skills in a forked child at the same time (the pass is a Python
    loop over every group: 2.9 million, 2 s, at 100k skills)."""
    from array import array
    if not fork or len(docs) < 2:
        return array("d", _group_negs(docs, profile, avglen, progress))
    n = len(docs)
    # The parent's half stands for both in the progress shown.
    tick = None if progress is None else (lambda done: progress(min(n, 2 * done)))

    def work(lo, hi):
        return (array("d", _group_negs(docs[lo:hi], profile, avglen, tick if lo == 0 else None)),)
    (first,), (second,) = _in_two(work, n, "d")
    return first + second


def build_terms(docs, vocab, profile, progress=None, keep_postings=False, fork=False):
    """Compute the BM25F index from ``encode``d ``doc_terms`` results, in
    skill order; ``vocab[i]`` is term number ``i`` (it may hold terms no
    skill uses any more).

    Only this pass depends on the whole library (document frequencies,
    average field lengths, hence every weight); the per-skill analysis
    before it is what a rebuild reuses.  Returns a dict: ``terms`` (sorted
    by UTF-8 bytes), ``idf`` (per term), ``n_docs``, ``avglen`` (per field)
    and the postings as arrays: ``post_off`` (each term's slice),
    ``post_doc`` (skill numbers) and ``post_w`` (float32 weights), each
    term's postings in skill-number order; and ``layout``,
    what ``update_terms`` needs to redo this after a few skills changed.
    ``progress(done)`` is called now and then with the skills done.
    ``fork``: saturate the groups and deal out the postings in two
    processes (the caller knows whether forking is safe here); the result
    is the same.
    """
    from array import array
    from collections import deque
    from itertools import accumulate, chain, compress, repeat
    from operator import itemgetter, lshift, mul

    consume = deque
    avglen = _avglen(docs, profile)
    # Each group's saturated tf, negated, by slot (see below).
    sneg = _negs(docs, profile, avglen, progress, fork)
    gdoc = []
    gsize = array("I")  # terms in each group
    gbase = array("I", [0])
    datas = []
    for doc, (_, (pairs, data)) in enumerate(docs):
        n = len(gsize)
        gsize.extend(map(itemgetter(1), pairs))
        if 4 * sum(gsize[n:]) != len(data):
            raise ValueError("skill %d: its groups do not add up to its terms" % doc)
        datas.append(data)
        gdoc += repeat(doc, len(pairs))
        gbase.append(len(gdoc))
    # Where each group's terms start, in bytes, in every skill's terms joined.
    gstart = array("Q", accumulate(map(lshift, gsize, repeat(2)), initial=0))
    joined = memoryview(b"".join(datas))
    del datas

    # Each group's "slot" is its place in skill order, and the groups'
    # terms are dealt out in that order: every term's postings come out in
    # skill-number order, with no per-term sort.  (The order within a term
    # changes no score: a query adds up all of a term's postings.  Skill
    # order, unlike the heaviest-first order it replaced, does not depend on
    # the library's average lengths, so a rebuild after an edit never has
    # to reorder anyone's postings, and a cold build sorts nothing.)
    # Floats in arrays, not lists: every pass below reads them from
    # contiguous memory (three times faster at 20k skills).
    nslots = len(sneg)
    sdoc = array("I", gdoc)
    gslot = array("I", range(nslots))  # slot of each group, in skill order
    del gdoc
    n_docs, n_vocab = len(docs), len(vocab)
    # Term numbers in code-point order (which is UTF-8 byte order): the
    # index's order.  A term's postings are dealt into its own array and
    # the arrays joined in this order, so they come out in index order.
    order = sorted(range(n_vocab), key=vocab.__getitem__)

    def part(lo, hi):
        # The postings of the terms order[lo:hi]: (postings per term,
        # slots, skill numbers, weights), in index order.  Every slot's
        # terms are read; those of other terms go to one scratch array,
        # emptied as it goes.  A run of slots is a run of groups, whose
        # term numbers lie side by side in ``joined``: one slice, dealt
        # out in one C-level pass, each with its group's slot.
        mine = order[lo:hi]
        scratch = array("I")
        pslots = [scratch] * n_vocab
        consume(map(pslots.__setitem__, mine, map(array, repeat("I", len(mine)))), 0)
        for a in range(0, nslots, 1 << 15):
            b = min(nslots, a + (1 << 15))
            ids = array("I")
            ids.frombytes(joined[gstart[a]:gstart[b]])
            consume(map(array.append, map(pslots.__getitem__, ids),
                        chain.from_iterable(map(repeat, range(a, b), gsize[a:b]))), 0)
            del scratch[:]
        arrays = list(map(pslots.__getitem__, mine))
        del pslots
        counts = array("I", map(len, arrays))
        slots = array("I", b"".join(arrays))
        del arrays
        negidf = list(map(neg, idfs(n_docs, counts)))  # a term without postings repeats none
        # weight = idf * saturated tf; (-idf) * (-sat) is exactly that (and
        # exactly what _finish computes).
        return (counts, slots, array("I", map(sdoc.__getitem__, slots)),
                array("f", map(mul, chain.from_iterable(map(repeat, negidf, counts)), map(sneg.__getitem__, slots))))

    if fork and nslots > 1 and n_vocab > 1:
        # Two processes, each all the slots but half the postings kept (by
        # a sample of the term numbers: half the terms can hold far more
        # or fewer than half the postings); joined, the two halves are the
        # index's order as they stand, with no merge.
        step = max(1, nslots // 64)
        sample = array("I")
        for a in range(0, nslots, step):  # a sixteenth of the postings, in 64 runs
            sample.frombytes(joined[gstart[a]:gstart[min(nslots, a + step // 16 + 1)]])
        rank = [0] * n_vocab
        consume(map(rank.__setitem__, order, range(n_vocab)), 0)
        ranks = sorted(map(rank.__getitem__, sample))
        del rank, sample
        split = min(n_vocab - 1, max(1, ranks[len(ranks) // 2] if ranks else n_vocab // 2))
        first, second = _in_two(part, n_vocab, "IIIf", split)
        for k in range(4):
            # In place, each second half freed at once: the postings are
            # held twice at most, never three times (100k skills: 250 MB).
            first[k] += second[k]
            second[k] = None
        counts, post_slot, post_doc, post_w = first
        del first, second
    else:
        counts, post_slot, post_doc, post_w = part(0, n_vocab)
    del joined, gstart, gsize
    used = array("I", compress(order, counts))
    dfs = list(compress(counts, counts))
    del order, counts
    # The weights and each slot's saturated tf go in the layout too: a
    # rebuild that finds the same averages and skill count keeps them.
    layout = {"terms": used, "doc": post_doc, "slot": post_slot,
              "gslot": gslot, "gbase": gbase, "nslots": nslots,
              "gneg": sneg, "w": post_w, "avglen": avglen, "n_docs": n_docs}
    negs = array("d", map(sneg.__getitem__, post_slot)) if keep_postings else None
    return _finish(vocab, n_docs, avglen, dfs, negs, layout, keep_postings, post_w)


def _in_two(work, n, codes, half=None):
    """``[work(0, half), work(half, n)]`` (``half``: n // 2 unless
    given), the second made in a forked
    child at the same time as the first; ``work`` returns arrays of the
    types ``codes`` (one letter each).  A failed child's part is made
    here, so the result never depends on it."""
    import os
    half = n // 2 if half is None else half
    try:
        rd, wr = os.pipe()
    except OSError:
        return [list(work(0, half)), list(work(half, n))]
    try:
        pid = os.fork()
    except OSError:
        os.close(rd)
        os.close(wr)
        return [list(work(0, half)), list(work(half, n))]
    if pid == 0:  # the child: its part, then out without any cleanup of the parent's
        code = 1
        try:
            os.close(rd)
            with open(wr, "wb") as out:
                for a in work(half, n):
                    _send(out, a)
            code = 0
        finally:
            os._exit(code)
    os.close(wr)
    theirs = None
    try:
        with open(rd, "rb") as inp:
            mine = work(0, half)
            try:
                theirs = [_receive(inp, code) for code in codes]
            except (OSError, ValueError):
                theirs = None
    finally:
        _, status = os.waitpid(pid, 0)
    if theirs is None or status != 0:
        theirs = work(half, n)
    return [list(mine), list(theirs)]


def _send(f, a):
    """Write array ``a`` to the binary file ``f``, its byte length first."""
    view = memoryview(a).cast("B")
    f.write(len(view).to_bytes(8, "little"))
    f.write(view)


def _receive(f, code):
    """The array ``_send`` wrote to ``f``; ValueError when cut short."""
    from array import array
    n = int.from_bytes(f.read(8), "little")
    data = f.read(n)
    if len(data) != n:
        raise ValueError("cut short")
    a = array(code)
    a.frombytes(data)
    return a


def _finish(vocab, n, avglen, dfs, negs, layout, keep_postings=False, post_w=None):
    """The ``build_terms`` result from the term-major postings: ``layout``
    (``terms``: term numbers in index order, ``doc``, ``slot``, per
    posting), ``dfs`` per term and ``negs`` (array "d"), each posting's
    negated saturated tf, unless ``post_w``, the weights, are given and
    not ``keep_postings``."""
    from array import array
    from itertools import accumulate, chain, repeat

    term_idfs = idfs(n, dfs)
    post_off = array("I", accumulate(dfs, initial=0))
    layout["off"] = post_off
    # weight = idf * saturated tf; (-idf) * (-sat) is exactly that.
    # (operator.mul is a plain builtin: twice as fast to call as float.__mul__.)
    if post_w is None:
        post_w = array("f", map(mul, chain.from_iterable(map(repeat, map(neg, term_idfs), dfs)), negs))
    out = {
        "terms": list(map(vocab.__getitem__, layout["terms"])),
        "idf": term_idfs,
        "n_docs": n,
        "avglen": avglen,
        "post_off": post_off,
        "post_doc": layout["doc"],
        "post_w": post_w,
        "layout": layout,
    }
    if keep_postings:
        d = layout["doc"]
        out["postings"] = [list(zip(d[a:b], map(mul, repeat(-w), negs[a:b])))
                           for w, a, b in zip(term_idfs, post_off, post_off[1:])]
    return out


def update_terms(docs, vocab, profile, prev, old_of, removed, progress=None, fork=False):
    """What ``build_terms(docs, vocab, profile)`` returns, byte for byte,
    computed from the ``layout`` of an earlier build (``prev``) when only a
    few skills changed.

    ``old_of[j]`` is the earlier skill number of skill ``j`` when its
    analysis is unchanged, else -1 (added or edited); ``removed`` lists
    ``(earlier skill number, its encoded groups)`` of every earlier skill
    not kept; ``prev``'s "doc", "slot" and "w" are taken out of it.  The
    changed skills' postings are taken out and put in by bisection on skill
    numbers (a term's postings are in skill order, which no weight
    decides).  With the same skill count and gridded average lengths as
    ``prev``, only the touched terms' weights and checksums are made and
    the others copied; otherwise every weight is made again from its
    slot's saturated tf, in passes over arrays that run in C.  Raises ValueError (or
    IndexError, KeyError) when ``prev`` does not fit; the caller then
    builds afresh.  ``fork``: saturate the groups and make the weights in
    two processes (the caller knows whether forking is safe here); the
    result is the same.
    """
    from array import array
    from bisect import bisect_left, bisect_right
    from collections import deque
    from itertools import accumulate, chain, islice, repeat
    from operator import mul, sub

    def u32(buf):  # bytes, a buffer or an array
        a = array("I")
        a.frombytes(buf)
        return a

    terms0, off0, gslot0, gbase0 = map(u32, map(prev.__getitem__, ("terms", "off", "gslot", "gbase")))
    # The two posting-sized arrays are read in place, not copied, and
    # taken out of ``prev``: their memory (the reuse store's bytes) goes
    # as soon as the merge below has read them (with reuse.load's split
    # read, 20k skills' one-edit peak went from 401 to 361 MiB).
    doc0, slot0 = (memoryview(prev.pop(k)).cast("B").cast("I") for k in ("doc", "slot"))

    def as_bytes(part):  # a slice of those, or of an array, for frombytes
        return memoryview(part).cast("B")

    nslots = prev["nslots"]
    n_terms, n_post = len(terms0), len(doc0)
    if (len(off0) != n_terms + 1 or off0[0] != 0 or off0[-1] != n_post or len(slot0) != n_post
            or len(old_of) != len(docs) or not isinstance(nslots, int) or gbase0[-1] != len(gslot0)):
        raise ValueError("layout does not fit")
    avglen = _avglen(docs, profile)
    # Kept skills keep their slots; added ones take new slots past the old.
    gslot = array("I")
    gbase = array("I", [0])
    top = nslots
    for (_, (groups, _)), o in zip(docs, old_of):
        if o >= 0:
            a, b = gbase0[o], gbase0[o + 1]
            if b - a != len(groups):
                raise ValueError("skill %d has %d groups, not %d" % (o, len(groups), b - a))
            gslot += gslot0[a:b]
        else:
            gslot += array("I", range(top, top + len(groups)))
            top += len(groups)
        gbase.append(len(gslot))
    n_docs = len(docs)
    # The same averages and skill count as the last build: every kept
    # group's saturated tf is the stored one, and every term the changes
    # do not touch keeps its df, so its weights (copied below).
    w0 = prev.pop("w", None)
    keep = (w0 is not None and prev.get("avglen") == avglen and prev.get("n_docs") == n_docs
            and len(prev.get("gneg") or b"") == 8 * nslots and len(w0) == 4 * n_post)
    if keep:
        w0 = memoryview(w0).cast("B").cast("f")
        gneg = array("d")
        gneg.frombytes(prev["gneg"])
        gneg.frombytes(bytes(8 * (top - nslots)))
        new = [j for j, o in enumerate(old_of) if o < 0]
        fresh = _group_negs([docs[j] for j in new], profile, avglen)
        deque(map(gneg.__setitem__, chain.from_iterable(gslot[gbase[j]:gbase[j + 1]] for j in new), fresh), 0)
        if progress is not None:
            progress(n_docs)
    else:
        w0 = None
        negs = _negs(docs, profile, avglen, progress, fork)  # in skill and group order
        gneg = array("d", bytes(8 * top))  # by slot; see build_terms for why arrays
        deque(map(gneg.__setitem__, gslot, negs), 0)
        del negs

    # Skill numbers: kept skills keep their order, so renumbering never
    # reorders two of them.
    n_old = len(gbase0) - 1
    gone = {o for o, _ in removed}
    if len(docs) == n_old and all(o == j or (o < 0 and j in gone) for j, o in enumerate(old_of)):
        # Only edits, each at its own number: the numbers stand (the
        # edited skills' old postings are taken out below, by number).
        doc1 = doc0
    else:
        new_num = [0xFFFFFFFF] * n_old
        for j, o in enumerate(old_of):
            if o >= 0:
                new_num[o] = j
        doc1 = array("I", map(new_num.__getitem__, doc0))

    # Per touched term: the positions to take out, the postings to put in.
    rank = dict(zip(terms0, range(n_terms)))
    dels = {}
    for o, (_, data) in removed:
        for t in u32(data):
            r = rank[t]
            a = off0[r]
            p = bisect_left(doc0, o, a, off0[r + 1])
            if p == off0[r + 1] or doc0[p] != o:
                raise ValueError("skill %d is not among the postings of term %d" % (o, t))
            dels.setdefault(r, []).append(p)
    ins = {}
    for j, ((_, (groups, data)), o) in enumerate(zip(docs, old_of)):
        if o >= 0:
            continue
        b = gbase[j]
        tids = u32(data)
        p = 0
        for gi, (_, n) in enumerate(groups):
            item = (j, gslot[b + gi])
            for t in tids[p:p + n]:
                ins.setdefault(t, []).append(item)
            p += n
        if p != len(tids):
            raise ValueError("skill %d: its groups do not add up to its terms" % j)
    events = [(r, 1, "", r) for r in dels]
    strings = None
    for t in ins:
        r = rank.get(t)
        if r is not None:
            if r not in dels:
                events.append((r, 1, "", r))
            continue
        if strings is None:
            strings = list(map(vocab.__getitem__, terms0))
        s = vocab[t]
        events.append((bisect_left(strings, s), 0, s, t))
    events.sort()

    dfs0 = list(map(sub, islice(off0, 1, None), off0))
    terms1, dfs, doc2, slot2 = array("I"), [], array("I"), array("I")
    w2 = array("f")  # with ``keep``: the weights, kept or made per touched term
    # Kept weights and unchanged skill numbers: an untouched term's postings
    # are the very bytes they were, and so is their checksum (the index
    # writer computes only the touched terms', at ``redo``).
    crc0 = prev.get("crc")
    carry = keep and doc1 is doc0 and isinstance(crc0, (bytes, memoryview)) and len(crc0) == 4 * n_terms
    crc0 = u32(crc0) if carry else None
    crc2, redo = array("I"), []
    cur = 0
    for q, kind, _, x in events:
        if q > cur:
            a, b = off0[cur], off0[q]
            terms1 += terms0[cur:q]
            dfs += dfs0[cur:q]
            doc2.frombytes(as_bytes(doc1[a:b]))
            slot2.frombytes(as_bytes(slot0[a:b]))
            if keep:
                w2.frombytes(as_bytes(w0[a:b]))
            if carry:
                crc2 += crc0[cur:q]
            cur = q
        if kind:
            a, b = off0[x], off0[x + 1]
            sd, ss = doc1[a:b].tolist(), slot0[a:b].tolist()
            for p in sorted(dels.get(x, ()), reverse=True):
                del sd[p - a], ss[p - a]
            t = terms0[x]
            cur = x + 1
        else:
            sd, ss = [], []
            t = x
        for j, s in sorted(ins.get(t, ())):
            p = bisect_left(sd, j)
            sd.insert(p, j)
            ss.insert(p, s)
        if sd:
            terms1.append(t)
            dfs.append(len(sd))
            doc2 += array("I", sd)
            slot2 += array("I", ss)
            if keep:  # as the weighing below makes them: (-idf) * (-sat)
                w2 += array("f", map(mul, repeat(-idf(n_docs, len(sd)), len(ss)), map(gneg.__getitem__, ss)))
            if carry:
                redo.append(len(crc2))
                crc2.append(0)
    if cur < n_terms:
        a = off0[cur]
        terms1 += terms0[cur:]
        dfs += dfs0[cur:]
        doc2.frombytes(as_bytes(doc1[a:]))
        slot2.frombytes(as_bytes(slot0[a:]))
        if keep:
            w2.frombytes(as_bytes(w0[a:]))
        if carry:
            crc2 += crc0[cur:]
    del doc0, slot0, doc1, crc0

    n_post = len(slot2)
    if keep:
        if len(w2) != n_post:
            raise ValueError("kept weights do not fit")
        post_w = w2
    else:
        post_w = _reweigh(dfs, n_docs, gneg, slot2, fork)
    del w2
    layout = {"terms": terms1, "doc": doc2, "slot": slot2, "gslot": gslot, "gbase": gbase, "nslots": top,
              "gneg": gneg, "w": post_w, "avglen": avglen, "n_docs": n_docs}
    out = _finish(vocab, n_docs, avglen, dfs, None, layout, post_w=post_w)
    if carry:
        out["post_crc"] = (crc2, redo)  # see store.post_crcs
    return out


def _reweigh(dfs, n_docs, gneg, slot2, fork):
    """Every posting's weight, made again from its slot's saturated tf
    (``gneg``, by slot) and its term's df, a million postings at a time
    (no array of every posting's tf: 8 bytes a posting, 200 MB at 100k
    skills); with ``fork``, in two processes."""
    from array import array
    from bisect import bisect_right
    from itertools import accumulate, chain, islice, repeat
    from operator import mul
    negidf = list(map(neg, idfs(n_docs, dfs)))
    off = array("I", accumulate(dfs, initial=0))
    gn = gneg.__getitem__
    n_post = len(slot2)

    def weigh(lo, hi):
        # The weights of postings lo..hi-1, as one array.
        r = bisect_right(off, lo) - 1
        # Each posting's -idf: (-idf) * (-sat) is the weight, as build_terms makes it.
        each_negidf = chain(repeat(negidf[r], off[r + 1] - lo) if lo < n_post else (),
                            chain.from_iterable(map(repeat, islice(negidf, r + 1, None), islice(dfs, r + 1, None))))
        w = array("f")
        for c0 in range(lo, hi, 1 << 20):
            c1 = min(hi, c0 + (1 << 20))
            w.extend(map(mul, islice(each_negidf, c1 - c0), map(gn, slot2[c0:c1])))
        return (w,)

    if fork and n_post > 1:
        (w1,), (w2,) = _in_two(weigh, n_post, "f")
        if len(w1) + len(w2) != n_post:
            raise ValueError("weights cut short")
        return w1 + w2
    return weigh(0, n_post)[0]
