"""``skill-retrieve serve``: the warm helper of the semantic tier.

One process per user holds the sentence encoder (loaded once) and the
skill vectors of every index it is asked about, and answers the
per-prompt clients' requests for cosines through FIFOs (a Unix socket
for long questions, older clients and control):

- the socket and the FIFOs are mode 0600 in a 0700 folder of the user's
  runtime (or cache) folder, and every socket connection's peer uid is
  checked (``SO_PEERCRED``): only the user can reach it;
- it never runs twice: an exclusive ``flock`` on ``semantic.lock``;
- it picks up index changes: a request names an index file, whose
  ``stat`` tells when it was rebuilt, and a rebuilt one is reloaded
  (vectors for unchanged skills are reused; new ones are embedded in a
  background thread, and until they are ready the answer is "pending", so
  the client answers BM25 only);
- it exits after SKILL_RETRIEVAL_SEMANTIC_IDLE seconds without a request
  (default 1800).

Requests are the client's framing (``client.frame``).  A question comes
before the client loads its index and runs BM25, so the two overlap.
Usually it comes through the FIFO ``semantic.ask`` beside the socket:
``ask`` with an id, the index path and the text; the helper encodes it
and finds the encoder's top at once, and keeps that (``Early``) until
the client's ``cands`` message, with the same id and BM25's candidates,
arrives on the same FIFO; the reply goes to the client's FIFO
``r.<id>``, which the helper then removes.  A client that cannot use the
FIFO asks over the socket instead: ``ask`` with the index path and the
text, then its candidates in a second frame, and the reply on the same
connection.  The reply names the index build and packs the cosines of
the encoder's top and of the candidates (see ``packed``).  The socket
also serves ``ping`` and ``stop``.  Both FIFOs are mode 0600 in the same
private folder; what arrives on the question FIFO is parsed with bounds,
and anything else is dropped with one log line.
"""

import os
import sys
import threading
import time

from retriever import locate
from retriever.semantic import client

MAX_INDEXES = 8  # indexes kept in memory; the least recently used is dropped
# Set once an index with skills is asked about: the helper loads the model
# then, not at start, so a library without skills never loads it.
MODEL_WANTED = threading.Event()


def idle_seconds():
    """SKILL_RETRIEVAL_SEMANTIC_IDLE (seconds, default 1800)."""
    from retriever import settings
    return settings.get("SKILL_RETRIEVAL_SEMANTIC_IDLE")


def lock_path(sock_path):
    """The lock file that keeps a second helper from starting."""
    return sock_path.rsplit("/", 1)[0] + "/semantic.lock"


def _stat_sig(path):
    """What says an index file changed: a rebuild renames a new file over
    it (new inode), an edit in place changes its size or mtime."""
    st = os.stat(path)
    return st.st_ino, st.st_size, st.st_mtime_ns


