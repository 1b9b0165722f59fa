"""Parse a SKILL.md into metadata and body without ever aborting a build.

Real skill libraries are messy: BOMs, CRLF, missing or unclosed fences,
YAML that strict parsers reject (an unquoted ": " in a description is the
usual culprit), documents that are lists or scalars.  Each problem becomes
one warning string; the skill is still indexed with what could be read.
Build path only: PyYAML is imported here, never on the query path.
"""

_yaml_loader = None

# Bounds on what one SKILL.md may cost the build (issue 15).  The largest
# frontmatter among 3,741 real skills is 2 KiB and the deepest nests 5
# levels; a few lines of YAML aliases can otherwise expand into billions of
# nodes and hang the build with every skill hidden.
MAX_FRONTMATTER = 256 * 1024   # characters between the fences
MAX_YAML_NODES = 20000         # nodes once aliases and merge keys are expanded
MAX_YAML_DEPTH = 64            # nesting levels
YAML_SECONDS = 2.0             # wall time for parsing one frontmatter
# What is kept of a name and a description (the longest real ones: 59 and
# 5,258 characters); the rest would only slow the build and the output.
MAX_NAME = 256
MAX_DESCRIPTION = 16384


class Rejected(ValueError):
    """A SKILL.md past the bounds: reported and skipped, never indexed."""


def _load_yaml(text):
    """Parse YAML with the C loader when present; raises on invalid YAML
    and Rejected past the bounds."""
    return load_yaml(text)


# A frontmatter this short, without anchors or aliases, whose collection
# openers are few, is within the bounds by construction (``within_bounds``).
SMALL_YAML = 4096
_OPENERS = []  # compiled on first use


def load_yaml(text, max_chars=MAX_FRONTMATTER, always_check=False):
    """yaml's safe loader, bounded: Rejected when ``text`` is longer than
    ``max_chars``, expands past MAX_YAML_NODES nodes or MAX_YAML_DEPTH
    levels (alias bombs, merge-key bombs, recursive aliases), or takes
    longer than YAML_SECONDS.  The document is composed into nodes first
    (aliases are shared there, so composing is linear) and counted before
    anything is constructed, unless ``within_bounds(text)`` says it cannot
    break them (nearly every real frontmatter: the count and the timer
    doubled the cost of parsing); ``always_check`` counts anyway."""
    global _yaml_loader
    if len(text) > max_chars:
        raise Rejected("frontmatter is %d characters, over the %d limit" % (len(text), max_chars))
    if _yaml_loader is None:
        import yaml
        _yaml_loader = (yaml, getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    yaml, Loader = _yaml_loader
    check = always_check or not within_bounds(text)
    with _time_limit(YAML_SECONDS if check else None):
        loader = Loader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            if check:
                _check_nodes(node, yaml.nodes)
            return loader.construct_document(node)
        finally:
            loader.dispose()


def within_bounds(text):
    """True when ``text`` cannot break the bounds, so its nodes need no
    count: at most SMALL_YAML characters, no anchor or alias (``&``,
    ``*``: nothing is repeated, so its nodes are at most about as many as
    its characters, far under MAX_YAML_NODES), and at most MAX_YAML_DEPTH
    collection openers.  Every collection has an opener of its own: a
    flow ``[`` or ``{``, a block sequence's ``-`` (followed by a space or
    a line end), or a mapping's ``:`` or ``?`` (counted wherever they
    are: inside brackets either makes a one-pair mapping whatever
    follows), so no path nests deeper than there are openers.  Parsing
    that little takes microseconds: no timer either."""
    if len(text) > SMALL_YAML or "&" in text or "*" in text:
        return False
    if not _OPENERS:
        import re
        _OPENERS.append(re.compile(r"[\[{:?]|-(?=\s|$)").findall)
    return len(_OPENERS[0](text)) <= MAX_YAML_DEPTH


def _check_nodes(root, nodes):
    """Rejected unless the tree under ``root``, with every alias expanded,
    stays within MAX_YAML_NODES nodes and MAX_YAML_DEPTH levels.  Subtree
    sizes are memoised per node, so the count costs one visit per distinct
    node however often aliases repeat it."""
    size = {}
    on_path = set()
    stack = [(root, 0, False)]
    while stack:
        node, depth, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            n = 1
            for child in _children(node, nodes):
                n += size[id(child)]
            size[key] = min(n, MAX_YAML_NODES + 1)
            if n > MAX_YAML_NODES:
                raise Rejected("YAML expands to over %d nodes (an alias bomb?)" % MAX_YAML_NODES)
            continue
        if key in size:
            continue
        if key in on_path:
            raise Rejected("YAML alias refers to itself")
        if depth > MAX_YAML_DEPTH:
            raise Rejected("YAML nested deeper than %d levels" % MAX_YAML_DEPTH)
        on_path.add(key)
        stack.append((node, depth, True))
        for child in _children(node, nodes):
            if id(child) in on_path:
                raise Rejected("YAML alias refers to itself")
            if id(child) not in size:
                stack.append((child, depth + 1, False))


def _children(node, nodes):
    if isinstance(node, nodes.SequenceNode):
        return node.value
    if isinstance(node, nodes.MappingNode):
        return [n for kv in node.value for n in kv]
    return ()


class _time_limit:
    """SIGALRM-based wall-clock bound; a no-op for ``seconds`` None, off
    the main thread or where there is no SIGALRM (the size and node bounds
    still hold there)."""

    def __init__(self, seconds):
        self.seconds = seconds
        self.old = None

    def __enter__(self):
        if self.seconds is None:
            return self
        import signal
        import threading
        if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
            return self
        if signal.getitimer(signal.ITIMER_REAL)[0]:
            return self  # someone else's timer is running: leave it alone

        def expired(signum, frame):
            raise Rejected("YAML took over %gs to parse" % self.seconds)

        self.old = signal.signal(signal.SIGALRM, expired)
        signal.setitimer(signal.ITIMER_REAL, self.seconds)
        return self

    def __exit__(self, *exc):
        if self.old is not None:
            import signal
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.old)
        return False


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
    Raises Rejected for a file past the bounds (see ``load_yaml``), which
    the caller reports and skips.

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
        except Rejected:
            raise
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
    name = " ".join(name[:MAX_NAME * 4].split())[:MAX_NAME] or folder_name

    desc = meta.get("description")
    if desc is None or (isinstance(desc, str) and not desc.strip()):
        desc = meta.get("when_to_use") or _first_paragraph(body)
        if fm_text is not None:
            problems.append("missing description; using the first paragraph")
    if not isinstance(desc, str):
        problems.append("description is a %s; converted to text" % type(desc).__name__)
    desc = " ".join(_as_text(desc)[:MAX_DESCRIPTION * 4].split())[:MAX_DESCRIPTION]

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
