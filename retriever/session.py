"""Session memory: a skill the agent was just given, or has loaded, is not
offered again.

A filter applied after the decision of what to inject: the decision stays
per prompt; this module only takes out what the session already holds.

- A skill injected in the last ``RECENT_TURNS`` turns of the same session
  is not injected again, unless the turn asks for it again (``asks_for``):
  the message names the skill (``decide.names``), or the skill scores at least ``STRONGER``
  times its score when it was injected, by the same ranking (scores of
  BM25 alone and of the fused ranking are not on one scale).
- A skill the agent has loaded in this session is not offered again: seen
  in the runner's transcript (Claude Code, Codex and Gemini CLI name one in
  the hook payload) or in the conversation Hermes passes its hooks.

It also gives a turn its session's context: the terms of the last prompts
that were given a skill rank a short or referring turn (``contextualize``,
read by ``query.parse``), and a turn that ``continues`` what the session is
doing gets nothing new.

Use::

    memo = session.begin(session_id, runner, transcript=path, history=msgs)
    session.contextualize(req, memo)          # before service.answer(text, req)
    memo["ranking"] = "+".join(req["tiers"])  # after it
    results = session.filter(memo, results, text)
    session.record(memo, injected)

``begin`` returns None without a session id, and ``filter`` and ``record``
then do nothing: a hook without one behaves as it did before.

The memory of every session of a user is one small JSON file in the cache
folder (``sessions.json``, mode 0600), read once per prompt and replaced
atomically when the turn changes what it holds (a silent turn with nothing
injected in the window writes nothing); the Hermes plugin, a long-lived
process, passes a dict (``store``) instead.  It is bounded (``MAX_SESSIONS``
sessions, each with at most ``MAX_GIVEN`` injections and ``MAX_LOADED``
loaded skills, ``MAX_FILE_BYTES`` in all) and a session is forgotten a day
(``EXPIRE_S``) after its memory last changed.  Two prompts of one session at
once each replace the whole file: one of the two updates may be lost, the
file is never torn.

Only what the product made, where only the user can write, is trusted: a
state file that is a link, is not a regular file, belongs to someone else or
does not parse is ignored (and a file not ours is never replaced); a
transcript is read only at an absolute path naming a regular file the user
owns, at most ``TAIL_BYTES`` from its end, and its text is untrusted: every
field is type-checked, and all it can do is keep a skill out.

Hot path: runs in the per-prompt hook process; built-in modules, ``locate``
and ``jsonlite`` only (and ``decide`` and ``query`` for a named skill,
loaded already by the answer), plain dicts and lists.
"""

import posix
import time

from retriever import jsonlite, locate

# A turn is one user prompt.  The runners keep the whole conversation in
# the model's context, so an injected description is still there a few
# prompts later; four turns cover a task and its follow-ups ("now the
# tables too", "shorter", "thanks"), and after that a still-relevant skill
# is offered again in case the context was compacted or the topic moved on.
RECENT_TURNS = 4
# The context a turn is ranked in: the terms of the session's last
# CONTEXT_PROMPTS prompts that were given a skill (``query.CONTEXT_TERMS``
# each), the one just before this turn at full weight and CONTEXT_DECAY
# times less for each prompt since.
CONTEXT_PROMPTS = 3
CONTEXT_DECAY = 0.6
# With the tier, the last prompt given a skill also leaves its encoder's
# MAX_COS best skills and cosines (x COS_SCALE, as ints: compact JSON).
MAX_COS = 10
COS_SCALE = 1000
# A skill the session was just given, ranked in the turn's first few at
# this share of the first's score or more, says the turn continues the
# session's work (``continues``).
CONTINUES = 0.5
SHORT_WORDS = 12
# A message term this rare (its IDF against ln(1 + N), the decision's "rare
# term in the name") in the name of a skill the decision picked, one the
# session was not just given, asks for a new tool by name: "cria os tickets
# no jira" in a postmortem session does not continue the postmortem's work
# (``asks_for_new``).  Chosen on the session set, each tier apart, and held
# out: leaving one session out, the tier's folds pick 0.5 in 12 of 12 (in
# context 0.750 -> 0.790, silent 0.902 -> 0.894); BM25 alone's pick none
# in 11 of 12, as its decision's picks are noisier ("sweet, dbt build
# passes" brought a dbt skill), and 0.7 changes none of its turns.
RARE_NAME = 0.5
RARE_NAME_BM25 = 0.7
STRONGER = 2.0          # a score this many times the injected one asks again
EXPIRE_S = 86400.0      # a session is forgotten a day after its last prompt
MAX_SESSIONS = 100      # sessions kept; the least recently used go first
MAX_GIVEN = 32          # injections remembered per session
MAX_LOADED = 64         # loaded skills (names and folders) per session
MAX_FILE_BYTES = 1 << 18  # saved smaller (oldest sessions dropped); a larger one is not ours
TAIL_BYTES = 1 << 19    # a transcript is read this far from its end at most
HISTORY_MESSAGES = 200  # Hermes: messages of the conversation looked at
_FILE = "sessions.json"
# Tools whose only argument is a skill's name (Claude Code's Skill, Gemini
# CLI's activate_skill, Hermes' skill_view).
_SKILL_TOOLS = ("skill", "activate_skill", "skill_view")
# Transcript lines that can show a skill being loaded hold one of these;
# only those lines are parsed.
_MARKERS = (b"SKILL.md", b'"Skill"', b"activate_skill", b"skill_view", b"<skill>",
            b"Base directory for this skill")
