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


def body_outline(body):
    """``(headings, usage, negative, rest)`` of a Markdown body: its heading
    lines; the text of its "When to use"-style sections; the text of its
    "When NOT to use"-style sections; and the body without the latter.
    A section runs to the next heading of the same or a higher level."""
    headings, usage, negative, rest = [], [], [], []
    kind = None  # "usage" or "negative" while inside such a section
    level_in = 0
    fence = False
    for line in body.split("\n"):
        s = line.strip()
        if s.startswith(("```", "~~~")):
            fence = not fence
        elif not fence and s.startswith("#"):
            level = len(s) - len(s.lstrip("#"))
            title = s[level:].strip()
            if title and level <= 6:
                headings.append(title)
                if kind and level <= level_in:
                    kind = None
                low = title.lower()
                if not kind:
                    if any(h in low for h in _NOT_SECTION):
                        kind, level_in = "negative", level
                        negative.append(title)
                        continue
                    if any(h in low for h in _USAGE_HINTS):
                        kind, level_in = "usage", level
        if kind == "negative":
            negative.append(s)
            continue
        rest.append(line)
        if kind == "usage" and s and not s.startswith("#"):
            usage.append(s)
    return "\n".join(headings), "\n".join(usage), "\n".join(negative), "\n".join(rest)


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
    headings, usage, body_not, body = body_outline(skill.get("body", "")[:MAX_FIELD_CHARS])
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
