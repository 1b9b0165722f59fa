"""``skill-retrieve serve``: the warm helper of the semantic tier.

One process per user holds the sentence encoder (loaded once) and the
skill vectors of every index it is asked about, and answers the
per-prompt clients' requests for cosines over a Unix socket:

- the socket is mode 0600 in a 0700 folder of the user's runtime (or
  cache) folder, and every connection's peer uid is checked
  (``SO_PEERCRED``): only the user can reach it;
- it never runs twice: an exclusive ``flock`` on ``semantic.lock``;
- it picks up index changes: a request names an index file, whose
  ``stat`` tells when it was rebuilt, and a rebuilt one is reloaded
  (vectors for unchanged skills are reused; new ones are embedded in a
  background thread, and until they are ready the answer is "pending", so
  the client answers BM25 only);
- it exits after SKILL_RETRIEVAL_SEMANTIC_IDLE seconds without a request
  (default 1800).

Requests are the client's framing (``client.frame``): ``ask`` with the
index path and the text, sent before the client loads its index and runs
BM25, so the two overlap; the client's candidates follow in a second
frame once BM25 has chosen them, and the reply names the index build and
packs the cosines of the encoder's top and of those candidates (see
``packed``); ``ping``; ``stop``.
"""

import os
import sys
import threading
import time

from retriever import locate
from retriever.semantic import client

MAX_INDEXES = 8  # indexes kept in memory; the least recently used is dropped


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
    """Loaded indexes and their vectors, by index path."""

    def __init__(self, log, max_indexes=MAX_INDEXES):
        self.log = log
        self.max_indexes = max_indexes
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
            key = client.index_key(idx["header"])
            if want[0] == "key" and key != want[1]:
                # The index changed again since the request: the next one names it.
                return
            mat = vectors.load_for(path, idx["header"])
            if mat is None:
                t0 = time.perf_counter()
                mat, n = vectors.ensure(path, idx)
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


def top_of(vecs, qv, n=None):
    """The encoder's top ``n`` skill numbers for the question's vector
    ``qv``, over ``vecs`` from ``dense.prepare`` (exact: dense.py)."""
    from retriever.semantic import dense, fuse
    return dense.top(vecs, qv, n or fuse.DENSE_POOL)


def _listed(vecs, top, candidates):
    # The skill numbers a reply covers: the encoder's top, then the
    # candidates that exist.
    from retriever.semantic import dense
    n = dense.count(vecs)
    return top.tolist() + [d for d in candidates if 0 <= d < n]


def cosines(vecs, text, candidates, n=None):
    """``{skill number: cosine}`` for ``candidates`` and the encoder's own
    top ``n`` skills (the in-process provider's answer)."""
    from retriever.semantic import dense, embed
    qv = embed.encode_query(text)
    ids = _listed(vecs, top_of(vecs, qv, n), candidates)
    return dict(zip(ids, dense.at(vecs, qv, ids).tolist())) if ids else {}


def packed(key, vecs, qv, top, candidates):
    """The helper's reply to a question (``client.parse``): ``ok``, the
    index build ``key`` it is about, the skill numbers it covers (the
    encoder's top, then the client's candidates), and their cosines, one
    little-endian int16 (cosine x client.SCALE) each."""
    import numpy as np
    from retriever.semantic import dense
    ids = _listed(vecs, top, candidates)
    cos = dense.at(vecs, qv, ids) if ids else np.zeros(0, dtype=np.float32)
    blob = np.rint(np.clip(cos, -1.0, 1.0) * client.SCALE).astype("<i2").tobytes()
    head = "ok\n%s\n%s\n" % (key, " ".join(map(str, ids)))
    return head.encode("utf-8", "surrogateescape") + blob


