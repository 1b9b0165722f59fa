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

Loading reads the small header and maps the rest: nothing is decoded until
a query asks for a term's postings or a result's record, so load time does
not grow with the number of skills (performance-facts.md section 3).
"""

import marshal

MAGIC = b"SKRIDX\x00\x01"
FORMAT_VERSION = 3
_MMAP_ABOVE = 1 << 20  # smaller files are read whole; reading beats mapping there


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
        docs_flat.extend(d for d, _ in plist)
        weights_flat.extend(w for _, w in plist)
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
    """Open an index for querying.  Returns a plain dict of views.

    Raises IndexError_ (missing, corrupt, truncated, other version).
    """
    header, f = read_header(path)
    import sys
    try:
        size = f.seek(0, 2)
        if size != header.get("size") or header.get("byteorder") != sys.byteorder:
            raise IndexError_("truncated (%d of %s bytes)" % (size, header.get("size"))
                              if size != header.get("size") else "byte order differs")
        if size > _MMAP_ABOVE:
            import mmap
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        else:
            f.seek(0)
            data = f.read()
    finally:
        f.close()
    mv = memoryview(data)
    sec = header["sections"]

    def view(name, fmt):
        off, ln = sec[name]
        return mv[off:off + ln].cast(fmt)

    tb_off, _ = sec["term_blob"]
    db_off, _ = sec["doc_blob"]
    return {
        "header": header,
        "data": data,
        "term_off": view("term_off", "I"),
        "term_base": tb_off,
        "post_off": view("post_off", "I"),
        "post_doc": view("post_doc", "I"),
        "post_w": view("post_w", "f"),
        "idf": view("idf", "f"),
        "doc_off": view("doc_off", "I"),
        "doc_base": db_off,
    }


def find_term(idx, term):
    """Term number of ``term`` (a str), or -1.  Binary search over the
    sorted term blob; only the probed terms are ever sliced out."""
    key = term.encode("utf-8")
    off = idx["term_off"]
    data = idx["data"]
    base = idx["term_base"]
    lo, hi = 0, len(off) - 1
    while lo < hi:
        mid = (lo + hi) >> 1
        t = data[base + off[mid]:base + off[mid + 1]]
        if t < key:
            lo = mid + 1
        elif t > key:
            hi = mid
        else:
            return mid
    return -1


def doc(idx, n):
    """The ``(id, name, path, description, vis)`` record of skill ``n``."""
    off = idx["doc_off"]
    base = idx["doc_base"]
    return marshal.loads(idx["data"][base + off[n]:base + off[n + 1]])
