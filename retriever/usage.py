"""The record of use: what each prompt got, and what the agent then loaded.

Every prompt of a session that a hook answers appends one line to ``usage.log`` in the cache
folder (mode 0600), a JSON array:

    [1, time, runner, session, injected, tier, loaded, prompt, terms, why]

- ``session``: a hash of the runner's session id ("" without one);
- ``injected``: the skills injected, each ``[name]`` or ``[name, folder]``
  when its folder is named otherwise (Claude Code loads a skill by its
  folder);
- ``tier``: the rankings that answered ("bm25", "bm25+semantic");
- ``loaded``: the skills the session's transcript showed loaded since the
  session's last prompt, by name (``retriever.session`` reads them), so
  loads are attributed to the prompts before them; None where the runner
  shows no loads (no transcript, no history);
- ``prompt`` (the message, shortened) and ``terms`` (the terms its
  ranking read of its own words, ``query.parse``: a foreign language's
  function words left out, no pasted block's; space-separated, in
  order, ready for learning): kept only while learning is on
  (``SKILL_RETRIEVAL_LEARN``), else null;
- ``why``: on a prompt a hook answered from an index, "" when the
  semantic tier answered, else why BM25 answered alone
  (``service.bm25_reason``); null otherwise (the Hermes plugin's turns, a
  runner with no skill folders).  Doctor's tally of the tiers reads it
  (``tier_tally``): one append a prompt, where a second log file was
  written before.  Lines of nine fields (no ``why``) are read as null.

Cheap on the hot path: one ``O_APPEND`` write of one line, and a 32-byte
read of the first line's time.  The record is bounded (``MAX_PROMPTS``
prompts, ``MAX_AGE_S``, ``MAX_BYTES``): readers apply the bounds, and the
file is compacted (rewritten atomically, old and damaged lines dropped)
when an append crosses a ``STEP`` boundary of its size or its first line is
past its age, so a prompt pays for a rewrite once in thousands.  An append
that races a compaction may be lost: a count, never a prompt.

Recording never fails a prompt: ``append`` never raises, and a file that is
not the user's own regular file is never written.
"""

import posix

from retriever import locate

VERSION = 1
FILE = "usage.log"
MAX_PROMPTS = 10000
MAX_AGE_S = 90 * 86400.0
MAX_BYTES = 10 << 20
STEP = 1 << 20          # compaction when the file grows past a multiple of this
PROMPT_CHARS = 240      # of the message kept (whitespace folded)
_HEAD = 32              # bytes read to find the first line's time
SAVE_READ = 32 << 10    # transcript bytes read past the saved offset that make the memory save it


def path():
    """The record: ``usage.log`` in the per-user cache folder."""
    return locate.cache_dir() + "/" + FILE


def learning(warn=None):
    """Whether learning is on (SKILL_RETRIEVAL_LEARN): then each prompt's
    terms and shortened text are kept."""
    from retriever import settings
    return settings.get("SKILL_RETRIEVAL_LEARN", warn)


def session_key(runner, session_id):
    """The session's name in the record: a hash, not the runner's id."""
    if not isinstance(session_id, str) or not session_id:
        return ""
    return locate.fnv64((runner or "") + "\0" + session_id)


def injected_names(results):
    """``[[name], [name, folder], ...]`` for injected result dicts: the
    names the agent may load each by."""
    out = []
    for r in results:
        name = r.get("name") or ""
        folder = (r.get("id") or "").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
        out.append([name] if folder.lower() == name.lower() else [name, folder])
    return out


def loaded_names(found):
    """The skill names among what the session memory found loaded
    (names, folders, paths, "plugin:name"): those without "/" or ":"
    (each form found adds its last part too)."""
    return sorted({x for x in found if "/" not in x and ":" not in x})


def line(runner, skey, injected, tier, loaded, text=None, terms=None, now=None, why=None):
    """One record line (bytes, newline-terminated).  ``text`` and
    ``terms`` are kept as given: pass None when learning is off.
    ``why``: see the module's docstring."""
    from retriever import jsonlite
    import time
    now = time.time() if now is None else now
    prompt = " ".join(text.split())[:PROMPT_CHARS] if isinstance(text, str) else None
    words = " ".join(terms) if terms else None
    return (jsonlite.encode([VERSION, int(now), runner, skey, injected, tier or "", loaded, prompt, words,
                             " ".join(why.split()) if isinstance(why, str) else None])
            + "\n").encode("ascii")


def append(data, where=None, now=None):
    """Append ``data`` (one ``line``) to the record at ``where`` (default
    ``path()``), compacting when due.  Never raises: a failure is one log
    line, and the prompt goes on."""
    try:
        _append(data, where or path(), now)
    except Exception as exc:
        locate.log("usage record: not written (%s: %s)" % (type(exc).__name__, exc))


