"""Build, store and revalidate an index: the cold path.

Everything here may import freely (PyYAML, hashlib, os); the query path
imports this module only when the index is missing, corrupt or stale.
"""

import hashlib
import os
import sys
import time

from retriever import discover, hermes_config, index, locate, skills, store


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


def signature(scope, walked=None):
    """Digest of the stat manifest and the roots: changes iff the skills,
    their locations or the config changed."""
    extra = [scope["config"]] if scope["config"] else []
    man = discover.manifest(scope["roots"], extra, walked)
    roots = tuple((r["path"], r["prefix"]) if locate.root_key(r) == r["path"] else locate.root_key(r)
                  for r in scope["roots"])
    # repr, not marshal: marshal output depends on object identity (shared
    # strings become back-references), so equal data could digest differently.
    return hashlib.blake2b(repr((roots, man)).encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()


def build(scope, index_path, profile="default", warn=None, memory=None, verbose=False):
    """Collect, index and write.  Returns ``(header, problems)``.

    ``warn`` receives the problems (files and reasons), summarised by kind
    unless ``verbose``; the build never stops on a bad skill.  Raises
    store.UnsafeTarget, before any work, when ``index_path`` is not ours to
    overwrite.  When ``memory`` is a dict and the file cannot be written (a
    read-only cache), the index is kept in memory instead: ``memory["idx"]``
    (loaded, as store.load returns it) and ``memory["error"]`` (why it was
    not written).
    """
    store.write_target(index_path)
    t0 = time.perf_counter()
    skipped = []
    walked = discover.walk_roots(scope["roots"], skipped)
    sig = signature(scope, walked)
    recs, problems, counts = skills.collect(scope["roots"], scope["disabled"], walked)
    problems = skipped + problems
    recs.sort(key=lambda r: r["id"])  # skill numbers follow id order: ties break by id
    prof = index.PROFILES[profile]
    built = index.build(recs, prof)
    docs = [(r["id"], r["name"], r["path"], r["description"], r["vis"]) for r in recs]
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
    }
    if warn:
        for line in summarise(problems, verbose):
            warn(line)
    try:
        header = store.write(index_path, built, docs, header)
    except OSError as exc:
        if memory is None:
            raise
        header, chunks = store.pack(built, docs, header)
        memory["idx"] = store.load_bytes(b"".join(chunks))
        memory["error"] = exc.strerror or str(exc)
    return header, problems


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
        store.verify(index_path)
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
