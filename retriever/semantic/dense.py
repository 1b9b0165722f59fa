"""Exact cosine search over the skill vectors, pruned with a bound.

The answer needs two things from the vectors: the encoder's own top
``n`` skills, over every skill, and the cosines of the candidates BM25
chose.  A plain product reads every vector (40 MB of float32 at 20,000
skills, about 4 ms, memory bound), and with the encoder's 13.5 MB of
weights it overflows the machine's cache on every question.

So a large library's vectors are kept rotated onto their principal axes
(a rotation keeps every dot product) and split in two: the first
``HEAD_DIMS`` coordinates, which carry most of each vector, and the rest.
A skill's cosine is at most its head's dot product plus the lengths of
the two rests multiplied (Cauchy-Schwarz).  ``top`` reads the heads,
computes whole cosines best bound first, and stops when no bound can
beat the ``n``-th: exactly the top ``n`` of the whole product.  At
20,000 skills, encoding a question and finding its top takes the helper
6.8 ms instead of 8.5 (docs/semantic-tier.md).  A question
unlike every skill (small talk) prunes little; it reads the rests whole,
one pass over the vectors as before.

Plain data: ``prepare`` returns a tuple; numpy only.
"""

SPLIT_MIN = 4096  # below this many skills one plain product is cheaper
HEAD_DIMS = 192  # at 20,000 skills: 128 prunes too little, 256 reads too much
_FIRST = 4  # whole cosines computed first: this many times n, best bound first
_SLACK = 1e-4  # float32 rounding in the bound (cosines are at most 1)


def prepare(mat):
    """The search structure for ``mat``, float32 unit rows: ``(mat,)``
    for a small library, else ``(rotation, heads, rests, rest lengths)``."""
    import numpy as np
    mat = np.ascontiguousarray(mat, dtype=np.float32)
    if len(mat) < SPLIT_MIN or mat.shape[1] <= HEAD_DIMS:
        return (mat,)
    # The axes of the uncentred second moment, largest first: they keep
    # the most of the dot products, which is what the bound needs.
    _, axes = np.linalg.eigh((mat.T @ mat).astype(np.float64))
    rot = np.ascontiguousarray(axes[:, ::-1], dtype=np.float32)
    turned = mat @ rot
    heads = np.ascontiguousarray(turned[:, :HEAD_DIMS])
    rests = np.ascontiguousarray(turned[:, HEAD_DIMS:])
    del turned
    lengths = np.sqrt(np.einsum("ij,ij->i", rests, rests))
    return rot, heads, rests, lengths


def count(vecs):
    """Number of skills in ``vecs``."""
    return len(vecs[0]) if len(vecs) == 1 else len(vecs[1])


def turn(vecs, qv):
    """The question's vector ``qv`` (unit float32) in the basis ``vecs``
    are kept in (rotated for a split library): what ``top`` and ``at``
    take, computed once per question."""
    return qv if len(vecs) == 1 else qv @ vecs[0]


def top(vecs, q, n):
    """The ``n`` skill numbers with the highest cosine with the question
    (``q``, from ``turn``), as the whole product ranks them; numpy ints."""
    import numpy as np
    if len(vecs) == 1:
        allc = vecs[0] @ q
        return np.argpartition(-allc, n)[:n] if len(allc) > n else np.arange(len(allc))
    _, heads, rests, lengths = vecs
    if len(heads) <= n:
        return np.arange(len(heads))
    q1, q2 = q[:HEAD_DIMS], q[HEAD_DIMS:]
    part = heads @ q1
    bound = part + (lengths * float(np.sqrt(q2 @ q2)) + _SLACK)
    first = min(len(heads) - 1, _FIRST * n)
    ids = np.argpartition(-bound, first)[:first]
    whole = part[ids] + rests[ids] @ q2
    nth = np.partition(whole, -n)[-n]
    if bound[ids].min() > nth:
        # A skill outside the first batch may still beat the n-th: every
        # skill whose bound does, whole.
        ids = np.flatnonzero(bound > nth)
        if len(ids) * 4 > len(heads):  # little pruned: one pass over the rests
            whole = part + rests @ q2
            return np.argpartition(-whole, n)[:n]
        whole = part[ids] + rests[ids] @ q2
    return ids[np.argpartition(-whole, n - 1)[:n]]


def at(vecs, q, ids):
    """Cosines of the question (``q``, from ``turn``) with the skills
    numbered ``ids``."""
    if len(vecs) == 1:
        return vecs[0][ids] @ q
    _, heads, rests, _ = vecs
    return heads[ids] @ q[:HEAD_DIMS] + rests[ids] @ q[HEAD_DIMS:]
