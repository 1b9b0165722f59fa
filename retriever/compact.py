"""Phase 1: the names-only skills index, as an ``llm_request`` middleware.

Hermes lists every skill with a description inside ``<available_skills>``
on every request.  The rewrite keeps the names, one comma-separated line
per top-level category (descriptions of the skills that matter arrive
with the user's message, from the ``pre_llm_call`` hook), and adds one
note saying so.  It works on the outgoing request only:
Hermes keeps the original prompt in its store, so the same rewrite runs on
every attempt and must give the same bytes each time (prompt cache).

The block is found by its structure (``find_block``), never by the first
matching tag: descriptions are the skill authors' text, copied verbatim,
and may hold ``</available_skills>`` or our marker.

Pure functions over plain data; nothing here imports Hermes or the retriever.
"""

OPEN = "<available_skills>"
CLOSE = "</available_skills>"
# Inside the block, so a compacted text is recognised and left alone.
MARKER = "<!-- skill-retrieval:compact -->"
NOTE = ("(Names only: the skills relevant to a request are described after the "
        "user's message; skill_view(name) loads any listed skill.)")
NAMES_ONLY = " [names only]: "
# Hermes 0.19.0 writes this sentence right after the block's closing tag;
# no description can hold it (they are cut to DESC_MAX characters).
SENTENCE = "Only proceed without loading a skill if genuinely none are relevant to the task."
DESC_MAX = 60  # Hermes' extract_skill_description: 57 characters and "..."


def _trailer_closes(text):
    # Where closing tags followed by what Hermes (or our compaction) writes
    # after the block start; None when there is none (another layout).
    out = set()
    for tail in ("\n\n" + SENTENCE, "\n" + NOTE):
        at = text.find("\n" + CLOSE + tail)
        while at >= 0:
            out.add(at + 1)
            at = text.find("\n" + CLOSE + tail, at + 1)
    return out or None


def _is_index_line(line):
    # A category line (2 spaces, then a name) or a skill line (4 spaces, "- ").
    return line.startswith("    - ") or (line.startswith("  ") and line[2:3] not in ("", " "))


def _close_of(text, at, ends):
    """Where the block whose lines start at ``at`` closes, or None.

    Hermes writes one line per category and per skill; only a skill's
    description (at most DESC_MAX characters, newlines included) may run
    over several lines.  ``slack`` is how many characters of description
    text may still follow.  A closing tag that cannot be description text
    ends the block; one that could is remembered, and the block ends at the
    last of those when a line turns up that cannot belong to the block.
    With ``ends`` (closing tags followed by Hermes' sentence or our note)
    only those close it.  None: the text after ``at`` is not Hermes' block.
    """
    slack, last = 0, None
    while True:
        nl = text.find("\n", at)
        line = text[at:] if nl < 0 else text[at:nl]
        cost = len(line) + 1
        if line == CLOSE and (ends is None or at in ends):
            if cost > slack:
                return at
            last, slack = at, slack - cost
        elif _is_index_line(line) or (line == MARKER and last is None and slack == 0):
            # Either a new line of the index or, if it fits, more description.
            desc = line[6:].partition(": ")[2] if line.startswith("    - ") and ": " in line[6:] else None
            new = DESC_MAX - len(desc) if desc is not None else 0
            slack = max(slack - cost, new) if cost <= slack else new
        elif cost <= slack:
            slack -= cost
        else:
            return last
        if nl < 0:
            return last
        at = nl + 1


def find_block(text):
    """``(start, close)``: where the skills block of ``text`` opens (its
    ``<available_skills>`` tag) and where its closing tag is, or None.

    The block is the first opening tag on a line of its own whose lines
    parse as Hermes writes them (``_close_of``); a tag inside a
    description neither opens nor closes it."""
    if not isinstance(text, str):
        return None
    ends = _trailer_closes(text)
    at = text.find(OPEN + "\n")
    while at >= 0:
        if at == 0 or text[at - 1] == "\n":
            close = _close_of(text, at + len(OPEN) + 1, ends)
            if close is not None:
                return at, close
        at = text.find(OPEN + "\n", at + 1)
    return None


