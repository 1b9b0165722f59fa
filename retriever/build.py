"""Build, store and revalidate an index: the cold path.

Everything here may import freely (PyYAML, os); the query path
imports this module only when the index is missing, corrupt or stale.
"""

import os
import sys
import time

from retriever import (analyze, copies, discover, frontmatter, hermes_config, index, languages, locate, reuse,
                       skills, store)


def resolve(roots=None, platform=None, hermes_home=None, warn=None, use_config=None, only_hermes=False):
    """Decide what an index covers.

    Returns a dict: ``roots`` (list of root dicts, precedence order),
    ``explicit`` (bool), ``platform``, ``hermes_home``, ``config`` (the path
    whose changes matter, or None), ``disabled`` (set of names) and
    ``only_hermes`` (the default roots cut to Hermes' own folders).
    """
    hh = hermes_home or locate.hermes_home()
    explicit = bool(roots)
    # Hermes' config applies to the default roots, and to explicit roots
    # when HERMES_HOME is set: a plain --root build is not silently filtered
    # by some unrelated ~/.hermes.
    if use_config is None:
        use_config = not explicit or bool(os.environ.get("HERMES_HOME")) or hermes_home is not None
    cfg = hermes_config.load(hh, warn) if use_config else {}
    if explicit:
        rlist = discover.dedupe_roots([_explicit_root(r) for r in roots])
    else:
        env = dict(os.environ, HERMES_HOME=hh)
        rlist = discover.default_roots(env=env, external_dirs=hermes_config.external_dirs(cfg, hh),
                                       only_hermes=only_hermes,
                                       plugin_dirs=hermes_config.plugin_skill_dirs(cfg, hh, env))
    return {
        "roots": rlist,
        "explicit": explicit,
        "platform": platform or "",
        "hermes_home": hh,
        "config": hermes_config.config_path(hh) if use_config else None,
        "disabled": hermes_config.disabled_names(cfg, platform) if use_config else set(),
        "only_hermes": bool(only_hermes and not explicit),
        # Explicit roots that are not folders: a typo should not look like
        # an empty library.
        "missing": [r["path"] for r in rlist if explicit and not os.path.isdir(r["path"])],
    }


def _explicit_root(r):
    # A --root path, or a root dict of a runner's skill set whose naming
    # and hiding rules (runners/skillsets.py) are kept.
    if not isinstance(r, dict):
        return {"path": locate.abspath(r), "source": "root", "prefix": ""}
    out = {"path": locate.abspath(r["path"]), "source": r.get("source") or "root", "prefix": r.get("prefix") or ""}
    for rule in ("naming", "hide_manual", "max_depth", "require"):
        if r.get(rule) is not None and r.get(rule) is not False:
            out[rule] = list(r[rule]) if rule == "require" else r[rule]
    return out