class Indexes:
    """Loaded indexes and their vectors, by index path.  Missing vectors
    are embedded at low priority: in a forked child (``aside``, the warm
    helper's way: its answers never wait for the embedding), or in the
    loading thread with its priority lowered (the Hermes plugin, which
    does not fork inside the agent)."""

    def __init__(self, log, max_indexes=MAX_INDEXES, aside=True):
        self.log = log
        self.max_indexes = max_indexes
        self.aside = aside
        self.mu = threading.Lock()
        self.ready = {}    # path -> (key, stat signature, idx, vectors as dense.prepare gives them)
        self.loading = {}  # path -> ("key", build key) or ("stat", signature) being loaded

    def get(self, path, key):
        """``(idx, vectors)`` for this build of ``path`` (the caller holds
        that build: the Hermes plugin, the eval), or None while it loads (a
        background load is started when needed)."""
        with self.mu:
            got = self.ready.get(path)
            if got is not None and got[0] == key:
                self.ready[path] = self.ready.pop(path)  # most recently used last
                return got[2], got[3]
            return self._start(path, ("key", key))

    def get_file(self, path):
        """``(build key, idx, vectors)`` for the index file at ``path`` as it
        is now, or None while it loads.  The warm helper's way: the client
        asks before loading its index, so it cannot name the build; one
        ``stat`` per request (microseconds) notices a rebuild, and the
        client checks the build key of the reply against its own index.
        Raises OSError when the file is missing."""
        sig = _stat_sig(path)
        with self.mu:
            got = self.ready.get(path)
            if got is not None and got[1] == sig:
                self.ready[path] = self.ready.pop(path)
                return got[0], got[2], got[3]
            return self._start(path, ("stat", sig))

    def _start(self, path, want):
        # Called with self.mu held.
        if self.loading.get(path) == want:
            return None
        self.loading[path] = want
        threading.Thread(target=self._load, args=(path, want), daemon=True,
                         name="skill-retrieval-vectors").start()
        return None

    def _load(self, path, want):
        from retriever import store
        from retriever.semantic import dense, vectors
        try:
            # Taken before the load: a change after it makes the next
            # request load again, never serve a stale matrix.
            sig = _stat_sig(path)
            idx = store.load(path)
            if idx["header"]["n_docs"]:
                MODEL_WANTED.set()
            key = client.index_key(idx["header"])
            if want[0] == "key" and key != want[1]:
                # The index changed again since the request: the next one names it.
                return
            mat = vectors.load_for(path, idx["header"])
            if mat is None:
                t0 = time.perf_counter()
                if not self.aside:
                    from retriever.semantic import embed
                    embed.lower_priority()  # this thread only; it ends after this load
                mat, n = vectors.ensure(path, idx, aside=self.aside)
                self.log("embedded %d skills of %s in %.1fs" % (n, path, time.perf_counter() - t0))
            vecs = dense.prepare(mat)
            del mat
            self.log("vectors of %s ready (%d skills)" % (path, dense.count(vecs)))
            with self.mu:
                self.ready[path] = (key, sig, idx, vecs)
                while len(self.ready) > self.max_indexes:
                    self.ready.pop(next(iter(self.ready)))
        except Exception as exc:
            self.log("loading %s failed: %s: %s" % (path, type(exc).__name__, exc))
        finally:
            with self.mu:
                if self.loading.get(path) == want:
                    del self.loading[path]


def top_of(vecs, q, n=None):
    """The encoder's top ``n`` skill numbers for the question's vector
    ``q`` (``dense.turn``), over ``vecs`` from ``dense.prepare`` (exact:
    dense.py)."""
    from retriever.semantic import dense, fuse
    return dense.top(vecs, q, n or fuse.DENSE_POOL)


def _listed(vecs, top, candidates):
    # The skill numbers a reply covers: the encoder's top, then the
    # candidates that exist.
    from retriever.semantic import dense
    n = dense.count(vecs)
    return top.tolist() + [d for d in candidates if 0 <= d < n]


def cosines(vecs, text, candidates, n=None):
    """``{skill number: cosine}`` for ``candidates`` and the encoder's own
    top ``n`` skills, and under ``semantic.CHAT`` the message's no-skill
    likeness (the in-process provider's answer)."""
    from retriever import semantic
    from retriever.semantic import dense, embed
    qv = embed.encode_query(text)
    q = dense.turn(vecs, qv)
    ids = _listed(vecs, top_of(vecs, q, n), candidates)
    out = dict(zip(ids, dense.at(vecs, q, ids).tolist())) if ids else {}
    out[semantic.CHAT] = embed.no_skill_likeness(qv)
    return out


def packed(key, vecs, q, top, candidates, chat=0.0):
    """The helper's reply to a question (``client.parse``): ``ok``, the
    index build ``key`` it is about, the skill numbers it covers (the
    encoder's top, then the client's candidates, then ``semantic.CHAT``),
    and their cosines, one little-endian int16 (cosine x client.SCALE)
    each; CHAT's is the message's no-skill likeness ``chat``."""
    import numpy as np
    from retriever import semantic
    from retriever.semantic import dense
    ids = _listed(vecs, top, candidates)
    cos = dense.at(vecs, q, ids) if ids else np.zeros(0, dtype=np.float32)
    ids.append(semantic.CHAT)
    cos = np.append(cos.astype(np.float32), np.float32(chat))
    blob = np.rint(np.clip(cos, -1.0, 1.0) * client.SCALE).astype("<i2").tobytes()
    head = "ok\n%s\n%s\n" % (key, " ".join(map(str, ids)))
    return head.encode("utf-8", "surrogateescape") + blob


