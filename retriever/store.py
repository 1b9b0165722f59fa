"""The index file: one packed, self-describing file, written atomically.

Layout (all offsets absolute, sections 8-byte aligned, native byte order
recorded in the header)::

    b"SKRIDX\\0\\1" | u32 header length | u32 CRC-32 of the header
    | marshal(header dict) | sections

    term_off  u32[T+1]   offsets of each term in term_blob (terms sorted by bytes)
    term_blob utf-8      the terms, concatenated
    post_off  u32[T+1]   each term's slice of post_doc / post_w
    post_doc  u32[P]     skill numbers, ascending within a term
    post_w    f32[P]     precomputed BM25F weights
    idf       f32[T]     per-term IDF (abstention and explain)
    doc_off   u32[N+1]   each skill's record in doc_blob
    doc_blob  marshal    one (id, name, path, description, vis) tuple per skill
    post_crc  u32[T]     CRC-32 of each term's post_doc + post_w slices
    doc_crc   u32[N]     CRC-32 of each skill's record

The header holds a CRC-32 of every section, checked for every section a
load reads whole; the per-term and per-record CRCs cover what a large
index reads lazily, checked as it is read.  Damage anywhere is found
before it can change an answer.

Loading reads the header and the vocabulary-sized tables; nothing else is
read until a query asks for a term's postings or a result's record, so load
time and memory do not grow with the number of skills (performance-facts.md
section 3).  A large file verified whole since its last change is read even
less: its header also holds every 64th term (``term_heads``), so a query
reads only the block of terms it looks for and the few table entries it
uses (``_Entries``).
"""

import marshal

MAGIC = b"SKRIDX\x00\x01"
# 5: a CRC-32 of the header in the preamble, one per section in the header,
# and a validated header (issue 15).  6: the library's languages and the
# foreign function words (``lang``), and the groups of near-copies
# (``copies``; issue 37), so an older index is rebuilt.
FORMAT_VERSION = 6
_READ_WHOLE_BELOW = 1 << 20  # smaller files are read whole in one call
_PREAMBLE = len(MAGIC) + 8  # magic, u32 header length, u32 header CRC
# Real headers are a few KiB (one entry per root); a flipped length must not
# make the loader read, or marshal, megabytes of sections as a header.
MAX_HEADER = 1 << 20
# Read at load (and so checked at load) even when the rest is read lazily;
# the CRC tables only when the file is not known good (see ``verify``).
_TERMS = ("term_off", "term_blob", "post_off", "idf", "doc_off")
# Every HEAD_EVERY-th term is also in the header (``term_heads``): a query
# of a large, verified index looks its terms up there and reads only their
# blocks of term_off and term_blob, and only the entries it needs of the
# other tables (``_Entries``), instead of all of them.  Reading those
# tables whole took 1 to 2 ms of a 7 ms query at 20,000 skills (1.4 MB of
# fresh pages for a 68,000-term vocabulary, whatever the library's size).
HEAD_EVERY = 64
# Heads past this many bytes would make every header parse slow (a
# vocabulary of millions): such an index reads its tables whole instead.
MAX_HEADS_BYTES = 1 << 18
_TABLES = _TERMS + ("post_crc", "doc_crc")
_SECTIONS = _TABLES + ("post_doc", "post_w", "doc_blob")


class IndexError_(Exception):
    """The index file is missing, corrupt, truncated or of another version.
    ``header``: the file's (checked) header when only what follows it is
    damaged, else None."""

    header = None


class Damaged(ValueError):
    """A lazily read part of a loaded index fails its checksum.  A
    ValueError, so the query path's repair (rebuild on ValueError) applies;
    ``path`` names the file."""

    def __init__(self, path, what):
        ValueError.__init__(self, "index %s: damaged %s (checksum mismatch)" % (path, what))
        self.path = path


class UnsafeTarget(Exception):
    """The index path names something that is not ours to overwrite."""


def _crc(data):
    from zlib import crc32
    return crc32(data)


