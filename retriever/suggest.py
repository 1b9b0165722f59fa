"""``did_you_mean``: the guess an error line offers for a mistyped name.

Below both of its callers, the CLI (options, choices, runner flags) and
the runners' front end (``query --runner``), so neither imports upward.
Only error paths import it.
"""


def did_you_mean(word, names, quote=True):
    """``; did you mean 'NAME'?`` for the one of ``names`` that ``word`` is
    most likely a typo of, else "".  Only error paths call it.

    A name that begins with the word or that the word begins with counts
    ("claude" for claude-code, "gemini-cli" for gemini: how people call the
    runners), then a close spelling; a word far from every name gets no
    guess, since a wrong guess misleads more than the list does.  Case
    does not count ("CODEX", "Claude"): the names shown are the real ones."""
    by_key = {}
    for n in names:
        by_key.setdefault(str(n).lower(), str(n))
    word = word.lower()
    meant = None
    if len(word) >= 3:
        starts = [k for k in by_key if k.startswith(word) or word.startswith(k)]
        meant = starts[0] if len(starts) == 1 else None
    if meant is None:
        import difflib
        close = difflib.get_close_matches(word, list(by_key), 1, 0.75)
        meant = close[0] if close else None
    meant = by_key.get(meant) if meant is not None else None
    if meant is None:
        return ""
    return "; did you mean %s?" % ("'%s'" % meant if quote else meant)