def _append(data, where, now):
    folder = where.rpartition("/")[0]
    if not locate.private_dir(folder):
        try:
            posix.lstat(folder)
            return  # there, but not the user's own closed folder: keep nothing
        except FileNotFoundError:
            try:
                posix.mkdir(folder, 0o700)
            except FileNotFoundError:  # no ~/.cache either: rare, so the heavier helper
                from retriever.background import _makedirs
                _makedirs(folder)
    fd = posix.open(where, posix.O_RDWR | posix.O_APPEND | posix.O_CREAT | posix.O_NOFOLLOW
                    | posix.O_NONBLOCK | posix.O_CLOEXEC, 0o600)
    try:
        st = posix.fstat(fd)
        if (st.st_mode & 0o170000) != 0o100000 or st.st_uid != posix.getuid():
            return  # not ours: never written
        if st.st_mode & 0o077:
            posix.fchmod(fd, 0o600)
        posix.write(fd, data)
        before, after = st.st_size, st.st_size + len(data)
        if before == 0:
            return
        if now is None:
            import time
            now = time.time()
        first = time_of(posix.pread(fd, _HEAD, 0))
    finally:
        posix.close(fd)
    # A day's slack on the age: swept at most daily, not on every prompt.
    if first is None or now - first > MAX_AGE_S + 86400 or before // STEP != after // STEP \
            or after > MAX_BYTES:
        compact(where, now)


def time_of(head):
    """The time of a record line from its first bytes, or None when they
    are not a line of this version."""
    if not head.startswith(b"[1,"):
        return None
    end = head.find(b",", 3)
    try:
        return int(head[3:end]) if end > 3 else None
    except ValueError:
        return None


def compact(where=None, now=None):
    """Rewrite the record within its bounds, atomically: the last
    MAX_PROMPTS lines of the last MAX_AGE_S, at most 90% of MAX_BYTES;
    damaged lines dropped (one log line says how many)."""
    import time
    where = where or path()
    now = time.time() if now is None else now
    data = _read(where)
    if data is None:
        return
    keep, bad = _within(data.split(b"\n"), now)
    total = sum(len(x) + 1 for x in keep)
    while keep and total > MAX_BYTES * 9 // 10:
        total -= len(keep.pop(0)) + 1
    from retriever import fileutil
    text = b"".join(x + b"\n" for x in keep).decode("utf-8", "surrogateescape")
    fileutil.write_atomic(where, text, mode=0o600)
    if bad:
        locate.log("usage record: %d damaged line%s dropped from %s" % (bad, "" if bad == 1 else "s", where))


def _within(lines, now):
    # (lines within the bounds, damaged lines); the last piece of a split
    # has no newline: a line being written or torn, left out.
    keep, bad = [], 0
    for x in lines[:-1]:
        t = time_of(x[:_HEAD])
        if t is None or not x.endswith(b"]"):
            bad += 1 if x.strip() else 0
        elif -86400 <= now - t <= MAX_AGE_S:
            keep.append(x)
    return keep[-MAX_PROMPTS:], bad


def _read(where):
    # The record's bytes (its last MAX_BYTES + STEP at most), or None when
    # it is missing or not the user's own file.
    fd = locate.open_own(where)
    if fd < 0:
        return None
    try:
        size = posix.fstat(fd).st_size
        start = max(0, size - MAX_BYTES - STEP)
        chunks, off = [], start
        while off < size:
            b = posix.pread(fd, min(size - off, 1 << 20), off)
            if not b:
                break
            chunks.append(b)
            off += len(b)
    finally:
        posix.close(fd)
    data = b"".join(chunks)
    if start:
        data = data[data.find(b"\n") + 1:]  # the first line read is a part
    return data


def read(where=None, now=None, days=None, runner=None):
    """The record's entries within its bounds, oldest first, as dicts
    (t, runner, session, injected, tier, loaded, prompt, terms, why); damaged
    lines skipped.  ``days``: only the last that many days; ``runner``:
    only that runner's.  Returns ``(entries, damaged lines)``."""
    import time
    from retriever import jsonlite
    now = time.time() if now is None else now
    data = _read(where or path())
    if not data:
        return [], 0
    lines, bad = _within(data.split(b"\n"), now)
    since = now - days * 86400.0 if days is not None else None
    out = []
    for x in lines:
        try:
            v = jsonlite.loads(x.decode("utf-8"))
        except (ValueError, RecursionError):
            v = None
        e = _entry(v)
        if e is None:
            bad += 1
        elif (since is None or e["t"] >= since) and (runner is None or e["runner"] == runner):
            out.append(e)
    return out, bad


