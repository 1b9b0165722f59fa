"""What text each field of a skill holds, before analysis.

Beyond the frontmatter, two fields come from the body's structure: the
Markdown headings (a skill's own outline), and the "When to use" section
most authors write (their own list of trigger situations).  "When NOT to
use" sections are left out of it: they list exactly the requests that
should go elsewhere.
"""

_USAGE_HINTS = ("when to use", "use when", "when to apply", "when to invoke", "use this skill",
                "use cases", "use case", "trigger", "when should", "when you need", "usage scenarios")
_NEGATIVE_HINTS = ("not ", "n't", "avoid", "instead", "skip")
# Sentences of a description that say what a skill is NOT for.  Their words
# must not count for the skill: "Not for libFuzzer" is no reason to rank it
# for a libFuzzer question.
_NOT_FOR = ("not for ", "do not use", "don't use", "not intended", "not to be used", "never use this",
            "skip for ", "avoid for ", "not suitable for", "not a replacement")


# Headings of sections listing when a skill should not be used.
_NOT_SECTION = ("when not", "not to use", "not for", "don't use", "do not use", "when to avoid",
                "avoid using", "not use this", "when to skip")


def split_not_for(text):
    """``(positive, negative)``: the sentences of ``text`` that say what the
    skill is not for, moved out of it."""
    low = text.lower()
    if not any(h in low for h in _NOT_FOR):
        return text, ""
    keep, drop = [], []
    for sent in _sentences(text):
        (drop if sent.lower().lstrip(" *_(").startswith(_NOT_FOR) else keep).append(sent)
    return " ".join(keep), " ".join(drop)


def _sentences(text):
    out, start = [], 0
    for i, ch in enumerate(text):
        if ch in ".;!?" and (i + 1 == len(text) or text[i + 1] == " "):
            out.append(text[start:i + 1].strip())
            start = i + 1
    if text[start:].strip():
        out.append(text[start:].strip())
    return out


def split_camel(word):
    """``"PRReview"`` -> ``"PR Review"``, ``"camelCase"`` -> ``"camel Case"``."""
    out = []
    n = len(word)
    for i, ch in enumerate(word):
        if i and ch.isupper() and (word[i - 1].islower() or word[i - 1].isdigit()
                                   or (i + 1 < n and word[i + 1].islower() and word[i - 1].isupper())):
            out.append(" ")
        out.append(ch)
    return "".join(out)


_CONTROL = []  # compiled on first use: build path only


def body_outline(body, headings_too=True):
    """``(headings, usage, negative, rest)`` of a Markdown body: its heading
    lines; the text of its "When to use"-style sections; the text of its
    "When NOT to use"-style sections; and the body without the latter.
    A section runs to the next heading of the same or a higher level.
    Without ``headings_too`` the headings may come back empty (a profile
    without that field: most bodies then cost two regex scans)."""
    if not _CONTROL:
        import re
        # Lines that can change the state below: headings and code fences
        # (also "#" lines inside fences, which are handled one by one too).
        # A literal "\n" first lets the engine jump from line to line.
        _CONTROL.append(re.compile(r"\n[^\S\n]*(?:```|~~~|#)"))
        # The same lines whole, and any hint a heading could hold.
        _CONTROL.append(re.compile(r"\n[^\S\n]*(?:```|~~~|#)[^\n]*"))
        _CONTROL.append(re.compile("|".join(map(re.escape, _USAGE_HINTS + _NOT_SECTION))))
        # Each list apart, for _control_line (one search instead of any()).
        _CONTROL.append(re.compile("|".join(map(re.escape, _NOT_SECTION))).search)
        _CONTROL.append(re.compile("|".join(map(re.escape, _USAGE_HINTS))).search)
    if not headings_too and not _CONTROL[2].search("\n".join(_CONTROL[1].findall("\n" + body)).lower()):
        # No heading, fence or fenced "#" line holds a hint (two thirds of
        # real bodies): no section starts, so none is cut out, and the
        # line-by-line pass below would give back the body as it is.
        return "", "", "", body
    headings, usage, negative, rest = [], [], [], []
    st = {"kind": None, "level": 0, "fence": False}  # kind: "usage" or "negative" inside such a section

    def plain(chunk):
        # Lines that are neither headings nor fences, all in one state:
        # kept whole in ``rest`` (joined by newlines like its lines), split
        # only inside a section.
        if st["kind"] == "negative":
            negative.extend(map(str.strip, chunk.split("\n")))
            return
        rest.append(chunk)
        if st["kind"] == "usage":
            usage.extend(filter(None, map(str.strip, chunk.split("\n"))))

    pos = 0
    for m in _CONTROL[0].finditer("\n" + body):
        start = m.start()  # in body: the line after the matched "\n"
        if start > pos:
            plain(body[pos:start - 1])
        end = body.find("\n", start)
        if end < 0:
            end = len(body)
        _control_line(body[start:end], st, headings, usage, negative, rest)
        pos = end + 1
    if pos <= len(body):
        plain(body[pos:])
    return "\n".join(headings), "\n".join(usage), "\n".join(negative), "\n".join(rest)


def _control_line(line, st, headings, usage, negative, rest):
    """One heading or fence line of body_outline, which it hands over."""
    s = line.strip()
    if s.startswith(("```", "~~~")):
        st["fence"] = not st["fence"]
    elif not st["fence"] and s.startswith("#"):
        level = len(s) - len(s.lstrip("#"))
        title = s[level:].strip()
        if title and level <= 6:
            headings.append(title)
            if st["kind"] and level <= st["level"]:
                st["kind"] = None
            low = title.lower()
            if not st["kind"]:
                if _CONTROL[3](low):
                    st["kind"], st["level"] = "negative", level
                    negative.append(title)
                    return
                if _CONTROL[4](low):
                    st["kind"], st["level"] = "usage", level
    if st["kind"] == "negative":
        negative.append(s)
        return
    rest.append(line)
    if st["kind"] == "usage" and s and not s.startswith("#"):
        usage.append(s)


# Every field field_texts() can fill, in the order it fills them (the order
# the index sums a term's per-field contributions in).
FIELDS = ("seed", "name", "description", "triggers", "tags", "category", "headings", "usage", "body", "not")


# What is analysed of one field (the largest real body is 290 KiB), so a
# huge file costs a bounded time and memory to index.
MAX_FIELD_CHARS = 1 << 20


def field_texts(skill, profile):
    """The text of each field of ``profile`` for one skill record, each at
    most MAX_FIELD_CHARS characters."""
    name = skill["name"]
    folder = skill["id"].rsplit("/", 1)[-1].split(":")[-1]
    names = name if folder == name else name + " " + folder
    fields = profile["fields"]
    if fields.keys() == {"seed"}:
        # The design we started from: one text, "name: description" + triggers + tags.
        return {"seed": " ".join([name + ": " + skill["description"]] + skill["triggers"]
                                 + skill["tags"])[:MAX_FIELD_CHARS]}
    camel = split_camel(names)
    desc, desc_not = split_not_for(skill["description"])
    headings, usage, body_not, body = body_outline(skill.get("body", "")[:MAX_FIELD_CHARS], "headings" in fields)
    out = {
        "name": names if camel == names else names + " " + camel,
        "description": desc,
        "triggers": " ".join(skill["triggers"]),
        "tags": " ".join(skill["tags"]),
        "category": skill.get("category", "").replace("/", " "),
        "headings": headings,
        "usage": usage,
        "body": body,
        "not": (desc_not + "\n" + body_not).strip(),
    }
    return {f: t[:MAX_FIELD_CHARS] for f, t in out.items() if f in fields}
