"""Every ``SKILL_RETRIEVAL_*`` setting, in one table, with one reader.

The table is the single source for the readers (``get``), ``--help``
(``help_text``) and the settings table of docs/configuration.md
(``markdown_table``; a test holds the page to it).  A malformed value never
stops anything: it is reported once per process, through the caller's
``warn`` (stderr by default; hooks capture it into the log, the rerank
redacts it), and the default is used instead.

Hot path: imported by every query, so it imports nothing but ``locate``
and keeps its table as constants.
"""

from retriever import locate

K_MAX = 1000  # the one range for -k, TOP_K and INJECT_K
_NEVER = ("off", "never", "false", "no")  # a period turned off ("0" is a period)
_OFF = _NEVER + ("0",)
_ON = ("on", "true", "yes", "1")

# name: (kind, default, low, high, default as shown, help)
#   kind int/float: a number in [low, high];
#   seconds_or_off: a float >= 0 or an "off" word (None); flag: on/off words;
#   choice: "" or one of ``low``; text: any string (names, URLs); path: an
#   absolute path (a relative one would depend on the folder a hook runs in).
TABLE = {
    "SKILL_RETRIEVAL_TOP_K": (
        "int", 6, 1, K_MAX, "6",
        "shortlist size: how many skills are ranked before the cut"),
    "SKILL_RETRIEVAL_INJECT_K": (
        "int", None, 1, K_MAX, "TOP_K",
        "how many of the shortlist are injected or printed, at most (never more than TOP_K; -k sets it)"),
    "SKILL_RETRIEVAL_DECIDE": (
        "flag", True, None, None, "on",
        "the calibrated decision of which ranked skills to inject, often one or two, or none (docs/decision.md); off injects the top INJECT_K of the ranking"),
    "SKILL_RETRIEVAL_REVALIDATE": (
        "seconds_or_off", 2.0, 0.0, 1e9, "2",
        "seconds between background freshness checks; off disables them"),
    "SKILL_RETRIEVAL_HOOK_WAIT": (
        "float", 3.0, 0.0, 600.0, "3",
        "seconds a hook waits for a first index build before answering empty"),
    "SKILL_RETRIEVAL_COMPACT": (
        "flag", True, None, None, "on",
        "Hermes plugin: cut <available_skills> to names; 0/off keeps the descriptions"),
    "SKILL_RETRIEVAL_ROOTS": (
        "text", "", None, None, "none",
        "your skill folders, separated by ':', used beside the default ones (also: skill-retrieve roots add DIR)"),
    "SKILL_RETRIEVAL_PYTHON": (
        "text", "", None, None, ".venv/bin/python3",
        "interpreter bin/skill-retrieve and installed hooks run (never a version-manager shim)"),
    "SKILL_RETRIEVAL_SEMANTIC": (
        "flag", True, None, None, "on",
        "the semantic tier (multilingual sentence encoder fused with BM25), on when its extra is installed; off turns it off"),
    "SKILL_RETRIEVAL_SEMANTIC_IDLE": (
        "float", 1800.0, 1.0, 1e7, "1800",
        "seconds without a request after which the semantic tier's warm helper exits"),
    "SKILL_RETRIEVAL_SEMANTIC_TIMEOUT": (
        "float", 30.0, 1.0, 60000.0, "30",
        "milliseconds a query waits for the warm helper before answering BM25 only"),
    "SKILL_RETRIEVAL_SEMANTIC_SOCKET": (
        "path", "", None, None, "$XDG_RUNTIME_DIR/skill-retrieval/semantic.sock",
        "the warm helper's Unix socket; its question FIFO `semantic.ask` and the reply FIFOs sit in the same folder (default: the runtime folder, else the cache folder)"),
    "SKILL_RETRIEVAL_LEARN": (
        "flag", True, None, None, "on",
        "learn your own words for skills from what the agent loads (docs/usage.md): keeps each prompt's analysed terms and shortened text in the usage record and ranks with what they taught; off keeps counts only and learns nothing"),
    "SKILL_RETRIEVAL_RERANK": (
        "choice", "", ("jev",), None, "off",
        "jev turns on the optional LLM rerank (jev is the reranking model, its one mode): each query's shortlist goes to a remote LLM service to be reordered; unset is off"),
    "SKILL_RETRIEVAL_RERANK_PROVIDER": (
        "text", "typesafe", None, None, "typesafe",
        "rerank provider: typesafe or openrouter"),
    "SKILL_RETRIEVAL_RERANK_MODEL": (
        "text", "jev-latest", None, None, "jev-latest",
        "rerank model name"),
    "SKILL_RETRIEVAL_RERANK_CANDIDATES": (
        "int", 12, 1, K_MAX, "12",
        "most descriptions sent to the reranker per query"),
    "SKILL_RETRIEVAL_RERANK_BASE_URL": (
        "text", "", None, None, "provider's",
        "rerank base URL override (http:// only to localhost)"),
    "SKILL_RETRIEVAL_RERANK_LOG": (
        "text", "", None, None, "$HERMES_HOME/data/jev-trial/rerank_ab_log.jsonl",
        "the rerank A/B log file"),
}