def pack(built, docs, header):
    """The index file as ``(header, list of byte chunks)``: what ``write``
    puts on disk and ``load_bytes`` reads back."""
    import sys
    from array import array
    from itertools import accumulate, repeat
    from zlib import crc32

    # Per term and per skill, in C-level passes (tens of thousands of each).
    terms = list(map(str.encode, built["terms"]))
    term_off = array("I", accumulate(map(len, terms), initial=0))
    blob = b"".join(terms)
    heads = tuple(terms[::HEAD_EVERY])
    del terms
    post_off, post_doc, post_w = built["post_off"], built["post_doc"], built["post_w"]
    offs = post_off
    # Version 2: no back-references, so the bytes do not depend on refcounts.
    recs = list(map(marshal.dumps, docs, repeat(2)))
    doc_crc = array("I", map(crc32, recs))
    doc_off = array("I", accumulate(map(len, recs), initial=0))
    doc_blob = b"".join(recs)
    del recs
    pd, pw = memoryview(post_doc).cast("B"), memoryview(post_w).cast("B")
    post_crc = post_crcs(built)

    sections = [
        ("term_off", term_off.tobytes()),
        ("term_blob", blob),
        ("post_off", post_off.tobytes()),
        # The posting arrays as they are, not copied (8 bytes a posting).
        ("post_doc", pd),
        ("post_w", pw),
        ("idf", array("f", built["idf"]).tobytes()),
        ("doc_off", doc_off.tobytes()),
        ("doc_blob", doc_blob),
        ("post_crc", post_crc.tobytes()),
        ("doc_crc", doc_crc.tobytes()),
    ]
    header = dict(header)
    header.pop("term_heads", None)
    if sum(map(len, heads)) <= MAX_HEADS_BYTES:
        header["term_heads"] = heads
    header.update(version=FORMAT_VERSION, byteorder=sys.byteorder,
                  n_docs=len(docs), n_terms=len(term_off) - 1, n_postings=len(post_doc),
                  crc={name: _crc(data) for name, data in sections})
    # Two passes: section offsets depend on the header's own length.
    layout = {}
    for _ in range(3):
        header["sections"] = layout
        hbytes = marshal.dumps(header)
        pos = _align(_PREAMBLE + len(hbytes))
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
    chunks = [MAGIC, len(hbytes).to_bytes(4, "little"), _crc(hbytes).to_bytes(4, "little"), hbytes]
    pos = _PREAMBLE + len(hbytes)
    for name, data in sections:
        chunks.append(b"\0" * (layout[name][0] - pos))
        chunks.append(data)
        pos = layout[name][0] + len(data)
    chunks.append(b"\0" * (header["size"] - pos))
    return header, chunks


def post_crcs(built):
    """Each term's CRC-32 of its ``post_doc`` and ``post_w`` slices, as the
    index stores them: ``built["post_crc"]`` when that is already every
    term's (the build made it before writing).  When it is ``(crcs, redo)``
    (``index.update_terms`` kept the untouched terms' postings, bytes and
    checksums), only the terms at the positions ``redo`` are computed."""
    from array import array
    from zlib import crc32
    offs = built["post_off"]
    known = built.get("post_crc")
    if isinstance(known, array) and len(known) == len(offs) - 1:
        return known
    pd, pw = memoryview(built["post_doc"]).cast("B"), memoryview(built["post_w"]).cast("B")
    if isinstance(known, tuple) and len(known[0]) == len(offs) - 1:
        crcs, redo = known
    else:
        crcs, redo = array("I", bytes(4 * (len(offs) - 1))), range(len(offs) - 1)
    for i in redo:
        a, b = 4 * offs[i], 4 * offs[i + 1]
        crcs[i] = crc32(pw[a:b], crc32(pd[a:b]))  # _crc2, inlined: 70k terms at every build
    return crcs


def write(path, built, docs, header):
    """Write the index atomically: a temp file in the same folder, fsync,
    then rename over ``path``.  Readers see the old file or the new one,
    never a torn one.  Raises UnsafeTarget, before writing anything, when
    ``path`` is not ours to replace (see ``write_target``)."""
    header, chunks = pack(built, docs, header)
    write_atomically(write_target(path), chunks)
    return header


