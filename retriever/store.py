"""The index file: one packed, self-describing file, written atomically.

Layout (all offsets absolute, sections 8-byte aligned, native byte order
recorded in the header)::

    b"SKRIDX\\0\\1" | u32 header length | marshal(header dict) | sections

    term_off  u32[T+1]   offsets of each term in term_blob (terms sorted by bytes)
    term_blob utf-8      the terms, concatenated
    post_off  u32[T+1]   each term's slice of post_doc / post_w
    post_doc  u32[P]     skill numbers, highest weight first
    post_w    f32[P]     precomputed BM25F weights
    idf       f32[T]     per-term IDF (abstention and explain)
    doc_off   u32[N+1]   each skill's record in doc_blob
    doc_blob  marshal    one (id, name, path, description, vis) tuple per skill

Loading reads the header and the vocabulary-sized tables; nothing else is
read until a query asks for a term's postings or a result's record, so load
time and memory do not grow with the number of skills (performance-facts.md
section 3).
"""

import marshal

MAGIC = b"SKRIDX\x00\x01"
FORMAT_VERSION = 4  # 4: header carries per-field average lengths
_READ_WHOLE_BELOW = 1 << 20  # smaller files are read whole in one call


class IndexError_(Exception):
    """The index file is missing, corrupt, truncated or of another version."""


def write(path, built, docs, header):
    """Write the index atomically: a temp file in the same folder, fsync,
    then rename over ``path``.  Readers see the old file or the new one,
    never a torn one."""
    import os
    import sys
    from array import array

    terms = built["terms"]
    term_off = array("I", [0])
    blob = bytearray()
    for t in terms:
        blob += t.encode("utf-8")
        term_off.append(len(blob))
    offs = [0]
    docs_flat = []
    weights_flat = []
    for plist in built["postings"]:
        if plist:
            ds, ws = zip(*plist)
            docs_flat.extend(ds)
            weights_flat.extend(ws)
        offs.append(len(docs_flat))
    post_off = array("I", offs)
    post_doc = array("I", docs_flat)
    post_w = array("f", weights_flat)
    doc_off = array("I", [0])
    doc_blob = bytearray()
    for d in docs:
        doc_blob += marshal.dumps(d)
        doc_off.append(len(doc_blob))

    sections = [
        ("term_off", term_off.tobytes()),
        ("term_blob", bytes(blob)),
        ("post_off", post_off.tobytes()),
        ("post_doc", post_doc.tobytes()),
        ("post_w", post_w.tobytes()),
        ("idf", array("f", built["idf"]).tobytes()),
        ("doc_off", doc_off.tobytes()),
        ("doc_blob", bytes(doc_blob)),
    ]
    header = dict(header)
    header.update(version=FORMAT_VERSION, byteorder=sys.byteorder,
                  n_docs=len(docs), n_terms=len(terms), n_postings=len(post_doc))
    # Two passes: section offsets depend on the header's own length.
    layout = {}
    for _ in range(3):
        header["sections"] = layout
        hbytes = marshal.dumps(header)
        pos = _align(len(MAGIC) + 4 + len(hbytes))
        new = {}
        for name, data in sections:
            new[name] = (pos, len(data))
            pos = _align(pos + len(data))
        header["size"] = pos
        if new == layout:
            break
        layout = new
    header["sections"] = layout
    hbytes = marshal.dumps(header)

    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, mode=0o700, exist_ok=True)
    tmp = "%s.tmp.%d" % (path, os.getpid())
    try:
        with open(tmp, "wb") as f:
            f.write(MAGIC)
            f.write(len(hbytes).to_bytes(4, "little"))
            f.write(hbytes)
            for name, data in sections:
                f.write(b"\0" * (layout[name][0] - f.tell()))
                f.write(data)
            f.write(b"\0" * (header["size"] - f.tell()))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return header


def _align(n):
    return (n + 7) & ~7


