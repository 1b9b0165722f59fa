"""Tokenizer shared by the index build and the query path.

Lowercase, split on anything that is not a letter, digit or combining mark
(Unicode punctuation, symbols, whitespace), and turn runs of CJK characters
into overlapping bigrams.  No ``re`` and no ``unicodedata`` at import: the
query path pays only for what a query actually contains.
"""

# Separator table for str.translate, filled lazily per code point.  A dict
# subclass with __missing__ keeps the cost proportional to the distinct
# characters seen rather than to the size of Unicode.
class _SepTable(dict):
    def __missing__(self, cp):
        ch = chr(cp)
        # isalnum() covers letters and digits of every script; the
        # isidentifier() probe adds combining marks (Mn/Mc), which belong to
        # the word they decorate.  "_" is an identifier char but punctuation.
        if ch.isalnum() or (ch != "_" and ("a" + ch).isidentifier()):
            keep = cp  # maps to itself
        else:
            keep = " "
        self[cp] = keep
        return keep


_SEP = _SepTable()
_ASCII = []  # the bytes table of the ASCII fast path, made on first use


def _ascii_table():
    # For ASCII the rule above keeps exactly [A-Za-z0-9]; one bytes.translate
    # lowercases and separates at once, several times faster than str.translate.
    t = bytearray(b" ") * 256
    t[48:58] = b"0123456789"
    t[65:91] = t[97:123] = b"abcdefghijklmnopqrstuvwxyz"
    _ASCII.append(bytes(t))
    return _ASCII[0]


_UTF8 = []  # the same for UTF-8 text whose non-ASCII separators are gone
_ASCII_BYTES = []  # every ASCII byte, to delete them: the non-ASCII left (made on first use)
# Non-ASCII character -> what it becomes in a lowercased, separated text
# (" " for a separator, its lowercase for a letter; itself mostly).
_LOWSEP = {}


def _utf8_table():
    t = bytearray(_ASCII[0] if _ASCII else _ascii_table())
    t[128:256] = bytes(range(128, 256))
    _UTF8.append(bytes(t))
    return _UTF8[0]


def _ascii_bytes():
    _ASCII_BYTES.append(bytes(range(128)))
    return _ASCII_BYTES[0]


def _is_cjk(cp):
    """True for code points indexed as bigrams (han, kana, hangul)."""
    return (
        0x4E00 <= cp <= 0x9FFF          # CJK Unified Ideographs
        or 0x3400 <= cp <= 0x4DBF       # Extension A
        or 0x20000 <= cp <= 0x2A6DF     # Extension B
        or 0xF900 <= cp <= 0xFAFF       # Compatibility Ideographs
        or 0x3040 <= cp <= 0x30FF       # Hiragana, Katakana
        or 0x31F0 <= cp <= 0x31FF       # Katakana phonetic extensions
        or 0xFF66 <= cp <= 0xFF9F       # half-width Katakana
        or 0xAC00 <= cp <= 0xD7AF       # Hangul syllables
    )


def _split_cjk(tok, out):
    """Append the parts of a mixed-script token: non-CJK runs whole, CJK
    runs as overlapping bigrams (a one-character run stays whole)."""
    run = []
    kind = None
    for ch in tok:
        k = _is_cjk(ord(ch))
        if k is not kind and run:
            _flush(run, kind, out)
            run = []
        kind = k
        run.append(ch)
    if run:
        _flush(run, kind, out)


def _flush(run, cjk, out):
    if not cjk:
        out.append("".join(run))
    elif len(run) == 1:
        out.append(run[0])
    else:
        for i in range(len(run) - 1):
            out.append(run[i] + run[i + 1])