def write_atomically(target, chunks, durable=True):
    """Write the byte ``chunks`` to ``target`` through a temp file in the
    same folder, fsync, then rename (the index, and its vectors).  Without
    ``durable``, no fsync: for files whose every reader checks them whole
    and treats damage as absence (the reuse store, the verified memo), so
    a crash can cost a full build or a checksum pass, never a wrong
    answer; the fsync was most of a rebuild's time writing the 80 MB
    store of 20k skills (0.1 to 0.3 s on this disk)."""
    import os
    folder = os.path.dirname(target)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    remove_dead_temps(target)
    fd, tmp = _new_temp(target)
    try:
        with open(fd, "wb") as f:
            for c in chunks:
                f.write(c)
            f.flush()
            if durable:
                os.fsync(f.fileno())
            os.replace(tmp, target)  # still locked: never taken for a dead build's
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


_TEMP = ".tmp."  # <target>.tmp.<pid>.<random>: the temp files write_atomically makes


def _new_temp(target):
    """A new temp file beside ``target``: ``(fd, path)``.  Its name holds
    the pid (for people) and a random part, so nobody can plant one in
    advance; O_EXCL | O_NOFOLLOW, so nothing already there is written
    through.  It is locked (``flock``) while it is written: a build killed
    at any moment leaves one nobody holds, which ``remove_dead_temps``
    removes, whoever's pid it carries."""
    import fcntl
    import os
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    while True:
        tmp = "%s%s%d.%s" % (target, _TEMP, os.getpid(), os.urandom(4).hex())
        fd = os.open(tmp, flags, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # a cleaner's check holds it this instant, and removes it
                os.close(fd)
                continue
            st = os.fstat(fd)
            if st.st_nlink:  # else another build removed it before the lock: make another
                if st.st_mode & 0o022:
                    os.fchmod(fd, st.st_mode & 0o755)  # a umask of 0 must not make it writable by others
                return fd, tmp
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)


def remove_dead_temps(target):
    """Remove the temp files of builds of ``target`` that died (killed at
    any moment): regular files of this user named ``<target>.tmp.<pid>...``
    that no live writer holds locked.  Only where nobody else can swap a
    name under us: a private folder, or a sticky one (/tmp)."""
    import fcntl
    import os
    from retriever import locate
    folder, name = os.path.split(target)
    try:
        if not (locate.private_dir(folder or ".") or os.stat(folder or ".").st_mode & 0o1000):
            return
        names = [n for n in os.listdir(folder or ".") if n.startswith(name + _TEMP)]
    except OSError:
        return
    for n in names:
        pid, _, rest = n[len(name) + len(_TEMP):].partition(".")
        if not pid.isdigit() or not all(c in "0123456789abcdef" for c in rest):
            continue
        path = os.path.join(folder, n)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            if (st.st_mode & 0o170000) != 0o100000 or st.st_uid != os.getuid():
                continue
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises while its writer lives
            if os.path.samestat(st, os.lstat(path)):
                os.unlink(path)
        except OSError:
            pass
        finally:
            os.close(fd)


def write_target(path):
    """The file ``write`` may replace for ``path``, or UnsafeTarget.

    Ours to replace: nothing at ``path`` yet; an existing skill-retrieval
    index (any version); any regular file in the cache's own index slots;
    a symlink to an existing index, replaced at its target so the link
    survives.  Never another file, a folder, a device, a FIFO or a socket:
    ``--index`` is a user's argument and may name something precious."""
    import os
    import stat
    try:
        st = os.lstat(path)
    except OSError:
        return path  # nothing there, or an unusable folder: the write itself fails
    if stat.S_ISLNK(st.st_mode):
        real = os.path.realpath(path)
        if is_index_file(real):
            return real
        raise UnsafeTarget("--index %s is a symlink to %s, which is not a skill-retrieval index; "
                           "refusing to write there" % (path, real))
    if stat.S_ISDIR(st.st_mode):
        raise UnsafeTarget("--index %s is a folder; give a file path" % path)
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeTarget("--index %s is a %s, not a regular file; refusing to write there"
                           % (path, _kind(st.st_mode)))
    if st.st_uid != os.getuid() and _others_write(path, st.st_uid):
        raise UnsafeTarget("--index %s belongs to another user (uid %d) in a folder others can write; "
                           "not trusted, not replaced (choose another path)" % (path, st.st_uid))
    if is_index_file(path) or _in_cache_slot(path):
        return path
    raise UnsafeTarget("--index %s exists and is not a skill-retrieval index; refusing to "
                       "overwrite it (remove it or choose another path)" % path)