def _entry(v):
    # A parsed line as a dict, or None: every field type-checked.
    if not isinstance(v, list) or len(v) not in (9, 10) or v[0] != VERSION:
        return None
    _, t, runner, skey, inj, tier, loaded, prompt, terms = v[:9]
    why = v[9] if len(v) == 10 and isinstance(v[9], str) else None
    if not isinstance(t, int) or not isinstance(runner, str) or not isinstance(skey, str) \
            or not isinstance(inj, list) or not isinstance(tier, str):
        return None
    injected = [[n for n in x if isinstance(n, str)] for x in inj if isinstance(x, list) and x]
    if not all(injected):
        return None
    if loaded is not None:
        if not isinstance(loaded, list):
            return None
        loaded = [x for x in loaded if isinstance(x, str)]
    return {"t": t, "runner": runner, "session": skey, "injected": injected, "tier": tier,
            "loaded": loaded, "prompt": prompt if isinstance(prompt, str) else None,
            "terms": terms.split() if isinstance(terms, str) else None, "why": why}


def tier_tally(entries, m=50):
    """How the last ``m`` prompts a hook answered from an index were
    answered, over record ``entries`` (``read``): ``{"prompts": M,
    "bm25": N, "why": {reason: count}}``, reasons without their detail
    ("helper loading", "turned off", ...), most frequent first."""
    counted = [e["why"] for e in entries if e.get("why") is not None][-m:]
    why = {}
    for w in counted:
        if w:
            r = w.split(" (")[0]
            why[r] = why.get(r, 0) + 1
    return {"prompts": len(counted), "bm25": sum(why.values()),
            "why": dict(sorted(why.items(), key=lambda kv: -kv[1]))}


def forget(where=None):
    """Delete the record (and its compaction's leftovers).  Returns True
    when there was one.  A path that is not the user's own file is left."""
    where = where or path()
    locate.remove_dead_temps(where)
    try:
        st = posix.lstat(where)
    except FileNotFoundError:
        return False
    if (st.st_mode & 0o170000) != 0o100000 or st.st_uid != posix.getuid():
        raise OSError("%s is not a file of yours; left as it is" % where)
    posix.unlink(where)
    return True


def loads_since(memo, held):
    """The skills the agent loaded since the session's last look
    (``retriever.session`` memo ``memo``; ``held``: the set of what it
    held before this prompt), read on every prompt, silent ones too;
    None when the runner passed no transcript or history to read (nor
    the loads its caller read in one: ``session.begin``'s ``loads``)."""
    if not (memo["transcript"] or memo["history"] or memo.get("shown")):
        return None
    from retriever import session
    was = memo["entry"]["x"]
    if memo["entry"]["n"] == 1 and not memo["seen"] and memo["transcript"]:
        # The session's first prompt, when nothing needed a look: what
        # a resumed session's transcript held before (up to 512 KiB, about
        # 3 ms to parse) is not read on this prompt's time; the next
        # prompt reads on from here.
        end = session.transcript_end(memo["transcript"])
        if end is not None:
            memo["entry"]["x"], memo["seen"], memo["changed"] = end, True, True
            return []
    session._see_loaded(memo)  # once per prompt (filter may have looked already)
    now = memo["entry"]["x"]
    # The session memory saves how far it read only when something
    # changed; a silent prompt now reads too, so a transcript that grew a
    # lot is saved as read, and the next prompt does not read it again.
    if was and now and was[:2] == now[:2] and now[2] - was[2] > SAVE_READ or not was and now:
        memo["changed"] = True
    return loaded_names([x for x in memo["entry"]["l"] if x not in held])


def note(runner, session_id, text, injected, tier, loaded, terms=None, why=None):
    """Record one prompt of session ``session_id``: ``injected`` (result
    dicts), ``tier``, ``loaded`` (``loads_since``), ``why`` (see the
    module's docstring); the prompt ``text`` and its ``terms`` only while
    learning is on.  ``terms``: the message's own terms as its ranking
    read them (``query.parse`` leaves them in the session's context, as
    ``terms``), not analysed again here: analysed apart, a foreign
    message kept the function words its ranking leaves out, and the
    pairs learnt from it were never looked up.  Never raises."""
    try:
        learn = learning()
        append(line(runner, session_key(runner, session_id), injected_names(injected), tier, loaded,
                    text if learn else None, terms if learn else None, why=why))
    except Exception as exc:
        locate.log("usage record: not written (%s: %s)" % (type(exc).__name__, exc))


def relearn(index_path):
    """Fold the record into the learnt table of the index at
    ``index_path`` (``retriever.learn``).  Run in a detached child after
    a prompt that saw loads, or whose index was rebuilt since the table
    was folded.  Never raises."""
    try:
        import time
        from retriever import learn
        now = time.time()
        learn.write(index_path, read(now=now)[0], now)
    except Exception as exc:
        locate.log("learning: not folded (%s: %s)" % (type(exc).__name__, exc))
    return True