_warned = set()


def _stderr(msg):
    import sys
    sys.stderr.write("skill-retrieve: %s\n" % msg)


def parse(name, raw):
    """``raw`` (a str) read as setting ``name``.  Raises ValueError with a
    one-line reason when it is not a valid value; "" gives the default."""
    kind, default, low, high = TABLE[name][:4]
    raw = raw.strip()
    if not raw:
        return default
    if kind == "int":
        try:
            v = int(raw)
        except ValueError:
            v = None
        if v is None or not low <= v <= high:
            raise ValueError("expected a whole number from %d to %d" % (low, high))
        return v
    if kind in ("float", "seconds_or_off"):
        if kind == "seconds_or_off" and raw.lower() in _NEVER:
            return None
        try:
            v = float(raw)
        except ValueError:
            v = None
        # v == v rejects nan; the range rejects inf.
        if v is None or v != v or not low <= v <= high:
            if kind == "seconds_or_off":
                raise ValueError("expected a number of seconds >= 0, or off")
            raise ValueError("expected a number from %g to %g" % (low, high))
        return v
    if kind == "flag":
        if raw.lower() in _OFF:
            return False
        if raw.lower() in _ON:
            return True
        raise ValueError("expected on or off")
    if kind == "choice":
        if raw.lower() in low:
            return raw.lower()
        raise ValueError("expected %s, or nothing to leave it off" % " or ".join(low))
    if kind == "path" and not raw.startswith("/"):
        raise ValueError("expected an absolute path")
    return raw


def get(name, warn=None, raw=None):
    """The value of setting ``name`` from the environment (or ``raw``).

    A malformed value falls back to the default and is reported once per
    process and value through ``warn`` (default: a line on stderr)."""
    if raw is None:
        raw = locate.env(name)
    try:
        return parse(name, raw)
    except ValueError as exc:
        default = TABLE[name][1]
        key = (name, raw)
        if key not in _warned:
            _warned.add(key)
            # The default as --help and docs/configuration.md write it
            # ("on", "2", "TOP_K"), not as Python prints it ("True", "2.0").
            (warn or _stderr)("ignoring %s=%r (%s); using %s" % (name, raw[:40], exc, TABLE[name][4]))
        return default


def unknown(names):
    """``(name, the setting it is closest to, or None)`` for each
    ``SKILL_RETRIEVAL_*`` name in ``names`` that is no setting: a typo
    (INJECTK for INJECT_K) is otherwise ignored without a word.  Doctor
    asks (cold path); queries and hooks never do, so they pay nothing."""
    import difflib
    prefix = "SKILL_RETRIEVAL_"
    # The part after the prefix: every name shares the prefix, which
    # would make any two of them look alike.
    known = {n[len(prefix):]: n for n in TABLE}
    out = []
    for name in sorted(names):
        if name.startswith(prefix) and name not in TABLE:
            close = difflib.get_close_matches(name[len(prefix):], known, n=1, cutoff=0.75)
            out.append((name, known[close[0]] if close else None))
    return out


def k_value(raw):
    """The one rule for ``-k``: a whole number from 1 to K_MAX.  Returns the
    int or raises ValueError naming the rule (used by the fast parser,
    argparse and the hook's command line alike)."""
    try:
        v = int(str(raw).strip())
    except ValueError:
        v = 0
    if not 1 <= v <= K_MAX:
        raise ValueError("-k must be a whole number from 1 to %d, not %r" % (K_MAX, raw))
    return v


def limits(k_flag=None, warn=None):
    """``(top_k, inject_k)``: TOP_K and INJECT_K from the environment, with
    ``-k`` (already validated) setting inject_k and widening top_k to it;
    inject_k never exceeds top_k."""
    top_k = get("SKILL_RETRIEVAL_TOP_K", warn)
    inject_k = get("SKILL_RETRIEVAL_INJECT_K", warn) or top_k
    if k_flag is not None:
        inject_k = k_flag
        top_k = max(top_k, k_flag)
    return top_k, min(inject_k, top_k)


def help_text():
    """The ``environment:`` section of ``--help``: every setting."""
    lines = ["environment (SKILL_RETRIEVAL_*; a bad value warns once and the default is used):"]
    for name, row in TABLE.items():
        lines.append("  %-34s %s (default %s)" % (name, row[5], row[4]))
    lines += ["  %-34s %s" % ("XDG_CACHE_HOME", "index cache folder parent (default ~/.cache)"),
              "  %-34s %s" % ("HERMES_HOME", "Hermes home for the default roots and config.yaml (default ~/.hermes)"),
              "  %-34s %s" % ("HERMES_PLATFORM", "platform for skills.platform_disabled")]
    return "\n".join(lines)


def markdown_table():
    """The settings table of docs/configuration.md (a test keeps the page in step)."""
    rows = ["| variable | what it does | default |", "|---|---|---|"]
    for name, row in TABLE.items():
        rows.append("| `%s` | %s | %s |" % (name, row[5], row[4].replace("|", "\\|")))
    return "\n".join(rows)