def _kind(mode):
    import stat
    for test, name in ((stat.S_ISFIFO, "FIFO"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device"), (stat.S_ISSOCK, "socket")):
        if test(mode):
            return name
    return "special file"


def _in_cache_slot(path):
    # The per-user cache is ours: a damaged file there is repaired, whatever
    # it now holds (a user's --index file is not).
    import os
    from retriever import locate
    name = os.path.basename(path)
    return (os.path.dirname(os.path.abspath(path)) == locate.cache_dir()
            and name.startswith("index-") and name.endswith(".skr"))


def is_index_file(path):
    """True when ``path`` is a regular file that starts with our magic
    (never blocks: a FIFO is opened non-blocking and rejected)."""
    try:
        fd = _open_regular(path)
    except (OSError, IndexError_):
        return False
    import posix
    try:
        return posix.read(fd, len(MAGIC)) == MAGIC
    except OSError:
        return False
    finally:
        posix.close(fd)


def _open_regular(path, trusted_only=False):
    """A read-only fd for ``path`` if it is a regular file; raises
    IndexError_ otherwise.  O_NONBLOCK so that a FIFO never blocks the
    open (it is then rejected by the fstat).  With ``trusted_only``, an
    index another user owns in a folder others can write (planted in
    /tmp before the user's first build: its header would choose the roots
    and its records the text injected) is refused too; one in a folder
    only its owner can write (an index a team installs) is read."""
    import posix
    try:
        fd = posix.open(path, posix.O_RDONLY | posix.O_NONBLOCK)
    except FileNotFoundError:
        raise IndexError_("missing")
    except OSError as exc:
        raise IndexError_("unreadable (%s)" % (exc.strerror or exc))
    try:
        st = posix.fstat(fd)
    except OSError as exc:
        posix.close(fd)
        raise IndexError_("unreadable (%s)" % (exc.strerror or exc))
    if (st.st_mode & 0o170000) != 0o100000:
        posix.close(fd)
        raise IndexError_("not a regular file")
    if trusted_only and st.st_uid != posix.getuid() and _others_write(path, st.st_uid):
        posix.close(fd)
        raise IndexError_("owned by another user (uid %d) in a folder others can write: not trusted" % st.st_uid)
    return fd


def _others_write(path, owner):
    # True when the folder of ``path`` can be written by someone besides
    # this user, root and ``owner`` (the file's): its group or others, or
    # a fourth user owning it.
    import posix
    try:
        st = posix.stat(path.rpartition("/")[0] or ".")
    except OSError:
        return True
    return bool(st.st_mode & 0o022) or st.st_uid not in (posix.getuid(), 0, owner)


def _align(n):
    return (n + 7) & ~7


def read_header(path):
    """Return ``(header, file object)``; raises IndexError_ with a reason.
    The header is checked (CRC, keys, types, section bounds) before it is
    returned."""
    header, f, _ = _read_header(path, False)
    return header, f


def _read_header(path, trust):
    # ``(header, file, trusted)``.  trusted: ``trust`` was asked and the
    # file was verified whole since its last change (see ``verify``), so
    # no checksum need be computed: zlib is not even imported.
    fd = _open_regular(path, trusted_only=True)
    f = open(fd, "rb")
    try:
        trusted = trust and _verified(path, fd)
        header = _parse_header(f.read(_PREAMBLE), f.read, trusted)
    except BaseException:
        f.close()
        raise
    return header, f, trusted


def _parse_header(pre, read, trusted=False):
    if len(pre) < _PREAMBLE or pre[:8] != MAGIC:
        raise IndexError_("not a skill-retrieval index (bad magic)" if len(pre) >= 8 and pre[:8] != MAGIC
                          else "truncated")
    hlen = int.from_bytes(pre[8:12], "little")
    if hlen > MAX_HEADER:
        raise IndexError_("corrupt header (claims %d bytes)" % hlen)
    hbytes = read(hlen)
    if len(hbytes) != hlen:
        raise IndexError_("truncated")
    if not trusted and _crc(hbytes) != int.from_bytes(pre[12:16], "little"):
        raise IndexError_("corrupt header (checksum mismatch)")
    try:
        header = marshal.loads(hbytes)
    except (EOFError, ValueError, TypeError):
        raise IndexError_("corrupt header")
    if not isinstance(header, dict) or header.get("version") != FORMAT_VERSION:
        raise IndexError_("format version %r, expected %d"
                          % (header.get("version") if isinstance(header, dict) else None, FORMAT_VERSION))
    problem = check_header(header)
    if problem:
        raise IndexError_("corrupt header (%s)" % problem)
    return header


# key -> accepted types.  What the query path, the hooks, revalidation and
# doctor read from a header; a header missing one, or holding another type,
# is rebuilt rather than crashing a reader later.
_HEADER_TYPES = {
    "version": int, "byteorder": str, "size": int, "n_docs": int, "n_terms": int,
    "n_postings": int, "sections": dict, "crc": dict, "params": dict, "avglen": dict,
    "roots": list, "explicit": bool, "only_hermes": bool, "platform": str,
    "hermes_home": str, "config": (str, type(None)), "disabled": list, "signature": str,
    "built_at": (int, float), "counts": dict, "problems": int,
}


def _lang_ok(lang):
    # The build's ``languages.header_entry``, or none (an index without it
    # reads every message as the library's own language).
    if lang is None:
        return True
    return (isinstance(lang, dict) and isinstance(lang.get("library"), list)
            and not set(map(type, lang["library"])) - {str} and isinstance(lang.get("foreign"), dict)
            and all(isinstance(k, str) and isinstance(v, frozenset) for k, v in lang["foreign"].items()))


def check_header(h):
    """The first thing wrong with header dict ``h``, or None."""
    for key, types in _HEADER_TYPES.items():
        if not isinstance(h.get(key), types):
            return "%s missing or of the wrong type" % key
    if not _lang_ok(h.get("lang")):
        return "lang"
    groups = h.get("copies", ())
    if not (isinstance(groups, tuple) and all(isinstance(g, tuple) and len(g) > 1 for g in groups)):
        return "copies"
    p = h["params"]
    if not (isinstance(p.get("analyzer"), dict) and isinstance(p.get("profile"), str)
            and isinstance(p.get("fields"), dict) and isinstance(p["analyzer"].get("stem", ""), str)
            and isinstance(p["analyzer"].get("stopwords", 0), int)):
        return "params"
    for r in h["roots"]:
        if not (isinstance(r, dict) and isinstance(r.get("path"), str) and isinstance(r.get("prefix"), str)):
            return "roots"
    n_docs, n_terms, n_post = h["n_docs"], h["n_terms"], h["n_postings"]
    heads = h.get("term_heads")
    if heads is not None and not (isinstance(heads, tuple) and len(heads) == -(-n_terms // HEAD_EVERY)
                                  and not set(map(type, heads)) - {bytes}):
        return "term_heads"
    want = {"term_off": 4 * (n_terms + 1), "post_off": 4 * (n_terms + 1), "post_doc": 4 * n_post,
            "post_w": 4 * n_post, "idf": 4 * n_terms, "doc_off": 4 * (n_docs + 1),
            "post_crc": 4 * n_terms, "doc_crc": 4 * n_docs}
    sec, crc = h["sections"], h["crc"]
    for name in _SECTIONS:
        s = sec.get(name)
        if not (isinstance(s, tuple) and len(s) == 2 and isinstance(s[0], int) and isinstance(s[1], int)
                and _PREAMBLE <= s[0] and 0 <= s[1] and s[0] + s[1] <= h["size"]):
            return "section %s" % name
        if name in want and s[1] != want[name]:
            return "section %s length" % name
        if not isinstance(crc.get(name), int):
            return "checksum of %s" % name
    return None


def load(path):
    """Open an index for querying.  Returns a plain dict.

    Small files are read whole, and every section's CRC-32 is checked.
    Large ones are read in part: the vocabulary-sized sections (term table,
    postings offsets, IDF, record offsets) once, checked, and each query
    term's postings and each printed record with ``pread`` when asked for,
    each checked against its own CRC.  (``mmap`` was measured first: on
    this kernel every touched region maps a 2 MiB page-cache folio, so a
    query over 20,000 skills peaked 15 MiB above the interpreter.)

    A file ``verify`` checked whole since its last change (its
    ``.verified`` memo matches the file's identity and change time) is
    read without computing a checksum: that saves importing zlib and
    hashing the tables on every query (see ``verify``).

    Raises IndexError_ (missing, not a regular file, corrupt, truncated,
    other version).
    """
    header, f, trusted = _read_header(path, True)
    try:
        return _load(path, header, f, trusted)
    except IndexError_ as exc:
        exc.header = header  # checked already: the caller need not read it again
        raise


def _load(path, header, f, trusted):
    try:
        size = f.seek(0, 2)
        _check_size(header, size)
        if size > _READ_WHOLE_BELOW:
            import posix
            fd = posix.open(path, posix.O_RDONLY | posix.O_NONBLOCK)

            def read(off, ln, _fd=fd, _pread=posix.pread):
                if off < 0 or ln < 0:  # only past a checksum collision
                    raise Damaged(path, "offsets")
                return _pread(_fd, ln, off)

            if trusted and "term_heads" in header:
                idx = _entries_index(header, read, path)
            else:
                idx = _index(header, read, () if trusted else _TABLES, _TERMS if trusted else _TABLES)
            if not trusted:
                # Read lazily, so checked piece by piece (postings, record).
                idx["post_crc"] = idx.pop("_post_crc")
                idx["doc_crc"] = idx.pop("_doc_crc")
            idx["path"] = path
            return idx
        f.seek(0)
        whole = f.read()
    finally:
        f.close()
    idx = load_bytes(whole, header, trusted)
    idx["path"] = path
    return idx


def load_bytes(data, header=None, trusted=False):
    """An index held in memory (``b"".join`` of ``pack``'s chunks, or a
    whole file), every section checked unless ``trusted`` (see ``load``).
    Raises IndexError_."""
    if header is None:
        pos = [_PREAMBLE]

        def take(n):
            out = data[pos[0]:pos[0] + n]
            pos[0] += n
            return out

        header = _parse_header(data[:_PREAMBLE], take)
        _check_size(header, len(data))
    whole = memoryview(data)

    def read(off, ln, _mv=whole):
        return _mv[off:off + ln]

    idx = _index(header, read, () if trusted else _SECTIONS, _TERMS if trusted else _TABLES)
    idx.pop("_post_crc"), idx.pop("_doc_crc")  # every section was checked whole, or need not be
    return idx


def _check_size(header, size):
    import sys
    if size != header["size"]:
        raise IndexError_("truncated (%d of %s bytes)" % (size, header["size"]))
    if header["byteorder"] != sys.byteorder:
        raise IndexError_("byte order differs")


def _index(header, read, checked, tables):
    # Reads the ``tables`` sections, checking those in ``checked``.
    sec = header["sections"]
    crc = header["crc"]
    data = {}
    for name in tables:
        off, ln = sec[name]
        b = read(off, ln)
        if len(b) != ln:
            raise IndexError_("truncated while reading %s" % name)
        if name in checked and _crc(b) != crc[name]:
            raise IndexError_("damaged %s section (checksum mismatch)" % name)
        data[name] = memoryview(b)
    if checked is _SECTIONS:
        for name in _SECTIONS[len(_TABLES):]:
            off, ln = sec[name]
            if _crc(read(off, ln)) != crc[name]:
                raise IndexError_("damaged %s section (checksum mismatch)" % name)
    return _indexed(header, read, {
        "term_off": data["term_off"].cast("I"),
        "term_blob": bytes(data["term_blob"]),
        "post_off": data["post_off"].cast("I"),
        "idf": data["idf"].cast("f"),
        "doc_off": data["doc_off"].cast("I"),
        "_post_crc": data["post_crc"].cast("I") if "post_crc" in data else None,
        "_doc_crc": data["doc_crc"].cast("I") if "doc_crc" in data else None,
        "path": "<memory>",
    })


def _entries_index(header, read, path):
    # A verified file's tables, read entry by entry as a query asks.
    sec = header["sections"]
    n_terms, n_docs = header["n_terms"], header["n_docs"]
    return _indexed(header, read, {
        "term_heads": header["term_heads"],
        "term_off": _Entries(read, sec["term_off"][0], n_terms + 1, "I", path),
        "term_blob_at": sec["term_blob"][0],
        "post_off": _Entries(read, sec["post_off"][0], n_terms + 1, "I", path),
        "idf": _Entries(read, sec["idf"][0], n_terms, "f", path),
        "doc_off": _Entries(read, sec["doc_off"][0], n_docs + 1, "I", path),
    })


def _indexed(header, read, tables):
    # The loaded-index dict: the tables as read, plus where the lazily
    # read sections start.
    sec = header["sections"]
    tables.update(header=header, read=read, post_doc_at=sec["post_doc"][0], post_w_at=sec["post_w"][0],
                  doc_at=sec["doc_blob"][0], post_crc=None, doc_crc=None)
    return tables


class _Entries:
    """A u32 or f32 table of the index file, read with ``pread`` only
    where indexed (``t[i]``, or ``t[i:j]`` in one read): a query needs a
    few dozen entries of tables of tens of thousands."""

    __slots__ = ("_read", "_at", "_n", "_code", "_path")

    def __init__(self, read, at, n, code, path):
        self._read, self._at, self._n, self._code, self._path = read, at, n, code, path

    def __len__(self):
        return self._n

    def __getitem__(self, i):
        if i.__class__ is slice:
            a, b = max(0, i.start), min(self._n, i.stop)
        else:
            a, b = i, i + 1
            if not 0 <= a < self._n:
                raise IndexError("table index out of range")
        n = max(0, b - a)
        data = self._read(self._at + 4 * a, 4 * n)
        if len(data) != 4 * n:  # the file changed under a verified memo
            raise Damaged(self._path, "tables")
        view = memoryview(data).cast(self._code)
        return view if i.__class__ is slice else view[0]


# A file changed within one clock tick of its last change can keep the same
# change time on kernels with coarse timestamps (a tick is 1-10 ms), so a
# memo is only written once the file's change time is this far behind.
_SETTLE_NS = 20_000_000
_CHUNK = 1 << 22  # verify hashes a large section 4 MiB at a time


def memo_path(path):
    """The file recording that the index at ``path`` was verified whole
    (``locate.side_path``: never one someone else could plant)."""
    from retriever import locate
    return locate.side_path(path, ".verified")


def _identity(st):
    # What changes whenever the file's bytes do: any write, truncation,
    # rename over it or utime moves st_ctime (which no user call can set).
    return b"%d %d %d %d %d\n" % (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _verified(path, fd):
    # True when the memo beside ``path`` names the file open as ``fd``.
    import posix
    from retriever import locate
    mfd = locate.open_own(memo_path(path))  # a memo the user did not make is no memo
    if mfd < 0:
        return False
    try:
        return posix.read(mfd, 256) == _identity(posix.fstat(fd))
    except OSError:
        return False
    finally:
        posix.close(mfd)


def verify(path, remember=False):
    """Check every section of the index at ``path`` whole (what a large
    index's load leaves to its queries), streaming: memory stays flat.
    Raises IndexError_.

    With ``remember``, a passing file gets a ``.verified`` memo naming it
    (device, inode, size, mtime, ctime): later loads of that same,
    unchanged file skip their checksums.  Any change to the file moves
    its ctime, so the memo no longer matches and loads check again.  The
    build writes the memo for the file it just wrote; revalidation for the
    file it checked."""
    import posix
    import time
    header, f = read_header(path)
    try:
        fd = f.fileno()
        st = posix.fstat(fd)
        if remember:
            # Read only after the change time has settled (see _SETTLE_NS),
            # so every change this check cannot see has a later ctime.
            for _ in range(5):
                wait = _SETTLE_NS - (time.time_ns() - st.st_ctime_ns)
                if wait <= 0 or wait > _SETTLE_NS:
                    break
                time.sleep(wait / 1e9)
                st = posix.fstat(fd)
            else:
                remember = False
            if time.time_ns() - st.st_ctime_ns < _SETTLE_NS:
                remember = False  # a change time in the future: never trust it
        _check_size(header, st.st_size)
        from zlib import crc32
        for name in _SECTIONS:
            off, ln = header["sections"][name]
            c = 0
            for at in range(off, off + ln, _CHUNK):
                b = posix.pread(fd, min(_CHUNK, off + ln - at), at)
                if not b:
                    raise IndexError_("truncated while reading %s" % name)
                c = crc32(b, c)
            if c != header["crc"][name]:
                raise IndexError_("damaged %s section (checksum mismatch)" % name)
    finally:
        f.close()
    if remember:
        try:
            # Not durable: a memo lost or torn by a crash matches no file.
            write_atomically(memo_path(path), [_identity(st)], durable=False)
        except OSError:
            pass  # a read-only folder: loads keep checking, as before


def find_term(idx, term):
    """Term number of ``term`` (a str), or -1.  Binary search over the
    sorted term blob; only the probed terms are ever sliced out.  With
    ``term_heads`` (``_entries_index``), the search runs over the heads
    first, then over the one block of terms read for it."""
    key = term.encode("utf-8")
    heads = idx.get("term_heads")
    if heads is None:
        return _search_terms(key, idx["term_off"], idx["term_blob"], 0, len(idx["term_off"]) - 1)
    lo, hi = 0, len(heads)
    while lo < hi:  # the last head at or before the key
        mid = (lo + hi) >> 1
        if heads[mid] <= key:
            lo = mid + 1
        else:
            hi = mid
    if lo == 0:
        return -1
    first = (lo - 1) * HEAD_EVERY
    off = idx["term_off"][first:first + HEAD_EVERY + 1]
    blob = idx["read"](idx["term_blob_at"] + off[0], off[-1] - off[0])
    if len(blob) != off[-1] - off[0]:
        raise Damaged(idx["path"], "terms")
    i = _search_terms(key, off, blob, 0, len(off) - 1, off[0])
    return i if i < 0 else first + i


def _search_terms(key, off, blob, lo, hi, base=0):
    # The place of ``key`` among the terms lo..hi-1, or -1: term j is
    # blob[off[j] - base:off[j + 1] - base].
    while lo < hi:
        mid = (lo + hi) >> 1
        t = blob[off[mid] - base:off[mid + 1] - base]
        if t < key:
            lo = mid + 1
        elif t > key:
            hi = mid
        else:
            return mid
    return -1


def postings(idx, i):
    """``(skill numbers, weights)`` of term number ``i``, in skill order.
    Raises Damaged when a lazily read slice fails its checksum."""
    a, b = idx["post_off"][i:i + 2]
    n = b - a
    read = idx["read"]
    bd = read(idx["post_doc_at"] + 4 * a, 4 * n)
    bw = read(idx["post_w_at"] + 4 * a, 4 * n)
    crcs = idx["post_crc"]
    if crcs is not None and _crc2(bd, bw) != crcs[i]:
        raise Damaged(idx["path"], "postings")
    return memoryview(bd).cast("I").tolist(), memoryview(bw).cast("f").tolist()


def _crc2(a, b):
    """A term's posting checksum: CRC-32 of its skill numbers, then its
    weights (``post_crcs`` makes them, ``postings`` checks them)."""
    from zlib import crc32
    return crc32(b, crc32(a))


def df(idx, i):
    """How many skills contain term number ``i``."""
    a, b = idx["post_off"][i:i + 2]
    return b - a


def build_key(header):
    """The index build a skill number belongs to: the same string for the
    same build, another after any rebuild (a skill's number can change)."""
    return "%s %s %r" % (header.get("signature"), header.get("n_docs"), header.get("built_at"))


def doc(idx, n):
    """The ``(id, name, path, description, vis)`` record of skill ``n``."""
    off = idx["doc_off"]
    if not 0 <= n < len(off) - 1:
        raise IndexError("skill number %r out of range" % (n,))
    a, b = off[n:n + 2]
    rec = idx["read"](idx["doc_at"] + a, b - a)
    crcs = idx["doc_crc"]
    if crcs is not None and _crc(rec) != crcs[n]:
        raise Damaged(idx["path"], "skill record")
    return marshal.loads(rec)
