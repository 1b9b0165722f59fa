"""Render results: the injected text block, or JSON for pipes."""

HEADING = "## Retrieved Skills"
# Where the text comes from, plainly (a description is its author's text,
# not the system's), and how this runner loads a skill.  Factual wording,
# not an order: imperative "system" text trips prompt-injection defences.
GUIDANCE = ("Skills that may fit this request; each description is quoted from that skill's SKILL.md. "
            "If one applies, load it %s before acting.")
LOAD = "with your skill tool, or by reading its SKILL.md"  # no runner named (the command line)
# A skill from a folder the runner does not read (one named with ``roots
# add``) is in no list its skill tool loads from: the block gives its
# SKILL.md path, and this sentence says what to do with it.
BY_PATH = " A skill given with its SKILL.md path is not in your skill list: read that file instead."
DESC_MAX = 200
JSON_DESC_MAX = 2000  # --format json: longer descriptions are cut (docs/cli.md)


def plural(n, word, words=None):
    """``n`` and ``word`` in agreement: "1 skill", "0 skills", "3 files
    with problems" (``words``: the plural when it is not ``word`` + s)."""
    return "%d %s" % (n, word if n == 1 else words or word + "s")


def one_line(text):
    """``text`` as one line of printable characters.

    Every string shown from a skill (id, name, description) passes here:
    a folder name or a description holding a newline could otherwise add
    lines to the injected block (a forged "## Retrieved Skills" heading),
    and ESC, BEL, NUL or a bidi override (U+202E) would reach the user's
    terminal raw.  Whitespace and C0/C1 controls become a space; anything
    else ``str.isprintable`` rejects (invisible format characters such as
    U+200B and the bidi controls U+202A-U+202E, U+2066-U+2069, unassigned
    and surrogate code points) is dropped, so "pdf\u200b-tools" shows as
    the "pdf-tools" a person reads; runs of spaces become one.
    """
    if not isinstance(text, str):
        text = str(text)
    if not text.isprintable():
        text = "".join(c if c.isprintable() else " " if c.isspace() or ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f
                       else "" for c in text)
    return " ".join(text.split())


# Printable, yet shown as nothing: Hangul fillers, Khmer inherent vowels,
# the combining grapheme joiner, Mongolian and plain variation selectors.
_BLANKS = dict.fromkeys([0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x3164, 0xFFA0]
                        + list(range(0x180B, 0x1810)) + list(range(0xFE00, 0xFE10)))


# Cyrillic and Greek letters drawn like a Latin one (after case folding),
# from Unicode's confusables: "рdf-tools" with a Cyrillic "р" reads as
# "pdf-tools".
_LOOK_ALIKE = str.maketrans("аеорсухіјѕԁһԛԝɡοαρνκιτυχ", "aeopcyxijsdhqwgoapvkitux")


def name_key(name):
    """What a person sees as the name ``name``: ``one_line`` (invisible and
    bidi characters gone, whitespace as one space), blank fillers dropped,
    Unicode NFKC (full-width and compatibility forms folded), case folded
    and Cyrillic or Greek look-alikes of Latin letters read as those.  Two
    skills with one key are one skill: the first in precedence order is
    kept (``skills.select``).  Build path only."""
    import unicodedata
    key = unicodedata.normalize("NFKC", one_line(name).translate(_BLANKS)).casefold().strip()
    return key.translate(_LOOK_ALIKE)
# The JSON echo of the query: enough to tell which query a line answers; a
# 5 MB paste echoed whole made 18.8 MB of output.
QUERY_ECHO_MAX = 200


def short(desc, limit=DESC_MAX):
    """``desc`` as one line cut to ``limit`` characters: ``limit - 3``
    plus ``...``."""
    desc = one_line(desc)
    return desc if len(desc) <= limit else desc[: limit - 3] + "..."


def guidance(load=None):
    """The block's second line, naming the runner's way to load a skill
    (a registry record's ``load``)."""
    return GUIDANCE % (load or LOAD)


def unlisted(results, roots):
    """``results`` with ``"read"`` (the SKILL.md path) set on each skill
    that the runner reading ``roots`` cannot load by name: one whose
    nearest root is a folder the user named (source ``remembered``), not
    one of the runner's own.  ``roots``: root dicts, as a hook's skill set
    or an index header lists them.  The others are returned as they are."""
    folders = sorted(((r["path"].rstrip("/") + "/", r.get("source")) for r in roots or ()
                      if isinstance(r, dict) and isinstance(r.get("path"), str)),
                     key=lambda f: -len(f[0]))
    if not any(source == "remembered" for _, source in folders):
        return results
    out = []
    for r in results:
        where = r["path"].rstrip("/") + "/"
        source = next((s for f, s in folders if where.startswith(f)), None)
        out.append(dict(r, read=r["path"].rstrip("/") + "/SKILL.md") if source == "remembered" else r)
    return out


def text_block(results, load=None):
    """The block injected into the prompt; ``""`` when there are no
    results.  ``load``: how the runner loads a skill (``guidance``).  A
    result marked by ``unlisted`` shows its SKILL.md path, and the guidance
    says to read that file."""
    if not results:
        return ""
    lines = [HEADING, guidance(load) + (BY_PATH if any(r.get("read") for r in results) else "")]
    for r in results:
        where = one_line(r["id"]) + (", " + one_line(r["read"]) if r.get("read") else "")
        lines.append("- **%s** (%s): %s" % (one_line(r["name"]), where, short(r["description"])))
    return "\n".join(lines) + "\n"


def json_doc(query, results, tiers=None):
    """``{"query", "query_chars", "tiers", "results": [{"id", "name", "path",
    "score", "description"}]}``: ``query`` is the first QUERY_ECHO_MAX
    characters (``...`` marks a cut), ``query_chars`` the full length; id,
    name and description are one line each, descriptions cut to
    JSON_DESC_MAX characters.  ``tiers`` names the rankers that answered
    (``["bm25"]``, or ``["bm25", "semantic"]`` when the semantic tier fused)."""
    from retriever import jsonlite
    return jsonlite.dumps({
        "query": query if len(query) <= QUERY_ECHO_MAX else query[:QUERY_ECHO_MAX - 3] + "...",
        "query_chars": len(query),
        "tiers": list(tiers or ("bm25",)),
        "results": [{"id": one_line(r["id"]), "name": one_line(r["name"]), "path": r["path"],
                     "score": r["score"], "description": short(r["description"], JSON_DESC_MAX)}
                    for r in results],
    }) + "\n"
