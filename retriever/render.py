"""Render results: the injected text block, or JSON for pipes."""

HEADING = "## Retrieved Skills"
# Runner-neutral: Hermes loads skills with skill_view(name), Claude Code and
# Codex by name or by reading the SKILL.md.  Factual wording, not an order:
# imperative "system" text trips prompt-injection defences.
GUIDANCE = ("Skills that may fit this request; if one applies, load it (skill_view(name), "
            "or read its SKILL.md) before acting.")
DESC_MAX = 200


def short(desc, limit=DESC_MAX):
    """Cut a description to ``limit`` characters: ``limit - 3`` plus ``...``."""
    desc = " ".join(desc.split())
    return desc if len(desc) <= limit else desc[: limit - 3] + "..."


def text_block(results):
    """The block injected into the prompt; ``""`` when there are no results."""
    if not results:
        return ""
    lines = [HEADING, GUIDANCE]
    for r in results:
        lines.append("- **%s** (%s): %s" % (r["name"], r["id"], short(r["description"])))
    return "\n".join(lines) + "\n"


def json_doc(query, results):
    """``{"query", "results": [{"id", "name", "path", "score", "description"}]}``."""
    from retriever import jsonlite
    return jsonlite.dumps({
        "query": query,
        "results": [{"id": r["id"], "name": r["name"], "path": r["path"],
                     "score": r["score"], "description": r["description"]} for r in results],
    }) + "\n"
