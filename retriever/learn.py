"""Learning from what the agent loads: the user's own words for a skill.

A skill the agent loaded after a prompt gains that prompt's terms as
evidence (the usage record, ``retriever.usage``), so a later prompt in
those words ranks it higher and passes the gate, with BM25 alone too.

The record is folded, off the hot path, into a small "learnt" table per
index (``fold``, written by ``usage.relearn``): for each term, its term
number and ``{skill number: evidence}``.  The hook reads it with one read
(``load``), looks up only the message's terms, and ``apply`` adds them to
the message's BM25 scores and to the skills each term is found in, so the
gate sees them through its usual features (coverage, name+description
coverage, known terms, rarest term): no coefficient changes.

Guards:
- evidence decays with age (HALF_LIFE_S), is scaled by how specific the
  term is to the skill (``evidence``) and saturates (``WEIGHT v / (v +
  1)`` times the term's IDF: at most about one field match of the
  library's own text, per term), and the table keeps MAX_TERMS terms;
- a load of a skill the session had injected counts FOLLOWED, an
  unoffered load UNOFFERED (the agent went and found it): a loop of
  injecting and loading feeds itself only half as fast;
- a skill injected and then not loaded loses IGNORED per prompt, only
  where the runner shows loads (``loaded`` not None); a net loss lowers
  its score by at most PENALTY of the term's IDF, and never adds it to a
  term's skills;
- per user and per index, in the cache folder; ``SKILL_RETRIEVAL_LEARN=off``
  neither reads nor writes it; ``stats --forget`` deletes it.

Terms the library does not hold (team jargon) are given the term number
of the library's rarest term, so their IDF is that of a word one skill
has.
"""

import posix

from retriever import locate

VERSION = 1
PREFIX = "learnt-"
HALF_LIFE_S = 30 * 86400.0
UNOFFERED = 1.0
FOLLOWED = 0.5
IGNORED = 0.1
PENALTY = 0.2
WEIGHT = 2.0  # a learnt term's score at most: about one strong field match (BM25's (k1 + 1) x IDF)
MIN_EVIDENCE = 0.3  # for a term to count as the user's name for a skill (one load)
LEARNT_WORDS = 2  # words of a message a skill must have learnt for any of them to count
MAX_TERMS = 4000
MAX_BYTES = 1 << 20


def path(index_path):
    """The learnt table of the index at ``index_path``, in the cache folder."""
    return locate.learnt_path(index_path)


def _identity(index_path):
    # Which build of the index a table was folded for: skill numbers
    # change with a rebuild.
    try:
        st = posix.stat(index_path)
    except OSError:
        return None
    return "%d:%d:%d" % (st.st_ino, st.st_size, st.st_mtime_ns)


def pairs(terms):
    """The message's word pairs: each term with the next, as ``"a b"``
    (no term holds a space), CJK tokens left out (they are character
    pairs already).  A team's name for a task is often a phrase of
    common words ("morning brief", "error budget"): the pair is specific
    to it where each word is not, and is learnt and looked up as one
    more term, with ``terms`` in the order ``query.parse`` keeps them
    (each term once, first place), the order the usage record keeps
    them in (``usage.note``)."""
    from retriever.tokenize import is_cjk_token
    return ["%s %s" % (a, b) for a, b in zip(terms, terms[1:]) if not (is_cjk_token(a) or is_cjk_token(b))]