_BASE_DIR = "Base directory for this skill: "  # Claude Code, before a loaded skill's text
# Bounds on the parse of untrusted transcript text, so that a prompt's cost
# does not grow with what one line holds (issue 36: a 96 KiB argument of
# "SKILL.md/SKILL.md/..." once took 26 s and every later prompt was killed).
# CPU time of the parsing thread (not the process: a Hermes gateway runs
# other turns in other threads) per prompt; the rest waits for the next.
PARSE_BUDGET_S = 0.025
_PATH_MAX = 4096        # a longer token is no path a tool could open
_MENTIONS = 64          # SKILL.md mentions looked at per string: the last ones
_PARTS = 256            # tool calls, content parts and strings looked at per record
_DELIMS = " \t\n\"'`=<>|;&(),:"  # what ends a path token in a command line
_PATTERN = "*?[]{}$"   # a token holding one is a pattern, not a path


# ------------------------------------------------------------------ the API


def begin(session_id, runner="", transcript=None, history=None, agent_id=None, ranking="",
          store=None, path=None, now=None, loads=None):
    """The memory of one prompt of session ``session_id`` (a str), or None
    when there is none (no session id, or no safe place to keep it).

    ``transcript``: the runner's transcript file, read when ``filter`` has
    something to filter.  ``history``: a list of chat messages (Hermes).
    ``agent_id``: a subagent's id (its context is not its parent's).
    ``loads``: what ``history_loads`` found, when the caller read the
    history already (the Hermes plugin, before taking its lock).
    ``ranking``: which ranking scored this prompt's results ("bm25",
    "bm25+semantic"): scores are compared only within one.
    ``store``: a dict holding the sessions in memory (the Hermes plugin);
    otherwise the state file at ``path`` (default: ``state_path()``).
    ``now``: the clock, in seconds since the epoch (tests)."""
    if not isinstance(session_id, str) or not session_id:
        return None
    now = time.time() if now is None else now
    key = _key(runner, session_id, agent_id)
    if store is not None:
        sessions, writable = store.setdefault("sessions", {}), False
    else:
        path = path or state_path()
        sessions, writable = load(path, now, key)
        if writable is None:
            return None
    prune(sessions, now)
    entry = _clean(sessions.get(key))
    if entry is None:
        # Stored by ``record``, if it saves.
        entry = {"t": now, "n": 0, "g": [], "l": [], "x": None, "p": [], "v": None}
    else:
        sessions[key] = entry  # the checked copy, in place of what was read
    entry["n"] += 1
    return {"key": key, "entry": entry, "sessions": sessions, "path": path, "writable": writable,
            "now": now, "ranking": ranking or "", "transcript": transcript if isinstance(transcript, str) else None,
            "history": history if isinstance(history, list) else None, "seen": False, "context": None,
            "loads": [x for x in loads if isinstance(x, str)] if isinstance(loads, list) else [],
            # The caller read a conversation (``loads`` given, even empty):
            # the record then knows what was loaded (``usage.loads_since``).
            "shown": isinstance(loads, list),
            # Whether this turn changes what the session holds: a turn that
            # injects nothing, finds no new load and has nothing injected in
            # the window to count down is not written.
            "changed": any(entry["n"] - g[0] <= RECENT_TURNS for g in entry["g"])}


def contextualize(req, memo):
    """Give the answer request ``req`` this session's context (the
    ``context`` key ``query.parse`` reads): the terms of its last
    CONTEXT_PROMPTS prompts that were given a skill, ``{term: weight}``
    (CONTEXT_DECAY per prompt since).  The ranking fills in its first
    ``ranked`` skills and the message's ``own`` terms, which ``filter``
    and ``record`` read.  ``memo`` None: nothing."""
    if memo is None:
        return
    entry = memo["entry"]
    prior = {}
    for turn, terms in entry["p"]:
        w = CONTEXT_DECAY ** (entry["n"] - turn - 1)
        for t in terms:
            if prior.get(t, 0.0) < w:
                prior[t] = w
    context = {"prior": prior}
    # The skills it was given in its last RECENT_TURNS turns, by the same
    # decay (``query.SKILL_PRIOR``).
    skills = {}
    for turn, rid, _score, _ranking in entry["g"]:
        w = CONTEXT_DECAY ** max(0, entry["n"] - turn - 1)
        if skills.get(rid, 0.0) < w:
            skills[rid] = w
    if skills:
        context["skills"] = skills
        if entry.get("k"):
            context["numbers"] = entry["k"]  # their numbers in the build that ranked them
    v = entry.get("v")
    if v:
        # The encoder's side of the same context: the last prompt given a
        # skill, as its top cosines (``semantic.fused_search``).
        context["prior_cos"] = (CONTEXT_DECAY ** max(0, entry["n"] - v[0] - 1), v[1], v[2])
    memo["context"] = req["context"] = context