def signature(scope, walked=None, stats=None):
    """Digest of the stat manifest and the roots: changes iff the skills,
    their locations or the config changed.  ``walked`` and ``stats``: a
    discover.walk_roots() result and the stat results it took."""
    extra = [scope["config"]] if scope["config"] else []
    man = discover.manifest(scope["roots"], extra, walked, stats)
    roots = tuple((r["path"], r["prefix"]) if locate.root_key(r) == r["path"] else locate.root_key(r)
                  for r in scope["roots"])
    # repr, not marshal: marshal output depends on object identity (shared
    # strings become back-references), so equal data could digest differently.
    return reuse.blake2b(repr((roots, man)).encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()


# Below this many files to parse, worker processes cost more than they save.
PARALLEL_MIN = 400
# Below this many skills, work done in a forked process beside the build's
# own (dealing out the postings, writing the reuse store) saves less than
# the fork costs.
DEAL_FORK_MIN = 1500
_PROFILE = {}  # the profile pool workers analyse under (set before forking them)
# In a pool worker (``_worker_start``): its numbering (``_numbering``).
_WORKER = {}


def analyse_file(job, w=None):
    """Read, parse and analyse one SKILL.md (``skills.scan`` job), its terms
    numbered in ``w`` (``_numbering()``; by default the pool worker's own).

    Returns the reuse-store entry ``(stamp, id, name, description, vis,
    problems, malformed, path, lengths, groups)``, its groups as
    ``index.pack`` leaves them plus the analysing process's id and
    the terms it met first in this file (``_number`` numbers them in the
    build's terms, into ``(pairs, data)``); for a file the index
    leaves out, ``(stamp, kind, problems)`` (kind as skills.read_skill
    says), with a stamp of None when it cannot be read (nothing is stored
    for it then).  The stamp is ``_stamp(job)``: what must be unchanged
    for the entry to hold.
    """
    root, skill_dir, md, st = job
    if isinstance(st, OSError):
        return None, "unreadable", ("cannot read (%s)" % (st.strerror or st),)
    kind, rec, problems, malformed = skills.read_skill(root, skill_dir, md)
    if kind != "ok":
        return (None if kind == "unreadable" else _stamp(job)), kind, tuple(problems)
    # A worker's result crosses a pipe (pickled): its term numbers as one
    # bytes object, the terms it meets for the first time as one string,
    # and its id (whose numbers they are).
    w = w or _WORKER
    lengths, packed = index.pack(index.doc_terms(rec, w["profile"], w["table"]))
    terms = w["terms"]
    packed += (w["pid"], "\n".join(terms[w["sent"]:]))
    w["sent"] = len(terms)
    return (_stamp(job), rec["id"], rec["name"], rec["description"], rec["vis"], tuple(problems), malformed,
            rec["path"], lengths, packed)


def _worker_start():
    """Pool initializer: this worker numbers its terms itself."""
    _WORKER.update(_numbering(_PROFILE["profile"]))


def _numbering(profile):
    """A numbering of its own for a process (or a build) analysing files
    under ``profile``: its id, its terms, a table of their numbers
    (``analyze.numbered_terms``, see ``index.pack``) and how many of its
    terms it has handed on."""
    terms = []
    # The pid and a random part: a worker that replaces a dead one may get its pid.
    return {"pid": "%d-%s" % (os.getpid(), os.urandom(6).hex()), "terms": terms, "sent": 0, "profile": profile,
            "table": analyze.numbered_terms(profile["analyzer"], index.term_ids(terms))}


def _learn(e, workers, shared):
    """Note the terms a worker met first in its result ``e`` (in
    ``workers``: its terms, in its numbering), as results arrive: a
    worker's results arrive in the order it made them.  Returns ``e``
    to be numbered later (``_number``), its count vectors and new terms
    shared through the dict ``shared`` (each result unpickled its own: 3 KB
    a skill, held until numbering) and its new terms dropped."""
    if len(e) != 10:
        return e
    vecs, sizes, numbers, wid, new = e[9]
    vset = shared.setdefault
    mine = workers.get(wid)
    if mine is None:
        mine = workers[wid] = []
    if new:
        # One string object per term for every worker's list (a million
        # terms at 100k skills): the workers meet mostly the same terms.
        new = new.split("\n")
        mine += map(vset, new, new)
    return e[:9] + ((list(map(vset, vecs, vecs)), sizes, numbers, wid, ""),)


def _number(results, fresh, vocab, workers):
    """Put each of ``results[i]`` for ``i`` in ``fresh`` in the build's term
    numbers, places in ``vocab``: ``(lengths, (pairs, data))`` as
    ``index.encode`` gives, its equal pairs one object.  The terms not in
    ``vocab`` yet are added first, in sorted order, so the numbers
    are the same whichever process analysed which file, in whatever order
    the results came.  Then each process's own numbers map to the build's
    through one list per process (its terms, which ``_learn`` gathered in
    ``workers``): a list lookup per posting, where looking up each term's
    string cost three times as much (and a third of the build's serial
    tail)."""
    from itertools import filterfalse
    ids = dict(zip(vocab, range(len(vocab))))
    new = set()
    for terms in workers.values():
        new.update(terms)
    new = sorted(filterfalse(ids.__contains__, new))
    ids.update(zip(new, range(len(vocab), len(vocab) + len(new))))
    vocab += new
    numbering = {wid: list(map(ids.__getitem__, terms)) for wid, terms in workers.items()}
    vset = {}.setdefault
    for i in fresh:
        e = results[i]
        if len(e) == 10:
            vecs, sizes, numbers, wid, _ = e[9]
            lengths, (pairs, data) = index.renumber(e[8], vecs, sizes, numbers, numbering[wid])
            results[i] = e[:8] + (lengths, (tuple(map(vset, pairs, pairs)), data))


def _stamp(job):
    # The file's (size, mtime_ns, inode), and its root with the root's
    # rules: the id, the name and whether it is shown depend on them.
    return job[3], repr(sorted(job[0].items()))


def can_fork():
    """The number of cores this process may fork workers onto: 0 when it
    must not fork at all."""
    import threading
    # Forking a process that runs other threads (an agent loading the
    # plugin) can copy a lock some thread holds: the workers would hang.
    # (Where os.fork exists, multiprocessing offers "fork": no need to
    # import it, 25 ms, to ask.)
    if threading.active_count() > 1 or not hasattr(os, "fork"):
        return 0
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _analyse(jobs, todo, profile):
    """Yield ``(job number, analyse_file result)`` for the job numbers in
    ``todo`` under ``profile``, on every core when there are enough of
    them."""
    ncpu = can_fork() if len(todo) >= PARALLEL_MIN else 0
    if ncpu < 2:
        w = _numbering(profile)
        for i in todo:
            yield i, analyse_file(jobs[i], w)
        return
    for i, (_, res) in zip(todo, _pooled(jobs[i] for i in todo)):
        yield i, res


def _analyse_walking(found, stats, learn, walked, progress):
    """Analyse the SKILL.md files ``found`` yields (``discover.walking``)
    while the walk goes on: ``{(root path, md): learn(analyse_file
    result)}``.  The walk runs in the pool's task thread, feeding the
    workers as it finds files, so a build no longer walks first and
    analyses after (at 100k skills a cold walk takes 12 s, against 3
    warm).  ``walked()`` is called in this thread as soon as the walk is
    done (the caller then lets its results go).  Nothing is analysed here
    (``{}``) when the walk finds under PARALLEL_MIN files or the build may
    not fork: the caller analyses the jobs as usual.  A file reached
    twice may be analysed twice; the caller keeps the result of the job
    ``skills.scan`` keeps."""
    from itertools import chain, islice
    done = []

    def jobs(items):
        # skills.scan's jobs, as the walk finds them.
        for root, skill_dir, md in items:
            st = stats.get(md)
            if st is not None and not skills.too_deep(root, skill_dir):
                yield skills.job(root, skill_dir, md, st)
        done.append(True)  # set in the task thread once the walk is over
    head = list(islice(jobs(found), PARALLEL_MIN))
    if len(head) < PARALLEL_MIN or can_fork() < 2:
        return {}
    early = {}
    for n, (job, e) in enumerate(_pooled(chain(head, jobs(found))), 1):
        early[(job[0]["path"], job[2])] = learn(e)
        if done and done.pop():
            walked()
        if progress is not None and not n & 63:
            progress(n, 0)
    return early


def _pooled(jobs):
    """``(job, analyse_file(job))`` for each of the iterable ``jobs``, in
    order, analysed in worker processes (one per core, at most 4); the
    iterable is read in the pool's task thread as the workers need it."""
    import multiprocessing
    frontmatter.yaml_available()  # imported before the fork, not in each worker
    kept = []

    def keep(items):
        for job in items:
            kept.append(job)
            yield job
    # fork: the workers inherit the loaded modules and _PROFILE at no cost.
    with multiprocessing.get_context("fork").Pool(min(can_fork(), 4), _worker_start) as pool:
        for n, res in enumerate(pool.imap(analyse_file, keep(jobs), chunksize=64)):
            yield kept[n], res
            kept[n] = None


def build(scope, index_path, profile="default", warn=None, memory=None, verbose=False, progress=None):
    """Collect, index and write.  Returns ``(header, problems)``.

    ``warn`` receives the problems (files and reasons), summarised by kind
    unless ``verbose``; the build never stops on a bad skill.  Raises store.UnsafeTarget, before any
    work, when ``index_path`` is not ours to overwrite.  When ``memory`` is
    a dict and the file cannot be written (a read-only cache), the index
    is kept in memory instead: ``memory["idx"]`` (loaded, as store.load
    returns it) and ``memory["error"]`` (why it was not written).
    ``progress(files_read, skills_indexed)``, when given, is called as the
    build goes (see retriever.progress).  Unchanged files are taken from
    the reuse store beside the index; ``header["reused"]`` (not written to
    the file) says how many, and ``header["updated"]`` whether the stored
    postings were updated rather than all dealt out again.
    """
    import gc
    store.write_target(index_path)
    t0 = time.perf_counter()
    # A build makes millions of small objects and no reference cycles worth
    # chasing: the cyclic collector would rescan them all again and again
    # (a third of the analysis time, measured).
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        args = (scope, index_path, profile, warn, memory, verbose, progress, t0)
        try:
            return _build(*args, use_store=True)
        except _StoreDamaged as exc:
            # Checked and keyed, yet unusable: never trust it, build from
            # scratch (walking again: _build let the first walk go).
            locate.log("reuse store of %s unusable (%s); full build" % (index_path, exc))
            return _build(*args, use_store=False)
    finally:
        if was_enabled:
            gc.enable()


class _StoreDamaged(Exception):
    """Reused entries did not fit together (see build)."""


def _build(scope, index_path, profile, warn, memory, verbose, progress, t0, use_store):
    prof = index.PROFILES[profile]
    _PROFILE["profile"] = prof
    store_path = reuse.path_for(index_path)
    store_key = reuse.key(prof)
    vocab, old, layout = reuse.load(store_path, store_key) if use_store else ([], {}, None)
    workers = {}

    shared = {}
    skipped = []
    stats = {}  # each SKILL.md stat once, by the walk
    walked = {}
    found = discover.walking(scope["roots"], skipped, stats, walked)
    scanned = []

    def scan():
        # Once the walk is over: its signature and jobs.  Its stat results
        # are then let go (jobs keep size, mtime and inode): at 100k skills
        # they held over 100 MB.
        scanned.append((signature(scope, walked, stats), skills.scan(scope["roots"], walked, stats)))
        walked.clear()
        stats.clear()
    # Nothing to reuse (a first build, or the store unusable): each file is
    # analysed as the walk finds it, the walk going on meanwhile.
    early = _analyse_walking(found, stats, lambda e: _learn(e, workers, shared), scan, progress) \
        if not old else {}
    if not scanned:
        for _ in found:
            pass  # the rest of the walk (all of it when nothing was analysed early)
        scan()
    sig, jobs = scanned.pop()
    results = [None] * len(jobs)
    todo = []
    root_keys = {}  # the stamp's root part, once per root
    reused = 0  # taken from the store
    fresh = []  # results to number: analysed in this build (while walking, so far)
    for i, job in enumerate(jobs):
        e = old.get(job[2])
        stored = e is not None
        if not stored:
            e = early.get((job[0]["path"], job[2]))
            if e is None:
                todo.append(i)
                continue
        rk = root_keys.get(job[0]["path"])
        if rk is None:
            rk = root_keys[job[0]["path"]] = _stamp(job)[1]
        if e[0] == (job[3], rk):
            results[i] = e
            if stored:
                reused += 1
            else:
                fresh.append(i)
        else:
            todo.append(i)
    early.clear()
    done = reused + len(fresh)
    if progress is not None:
        progress(done, 0)
    if todo:
        for n, (i, e) in enumerate(_analyse(jobs, todo, prof), 1):
            results[i] = _learn(e, workers, shared)
            if progress is not None and not n & 63:
                progress(done + n, 0)
        fresh = sorted(fresh + todo)
    # Equal (counts, size) pairs are shared across skills: tens of
    # thousands of distinct ones for millions of groups.
    _number(results, fresh, vocab, workers)
    del workers, fresh, shared

    recs, problems, counts = skills.select(
        scope["roots"], jobs,
        [("ok", {"name": e[2], "id": e[1], "entry": e, "md": job[2]}, e[5], e[6]) if len(e) == 10
         else (e[1], None, e[2], False) for job, e in zip(jobs, results)],
        scope["disabled"])
    problems = skipped + problems
    keep = {job[2]: e for job, e in zip(jobs, results) if e[0] is not None}
    del jobs, results
    recs.sort(key=lambda r: r["id"])  # skill numbers follow id order: ties break by id
    entries = [r["entry"] for r in recs]
    paths = [r["md"] for r in recs]
    del recs
    nfiles = len(keep)
    tick = None if progress is None else (lambda done: progress(nfiles, done))
    analysed = [(e[8], e[9]) for e in entries]
    built = _update(analysed, vocab, prof, layout, old, paths, entries, tick) if layout else None
    updated = built is not None
    del old, layout
    if built is None:
        try:
            built = index.build_terms(analysed, vocab, prof, tick,
                                      fork=len(analysed) >= DEAL_FORK_MIN and can_fork() >= 2)
        except (IndexError, TypeError, ValueError) as exc:
            if not reused:
                raise
            raise _StoreDamaged("%s: %s" % (type(exc).__name__, exc))
    del analysed
    layout = built.pop("layout")
    layout["docs"] = paths
    # Kept in the store too: the next edit's rebuild copies the untouched ones.
    layout["crc"] = built["post_crc"] = store.post_crcs(built)
    docs = [(e[1], e[2], e[7], e[3], e[4]) for e in entries]
    del entries
    # The library's languages, from what each skill's author says it is for.
    lang = languages.header_entry(name + " " + desc for _, name, _, desc, _ in docs)
    groups = _copies(docs, scope["roots"], built, prof)
    header = {
        "params": {"profile": profile, "k1": prof["k1"], "fields": prof["fields"],
                   "analyzer": prof["analyzer"]},
        "avglen": built["avglen"],  # per field, for explain's breakdown
        "roots": [dict(r) for r in scope["roots"]],
        "explicit": scope["explicit"],
        "only_hermes": scope.get("only_hermes", False),
        "platform": scope["platform"],
        "hermes_home": scope["hermes_home"],
        "config": scope["config"],
        "disabled": sorted(scope["disabled"]),
        "signature": sig,
        "built_at": time.time(),
        "build_seconds": round(time.perf_counter() - t0, 3),
        "counts": counts,
        "problems": len(problems),
        "lang": lang,
        "copies": groups,
    }
    if warn:
        for line in summarise(problems, verbose):
            warn(line)
    n_terms = len(built["terms"])

    def save():
        # Terms of edited or deleted skills stay numbered in the store;
        # drop them once they are most of it.
        v, k, lay = vocab, keep, layout
        if len(v) > 2 * n_terms + 10000:
            v, k, lay = reuse.compact(v, k, lay)
        reuse.save(store_path, store_key, v, k, lay)
    # The store is written in a forked child while this process writes and
    # checks the index (at 20k skills 0.4 s and 0.3 s).  A store whose
    # index could not be written is still right: its entries are checked
    # against the files, and its layout only helps compute the next index.
    saved = _aside(save) if len(keep) >= DEAL_FORK_MIN else save
    try:
        header = _write(index_path, built, docs, header, memory)
    finally:
        saved()
    header["reused"] = reused
    header["updated"] = updated
    return header, problems


def _copies(docs, roots, built, prof):
    """``copies.find`` over the built library, each skill in its
    ``copies.collection``."""
    paths = sorted((r["path"].rstrip("/") + "/" for r in roots), key=len, reverse=True)
    where = [copies.collection(d[2], next((r for r in paths if d[2].startswith(r)), "")) for d in docs]
    idf = dict(zip(built["terms"], built["idf"]))
    return copies.find([(d[1], d[3]) for d in docs], where, lambda t: idf.get(t, 0.0), prof["analyzer"])


def _write(index_path, built, docs, header, memory):
    """Write and check the index (or keep it in ``memory``, see ``build``);
    returns its header."""
    try:
        header = store.write(index_path, built, docs, header)
    except OSError as exc:
        if memory is None:
            raise
        header, chunks = store.pack(built, docs, header)
        memory["idx"] = store.load_bytes(b"".join(chunks))
        memory["error"] = exc.strerror or str(exc)
        return header
    del built, docs
    try:
        # Read back and remembered as checked: queries of this file then
        # skip their checksums (store.verify says why that is safe).
        store.verify(index_path, remember=True)
    except store.IndexError_ as exc:
        locate.log("index %s changed while it was written (%s); queries will check it" % (index_path, exc))
    return header


def _aside(work):
    """Start ``work()`` in a forked child, the caller going on meanwhile.
    Returns ``join()``, which waits for the child, and does the work in
    this process when the child could not (it failed, or no fork).  Only
    for work whose effect is a file: the child's objects die with it."""
    if can_fork() < 2:
        return work
    try:
        pid = os.fork()
    except OSError:
        return work
    if pid == 0:  # the child: the work, then out without the parent's cleanup
        code = 1
        try:
            work()
            code = 0
        finally:
            os._exit(code)

    def join():
        _, status = os.waitpid(pid, 0)
        if status != 0:
            work()
    return join


def _update(docs, vocab, prof, layout, old, paths, entries, tick):
    """``index.update_terms`` from the last build's ``layout`` when few
    skills changed, else None (the caller deals out every posting again,
    which also renumbers the slots that edits left unused)."""
    before = layout.get("docs")
    if not isinstance(before, list):
        return None
    number = dict(zip(before, range(len(before))))
    old_of = []
    for p, e in zip(paths, entries):
        o = number.get(p, -1)
        # Re-read files get new entries: only the very stored tuple is kept.
        old_of.append(o if o >= 0 and old.get(p) is e else -1)
    kept = set(old_of)
    removed = []
    for o, p in enumerate(before):
        if o not in kept:
            e = old.get(p)
            if e is None or len(e) != 10:
                return None  # its postings cannot be found: build afresh
            removed.append((o, e[9]))
    changed = len(removed) + old_of.count(-1)
    live = sum(len(d[1][0]) for d in docs)
    if changed > max(64, len(docs) // 8) or layout.get("nslots", 0) > 2 * live + 4096:
        return None
    try:
        return index.update_terms(docs, vocab, prof, layout, old_of, removed, tick,
                                  fork=len(docs) >= DEAL_FORK_MIN and can_fork() >= 2)
    except (IndexError, KeyError, TypeError, ValueError) as exc:
        locate.log("reuse store layout unusable (%s: %s); postings dealt out afresh" % (type(exc).__name__, exc))
        return None


def problem_kind(reason):
    """The kind of a problem, for grouping: its reason without the
    details ("invalid YAML (...); read key: value lines" -> "invalid YAML",
    "duplicate name 'x'; shadowed by ..." -> "duplicate name")."""
    for cut in (";", " (", " '", ' "'):
        reason = reason.split(cut)[0]
    return reason.strip()


def summarise(problems, verbose=False, first=3):
    """Warning lines for ``problems``: every one when ``verbose``, else per
    kind the first few by name and one line counting the rest (a library
    with 500 same-name copies gets 4 lines, not 500)."""
    if verbose:
        return ["%s: %s" % p for p in problems]
    kinds = {}
    for p in problems:
        kinds.setdefault(problem_kind(p[1]), []).append(p)
    lines = []
    for kind, items in kinds.items():
        lines += ["%s: %s" % p for p in items[:first]]
        if len(items) > first:
            lines.append("... and %d more: %s (build --verbose lists every file)" % (len(items) - first, kind))
    return lines


def scope_of(header, warn=None):
    """The scope an existing index covers, re-resolved now: the same roots
    (or the default roots, which may have gained or lost folders) and the
    current config, so a disabled-list edit reaches the rebuild."""
    roots = list(header["roots"]) if header["explicit"] else None
    return resolve(roots, header["platform"] or None, header["hermes_home"], warn,
                   use_config=bool(header["config"]), only_hermes=header.get("only_hermes", False))


def is_stale(header):
    """``(stale, scope)``: stale when the skills, their folders or the config
    changed since ``header`` was built."""
    scope = scope_of(header)
    return signature(scope) != header["signature"], scope


def revalidate(index_path, profile=None, warn=None):
    """Rebuild ``index_path`` if its skills changed or any section of it
    is damaged (a query of a large index checks only what it reads).
    Returns the reason, or None when nothing was done; raises
    store.IndexError_ when not even the header is usable (no roots to
    rebuild from: the next query rebuilds it)."""
    header, f = store.read_header(index_path)
    f.close()
    try:
        store.verify(index_path, remember=True)
    except store.IndexError_ as exc:
        build(scope_of(header), index_path, profile or header["params"]["profile"])
        return "damaged: %s" % exc
    stale, scope = is_stale(header)
    if not stale:
        return None
    build(scope, index_path, profile or header["params"]["profile"])
    return "skills changed"


def stderr_warn(line):
    """Write one warning line to stderr."""
    sys.stderr.write("skill-retrieve: warning: %s\n" % line)
