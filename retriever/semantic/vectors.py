"""Skill vectors stored beside the index: ``<index>.vec``.

Layout: ``b"SKRVEC\\0\\1" | u32 header length | marshal(header) | float16
matrix (n_docs x dim)``.  The header names the index it belongs to (its
signature and skill count: a stale file is detected and rebuilt) and one
short digest per row of the embedded text, so a rebuild re-embeds only
the skills whose text changed.  Written atomically like the index.
float16 halves the file and the helper's memory; cosines move by < 1e-3.
"""

import hashlib
import marshal

MAGIC = b"SKRVEC\x00\x01"
VERSION = 1


def vec_path(index_path):
    """Where the vectors of ``index_path`` live (``locate.side_path``)."""
    from retriever import locate
    return locate.side_path(index_path, ".vec")


def index_key(header):
    """What ties a vector file to one index build's skill set."""
    return [header.get("signature"), header.get("n_docs"), header.get("built_at")]


def _digest(text):
    return hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=8).digest()


def read(path):
    """``(header, float16 matrix)`` or None when missing or unreadable."""
    import numpy as np
    from retriever import locate
    fd = locate.open_own(path)  # only vectors this user made
    if fd < 0:
        return None
    try:
        with open(fd, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if len(data) < 12 or data[:8] != MAGIC:
        return None
    hlen = int.from_bytes(data[8:12], "little")
    try:
        header = marshal.loads(data[12:12 + hlen])
        n, dim = header["n"], header["dim"]
        mat = np.frombuffer(data, dtype="<f2", count=n * dim, offset=12 + hlen).reshape(n, dim)
    except (EOFError, ValueError, TypeError, KeyError):
        return None
    if header.get("version") != VERSION:
        return None
    return header, mat


def load_for(index_path, idx_header):
    """The matrix (float32, rows = skill numbers) if ``<index>.vec`` belongs
    to this index build, else None."""
    import numpy as np
    got = read(vec_path(index_path))
    if got is None or got[0].get("index") != index_key(idx_header):
        return None
    return np.asarray(got[1], dtype=np.float32)


def texts_of(idx, body_chars=None):
    """The embedded text of every skill of a loaded index, by skill number."""
    from retriever import store
    from retriever.semantic import embed
    bc = embed.BODY_CHARS if body_chars is None else body_chars
    out = []
    for n in range(idx["header"]["n_docs"]):
        _id, name, path, desc, _vis = store.doc(idx, n)
        out.append(embed.skill_text(name, desc, path, bc))
    return out


def missing(index_path, idx):
    """``(texts, digests, old rows by digest, numbers of the skills to
    embed)`` for the loaded index ``idx``: a skill whose text is in the
    current ``<index>.vec`` is not embedded again."""
    texts = texts_of(idx)
    keys = [_digest(t) for t in texts]
    old = read(vec_path(index_path))
    have = {}
    if old is not None:
        for k, row in zip(old[0].get("keys", ()), old[1]):
            have[k] = row
    return texts, keys, have, [i for i, k in enumerate(keys) if k not in have]


def ensure(index_path, idx, log=None, workers=1, fork=False, aside=False, todo=None):
    """Make ``<index>.vec`` match the loaded index ``idx``: rows whose text
    is unchanged are copied from the old file, the others embedded (over
    ``workers`` threads, or processes with ``fork``: ``embed.encode``; in
    a low-priority child with ``aside``: ``embed.encode_aside``).  ``todo``
    is ``missing``'s answer when the caller has it.  Returns ``(float32
    matrix, embedded count)``."""
    import numpy as np
    from retriever.semantic import embed
    hdr = idx["header"]
    texts, keys, have, todo = todo or missing(index_path, idx)
    dim = 512
    mat = np.zeros((len(texts), dim), dtype=np.float16)
    for i, k in enumerate(keys):
        if k in have:
            mat[i] = have[k]
    if todo:
        batch = [texts[i] for i in todo]
        vecs = embed.encode_aside(batch) if aside else embed.encode(batch, workers, fork)
        mat[todo] = vecs.astype(np.float16)
    write(vec_path(index_path), hdr, keys, mat)
    if log:
        log("vectors for %s: %d skills, %d embedded, %d reused"
            % (index_path, len(texts), len(todo), len(texts) - len(todo)))
    return mat.astype(np.float32), len(todo)


def write(path, idx_header, keys, mat):
    """Write the vector file atomically (temp file, fsync, rename).  Never
    over something that is not a vector file (``--index`` is the user's
    path, and so is the folder beside it)."""
    import os
    import stat
    from retriever.store import write_atomically
    try:
        st = os.lstat(path)
    except OSError:
        st = None
    if st is not None and not (stat.S_ISREG(st.st_mode) and _is_vec(path)):
        raise OSError("%s exists and is not a vector file; not replacing it" % path)
    header = marshal.dumps({"version": VERSION, "index": index_key(idx_header),
                            "n": int(mat.shape[0]), "dim": int(mat.shape[1]), "keys": list(keys)})
    write_atomically(path, [MAGIC, len(header).to_bytes(4, "little"), header, mat.astype("<f2").tobytes()])


def _is_vec(path):
    try:
        with open(path, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False