def filter(memo, results, text=""):
    """``results`` (ranked result dicts, in order) without the skills this
    session already holds: injected in the last RECENT_TURNS turns (unless
    ``asks_for``) or loaded by the agent; nothing at all when the turn
    ``continues`` what the session is doing.  ``memo`` None: ``results``."""
    if memo is None:
        return results
    entry = memo["entry"]
    recent = {}
    for turn, rid, score, ranking in entry["g"]:
        if entry["n"] - turn <= RECENT_TURNS:
            recent[rid] = score if ranking == memo["ranking"] else 0.0
    if recent and continues(memo, recent, results, text):
        return []
    if not results:
        return results
    _see_loaded(memo)
    loaded = set(entry["l"])
    if not loaded and not recent:
        return results
    text = text if isinstance(text, str) else ""
    out = []
    for r in results:
        if _loaded(r, loaded):
            continue
        if r["id"] in recent and not asks_for(r, text, recent[r["id"]]):
            continue
        out.append(r)
    return out


def continues(memo, recent, results, text):
    """True when this turn continues what the session is doing: among the
    first candidates of its ranking in context (``contextualize``) is a
    skill injected in the last RECENT_TURNS turns (``recent``: id to its
    score then), scoring at least CONTINUES times the first (the first
    itself, for a turn of SHORT_WORDS words or more), and the turn does
    not ask for it again (``asks_for``).  Such a turn ("give me 5
    subject lines for email 1" after an email task) gets nothing new: not
    a near skill of the same topic, and a task the session already has is
    in the model's context.  Unless it names a new tool (``asks_for_new``)."""
    context = memo["context"] or {}
    ranked = context.get("ranked")
    if not ranked or ranked[0][1] <= 0.0:
        return False
    floor = CONTINUES * ranked[0][1]
    # A longer message says what it wants in its own words: only its first
    # place tells whether it stays on the session's work.
    for rid, score in ranked if context.get("words", 0) < SHORT_WORDS else ranked[:1]:
        if rid in recent and score >= floor:
            return not any(r["id"] == rid and asks_for(r, text, recent[rid]) for r in results) \
                and not asks_for_new(context, recent, results, memo.get("ranking") != "bm25")
    return False


def asks_for_new(context, recent, results, tier=True):
    """True when the turn asks for a tool the session was not given, by
    name: a skill of ``results`` (the decision's picks) outside ``recent``
    whose name holds a term of the message at least RARE_NAME rare
    (``context["rarity"]``: IDF against ln(1 + N); RARE_NAME_BM25 when
    BM25 alone answered, ``tier`` False).  Then the turn does not continue
    the session's work, however near its ranking stays to it."""
    floor = RARE_NAME if tier else RARE_NAME_BM25
    rare = {t for t, r in (context.get("rarity") or {}).items() if r >= floor}
    if not rare:
        return False
    from retriever.decide import name_terms  # loaded already: the answer was decided
    opts = context.get("analyzer") or {}
    return any(r["id"] not in recent and not rare.isdisjoint(name_terms(r["name"], opts)) for r in results)


def record(memo, injected):
    """Remember that ``injected`` (result dicts) went into this turn of the
    session, and save.  Never raises; ``memo`` None does nothing."""
    if memo is None:
        return
    try:
        entry, n = memo["entry"], memo["entry"]["n"]
        ids = {r["id"] for r in injected}
        given = [g for g in entry["g"] if g[1] not in ids and n - g[0] < RECENT_TURNS]
        given += [[n, r["id"], r.get("score") or 0.0, memo["ranking"]] for r in injected]
        entry["g"] = given[-MAX_GIVEN:]
        entry["t"] = memo["now"]
        _keep_numbers(entry, memo["context"] or {}, injected)
        own = (memo["context"] or {}).get("own")
        if own and injected:
            # A prompt that was given a skill sets the session's topic; chat
            # does not, and a turn that injects nothing writes nothing.
            entry["p"] = (entry["p"] + [[n, own]])[-CONTEXT_PROMPTS:]
            own_cos = (memo["context"] or {}).get("own_cos")
            entry["v"] = [n, own_cos[0], own_cos[1]] if own_cos else None
        sessions = memo["sessions"]
        if not injected and not memo["changed"]:
            return  # nothing to count down, nothing new: no write
        sessions.pop(memo["key"], None)
        sessions[memo["key"]] = entry  # most recently used last
        while len(sessions) > MAX_SESSIONS:
            sessions.pop(next(iter(sessions)))
        if memo["writable"]:
            save(memo["path"], sessions)
    except Exception as exc:  # memory is a saving, never a failure
        locate.log("session memory: not saved (%s: %s)" % (type(exc).__name__, exc))