def handle(indexes, lines, read_more=None):
    """The reply (bytes) for one request: ``ping``, or ``ask`` (index
    path, the text).  An ``ask`` is answered in two steps: the helper
    encodes the text and finds the encoder's top on one core while the
    client runs BM25 on the other; ``read_more()`` then waits for the
    client's second frame, its candidates, and only their cosines are
    left to compute.  (The top used to wait for the candidates, to have
    both cores once the client waited: at 20,000 skills the client then
    waited for it, 3 ms longer end to end, measured interleaved.)"""
    op = lines[0] if lines else ""
    if op == "ping":
        return ("ok\npid %d\nindexes %d" % (os.getpid(), len(indexes.ready))).encode()
    if op != client.ASK or len(lines) < 3:
        return b"error\nbad request"
    path, text = lines[1], "\n".join(lines[2:])
    from retriever.semantic import embed
    try:
        got = indexes.get_file(path)
    except OSError as exc:
        return ("error\n%s: %s" % (path, exc.strerror)).encode("utf-8", "surrogateescape")
    if got is None:
        return ("pending\nvectors of %s are loading" % path).encode("utf-8", "surrogateescape")
    if not embed.loaded():
        # The warm-up thread is still loading it: never block the accept loop.
        return b"pending\nthe model is loading"
    key, _, vecs = got
    qv = embed.encode_query(text)
    top = top_of(vecs, qv)
    candidates = client.parse_candidates(read_more()) if read_more is not None else []
    return packed(key, vecs, qv, top, candidates)


def _peer_uid(conn):
    import socket
    import struct
    raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", raw)[1]


def serve(sock_path=None, idle=None, log=None, warm=True):
    """Run the helper until it idles out or is stopped.  Returns 0, or 3
    when another helper already holds the lock."""
    import fcntl
    import socket
    sock_path = sock_path or client.socket_path()
    idle = idle_seconds() if idle is None else idle
    log = log or (lambda m: locate.log("semantic helper: " + m))
    folder = sock_path.rsplit("/", 1)[0]
    os.makedirs(folder, mode=0o700, exist_ok=True)
    if not client.private_folder(sock_path):
        log("not listening in %s: not a folder of this user closed to others" % folder)
        return 4
    lock_fd = os.open(lock_path(sock_path), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(lock_fd)
        return 3
    os.ftruncate(lock_fd, 0)
    os.write(lock_fd, b"%d\n" % os.getpid())
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        try:
            os.unlink(sock_path)  # a dead helper's socket: we hold the lock
        except FileNotFoundError:
            pass
        old = os.umask(0o177)  # created 0600: no window where others can connect
        try:
            srv.bind(sock_path)
        finally:
            os.umask(old)
        os.chmod(sock_path, 0o600)
        srv.listen(16)
        ino = os.stat(sock_path).st_ino
        indexes = Indexes(log)
        if warm:
            threading.Thread(target=_warm, args=(log,), daemon=True).start()
        log("started (pid %d, socket %s, idle exit after %gs)" % (os.getpid(), sock_path, idle))
        me = os.getuid()
        last = time.monotonic()
        reason = "idle for %gs" % idle
        while True:
            left = idle - (time.monotonic() - last)
            if left <= 0:
                break
            srv.settimeout(min(left, 5.0))
            try:
                conn, _ = srv.accept()
            except socket.timeout:
                try:
                    if os.stat(sock_path).st_ino != ino:
                        reason = "socket replaced"
                        break
                except OSError:
                    reason = "socket removed"
                    break
                continue
            last = time.monotonic()
            with conn:
                try:
                    conn.settimeout(2.0)
                    if _peer_uid(conn) != me:
                        log("refused a connection from another user")
                        continue
                    lines = client.read_frame(conn).decode("utf-8", "replace").split("\n")
                    if lines[:1] == ["stop"]:
                        conn.sendall(client.frame(b"ok\nstopping"))
                        reason = "asked to stop"
                        break
                    conn.sendall(client.frame(handle(indexes, lines, lambda: client.read_frame(conn))))
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting (its deadline): normal
                except Exception as exc:
                    log("request failed: %s: %s" % (type(exc).__name__, exc))
        log("exiting (%s)" % reason)
    finally:
        srv.close()
        try:
            if os.stat(sock_path).st_ino == ino:
                os.unlink(sock_path)
        except (OSError, UnboundLocalError):
            pass
        os.close(lock_fd)
    return 0


def _warm(log):
    try:
        t0 = time.perf_counter()
        from retriever.semantic import embed
        embed.model()
        log("model loaded in %.2fs" % (time.perf_counter() - t0))
    except Exception as exc:
        log("model failed to load: %s: %s" % (type(exc).__name__, exc))


def stop(sock_path=None):
    """Ask the running helper to exit; True when one answered."""
    return client.stop_helper(sock_path, 5.0)


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
    code = serve(sock, idle)
    if code == 3 and not detached:
        sys.stderr.write("skill-retrieve: serve: a helper is already running\n")
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
