"""The reuse store: per-file parse and analysis results kept beside the index.

A rebuild reads again only the SKILL.md files whose path, size, mtime or
inode changed (never judged by content alone), and takes everything else
from here.  The file is ``<index>.reuse``::

    b"SKRREUSE" | u32 CRC-32 of the rest, 12 zero bytes | u64 length of the marshal part
    | marshal((key, vocab, entries, layout)) | the layout's arrays, raw

``key`` names everything an entry depends on besides its file: the store
format, the profile and the source of the modules that parse and analyse.
``entries`` maps a SKILL.md path to the tuple ``build.analyse_file`` made,
its terms numbered in ``vocab`` (``index.encode``: one bytes object of term
numbers a skill, and its groups' shared ``(counts, size)`` tuples, which
marshal writes once each).  ``layout`` (or None)
is the last index's postings, term-major, as ``index.build_terms`` returns
it (arrays as bytes) plus ``docs``, the SKILL.md path of each skill number:
with it, a rebuild after a few edits updates the postings instead of
dealing every one out again (``index.update_terms``).

Any doubt means a full build, never a wrong index: a missing, truncated or
altered file, a checksum or key mismatch, or anything that does not
unmarshal to the expected shape loads as an empty store.  Writes go to a
temp file and are renamed over the old one, so two builders running at once
each leave a whole store (either one is valid: entries are checked against
the files, not against an index).
"""

import marshal
import os
import sys
from array import array

try:
    # hashlib's own blake2b: importing hashlib loads OpenSSL first, 7 ms of
    # every rebuild and of every background freshness check.
    from _blake2 import blake2b
except ImportError:  # an interpreter without the built-in module
    from hashlib import blake2b

MAGIC = b"SKRREUSE"
VERSION = 4  # 2: the layout; 3: its arrays raw after the marshal part; 4: CRC-32
# The checksum finds damage, as the index's do: CRC-32 reads the 80 MB
# store of 20k skills in a quarter of blake2b's 0.1 s, paid at every load
# and every save.
# The modules whose code decides what an entry holds.
_SOURCES = ("analyze.py", "build.py", "discover.py", "fields.py", "frontmatter.py", "index.py", "reuse.py",
            "skills.py", "tokenize.py")


def path_for(index_path):
    """Where the reuse store of ``index_path`` lives (``locate.side_path``:
    beside it, unless its folder is shared)."""
    from retriever import locate
    return locate.side_path(index_path, ".reuse")


def key(profile):
    """The store key for ``profile``: entries made under another key (other
    code, other analyzer or fields) are never reused."""
    h = blake2b(repr((VERSION, marshal.version, sys.byteorder, array("I").itemsize, sorted(profile["analyzer"].items()),
                              sorted(profile["fields"].items()), profile["k1"])).encode(), digest_size=16)
    here = os.path.dirname(os.path.abspath(__file__))
    for name in _SOURCES:
        try:
            with open(os.path.join(here, name), "rb") as f:
                h.update(name.encode() + b"\0" + f.read())
        except OSError:
            h.update(name.encode() + b"\0missing")
    return h.hexdigest()


def load(path, want_key):
    """``(vocab, entries, layout)`` stored at ``path`` under ``want_key``, or
    ``([], {}, None)`` when the file is missing, damaged or made under
    another key.  The layout's arrays come as bytes or, the large ones,
    as views of the file's bytes (for ``array.frombytes``)."""
    from retriever import locate
    empty = [], {}, None
    # Only a store this user made: anyone with this code can make a valid
    # checksum, so a planted one would put its text in the user's index.
    fd = locate.open_own(path)
    if fd < 0:
        return empty
    try:
        with open(fd, "rb") as f:
            pre = f.read(32)
            if len(pre) < 32 or pre[:8] != MAGIC:
                return empty
            head = int.from_bytes(pre[24:32], "little")
            if 32 + head > os.fstat(f.fileno()).st_size:
                return empty
            # Two reads, so the marshal part's bytes (half the file) can go
            # once unmarshalled, before the rebuild's peak.
            hb = f.read(head)
            rest = f.read()
    except OSError:
        return empty
    if len(hb) != head or _crc((pre[24:32], hb, rest)) != pre[8:24]:
        return empty
    try:
        got = marshal.loads(hb)
    except (EOFError, ValueError, TypeError):
        return empty
    del hb
    if (not isinstance(got, tuple) or len(got) != 4 or got[0] != want_key
            or not isinstance(got[1], list) or not isinstance(got[2], dict)):
        return empty
    layout = got[3] if isinstance(got[3], dict) else None
    body = memoryview(rest)
    pos = 0
    for k, v in (layout or {}).items():
        if isinstance(v, tuple) and len(v) == 3 and v[0] == "array":
            n = v[2] * array(v[1]).itemsize
            # The posting-sized ones as views (update_terms reads them once);
            # the small ones copied, so they do not keep the file's bytes.
            layout[k] = body[pos:pos + n] if n >= 1 << 20 else bytes(body[pos:pos + n])
            pos += n
    if pos != len(body):
        return empty
    return got[1], got[2], layout


def save(path, store_key, vocab, entries, layout=None):
    """Write ``entries`` atomically (``store.write_atomically``: temp file,
    rename, never through a planted link).  Returns False, leaving
    any old store in place, when the write fails: the index is already
    written, and a missing store only costs a full build.  The layout's
    arrays are written as they are in memory after the rest, not copied
    into one marshal string (tens of MB at 20k skills)."""
    from retriever import store
    small = None
    chunks = []
    if layout is not None:
        small = {}
        for k, v in layout.items():
            if isinstance(v, array):
                small[k] = ("array", v.typecode, len(v))
                chunks.append(memoryview(v).cast("B"))
            else:
                small[k] = v
    head = marshal.dumps((store_key, vocab, entries, small))
    chunks[:0] = [len(head).to_bytes(8, "little"), head]
    try:
        # Not durable (no fsync): a store a crash tore fails its checksum,
        # and that means a full build.
        store.write_atomically(path, [MAGIC, _crc(chunks)] + chunks, durable=False)
        return True
    except OSError as exc:
        from retriever import locate
        locate.log("reuse store %s not saved (%s); the next build reads every file" % (path, exc))
        return False


def _crc(chunks):
    """The 16-byte checksum field of ``chunks`` (bytes-like, in order)."""
    from zlib import crc32
    c = 0
    for part in chunks:
        c = crc32(part, c)
    return c.to_bytes(4, "little") + bytes(12)


def compact(vocab, entries, layout=None):
    """``(vocab, entries, layout)`` renumbered to the terms ``entries`` use
    (``layout``'s terms are among them: it indexes some of the entries)."""
    used = set()
    for e in entries.values():
        if len(e) == 10:
            used.update(array("I", e[9][1]))
    keep = sorted(used)
    new = dict(zip(keep, range(len(keep))))
    get = new.__getitem__
    out = {}
    for path, e in entries.items():
        out[path] = (e[:9] + ((e[9][0], array("I", map(get, array("I", e[9][1]))).tobytes()),)
                     if len(e) == 10 else e)
    if layout is not None:
        layout = dict(layout, terms=array("I", map(get, array("I", layout["terms"]))))
    return [vocab[i] for i in keep], out, layout