def _category_names(inner):
    """``{category: [names]}`` of a block's inside, in block order.

    Skill lines (4 spaces, ``- ``) belong to the category line (2 spaces)
    above them; ``[names only]`` lines carry their names inline; anything
    else is a wrapped description."""
    cats = {}
    current = ""
    for line in inner.split("\n"):
        line = line.rstrip()
        if line.startswith("    - "):
            name = line[6:].split(": ", 1)[0].strip()
            if name:
                cats.setdefault(current, []).append(name)
        elif line.startswith("  ") and line[2:3] not in ("", " "):
            body = " " + line[2:]
            if NAMES_ONLY in body:
                cat, _, names = body.partition(NAMES_ONLY)
                current = cat.strip()
                cats.setdefault(current, []).extend(n.strip() for n in names.split(",") if n.strip())
            else:
                head, sep, _ = body.partition(": ")
                current = (head if sep else body.rstrip(":")).strip()
    return cats


def names_only_lines(inner):
    """The compact form of a block's inside: one ``[names only]`` line per
    top-level category (nested categories fold into their parent: the
    segment Hermes' own ``compact_categories`` matches on), names sorted
    and comma-separated, each name once."""
    groups = {}
    for cat, names in _category_names(inner).items():
        groups.setdefault(cat.split("/", 1)[0], set()).update(names)
    return ["  %s%s%s" % (top, NAMES_ONLY, ", ".join(sorted(names)))
            for top, names in sorted(groups.items()) if names]


def compact_text(text):
    """``text`` with its ``<available_skills>`` block in names-only form and
    the note after it; None when there is no complete block or it is
    already compact (idempotence)."""
    found = find_block(text)
    if found is None:
        return None
    i, j = found
    inner = text[i + len(OPEN):j]
    if inner.startswith("\n" + MARKER + "\n"):
        # Compact already: our marker as the block's first line, where
        # Hermes always writes a category line, so no description forges it.
        return None
    block = OPEN + "\n" + MARKER + "\n" + "".join(c + "\n" for c in names_only_lines(inner)) + CLOSE
    return text[:i] + block + "\n" + NOTE + text[j + len(CLOSE):]


def _compact_content(content):
    """A system ``content`` (str, or a list of text parts / blocks) with the
    block compacted, as a new object; None when nothing changes."""
    if isinstance(content, str):
        return compact_text(content)
    if isinstance(content, list):
        for n, part in enumerate(content):
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                new = compact_text(part["text"])
                if new is not None:
                    part = dict(part)  # keeps type, cache_control and the rest
                    part["text"] = new
                    return content[:n] + [part] + content[n + 1:]
    return None


def rewrite_request(request):
    """A new request dict with the skills block compacted, or None.

    Looks only where Hermes puts the system prompt: ``instructions``
    (Responses API), top-level ``system`` (Anthropic: str or blocks;
    Bedrock: ``{"text"}`` blocks) or the first ``system``/``developer``
    message (chat completions).  The input is never mutated: changed
    containers are copied, everything else (``tools``, other messages,
    Bedrock's sentinel keys) is shared as is.
    """
    if not isinstance(request, dict):
        return None
    new = compact_text(request.get("instructions"))
    if new is not None:
        out = dict(request)
        out["instructions"] = new
        return out
    if "system" in request:
        new = _compact_content(request["system"])
        if new is not None:
            out = dict(request)
            out["system"] = new
            return out
    msgs = request.get("messages")
    if isinstance(msgs, list) and msgs and isinstance(msgs[0], dict) \
            and msgs[0].get("role") in ("system", "developer"):
        new = _compact_content(msgs[0].get("content"))
        if new is not None:
            first = dict(msgs[0])
            first["content"] = new
            out = dict(request)
            out["messages"] = [first] + msgs[1:]
            return out
    return None


def block_names(text):
    """The skill names listed in the ``<available_skills>`` block of
    ``text`` (original or compact form), or None when there is no block."""
    found = find_block(text)
    if found is None:
        return None
    return {n for names in _category_names(text[found[0] + len(OPEN):found[1]]).values() for n in names}


def request_system_text(request):
    """The text holding the skills block in ``request`` (any shape), or None."""
    if not isinstance(request, dict):
        return None
    candidates = [request.get("instructions"), request.get("system")]
    msgs = request.get("messages")
    if isinstance(msgs, list) and msgs and isinstance(msgs[0], dict) \
            and msgs[0].get("role") in ("system", "developer"):
        candidates.append(msgs[0].get("content"))
    for c in candidates:
        parts = c if isinstance(c, list) else [c]
        for p in parts:
            t = p.get("text") if isinstance(p, dict) else p
            if isinstance(t, str) and OPEN in t:
                return t
    return None
