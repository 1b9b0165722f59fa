"""JSON for the query path without importing ``json`` (and with it ``re``).

CPython's C accelerator ``_json`` parses and escapes on its own; importing it
costs about 0.3 ms against about 12 ms for ``json``.  It is a private module,
so every use falls back to ``json`` if it is missing.
"""

try:
    import _json
except ImportError:  # pragma: no cover - other interpreters
    _json = None


class _Ctx:
    # The attributes _json.make_scanner reads from a JSONDecoder.
    strict = False
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    memo = None

    @staticmethod
    def parse_constant(name):
        return {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}[name]


def loads(text):
    """Parse a JSON document (str).  Raises ValueError on bad input."""
    if _json is None:
        import json
        return json.loads(text)
    ctx = _Ctx()
    ctx.memo = {}
    scan = _json.make_scanner(ctx)
    ws = " \t\n\r"
    i = 0
    n = len(text)
    while i < n and text[i] in ws:
        i += 1
    try:
        obj, end = scan(text, i)
    except StopIteration:
        raise ValueError("not JSON")
    except SystemError:
        # The C scanner reports most syntax errors through json.decoder's
        # JSONDecodeError, which it only looks up in sys.modules: with
        # ``json`` not imported it fails without an exception set.
        raise ValueError("not JSON") from None
    while end < n and text[end] in ws:
        end += 1
    if end != n:
        raise ValueError("extra data after JSON at %d" % end)
    return obj


def _no_default(obj):
    raise TypeError("%s is not plain JSON data" % type(obj).__name__)


def encode(obj):
    """Compact JSON for plain data (dicts with str keys, lists, str, int,
    finite floats, bool, None) by CPython's C encoder: about twenty times
    ``dumps``' speed, for a file written on every prompt.  Raises TypeError
    for other types and ValueError for NaN or infinity."""
    if _json is None:
        import json
        return json.dumps(obj, separators=(",", ":"), allow_nan=False)
    enc = _json.make_encoder(None, _no_default, _json.encode_basestring_ascii, None, ":", ",",
                             False, False, False)
    return "".join(enc(obj, 0))


def _str(s):
    if _json is not None:
        return _json.encode_basestring_ascii(s)
    import json
    return json.dumps(s)


def dumps(obj):
    """Serialise dicts, lists, tuples, str, int, float, bool and None."""
    if obj is None:
        return "null"
    if obj is True:
        return "true"
    if obj is False:
        return "false"
    if isinstance(obj, str):
        return _str(obj)
    if isinstance(obj, int):
        return str(obj)
    if isinstance(obj, float):
        if obj != obj or obj in (float("inf"), float("-inf")):
            return "null"
        return repr(obj)
    if isinstance(obj, dict):
        return "{" + ", ".join(_str(str(k)) + ": " + dumps(v) for k, v in obj.items()) + "}"
    if isinstance(obj, (list, tuple)):
        return "[" + ", ".join(dumps(v) for v in obj) + "]"
    return _str(str(obj))