def evidence(entries, now):
    """``{term: {skill name: evidence}}`` from usage record entries
    (``usage.read``, oldest first): each prompt's loads (seen at its
    session's next prompt) and its injected skills not loaded.  A gain
    is scaled by how specific the term is to the skill: the share of the
    sessions holding the term in which the skill was loaded after a
    prompt holding it ("today", "please" and "can" are in many sessions
    that load nothing).  Sessions, not prompts: a session's follow-ups
    repeat its topic's words ("sort the weekly numbers by region") with
    the skill loaded already, and are no evidence against them."""
    out = {}
    seen = {}  # term -> sessions holding it
    after = {}  # (term, skill name) -> sessions where the skill was loaded after a prompt holding it
    last = {}  # session -> (entry, names injected so far in the session)
    for e in entries:
        key = (e["runner"], e["session"])
        if e["terms"]:
            e = dict(e, terms=e["terms"] + pairs(e["terms"]))
        for t in e["terms"] or ():
            seen.setdefault(t, set()).add(key)
        prev = last.get(key)
        if prev is not None and e["loaded"] is not None and prev[0]["terms"]:
            p, offered = prev
            decay = 0.5 ** (max(0.0, now - p["t"]) / HALF_LIFE_S)
            loaded = set(e["loaded"])
            gains = {}
            for name in loaded:
                gains[name] = (FOLLOWED if name in offered else UNOFFERED) * decay
            for names in p["injected"]:
                if not loaded.intersection(names):
                    gains[names[0]] = gains.get(names[0], 0.0) - IGNORED * decay
            for t in p["terms"]:
                row = out.setdefault(t, {})
                for name, g in gains.items():
                    row[name] = row.get(name, 0.0) + g
                    if g > 0:
                        after.setdefault((t, name), set()).add(key)
        offered = set(prev[1]) if prev is not None else set()
        for names in e["injected"]:
            offered.update(names)
        last[key] = (e, offered)
    for t, row in out.items():
        for name, v in row.items():
            if v > 0:
                row[name] = v * len(after.get((t, name), ())) / len(seen[t])
    return out


def fold(idx, entries, now):
    """The learnt table of ``idx`` for usage entries: ``{term: [term
    number, {skill number: evidence}]}``; names not in the index dropped."""
    from retriever.store import doc, find_term
    ev = evidence(entries, now)
    if not ev:
        return {}
    number = {}
    for n in range(idx["header"]["n_docs"]):
        rid, name = doc(idx, n)[:2]
        number.setdefault(name, n)
        number.setdefault(rid.rsplit("/", 1)[-1].rsplit(":", 1)[-1], n)
    rare = None
    table = {}
    for t, row in ev.items():
        skills = {}
        for name, v in row.items():
            n = number.get(name)
            if n is not None and abs(v) > 1e-3:
                skills[str(n)] = round(skills.get(str(n), 0.0) + v, 4)
        if skills:
            i = find_term(idx, t)
            if i < 0:
                if rare is None:
                    rare = rarest(idx["idf"])
                i = rare
            if i >= 0:
                table[t] = [i, skills]
    if len(table) > MAX_TERMS:
        keep = sorted(table, key=lambda t: -max(abs(v) for v in table[t][1].values()))[:MAX_TERMS]
        table = {t: table[t] for t in keep}
    return table


def rarest(idf):
    """The number of the rarest term of an index's IDF table (the first
    of the highest IDF), or -1 when it is empty.  One read of the table:
    indexing it term by term was a ``pread`` each, 100 ms a fold at 3,741
    skills, in the child every prompt after a load starts."""
    values = list(idf[0:len(idf)])
    return values.index(max(values)) if values else -1


def write(index_path, entries, now):
    """Fold usage ``entries`` into the learnt table of the index at
    ``index_path`` and write it atomically (removed when empty)."""
    from retriever import fileutil, store
    ident = _identity(index_path)
    where = path(index_path)
    table = fold(store.load(index_path), entries, now) if entries and ident else {}
    if not table:
        try:
            posix.unlink(where)
        except OSError:
            pass
        return
    fileutil.write_atomic(where, "learnt %d %s" % (VERSION, ident) + encode(table).decode("utf-8"), mode=0o600)


def encode(table):
    """A folded table (``fold``) as ``apply`` reads it: bytes of one line
    per term, each after a newline, ``term TAB term number TAB n:w,...``.
    The hook looks up only the message's terms (``bytes.find``), so a
    table of thousands of terms costs a read, not a parse."""
    out = []
    for t in sorted(table):
        i, skills = table[t]
        if t and not any(c in t for c in "\t\n\r"):
            out.append("\n%s\t%d\t%s" % (t, i, ",".join("%s:%s" % (n, w) for n, w in skills.items())))
    return ("".join(out) + "\n").encode("utf-8")


def load(index_path):
    """The learnt table (``encode``'s bytes) for the index at
    ``index_path``, or None: missing, not the user's own or damaged;
    False when it was folded for another build of the index
    (``usage.relearn`` folds it again)."""
    fd = locate.open_own(path(index_path))
    if fd < 0:
        return None
    try:
        # Its size, not MAX_BYTES: a 1 MiB buffer costs more than the read.
        raw = posix.read(fd, min(posix.fstat(fd).st_size, MAX_BYTES))
    finally:
        posix.close(fd)
    # The header line, then each term's line after a newline: the lookups
    # search the whole bytes, and no term line starts the file.
    parts = raw[:raw.find(b"\n")].split(b" ")
    if len(parts) != 3 or parts[0] != b"learnt" or parts[1] != b"%d" % VERSION:
        return None
    if parts[2].decode("ascii", "replace") != _identity(index_path):
        return False
    return raw


