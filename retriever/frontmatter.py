"""Parse a SKILL.md into metadata and body without ever aborting a build.

Real skill libraries are messy: BOMs, CRLF, missing or unclosed fences,
YAML that strict parsers reject (an unquoted ": " in a description is the
usual culprit), documents that are lists or scalars.  Each problem becomes
one warning string; the skill is still indexed with what could be read.
Build path only: PyYAML is imported here, never on the query path.
"""

_yaml_loader = None


def _load_yaml(text):
    """yaml.load with the C loader when present; raises on invalid YAML."""
    global _yaml_loader
    if _yaml_loader is None:
        import yaml
        _yaml_loader = (yaml, getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    yaml, loader = _yaml_loader
    return yaml.load(text, Loader=loader)


def yaml_available():
    """True when PyYAML can be imported (the lenient parser works without it)."""
    try:
        _load_yaml("a: 1")
        return True
    except Exception:
        return False


def split_frontmatter(text):
    """Return (frontmatter_text or None, body, problem or None).

    Accepts a leading BOM and CRLF line ends.  An opening ``---`` with no
    closing fence is reported and the whole text is treated as body.
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    stripped = text.lstrip("\n")
    if not stripped.startswith("---"):
        return None, text, "no frontmatter"
    first_nl = stripped.find("\n")
    if first_nl < 0 or stripped[:first_nl].rstrip() != "---":
        return None, text, "no frontmatter"
    rest = stripped[first_nl + 1:]
    # The closing fence is a line of exactly "---" (or "..." as YAML allows).
    pos = 0
    while True:
        nl = rest.find("\n", pos)
        line = rest[pos:] if nl < 0 else rest[pos:nl]
        if line.rstrip() in ("---", "..."):
            return rest[:pos], ("" if nl < 0 else rest[nl + 1:]), None
        if nl < 0:
            return None, rest, "unclosed frontmatter fence"
        pos = nl + 1


def _unquote(v):
    v = v.strip()
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
        v = v[1:-1]
    return v


def lenient_parse(fm_text):
    """Fallback parser: top-level ``key: value`` lines, with indented or
    block-scalar continuation lines folded into the value."""
    out = {}
    key = None
    for line in fm_text.split("\n"):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line[0] not in " \t-" and ":" in line:
            k, _, v = line.partition(":")
            key = k.strip()
            v = v.strip()
            if v in ("|", ">", "|-", ">-", "|+", ">+"):
                v = ""
            out[key] = _unquote(v)
        elif key is not None:
            item = line.strip()
            if item.startswith("- "):
                prev = out[key]
                out[key] = (prev if isinstance(prev, list) else ([prev] if prev else [])) + [_unquote(item[2:])]
            elif isinstance(out[key], str):
                out[key] = (out[key] + " " + item).strip()
    return out


def _first_paragraph(body):
    for block in body.split("\n\n"):
        lines = [l.strip() for l in block.strip().split("\n")
                 if l.strip() and not l.lstrip().startswith(("#", "```", "---", "|", "<!--"))]
        if lines:
            return " ".join(lines)
    return ""


def _as_text(value):
    """Flatten a YAML value into text: lists are joined, scalars str()'d."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return " ".join(_as_text(v) for v in value)
    if isinstance(value, dict):
        return " ".join(_as_text(v) for v in value.values())
    return str(value)


def _as_list(value):
    if value is None:
        return []
    if isinstance(value, str):
        # "a, b, c" and "[a, b]" both appear in the wild.
        s = value.strip().strip("[]")
        return [p.strip().strip("\"'") for p in s.split(",") if p.strip()]
    if isinstance(value, (list, tuple)):
        return [_as_text(v) for v in value if v is not None]
    return [_as_text(value)]


def parse_skill(text, folder_name):
    """Parse SKILL.md text.  Returns (skill dict, list of problem strings).

    The dict always has ``name``, ``description``, ``triggers``, ``tags``,
    ``body`` and ``meta`` (the raw mapping, possibly empty).
    """
    problems = []
    fm_text, body, problem = split_frontmatter(text)
    if problem:
        problems.append(problem)
    meta = {}
    if fm_text is not None and fm_text.strip():
        try:
            data = _load_yaml(fm_text)
        except ImportError:
            data = lenient_parse(fm_text)
        except Exception as exc:
            reason = str(exc).split("\n")[0][:120]
            problems.append("invalid YAML (%s); read key: value lines instead" % reason)
            data = lenient_parse(fm_text)
        if data is None:
            data = {}
        if not isinstance(data, dict):
            problems.append("frontmatter is a %s, not a mapping; read key: value lines instead"
                            % type(data).__name__)
            data = lenient_parse(fm_text)
        meta = data
    elif fm_text is not None:
        problems.append("empty frontmatter")

    name = meta.get("name")
    if name is None or (isinstance(name, str) and not name.strip()):
        if fm_text is not None:
            problems.append("missing name; using the folder name")
        name = folder_name
    elif not isinstance(name, str):
        problems.append("name is a %s; converted to text" % type(name).__name__)
        name = _as_text(name)
    name = " ".join(name.split()) or folder_name

    desc = meta.get("description")
    if desc is None or (isinstance(desc, str) and not desc.strip()):
        desc = meta.get("when_to_use") or _first_paragraph(body)
        if fm_text is not None:
            problems.append("missing description; using the first paragraph")
    if not isinstance(desc, str):
        problems.append("description is a %s; converted to text" % type(desc).__name__)
    desc = " ".join(_as_text(desc).split())

    md = meta.get("metadata") if isinstance(meta.get("metadata"), dict) else {}
    hermes = md.get("hermes") if isinstance(md.get("hermes"), dict) else {}
    tags = []
    for src in (meta.get("tags"), meta.get("keywords"), md.get("tags"), hermes.get("tags")):
        tags.extend(_as_list(src))
    triggers = []
    for key in ("triggers", "trigger", "when_to_use"):
        value = meta.get(key)
        # A string trigger is one phrase: commas inside it are prose.
        triggers.extend([_as_text(value)] if isinstance(value, str) else _as_list(value))
    triggers = [t for t in triggers if t]

    return {
        "name": name,
        "description": desc,
        "triggers": triggers,
        "tags": [t for t in tags if t],
        "body": body,
        "meta": meta,
    }, problems