def _keep_numbers(entry, context, injected):
    # The skill numbers of what the session holds (``entry["g"]``), in the
    # index build that ranked this turn: the next turns' skill prior finds
    # them without a search (``query._with_context``).
    build = context.get("build")
    if not build:
        entry["k"] = None
        return
    old = entry.get("k")
    numbers = dict(old[1]) if old and old[0] == build else {}
    for r in injected:
        if isinstance(r.get("n"), int):
            numbers[r["id"]] = r["n"]
    held = {g[1] for g in entry["g"]}
    numbers = {rid: n for rid, n in numbers.items() if rid in held}
    entry["k"] = [build, numbers] if numbers else None


def asks_for(result, text, score_then):
    """True when a turn asks again for a skill injected a few turns ago:
    ``text`` (the message) names it (``decide.names``, the decision's own
    rule: its identifier, written exactly, in the message's own words,
    not a pasted block), or its score now is at least STRONGER times
    ``score_then`` (0: not comparable)."""
    score = result.get("score") or 0.0
    if score_then and score > 0 and score >= STRONGER * score_then:
        return True
    # decide and query are loaded already: the answer was decided by them.
    from retriever import decide, query
    return decide.names(text, result) and decide.names(query.prose(text), result)


# ------------------------------------------------------------- state file


def state_path():
    """The state file: ``sessions.json`` in the per-user cache folder."""
    return locate.cache_dir() + "/" + _FILE


# The file is one JSON document, written a session a line:
#
#     {"v":1,"sessions":{
#     "<key>":{"t":...,"n":...},
#     "<key>":{"t":...}
#     }}
#
# so a prompt parses only its own session's line, reads the others' clock
# from the first bytes of theirs, and writes them back as the bytes it
# read (``_Line``): parsing and encoding a full file (100 sessions) was
# most of the memory's cost, on every prompt that saves.  A file of
# another shape (an older one, one edited by hand) is parsed whole.  The
# others' lines are checked for shape only (a key of ours, a clock, a
# whole object): the file is the user's own, written atomically.
_HEAD = b'{"v":1,"sessions":{\n'
_TAIL = b"\n}}\n"


class _Line(dict):
    """Another session's entry as the state file holds it: its clock
    (``t``, what ``prune`` reads) and, in ``raw``, its line's bytes (key
    and entry), written back as they were."""
    __slots__ = ("raw",)


def load(path, now, key=None):
    """``(sessions, writable)`` from the state file at ``path``: its
    sessions (empty when it is missing, damaged, expired or not ours), and
    whether it may be replaced: True, False when something not ours sits
    there (a link, a folder, another user's file), None when its folder is
    not the user's own and closed to others (then nothing is kept).
    Session ``key``'s entry is parsed (``begin`` checks it whole); the
    others are ``_Line``s where the file is in lines."""
    folder = path.rsplit("/", 1)[0]
    if not _private_folder(folder):
        return {}, None
    try:
        fd = posix.open(path, posix.O_RDONLY | posix.O_NOFOLLOW | posix.O_NONBLOCK | posix.O_CLOEXEC)
    except FileNotFoundError:
        return {}, True
    except OSError:
        return {}, False  # a link (ELOOP) or unreadable: not ours
    try:
        st = posix.fstat(fd)
        if (st.st_mode & 0o170000) != 0o100000 or st.st_uid != posix.getuid():
            return {}, False
        if st.st_size > MAX_FILE_BYTES or st.st_mode & 0o077 or now - st.st_mtime > EXPIRE_S:
            return {}, True  # ours, but too big, opened to others or stale: start over
        raw = _read(fd, st.st_size)
    finally:
        posix.close(fd)
    if raw.startswith(_HEAD) and raw.endswith(_TAIL):
        return _lines(raw[len(_HEAD):-len(_TAIL)], key), True
    try:
        doc = jsonlite.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return {}, True
    sessions = {}
    found = doc.get("sessions") if isinstance(doc, dict) and doc.get("v") == 1 else None
    if isinstance(found, dict):
        # Only the prompt's own session is read past its clock, so only it
        # is checked whole (``begin``: ``_clean``); the others need a valid
        # "t" for ``prune`` and are written back as they were (``save``
        # checks them all only if one cannot be written).  Checking all
        # of them was 40% of a prompt's memory cost with a full file.
        for k, raw_entry in found.items():
            t = raw_entry.get("t") if isinstance(raw_entry, dict) else None
            if _number(t):
                sessions[k] = raw_entry
    return sessions, True