def _row(table, term):
    # (term number, {skill number: evidence}) for ``term``, or None.  The
    # lines are sorted by term (``encode``; UTF-8 keeps code point order),
    # so a binary search reads about log2(lines) of them: a scan
    # (``bytes.find``) read the whole table for each term it lacks, most
    # of a message's terms and pairs (the 72 KB table of make eval's week
    # one: 0.49 ms a message, 0.15 ms with the search, as before pairs).
    want = term.encode("utf-8", "surrogateescape")
    lo, hi = table.find(b"\n"), len(table)  # lo: a line's start; the term's is in [lo, hi)
    while 0 <= lo < hi:
        at = table.rfind(b"\n", lo, (lo + hi) // 2 + 1)
        end = table.find(b"\n", at + 1)
        if end < 0:
            end = len(table)
        if end == at + 1:  # the empty line that ends the table
            hi = at
            continue
        tab = table.find(b"\t", at + 1, end)
        have = table[at + 1:end if tab < 0 else tab]
        if have == want:
            break
        if have < want:
            lo = end
        else:
            hi = at
    else:
        return None
    try:
        _, i, skills = table[at + 1:end].decode("utf-8").split("\t")
        return int(i), {int(n): float(w) for n, w in (x.split(":") for x in skills.split(","))}
    except ValueError:
        return None  # a damaged line: that term only


def apply(idx, table, terms, acc, found):
    """Add the learnt evidence for the message's ``terms`` and their
    ``pairs`` to its BM25 scores ``acc`` (in place, as ``query.parse``
    made them); a term, or each word of a pair, with evidence of at
    least MIN_EVIDENCE for a skill also counts as found in it and as a
    word of its name and description (the user's own name for it), for
    the gate's coverage features.  Returns ``({skill number: the score
    it added}, {skill number: set of such terms})`` (``explain`` shows
    the first)."""
    idf = idx["idf"]
    n_docs = idx["header"]["n_docs"]
    added, heads = {}, {}
    named = {}  # word -> (its term number, skills it names)
    rows = []
    words = {}  # skill number -> the message's words with a gain for it
    for t in terms + pairs(terms):
        row = _row(table, t)
        if row is None:
            continue
        i, skills = row
        if not 0 <= i < len(idf):
            continue
        rows.append((t, i, skills))
        for n, v in skills.items():
            if v > 0:
                words.setdefault(n, set()).update(t.split(" "))
    for t, i, skills in rows:
        w = idf[i]
        for n, v in skills.items():
            if not 0 <= n < n_docs:
                continue
            if v <= 0 and n not in acc:
                continue  # a loss lowers a score; it never makes a candidate
            if v > 0 and len(words[n]) < LEARNT_WORDS:
                # One word of a taught phrase is not the phrase: after
                # "grab the morning brief", "good morning!" and "grab my
                # coffee" were given the skill loaded after it.
                continue
            s = WEIGHT * w * v / (v + 1.0) if v > 0 else -PENALTY * w * min(1.0, -v)
            acc[n] = acc.get(n, 0.0) + s
            added[n] = added.get(n, 0.0) + s
            if v >= MIN_EVIDENCE:
                # A pair's words are what the gate counts (each once).
                for word in t.split(" "):
                    named.setdefault(word, (i, set()))[1].add(n)
    for word, (i, skills) in named.items():
        have = found.get(word)
        docs = have[1] if have else ()
        more = sorted(n for n in skills if n not in docs)
        for n in skills:
            heads.setdefault(n, set()).add(word)
        if more:  # a new list: the postings' own is the index's
            found[word] = (have[0] if have else i, list(docs) + more)
    return added, heads


def forget():
    """Delete every learnt table of this user; returns how many."""
    folder = locate.cache_dir()
    try:
        names = posix.listdir(folder)
    except OSError:
        return 0
    gone = 0
    for name in names:
        if name.startswith(PREFIX):
            try:
                st = posix.lstat(folder + "/" + name)
                if locate.own_file(st):
                    posix.unlink(folder + "/" + name)
                    gone += 1
            except OSError:
                pass
    return gone
