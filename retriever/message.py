"""A message's own words, apart from what was pasted into it.

People paste a log, a stack trace or a file and ask about it before or
after.  The question says which skill fits; the paste mostly adds rare
words that BM25 would happily match.  ``split`` sorts lines into the two
without ``re`` (hot path): fenced code, indented blocks, stack-trace and
shell lines, very long lines and lines that are mostly symbols count as
pasted.
"""

_TRACE_STARTS = ("at ", "File \"", "Traceback", "$ ", "> ", ">>> ", "#", "//", "--- ", "+++ ",
                 "Caused by", "...")
_LONG_LINE = 300


def _pasted_line(line):
    s = line.strip()
    if not s:
        return False
    if line.startswith(("    ", "\t")) or len(s) > _LONG_LINE:
        return True
    if s.startswith(_TRACE_STARTS) and not s.startswith(("# ", "## ")) or s[:1] in "{}[]<|":
        return True
    if len(s) >= 20:
        plain = sum(1 for c in s if c.isalpha() or c == " ")
        if plain < 0.6 * len(s):
            return True  # paths, hex, timestamps, key=value runs
    return False


def split(text):
    """``(prose, pasted)``: the message's own lines and the pasted ones,
    each joined with newlines in their original order."""
    if "\n" not in text:
        return (text, "") if len(text) <= _LONG_LINE else ("", text)
    prose, pasted = [], []
    fenced = False
    for line in text.split("\n"):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            pasted.append(line)
            continue
        (pasted if fenced or _pasted_line(line) else prose).append(line)
    return "\n".join(prose), "\n".join(pasted)