def question(indexes, path, text):
    """The first half of an answer: ``(build key, vectors, question
    vector as ``dense.turn`` gives it, encoder's top, no-skill likeness)``
    for ``text`` about
    the index file ``path``, or the reply (bytes) when it cannot be
    answered now (loading, error)."""
    from retriever.semantic import dense, embed
    try:
        got = indexes.get_file(path)
    except OSError as exc:
        return ("error\n%s: %s" % (path, exc.strerror)).encode("utf-8", "surrogateescape")
    if got is None:
        return ("pending\nvectors of %s are loading" % path).encode("utf-8", "surrogateescape")
    if not embed.loaded():
        # The warm-up thread is still loading the model or encoding the
        # no-skill bank: never do either on the accept loop.
        return b"pending\nthe model is loading"
    key, _, vecs = got
    qv = embed.encode_query(text)
    q = dense.turn(vecs, qv)
    return key, vecs, q, top_of(vecs, q), embed.no_skill_likeness(qv)


class Early:
    """First halves of FIFO questions, by id, until their candidates come
    (a few, for a short while: a client that never sends them leaves
    nothing behind for long; its reply FIFO is removed then)."""

    MAX, TTL = 16, 60.0

    def __init__(self, folder):
        self.folder = folder
        self.items = {}  # id -> (time, first half: question's tuple or reply bytes)

    def put(self, qid, first):
        """Keep ``first`` for the question ``qid``."""
        now = time.monotonic()
        for k in [k for k, v in self.items.items() if now - v[0] > self.TTL]:
            self._drop(k)
        self.items[qid] = (now, first)
        while len(self.items) > self.MAX:
            self._drop(next(iter(self.items)))

    def take(self, qid):
        """The first half kept for ``qid``, or None."""
        got = self.items.pop(qid, None)
        return None if got is None else got[1]

    def _drop(self, qid):
        del self.items[qid]
        client.remove_own(client.reply_path(self.folder, qid), client.S_IFIFO)


def send_reply(folder, qid, data):
    """Write the reply ``data`` to the question's FIFO and remove it.
    Quietly nothing when the client is gone (nobody reads: ENXIO) or the
    path is not the user's own FIFO."""
    import stat
    path = client.reply_path(folder, qid)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        client.remove_own(path, client.S_IFIFO)
        return
    try:
        st = os.fstat(fd)
        if stat.S_ISFIFO(st.st_mode) and st.st_uid == os.getuid():
            os.write(fd, client.frame(data))
    except OSError:
        pass
    finally:
        os.close(fd)
        client.remove_own(path, client.S_IFIFO)


def answer(first, candidates):
    """The reply (bytes) to a question whose first half is ``first``
    (``question``'s tuple, or the reply it already is: loading, error)."""
    if isinstance(first, bytes):
        return first
    key, vecs, q, top, chat = first
    return packed(key, vecs, q, top, candidates, chat)


def handle(indexes, lines, read_more=None):
    """The reply (bytes) for one socket request: ``ping``, or ``ask``
    (index path, the text).  A question is answered in two steps: the
    helper encodes the text and finds the encoder's top (``question``) on
    one core while the client runs BM25 on the other; ``read_more()`` then
    waits for the client's second frame, its candidates, and only their
    cosines are left to compute.  (The top used to wait for the
    candidates, to have both cores once the client waited: at 20,000
    skills the client then waited for it, 3 ms longer end to end,
    measured interleaved.)"""
    op = lines[0] if lines else ""
    if op == "ping":
        return ("ok\npid %d\nindexes %d" % (os.getpid(), len(indexes.ready))).encode()
    if op != client.ASK or len(lines) < 3:
        return b"error\nbad request"
    first = question(indexes, lines[1], "\n".join(lines[2:]))
    if isinstance(first, bytes):
        return first
    return answer(first, client.parse_candidates(read_more()) if read_more is not None else [])