def _lines(body, key):
    # The sessions of a file in lines (``_HEAD``): session ``key``'s
    # parsed, the others as ``_Line``s; a line that is not a session's
    # (damaged, edited) is dropped, and the others kept.
    sessions = {}
    want = key.encode("ascii", "replace") if isinstance(key, str) else None
    for line in body.split(b"\n"):
        if line[-1:] == b",":
            line = line[:-1]
        end = line.find(b'":', 1)
        k = line[1:end]
        if end < 0 or line[:1] != b'"' or not k.isalnum():
            continue  # keys are ours: hashes (``_key``)
        if line[-1:] != b"}":
            continue  # cut short: damaged (the others are still read)
        if k == want or line[end + 2:end + 7] != b'{"t":':
            # This session's (``begin`` checks it whole), or one whose
            # clock is not first (written by hand?): parsed.
            try:
                e = jsonlite.loads(line[end + 2:].decode("utf-8"))
            except (ValueError, RecursionError):
                continue  # damaged: this session starts over
            if isinstance(e, dict) and _number(e.get("t")):
                sessions[k.decode("ascii")] = e
            continue
        stop = line.find(b",", end + 7)
        try:
            t = float(line[end + 7:stop if stop > 0 else -1])
        except ValueError:
            continue
        if -1e15 < t < 1e15:  # ``_number``; NaN is not
            e = sessions[k.decode("ascii")] = _Line(t=t)
            e.raw = line
    return sessions


