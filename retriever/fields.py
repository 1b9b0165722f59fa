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
    """``(headings, usage)``: the heading lines of the body, and the text of
    its "When to use"-style sections (up to the next heading of the same or
    a higher level)."""
    headings = []
    usage = []
    in_usage = 0  # level of the usage heading we are inside, 0 when outside
    fence = False
    for line in body.split("\n"):
        s = line.strip()
        if s.startswith("```") or s.startswith("~~~"):
            fence = not fence
            continue
        if fence:
            if in_usage:
                usage.append(s)
            continue
        if s.startswith("#"):
            level = len(s) - len(s.lstrip("#"))
            title = s[level:].strip()
            if not title or level > 6:
                continue
            headings.append(title)
            if in_usage and level <= in_usage:
                in_usage = 0
            low = title.lower()
            if not in_usage and any(h in low for h in _USAGE_HINTS) and not any(n in low for n in _NEGATIVE_HINTS):
                in_usage = level
            continue
        if in_usage and s:
            usage.append(s)
    return "\n".join(headings), "\n".join(usage)


def field_texts(skill, profile):
    """The text of each field of ``profile`` for one skill record."""
    name = skill["name"]
    folder = skill["id"].rsplit("/", 1)[-1].split(":")[-1]
    names = name if folder == name else name + " " + folder
    fields = profile["fields"]
    if fields.keys() == {"seed"}:
        # The design we started from: one text, "name: description" + triggers + tags.
        return {"seed": " ".join([name + ": " + skill["description"]] + skill["triggers"] + skill["tags"])}
    camel = split_camel(names)
    body = skill.get("body", "")
    out = {
        "name": names if camel == names else names + " " + camel,
        "description": skill["description"],
        "triggers": " ".join(skill["triggers"]),
        "tags": " ".join(skill["tags"]),
        "category": skill.get("category", "").replace("/", " "),
        "body": body,
    }
    if "headings" in fields or "usage" in fields:
        out["headings"], out["usage"] = body_outline(body)
    return {f: t for f, t in out.items() if f in fields}