def read_header(path):
    """Return ``(header, file object)``; raises IndexError_ with a reason."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise IndexError_("missing")
    except OSError as exc:
        raise IndexError_("unreadable (%s)" % (exc.strerror or exc))
    head = f.read(12)
    if len(head) < 12 or head[:8] != MAGIC:
        f.close()
        raise IndexError_("not a skill-retrieval index (bad magic)" if len(head) >= 8 else "truncated")
    hlen = int.from_bytes(head[8:12], "little")
    try:
        header = marshal.loads(f.read(hlen))
    except (EOFError, ValueError, TypeError):
        f.close()
        raise IndexError_("corrupt header")
    if not isinstance(header, dict) or header.get("version") != FORMAT_VERSION:
        f.close()
        raise IndexError_("format version %r, expected %d"
                          % (header.get("version") if isinstance(header, dict) else None, FORMAT_VERSION))
    return header, f


def load(path):
    """Open an index for querying.  Returns a plain dict.

    Small files are read whole.  Large ones are read in part: the
    vocabulary-sized sections (term table, postings offsets, IDF, record
    offsets) once, and each query term's postings and each printed record
    with ``pread`` when asked for.  (``mmap`` was measured first: on this
    kernel every touched region maps a 2 MiB page-cache folio, so a query
    over 20,000 skills peaked 15 MiB above the interpreter.)

    Raises IndexError_ (missing, corrupt, truncated, other version).
    """
    header, f = read_header(path)
    import sys
    sec = header["sections"]
    try:
        size = f.seek(0, 2)
        if size != header.get("size") or header.get("byteorder") != sys.byteorder:
            raise IndexError_("truncated (%d of %s bytes)" % (size, header.get("size"))
                              if size != header.get("size") else "byte order differs")
        if size > _READ_WHOLE_BELOW:
            import posix
            fd = posix.open(path, posix.O_RDONLY)

            def read(off, ln, _fd=fd, _pread=posix.pread):
                return _pread(_fd, ln, off)

            def section(name):
                off, ln = sec[name]
                data = read(off, ln)
                if len(data) != ln:
                    raise IndexError_("truncated while reading %s" % name)
                return memoryview(data)
        else:
            f.seek(0)
            whole = memoryview(f.read())

            def read(off, ln, _mv=whole):
                return _mv[off:off + ln]

            def section(name):
                off, ln = sec[name]
                return whole[off:off + ln]
    finally:
        f.close()
    return {
        "header": header,
        "read": read,
        "term_off": section("term_off").cast("I"),
        "term_blob": bytes(section("term_blob")),
        "post_off": section("post_off").cast("I"),
        "post_doc_at": sec["post_doc"][0],
        "post_w_at": sec["post_w"][0],
        "idf": section("idf").cast("f"),
        "doc_off": section("doc_off").cast("I"),
        "doc_at": sec["doc_blob"][0],
    }


def find_term(idx, term):
    """Term number of ``term`` (a str), or -1.  Binary search over the
    sorted term blob; only the probed terms are ever sliced out."""
    key = term.encode("utf-8")
    off = idx["term_off"]
    blob = idx["term_blob"]
    lo, hi = 0, len(off) - 1
    while lo < hi:
        mid = (lo + hi) >> 1
        t = blob[off[mid]:off[mid + 1]]
        if t < key:
            lo = mid + 1
        elif t > key:
            hi = mid
        else:
            return mid
    return -1


def postings(idx, i):
    """``(skill numbers, weights)`` of term number ``i``, heaviest first."""
    a = idx["post_off"][i]
    n = idx["post_off"][i + 1] - a
    read = idx["read"]
    docs = memoryview(read(idx["post_doc_at"] + 4 * a, 4 * n)).cast("I").tolist()
    weights = memoryview(read(idx["post_w_at"] + 4 * a, 4 * n)).cast("f").tolist()
    return docs, weights


def df(idx, i):
    """How many skills contain term number ``i``."""
    return idx["post_off"][i + 1] - idx["post_off"][i]


def doc(idx, n):
    """The ``(id, name, path, description, vis)`` record of skill ``n``."""
    off = idx["doc_off"]
    return marshal.loads(idx["read"](idx["doc_at"] + off[n], off[n + 1] - off[n]))