class Questions:
    """The question FIFO's reading end.  Every client writes each message
    whole, at most ``client.PIPE_BUF`` bytes, so a read finds whole
    messages only; anything else (a part, an oversized or foreign frame)
    is dropped, with one log line."""

    def __init__(self, fd, log):
        self.fd, self.log = fd, log

    def read(self):
        """The messages now in the FIFO: ``("ask", id, (index path, text))``
        and ``("cands", id, [skill numbers])``."""
        chunks = []
        while True:
            try:
                data = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                break
            chunks.append(data)
            if len(data) < 1 << 16:
                break
        buf = b"".join(chunks)
        out = []
        while buf:
            n = int.from_bytes(buf[4:8], "little")
            whole = buf[:4] == client.MAGIC and n <= client.PIPE_BUF and len(buf) >= 8 + n
            msg = _message(buf[8:8 + n]) if whole else None
            if msg is not None:
                out.append(msg)
                buf = buf[8 + n:]
                continue
            # Junk, or a frame of junk that swallowed what follows it: go on
            # from the next message that may be whole (every client writes
            # each of its messages whole), so junk another writer put in
            # costs no other client its question.
            nxt = buf.find(client.MAGIC, 1)
            if whole and not 0 < nxt < 8 + n:
                skip = 8 + n  # a whole frame that is no message: only it
            else:
                skip = nxt if nxt > 0 else len(buf)
            self.log("dropped %d bytes from the question FIFO: not a question or candidates" % skip)
            buf = buf[skip:]
        return out


def _message(payload):
    """A question FIFO message ``Questions.read`` returns, or None."""
    lines = payload.decode("utf-8", "replace").split("\n")
    if len(lines) < 3 or not client.valid_id(lines[1]):
        return None
    if lines[0] == client.ASK and len(lines) >= 4:
        return client.ASK, lines[1], (lines[2], "\n".join(lines[3:]))
    if lines[0] == client.CANDS:
        try:
            return client.CANDS, lines[1], client.parse_candidates(lines[2])
        except ValueError:
            return None
    return None


class off_cpu_of:
    """While the helper works on a question, keep it off the CPU its
    client runs on.  The client's message wakes the helper with a "sync"
    wakeup, which places it on the client's CPU when the client runs
    alone there, and the helper, having slept, preempts it: the client
    stalled for the whole encode (3 to 7 ms) while the other core idled,
    in 8 of 12 runs here.  Leaving that CPU out of the helper's affinity
    moves the helper to another core at once; the affinity is restored
    after.  A no-op on one core or when the client's CPU is unknown."""

    def __init__(self, pid):
        self.pid = pid
        self.saved = None

    def __enter__(self):
        try:
            mine = os.sched_getaffinity(0)
            with open("/proc/%d/stat" % self.pid, "rb") as f:
                cpu = int(f.read().rsplit(b")", 1)[1].split()[36])  # field 39: the CPU it last ran on
            if cpu in mine and len(mine) > 1:
                os.sched_setaffinity(0, mine - {cpu})
                self.saved = mine
        except (OSError, ValueError, IndexError, AttributeError):
            pass
        return self

    def __exit__(self, *exc):
        if self.saved is not None:
            try:
                os.sched_setaffinity(0, self.saved)
            except OSError:
                pass
        return False


def _peer(conn):
    """``(pid, uid)`` of the process at the other end of ``conn``."""
    import socket
    import struct
    raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", raw)[:2]


# A socket request (its question and its candidates) must be in whole
# within this long of its connection: a slow or silent client then costs
# its own request only, however it trickles its bytes.
REQUEST_SECONDS = 5.0
MAX_FRAME = 1 << 20  # a question is 2,000 characters, its candidates 10,000 numbers
MAX_CLIENTS = 32  # socket connections served at once; more are closed at once


