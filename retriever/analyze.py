"""Turn tokens into index terms: stopwords out, a light English stemmer.

The options travel inside the index header, so a query is always analysed
exactly as the skills it is matched against were.
"""

from retriever.tokenize import tokenize, is_cjk_token

# Function words plus the web and tooling noise that every skill shares.
STOPWORDS = frozenset("""
a about above after again all also am an and any are as at be been before
being below between both but by can could did do does doing down during each
few for from further had has have having he her here hers him his how i if in
into is it its itself just me more most my no nor not now of off on once only
or other our ours out over own same she should so some such than that the
their theirs them then there these they this those through to too under until
up very was we were what when where which while who whom why will with would
you your yours yourself please want need like get make let lets may might must
shall use uses used using via etc e g eg ie i'm im it's dont don't can't cant
http https www com org io html
""".split())

# Conversational filler common in prompts and rare in what they ask for.
CHATTER = frozenset("""
ve re ll d s t m isn aren wasn weren hasn haven hadn doesn didn won wouldn
shouldn couldn mustn just really actually basically maybe something anything
everything thing things stuff way kind sort lot lots bunch able sure know think
thought help hi hey hello thanks thank okay ok yes yeah also still already
even right now every one two getting got gonna wanna trying try tried see look
looking show tell give go going come came keep well much many quite says said
hmm hmmm hm mhm uh uhh um umm ah oh ooh wow huh meh lol haha hehe oops ugh yay
whoa interesting
""".split())

# Suffixes stripped by the light stemmer, longest first.  Conservative on
# purpose: "skills"/"skill" and "testing"/"test" meet, "process" stays.
_SUFFIXES = ("ingly", "edly", "ings", "ing", "ies", "ied", "ed", "es", "s", "ly")


# Level 0: none; 1: function words and web noise; 2: plus chatter.
_STOP_LEVELS = ((), STOPWORDS, STOPWORDS | CHATTER)


def light_stem(t):
    """Strip one common English suffix from words of 5+ letters, keeping a
    stem of 3+ letters with a vowel.  CJK, digits and short words pass."""
    # Most words end in none of the suffixes: one C-level test sends them back.
    if len(t) < 5 or not t.endswith(_SUFFIXES) or not t.isalpha() or not t.isascii():
        return t
    if t.endswith(("ss", "us", "is", "sis")):
        return t
    for suf in _SUFFIXES:
        if t.endswith(suf):
            stem = t[: -len(suf)]
            if suf == "ies" or suf == "ied":
                stem += "y"
            elif suf == "es" and not stem.endswith(("sh", "ch", "x", "z", "ss")):
                # "notes" -> "note", "classes" -> "class"
                stem += "e"
            if len(stem) >= 3 and any(c in "aeiouy" for c in stem):
                if suf in ("ing", "ed", "ings") and len(stem) > 3 and stem[-1] == stem[-2] and stem[-1] not in "lsz":
                    stem = stem[:-1]  # "running" -> "run", "mapped" -> "map"
                return stem
            return t
    return t


# token -> term ("" for a stopword), one table per analyzer setting.  A
# library repeats a few tens of thousands of distinct words hundreds of
# thousands of times, so the build stems each word once.
_TERM_CACHE = {}


def analyze(text, opts):
    """Tokens of ``text`` turned into terms under the analyzer ``opts``
    (a dict with ``stopwords``: 0, 1 or 2, and ``stem``: "none" or
    "light"), in order, repeats kept."""
    level = opts.get("stopwords") or 0
    stem = opts.get("stem") == "light"
    table = _TERM_CACHE.get((level, stem))
    if table is None:
        table = _TERM_CACHE[(level, stem)] = {}
    toks = tokenize(text)
    new = [t for t in set(toks) if t not in table]
    if new:
        stop = _STOP_LEVELS[level]
        for t in new:
            if t in stop:
                table[t] = ""
            elif stem and not is_cjk_token(t):
                table[t] = light_stem(t)
            else:
                table[t] = t
    return [term for term in map(table.__getitem__, toks) if term]


def _table(opts):
    """The token -> term table of the analyzer ``opts``, filling itself:
    a miss (a word not seen before) is analysed once and remembered."""
    level = opts.get("stopwords") or 0
    stem = opts.get("stem") == "light"
    # Its own entry: analyze() on the query path keeps its plain dict.
    table = _TERM_CACHE.get(("missing", level, stem))
    if table is None:
        stop = _STOP_LEVELS[level]

        class _Terms(dict):
            def __missing__(self, t):
                # light_stem passes every non-ASCII token, CJK ones included.
                term = "" if t in stop else (light_stem(t) if stem else t)
                self[t] = term
                return term

        table = _TERM_CACHE[("missing", level, stem)] = _Terms()
    return table


def numbered_terms(opts, ids):
    """A table token -> term number under the analyzer ``opts``, for
    ``count_terms``: ``ids`` (``index.term_ids``) numbers the terms, and a
    token that makes no term maps to "".  A build's analysis then counts
    numbers, and need not look each term up again to number it."""
    terms = _table(opts)

    class _Numbers(dict):
        def __missing__(self, t):
            term = terms[t]
            n = self[t] = ids[term] if term else ""
            return n

    return _Numbers()


def count_terms(text, opts, table=None):
    """``(Counter of terms, number of terms)`` of ``text``: what
    ``analyze`` returns, counted, without building the term list; with
    ``table`` (``numbered_terms``), the terms' numbers counted instead.
    Build path only: the lookups and the counting both run in C."""
    from collections import Counter
    if table is None:
        table = _table(opts)
    counts = Counter(map(table.__getitem__, tokenize(text)))
    counts.pop("", None)
    return counts, sum(counts.values())