def save(path, sessions):
    """Replace the state file at ``path`` with ``sessions``, atomically:
    a 0600 temporary file beside it, renamed over it.  Past MAX_FILE_BYTES
    the least recently used sessions are left out."""
    lines = {}
    while True:
        data = _encode(sessions, lines)
        if len(data) <= MAX_FILE_BYTES or len(sessions) <= 1:
            break
        for key in list(sessions)[:max(1, len(sessions) // 4)]:
            del sessions[key]
    # Temp files of writers killed before their rename (pids that are gone):
    # swept, as an index build sweeps its own (store.remove_dead_temps).
    locate.remove_dead_temps(path)
    tmp = "%s.tmp-%d" % (path, posix.getpid())
    flags = posix.O_WRONLY | posix.O_CREAT | posix.O_EXCL | posix.O_NOFOLLOW | posix.O_CLOEXEC
    try:
        fd = posix.open(tmp, flags, 0o600)
    except FileExistsError:
        # Left by a killed process that had this pid: ours if it is a
        # regular file of this user (O_EXCL above never follows a link).
        st = posix.lstat(tmp)
        if (st.st_mode & 0o170000) != 0o100000 or st.st_uid != posix.getuid():
            raise
        posix.unlink(tmp)
        fd = posix.open(tmp, flags, 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[posix.write(fd, view):]
        finally:
            posix.close(fd)
        posix.rename(tmp, path)
    except BaseException:
        try:
            posix.unlink(tmp)
        except OSError:
            pass
        raise


def _encode(sessions, lines=None):
    # The file's bytes, a session a line (``_HEAD``); ``lines`` caches each
    # key's line between calls.  Other sessions' lines go back as ``load``
    # read them; an entry holding what JSON cannot write (NaN, infinity)
    # or nested past the encoder's depth is checked (``_clean``) and, if
    # damaged, dropped, so it never stops a save.
    lines = {} if lines is None else lines
    out = []
    for key, e in list(sessions.items()):
        if type(e) is _Line:
            out.append(e.raw)
            continue
        line = lines.get(key)
        if line is None:
            try:
                entry = jsonlite.encode(e)
            except (ValueError, TypeError, RecursionError):
                e = _clean(e)
                if e is None:
                    del sessions[key]
                    continue
                sessions[key] = e
                entry = jsonlite.encode(e)
            line = lines[key] = (jsonlite.encode(key) + ":" + entry).encode("ascii")
        out.append(line)
    return _HEAD + b",\n".join(out) + _TAIL


def prune(sessions, now):
    """Drop from ``sessions`` (in place) those idle for EXPIRE_S or dated
    in the future, then the least recently used beyond MAX_SESSIONS."""
    for key in [k for k, e in sessions.items() if not -3600.0 <= now - e["t"] <= EXPIRE_S]:
        del sessions[key]
    if len(sessions) > MAX_SESSIONS:
        for key in sorted(sessions, key=lambda k: sessions[k]["t"])[:len(sessions) - MAX_SESSIONS]:
            del sessions[key]


def _private_folder(folder):
    # The user's own folder, closed to others, created (0700) if missing.
    try:
        st = posix.lstat(folder)
    except FileNotFoundError:
        try:
            from retriever.background import _makedirs
            _makedirs(folder)
            st = posix.lstat(folder)
        except OSError:
            return False
    except OSError:
        return False
    return (st.st_mode & 0o170000) == 0o040000 and st.st_uid == posix.getuid() and not st.st_mode & 0o022


def _read(fd, limit):
    chunks, left = [], limit
    while left > 0:
        b = posix.read(fd, min(left, 1 << 16))
        if not b:
            break
        chunks.append(b)
        left -= len(b)
    return b"".join(chunks)


def _clean(e):
    # A session entry as written by record, or None: the file is ours, but
    # checked anyway (a damaged or hand-edited file must not crash a hook).
    if not isinstance(e, dict):
        return None
    t, n, given, loaded, tx = e.get("t"), e.get("n"), e.get("g"), e.get("l"), e.get("x")
    if not _number(t) or not isinstance(n, int) or n < 0 \
            or not isinstance(given, list) or not isinstance(loaded, list):
        return None
    g = [[x[0], x[1], float(x[2]), x[3]] for x in given[-MAX_GIVEN:]
         if isinstance(x, list) and len(x) == 4 and isinstance(x[0], int) and isinstance(x[1], str)
         and _number(x[2]) and isinstance(x[3], str)]
    l = [x for x in loaded[-MAX_LOADED:] if isinstance(x, str)]
    x = tx if isinstance(tx, list) and len(tx) == 3 and all(isinstance(v, int) for v in tx) else None
    p = e.get("p")
    p = [[y[0], [w for w in y[1][:64] if isinstance(w, str)]] for y in p[-CONTEXT_PROMPTS:]
         if isinstance(y, list) and len(y) == 2 and isinstance(y[0], int) and y[0] <= n
         and isinstance(y[1], list)] if isinstance(p, list) else []
    v = e.get("v")
    v = v if isinstance(v, list) and len(v) == 3 and isinstance(v[0], int) and v[0] <= n \
        and isinstance(v[1], str) and isinstance(v[2], list) and len(v[2]) <= 2 * MAX_COS and not len(v[2]) % 2 \
        and all(isinstance(x, int) and not isinstance(x, bool) for x in v[2]) else None
    k = e.get("k")
    k = k if isinstance(k, list) and len(k) == 2 and isinstance(k[0], str) and isinstance(k[1], dict) \
        and len(k[1]) <= MAX_GIVEN and all(isinstance(r, str) and isinstance(d, int) and not isinstance(d, bool)
                                           and d >= 0 for r, d in k[1].items()) else None
    return {"t": float(t), "n": n, "g": g, "l": l, "x": x, "p": p, "v": v, "k": k}


def _number(v):
    # A number JSON can write back and float() takes: not NaN, not
    # infinite, not an integer past any float (a clock, a score).
    return isinstance(v, (int, float)) and -1e15 < v < 1e15


def _key(runner, session_id, agent_id):
    # Hashed: the file need not hold the runner's session ids.
    parts = [runner or "", session_id]
    if isinstance(agent_id, str) and agent_id:
        parts.append(agent_id)
    return locate.fnv64("\0".join(parts))


# ----------------------------------------------------------- what it holds


def _names_of(result):
    # The names a runner or a user knows a skill by: its name and its
    # folder (the last part of its id; Claude Code names a skill by it).
    folder = result["id"].rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    name = result["name"].lower()
    return (name,) if folder.lower() == name else (name, folder.lower())


def _loaded(result, loaded):
    if result.get("path") in loaded:
        return True
    return any(n in loaded for n in _names_of(result))


def _see_loaded(memo):
    # Add what the transcript (or Hermes' history) shows loaded since the
    # last look to the session's loaded list; once per prompt.
    if memo["seen"]:
        return
    memo["seen"] = True
    entry = memo["entry"]
    found = list(memo["loads"])
    try:
        if memo["transcript"]:
            status = {}
            entry["x"] = read_transcript(memo["transcript"], entry["x"], found, status)
            # Stopped early: the offset reached is saved even on a silent
            # turn, so the next prompt goes on from there, not from scratch.
            memo["changed"] = memo["changed"] or bool(status.get("cut"))
        if memo["history"]:
            found += history_loads(memo["history"])
    except Exception as exc:  # untrusted text: whatever it holds, the prompt is answered
        locate.log("session memory: transcript skipped (%s: %s)" % (type(exc).__name__, exc))
    if found:
        merged = [x for x in entry["l"] if x not in found] + list(dict.fromkeys(found))
        memo["changed"] = memo["changed"] or merged[-MAX_LOADED:] != entry["l"]
        entry["l"] = merged[-MAX_LOADED:]


# ------------------------------------------------------------- transcripts


def history_loads(history, budget=PARSE_BUDGET_S):
    """The names and folders of the skills the chat messages ``history``
    (Hermes' conversation, a list) show loaded, oldest first: its last
    HISTORY_MESSAGES messages, newest first for ``budget`` seconds of CPU
    at most (re-read every turn, so the newest are the ones that count).
    Touches nothing shared: the Hermes plugin calls it outside its lock."""
    if not isinstance(history, list):
        return []
    deadline = time.thread_time() + budget
    per = []
    for msg in reversed(history[-HISTORY_MESSAGES:]):
        if time.thread_time() > deadline:
            break
        one = []
        evidence(msg, one)
        per.append(one)
    return [x for one in reversed(per) for x in one]


def transcript_end(path):
    """Where a session's first look at its JSONL transcript at ``path``
    starts when the lines before it are not read: ``[device, inode,
    size]`` (as ``read_transcript`` returns), ``[0, 0, 0]`` (from its
    start) when there is no such file of this user yet, None for a path
    that ``read_transcript`` reads whole (Gemini CLI's ``.json``) or would
    not read."""
    if not path.startswith("/") or path.endswith(".json"):
        return None
    try:
        st = posix.lstat(path)
    except OSError:
        return [0, 0, 0]
    if (st.st_mode & 0o170000) != 0o100000 or st.st_uid != posix.getuid():
        return None
    return [st.st_dev, st.st_ino, st.st_size]


def read_transcript(path, tx, found, status=None, budget=PARSE_BUDGET_S):
    """Add the skills the transcript at ``path`` shows loaded to ``found``
    (a list of names and folders), reading what was added since ``tx``
    (``[device, inode, offset]`` from the last call, or None) and at most
    TAIL_BYTES; returns the new ``tx``.  A path that is not absolute, or
    not a regular file of this user, is not read.

    Lines are parsed for ``budget`` seconds at most: past it the new ``tx``
    stops after the last line parsed, and ``status["cut"]`` (a dict, when
    given) is set, so the caller saves that progress."""
    if not path.startswith("/"):
        return tx
    try:
        fd = posix.open(path, posix.O_RDONLY | posix.O_NOFOLLOW | posix.O_NONBLOCK | posix.O_CLOEXEC)
    except OSError:
        return tx
    try:
        st = posix.fstat(fd)
        if (st.st_mode & 0o170000) != 0o100000 or st.st_uid != posix.getuid():
            return tx
        size = st.st_size
        if path.endswith(".json"):
            # Gemini CLI before its JSONL files: one document, rewritten
            # whole on each change; read whole when small enough.
            if size <= TAIL_BYTES:
                _whole_json(_read(fd, size), found)
            return None
        start = tx[2] if tx and tx[0] == st.st_dev and tx[1] == st.st_ino and tx[2] <= size else 0
        cut = size - TAIL_BYTES > start  # the first line read may be a part
        start = max(start, size - TAIL_BYTES)
        posix.lseek(fd, start, 0)
        data = _read(fd, size - start)
    finally:
        posix.close(fd)
    end = data.rfind(b"\n")
    if end < 0:
        return tx  # nothing new, or a line still being written
    deadline = time.thread_time() + budget
    for a, b in _marked_lines(data, end, data.find(b"\n") + 1 if cut else 0):
        if time.thread_time() > deadline:
            # One bad line costs one prompt at most: the lines before it
            # are done, and the next prompt starts here.
            if status is not None:
                status["cut"] = True
            return [st.st_dev, st.st_ino, start + a]
        try:
            rec = jsonlite.loads(data[a:b].decode("utf-8", "replace"))
        except (ValueError, RecursionError):  # nested past the parser's depth
            continue
        evidence(rec, found)
    return [st.st_dev, st.st_ino, start + end + 1]


def _marked_lines(data, end, first):
    # The (start, end) spans of the lines of data[first:end] holding a
    # marker, in order; found by searching the buffer for each marker (C
    # speed), not line by line.
    spans = set()
    for m in _MARKERS:
        i = data.find(m, first, end)
        while i >= 0:
            a = data.rfind(b"\n", first, i) + 1 or first
            b = data.find(b"\n", i, end + 1)
            spans.add((max(a, first), b))
            i = data.find(m, b, end)
    return sorted(spans)


def _whole_json(data, found):
    try:
        doc = jsonlite.loads(data.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return
    msgs = doc.get("messages") if isinstance(doc, dict) else None
    if isinstance(msgs, list):
        for m in msgs[-HISTORY_MESSAGES:]:
            evidence(m, found)


def evidence(rec, found):
    """Add the skills one transcript record or chat message shows loaded
    to ``found``.  Shapes understood:

    - Claude Code: ``{"message": {"content": [{"type": "tool_use", "name":
      "Skill", "input": {"skill": NAME}}]}}``, a ``Read`` of a SKILL.md, and
      the text Claude Code adds before a skill's body ("Base directory for
      this skill: DIR");
    - Codex: ``{"payload": {"type": "function_call", "name", "arguments"}}``
      (a shell command reading a SKILL.md) and the ``<skill><name>``
      message it adds for a skill the user names;
    - Gemini CLI: ``{"toolCalls": [{"name": "activate_skill", "args":
      {"name": NAME}}]}`` and ``read_file`` of a SKILL.md, unless the call
      failed (``"status": "error"``);
    - chat messages (Hermes): ``{"tool_calls": [{"function": {"name":
      "skill_view", "arguments": "{\\"name\\": NAME}"}}]}``."""
    if not isinstance(rec, dict):
        return
    msg = rec.get("message")
    if isinstance(msg, dict):
        _content(msg.get("content"), found)
    p = rec.get("payload")
    if isinstance(p, dict):
        kind = p.get("type")
        if kind in ("function_call", "custom_tool_call"):
            _call(p.get("name"), p.get("arguments", p.get("input")), found)
        elif kind == "local_shell_call" and isinstance(p.get("action"), dict):
            _call("shell", p["action"].get("command"), found)
        elif kind == "message" and p.get("role") == "user":
            _content(p.get("content"), found)
    for key in ("toolCalls", "tool_calls"):
        calls = rec.get(key)
        if isinstance(calls, list):
            for c in calls[:_PARTS]:
                if isinstance(c, dict) and c.get("status") not in ("error", "cancelled"):  # Gemini's failed calls
                    fn = c.get("function")
                    if isinstance(fn, dict):
                        _call(fn.get("name"), fn.get("arguments"), found)
                    else:
                        _call(c.get("name"), c.get("args"), found)
    if rec.get("role") == "user":
        _content(rec.get("content"), found)


def _content(content, found):
    if isinstance(content, str):
        _text(content, found)
    elif isinstance(content, list):
        for part in content[:_PARTS]:
            if not isinstance(part, dict):
                continue
            if part.get("type") == "tool_use":
                _call(part.get("name"), part.get("input"), found)
            elif isinstance(part.get("text"), str):
                _text(part["text"], found)


def _text(text, found):
    # A message the runner adds when it loads a skill starts with its mark.
    head = text[:2048].lstrip()
    if head.startswith(_BASE_DIR):
        _add_dir(head[len(_BASE_DIR):].split("\n", 1)[0].strip(), found)
    elif head.startswith("<skill>"):
        name = _between(head, "<name>", "</name>")
        if name:
            _add_name(name, found)
        where = _between(head, "<path>", "</path>")
        if where and where.endswith("/SKILL.md"):
            _add_dir(where[:-len("/SKILL.md")], found)


def _between(text, a, b):
    i = text.find(a)
    j = text.find(b, i + len(a)) if i >= 0 else -1
    return text[i + len(a):j].strip() if j > i >= 0 else ""


def _call(name, args, found):
    if not isinstance(name, str):
        return
    if isinstance(args, str) and args[:1] == "{":
        try:
            args = jsonlite.loads(args)
        except (ValueError, RecursionError):
            pass
    low = name.lower()
    if low in _SKILL_TOOLS:
        v = None
        if isinstance(args, dict):
            v = args.get("skill") or args.get("name") or args.get("command")
        elif isinstance(args, str):
            v = args
        if isinstance(v, str) and v.strip():
            _add_name(v, found)
        return
    if "write" in low or "edit" in low or "patch" in low or low == "replace":
        return  # writing a SKILL.md is authoring one, not loading it
    for n, s in enumerate(_strings(args, 2)):
        if n >= _PARTS:
            break
        if "SKILL.md" in s:
            _skill_paths(s, found)


def _strings(v, depth):
    if isinstance(v, str):
        yield v
    elif depth and isinstance(v, dict):
        for x in v.values():
            yield from _strings(x, depth - 1)
    elif depth and isinstance(v, list):
        for x in v[:64]:
            yield from _strings(x, depth - 1)


def _skill_paths(s, found):
    # Each path token of ``s`` ending in "SKILL.md" names a loaded skill's
    # folder, unless the token is a pattern or a bare name.  Linear in
    # len(s): a token's start is searched for once, in the text between
    # the previous mention and this one (mentions hold no delimiter), and
    # never further back than _PATH_MAX; only the last _MENTIONS mentions
    # are looked at, so the Python work per string is bounded too.
    i = s.rfind("SKILL.md")
    for _ in range(_MENTIONS - 1):
        j = s.rfind("SKILL.md", 0, i) if i >= 0 else -1
        if j < 0:
            break
        i = j
    if i < 0:
        return
    scanned, start, bad = max(0, i - _PATH_MAX), None, -1
    if scanned == 0:
        start = 0
    while i >= 0:
        end = i + 8
        lo = max(scanned, i - _PATH_MAX)
        if lo > scanned:
            start = None  # no delimiter in the _PATH_MAX before: too long a token
        d = max(s.rfind(c, lo, i) for c in _DELIMS)
        if d >= 0:
            start = d + 1
        b = max(s.rfind(c, lo, i) for c in _PATTERN)
        bad = b if b >= 0 else bad
        scanned = end
        if start is not None and end - start <= _PATH_MAX and i > start and s[i - 1] == "/" \
                and bad < start and not (end < len(s) and (s[end].isalnum() or s[end] in "._-")):
            _add_dir(s[start:i - 1], found)
        i = s.find("SKILL.md", end)


def _add_dir(folder, found):
    folder = folder.rstrip("/")
    if not folder or len(folder) > 1024:
        return
    found.append(folder)
    _add_name(folder.rsplit("/", 1)[-1], found)


def _add_name(name, found):
    name = name.strip().lower()
    if not name or len(name) > 256:
        return
    found.append(name)
    for sep in ("/", ":"):  # a plugin's "plugin:name", Hermes' "category/name"
        if sep in name:
            found.append(name.rsplit(sep, 1)[-1])