class Connections:
    """The socket's clients, each served in a thread of its own, so one
    slow, silent or huge client never holds another's answer, nor
    ``serve --status`` (``ping``) or ``doctor``."""

    def __init__(self, indexes, log, wake):
        self.indexes, self.log, self.wake = indexes, log, wake
        self.slots = threading.BoundedSemaphore(MAX_CLIENTS)
        self.me = os.getuid()
        self.last = time.monotonic()  # the last request, for the idle exit
        self.stopping = None  # why the helper stops, once a client asked

    def take(self, conn):
        """Serve ``conn`` in a thread of its own (closed at once when
        MAX_CLIENTS are being served)."""
        self.last = time.monotonic()
        if not self.slots.acquire(blocking=False):
            conn.close()
            self.log("closed a connection: %d are being served" % MAX_CLIENTS)
            return
        threading.Thread(target=self._serve, args=(conn,), daemon=True,
                         name="skill-retrieval-client").start()

    def _serve(self, conn):
        deadline = time.monotonic() + REQUEST_SECONDS
        try:
            with conn:
                conn.setblocking(True)
                pid, uid = _peer(conn)
                if uid != self.me:
                    self.log("refused a connection from another user")
                    return
                lines = client.read_frame(conn, MAX_FRAME, deadline).decode("utf-8", "replace").split("\n")
                if lines[:1] == ["stop"]:
                    conn.settimeout(1.0)
                    conn.sendall(client.frame(b"ok\nstopping"))
                    self.stopping = "asked to stop"
                    os.write(self.wake, b"s")
                    return
                with off_cpu_of(pid):
                    reply = handle(self.indexes, lines, lambda: client.read_frame(conn, MAX_FRAME, deadline))
                conn.settimeout(max(deadline - time.monotonic(), 0.5))
                conn.sendall(client.frame(reply))
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up waiting (its deadline): normal
        except Exception as exc:
            self.log("request failed: %s: %s" % (type(exc).__name__, exc))
        finally:
            self.last = time.monotonic()
            self.slots.release()


def clear_stale(sock_path):
    """Remove what a dead helper left in its folder: its socket, its
    question FIFO and its clients' reply FIFOs.  Only sockets and FIFOs of
    this user, by the names the helper gives them; called holding the
    lock, before listening, so none is in use."""
    folder = sock_path.rsplit("/", 1)[0]
    client.remove_own(sock_path, client.S_IFSOCK)
    client.remove_own(client.fifo_path(sock_path), client.S_IFIFO)
    for name in os.listdir(folder):
        if name.startswith(client.REPLY_PREFIX) and client.valid_id(name[len(client.REPLY_PREFIX):]):
            client.remove_own(folder + "/" + name, client.S_IFIFO)


SWEEP_SECONDS = 5.0  # how often reply FIFOs of dead clients are looked for


def sweep_replies(folder, pending):
    """Remove the reply FIFOs of clients that died (killed before they
    removed theirs): the id names the pid.  Never one of ``pending``
    (questions waiting for their candidates), never anything but a FIFO
    of this user."""
    for name in os.listdir(folder):
        qid = name[len(client.REPLY_PREFIX):]
        if not name.startswith(client.REPLY_PREFIX) or not client.valid_id(qid) or qid in pending:
            continue
        try:
            os.kill(int(qid.partition("-")[0]), 0)
        except ProcessLookupError:
            client.remove_own(folder + "/" + name, client.S_IFIFO)
        except OSError:
            pass