def tokenize(text):
    """Split ``text`` into lowercase tokens; CJK runs become bigrams.

    >>> tokenize("用python写 a Web-App")
    ['用', 'python', '写', 'a', 'web', 'app']
    """
    if not text:
        return []
    if text.isascii():
        return text.encode("ascii").translate(_ASCII[0] if _ASCII else _ascii_table()).decode("ascii").split()
    # NFKC folds full-width Latin and half-width kana onto the forms the
    # skills are written in.  Only non-ASCII text pays for the import.
    from unicodedata import normalize
    text = normalize("NFKC", text)
    if len(text) > 200 and "\u03a3" not in text:
        # Long text (a skill body): str.lower and str.translate pay per
        # character, and most of a body is ASCII.  Work on its UTF-8 bytes
        # instead: one bytes.translate lowercases and separates the ASCII,
        # and each distinct non-ASCII character (a few dozen: dashes,
        # arrows, emoji, accented letters) that lowercasing or separating
        # changes is replaced throughout with one bytes.replace.  (UTF-8 is
        # self-synchronising: one character's bytes never match inside
        # another's.)  Capital sigma is left to str.lower, the one
        # character whose lowercase depends on its neighbours.
        data = text.encode("utf-8", "surrogatepass")
        chars = set(data.translate(None, _ASCII_BYTES[0] if _ASCII_BYTES else _ascii_bytes())
                    .decode("utf-8", "surrogatepass"))
        kept = ""
        fixed = []
        for ch in chars:
            new = _LOWSEP.get(ch)
            if new is None:
                new = _LOWSEP[ch] = ch.lower().translate(_SEP)
            if new != ch:
                fixed.append(ch)
            kept += new
        kept = kept.replace(" ", "")
        if not kept:
            # Every non-ASCII character is a separator (most bodies): the
            # ASCII table blanks every byte of them at once, and an ASCII
            # str splits several times faster.
            return data.translate(_ASCII[0] if _ASCII else _ascii_table()).decode("ascii").split()
        if not set(kept).isdisjoint(fixed):
            data = None  # a replacement would be replaced again (not in real Unicode data)
        else:
            for ch in fixed:
                data = data.replace(ch.encode("utf-8", "surrogatepass"),
                                    _LOWSEP[ch].encode("utf-8", "surrogatepass"))
            words = data.translate(_UTF8[0] if _UTF8 else _utf8_table()).decode("utf-8", "surrogatepass").split()
            top = max(kept)
    else:
        data = None
    if data is None:
        low = text.lower()
        words = low.translate(_SEP).split()
        top = max(low)
    # No character at or above the first CJK block (U+3040) means no word
    # needs splitting: max() runs in C, the word loop below does not.  (The
    # loop leaves words without CJK characters as they are, so a check on
    # the lowercased characters is as good.)
    if top < "\u3040":
        return words
    out = []
    for w in words:
        if w.isascii() or max(w) < "\u3040":
            out.append(w)
        else:
            _split_cjk(w, out)
    return out


def is_cjk_token(tok):
    """True when ``tok`` came from a CJK run (it must not be stemmed)."""
    return bool(tok) and _is_cjk(ord(tok[0]))


def _spaceless(cp):
    # Han and kana: scripts written without spaces between words (Hangul,
    # though indexed as bigrams too, is spaced like Latin).
    return _is_cjk(cp) and not 0xAC00 <= cp <= 0xD7AF


def word_count(text):
    """How many words ``text`` holds, in any script: its space-separated
    words, except that a run of han or kana characters counts one word
    per two characters (rounded up), so a Chinese or Japanese sentence is
    as long as its English translation rather than one word like "ok".
    A Latin word inside such a run ("用python写") counts one.

    >>> word_count("remove duplicate rows"), word_count("删除重复的行"), word_count("好的")
    (3, 3, 1)
    """
    words = text.split()
    if text.isascii():
        return len(words)
    n = 0
    for w in words:
        if max(w) < "\u3040":
            n += 1  # no han, kana or hangul in it: one word, as before
            continue
        got = run = 0
        other = False  # inside a run of other letters or digits
        for ch in w:
            if _spaceless(ord(ch)):
                run += 1
                other = False
                continue
            if run:
                got += (run + 1) // 2
                run = 0
            if ch.isalnum():
                if not other:
                    got += 1
                other = True
            else:
                other = False
        got += (run + 1) // 2
        n += got or 1  # punctuation alone still counts, as str.split does
    return n