def serve(sock_path=None, idle=None, log=None, warm=True):
    """Run the helper until it idles out or is stopped.  Returns 0, 3
    when another helper already holds the lock, or 4 when it must not
    listen at ``sock_path`` (``client.place_problem``: logged)."""
    import fcntl
    import select
    import socket
    sock_path = sock_path or client.socket_path()
    idle = idle_seconds() if idle is None else idle
    log = log or (lambda m: locate.log("semantic helper: " + m))
    folder = sock_path.rsplit("/", 1)[0]
    if sock_path.startswith("/") and not os.path.lexists(folder):
        os.makedirs(folder, mode=0o700, exist_ok=True)
    problem = client.place_problem(sock_path)
    if problem:
        log(problem)
        return 4
    lock_fd = os.open(lock_path(sock_path), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(lock_fd)
        return 3
    os.ftruncate(lock_fd, 0)
    os.write(lock_fd, b"%d\n" % os.getpid())
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    fifo, fifo_fd, fifo_ino = client.fifo_path(sock_path), -1, None
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        # A dead helper's socket and FIFOs, and its clients' reply FIFOs:
        # we hold the lock, and no question is pending before we listen.
        clear_stale(sock_path)
        old = os.umask(0o177)  # created 0600: no window where others can connect
        try:
            srv.bind(sock_path)
            try:
                os.mkfifo(fifo, 0o600)
                # Read and write: the FIFO never reads as closed between clients.
                fifo_fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
                fifo_ino = os.fstat(fifo_fd).st_ino
            except OSError as exc:
                log("no question FIFO (%s): questions come over the socket" % exc)
        finally:
            os.umask(old)
        os.chmod(sock_path, 0o600)
        srv.listen(64)
        srv.setblocking(False)
        ino = os.stat(sock_path).st_ino
        questions, early = Questions(fifo_fd, log), Early(folder)
        poller = select.poll()
        if fifo_fd >= 0:
            poller.register(fifo_fd, select.POLLIN)
        poller.register(srv.fileno(), select.POLLIN)
        poller.register(wake_r, select.POLLIN)
        indexes = Indexes(log)
        conns = Connections(indexes, log, wake_w)
        if warm:
            threading.Thread(target=_warm, args=(log,), daemon=True).start()
        log("started (pid %d, socket %s, idle exit after %gs)" % (os.getpid(), sock_path, idle))
        reason = "idle for %gs" % idle
        swept = time.monotonic()
        while conns.stopping is None:
            now = time.monotonic()
            left = idle - (now - conns.last)
            if left <= 0:
                break
            if now - swept > SWEEP_SECONDS:
                swept = now
                sweep_replies(folder, early.items)
            ready = [fd for fd, _ in poller.poll(min(left, 5.0) * 1000.0)]
            if not ready:
                try:
                    if os.stat(sock_path).st_ino != ino:
                        reason = "socket replaced"
                        break
                except OSError:
                    reason = "socket removed"
                    break
                continue
            conns.last = time.monotonic()
            if fifo_fd in ready:
                for op, qid, arg in questions.read():
                    try:
                        if op == client.ASK:
                            with off_cpu_of(int(qid.partition("-")[0])):
                                early.put(qid, question(indexes, *arg))
                        else:
                            first = early.take(qid)
                            send_reply(folder, qid, b"error\nunknown question" if first is None
                                       else answer(first, arg))
                    except Exception as exc:
                        log("question failed: %s: %s" % (type(exc).__name__, exc))
                        send_reply(folder, qid, b"error\nquestion failed")
            if srv.fileno() in ready:
                while True:  # every connection waiting, each to a thread of its own
                    try:
                        conn, _ = srv.accept()
                    except (BlockingIOError, InterruptedError):
                        break
                    conns.take(conn)
        if conns.stopping is not None:
            reason = conns.stopping
        log("exiting (%s)" % reason)
    finally:
        from retriever.semantic import embed
        embed.stop_children()  # an embedding under way is of no use to anyone now
        srv.close()
        try:
            if os.stat(sock_path).st_ino == ino:
                os.unlink(sock_path)
        except (OSError, UnboundLocalError):
            pass
        if fifo_fd >= 0:
            os.close(fifo_fd)
        try:
            if fifo_ino is not None and os.stat(fifo).st_ino == fifo_ino:
                os.unlink(fifo)
        except OSError:
            pass
        os.close(wake_r)
        os.close(wake_w)
        os.close(lock_fd)
    return 0


def _warm(log):
    # Started with the helper; loads the model once a library with skills
    # is asked about (MODEL_WANTED), so the first answer about it finds it
    # loading or loaded.
    MODEL_WANTED.wait()
    try:
        t0 = time.perf_counter()
        from retriever.semantic import embed
        embed.model()
        embed.no_skill_bank()
        log("model loaded in %.2fs" % (time.perf_counter() - t0))
    except Exception as exc:
        log("model failed to load: %s: %s" % (type(exc).__name__, exc))


STOP_WAIT = 10.0  # seconds ``serve --stop`` waits for the helper to let go of its lock


def stop(sock_path=None):
    """Ask the running helper to exit, and wait (up to STOP_WAIT seconds)
    until it has let go of its socket and lock; True when one answered.

    Waiting is what makes "stopped" true: a session started right after
    would otherwise ask the helper still winding down, be told it is
    loading, and lose its warm-up with it."""
    sock_path = sock_path or client.socket_path()
    if not client.stop_helper(sock_path, 5.0):
        return False
    import fcntl
    try:
        fd = os.open(lock_path(sock_path), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return True
    try:
        deadline = time.monotonic() + STOP_WAIT
        while time.monotonic() < deadline:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                return True
            except OSError:
                time.sleep(0.02)
        locate.log("semantic helper: still holds its lock %gs after it was asked to stop" % STOP_WAIT)
        return True
    finally:
        os.close(fd)


def ping(sock_path=None, timeout=1.0):
    """The running helper's status lines, or None."""
    return client.call(["ping"], sock_path, timeout)


USAGE = """usage: skill-retrieve serve [--stop | --status] [--idle SECONDS] [--socket PATH]

Run the semantic tier's warm helper in the foreground (queries start one
in the background by themselves when the tier is installed).
  --stop     stop the running helper
  --status   say whether a helper runs
  --idle S   exit after S seconds without a request (default SKILL_RETRIEVAL_SEMANTIC_IDLE or 1800)
"""


def main(argv=None):
    """``skill-retrieve serve``; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    sock, idle, action = None, None, "serve"
    detached = False
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            sys.stdout.write(USAGE)
            return 0
        if a in ("--stop", "--status"):
            action = a[2:]
        elif a == "--detached":
            detached = True
        elif a in ("--idle", "--socket") and i + 1 < len(argv):
            i += 1
            if a == "--socket":
                sock = argv[i]
            else:
                try:
                    idle = float(argv[i])
                except ValueError:
                    sys.stderr.write("skill-retrieve: serve: --idle needs a number of seconds\n")
                    return 2
        else:
            sys.stderr.write("skill-retrieve: serve: unexpected argument %r\n%s" % (a, USAGE))
            return 2
        i += 1
    if action == "stop":
        ok = stop(sock)
        sys.stdout.write("stopped the semantic helper\n" if ok else "no semantic helper was running\n")
        return 0
    if action == "status":
        st = ping(sock)
        sys.stdout.write("semantic helper: %s\n" % (", ".join(st[1:]) if st else "not running"))
        return 0
    from retriever.semantic import embed
    embed.one_blas_thread()
    from retriever import semantic
    if not semantic.installed():
        if not detached:
            sys.stderr.write("skill-retrieve: serve: the semantic extra is not installed "
                             "(pip install 'skill-retrieval[semantic]')\n")
        return 2
    if sock is not None and not sock.startswith("/"):
        sys.stderr.write("skill-retrieve: serve: --socket %r is a relative path; give an absolute path\n" % sock)
        return 2
    code = serve(sock, idle)
    if code == 3 and not detached:
        sys.stderr.write("skill-retrieve: serve: a helper is already running\n")
    if code == 4 and not detached:
        sys.stderr.write("skill-retrieve: serve: %s\n" % client.place_problem(sock or client.socket_path()))
    return code


def add_arguments(p):
    """Arguments of ``skill-retrieve serve`` (the full CLI's parser)."""
    p.add_argument("--stop", action="store_true", help="stop the running helper")
    p.add_argument("--status", action="store_true", help="say whether a helper runs")
    p.add_argument("--idle", metavar="SECONDS", help="exit after this long without a request")
    p.add_argument("--socket", metavar="PATH", help="socket path (default: the per-user one)")


def run(args):
    """``skill-retrieve serve`` from the full CLI."""
    argv = ["--stop"] if args.stop else ["--status"] if args.status else []
    if args.idle is not None:
        argv += ["--idle", args.idle]
    if args.socket:
        argv += ["--socket", args.socket]
    return main(argv)


if __name__ == "__main__":
    sys.exit(main())
