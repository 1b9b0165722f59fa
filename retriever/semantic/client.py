"""The per-prompt side of the warm helper: stdlib only, ``posix`` alone
on the usual path.

A process that starts per prompt cannot load numpy and the model (about
1 s), so it asks the helper (``retriever.semantic.helper``) for cosines,
with a short deadline, and answers BM25 only on any failure.  The framing
is a 4-byte length and newline-separated text, the cosines packed int16
read with ``int.from_bytes``, so neither ``json`` nor ``struct`` is needed.

The question goes out before the index is loaded (``Provider.ask``), so
the helper encodes it and scans the vectors while the client loads its
index and runs BM25.  It goes through the helper's question FIFO beside
its socket, and the reply comes back through a FIFO the client made for
this question: ``posix`` writes and reads both, so a warm query imports
neither ``_socket`` (0.65 to 0.8 ms measured here; ``socket`` costs 8.7,
performance-facts.md section 10) nor ``select`` (0.45 ms), and the helper
starts encoding about a millisecond sooner.  BM25's candidates follow on
the question FIFO, tagged with the question's id.  Only the user reaches
either FIFO: both are mode 0600 in a folder of the user's closed to others.

The socket (``connect``) is the fallback: a question too long for one
atomic FIFO write, or a helper without the FIFO (an older version).  It
also carries ``ping`` and ``stop``, and its peer's uid is checked.

When the tier is installed and no helper answers, the first query starts
one, detached, and answers BM25 only; the next queries find it warm.
"""

import posix
import sys

from retriever import locate

MAGIC = b"SKR1"
_SPAWN_EVERY = 10.0  # seconds between start attempts while none answers
# The first prompt after a helper was started (by a session's start, or
# a prompt) waits at most FIRST_WAIT seconds for it to finish loading,
# when it was started at most RECENT seconds ago (docs/runners.md says
# why, with the figures); later prompts never wait.
FIRST_WAIT = 0.3
RECENT = 30.0


def runtime_dir():
    """The helper's own folder, which it creates mode 0700:
    ``$XDG_RUNTIME_DIR/skill-retrieval`` when that folder exists (a
    per-user tmpfs), else ``helper`` in the cache folder."""
    rt = locate.env("XDG_RUNTIME_DIR")
    if rt and locate.isdir(rt):
        return rt.rstrip("/") + "/skill-retrieval"
    return locate.cache_dir() + "/helper"


# A Unix socket's path holds at most 108 bytes (sun_path); past that the
# helper listens in a private folder of /tmp instead.
_MAX_PATH = 100
FALLBACK_DIR = "/tmp"  # where that folder goes (tests point it at a folder of theirs)


def socket_path(fallback=None):
    """The helper's socket (SKILL_RETRIEVAL_SEMANTIC_SOCKET overrides); a
    path too long for a Unix socket moves to ``/tmp/skill-retrieval-UID``
    (``fallback`` or FALLBACK_DIR instead of /tmp).  Anyone may create
    that folder first: ``private_folder`` and ``may_listen`` refuse it
    then."""
    from retriever import settings
    p = settings.get("SKILL_RETRIEVAL_SEMANTIC_SOCKET") or runtime_dir() + "/semantic.sock"
    if len(p.encode("utf-8", "surrogateescape")) > _MAX_PATH:
        p = "%s/skill-retrieval-%d/semantic.sock" % (fallback or FALLBACK_DIR, posix.getuid())
    return p


def fifo_path(sock_path=None):
    """The helper's question FIFO, beside its socket."""
    return (sock_path or socket_path()).rsplit("/", 1)[0] + "/semantic.ask"


def private_folder(path):
    """True when the folder of ``path`` is the user's own and closed to
    others, as the helper creates it (mode 0700; a home folder of mode
    0755 is not): checked before trusting a socket or FIFO in it, and by
    the helper before listening or removing anything in it."""
    try:
        st = posix.lstat(path.rsplit("/", 1)[0] or "/")
    except OSError:
        return False
    return (st.st_mode & 0o170000) == 0o040000 and st.st_uid == posix.getuid() \
        and not st.st_mode & 0o077


def may_listen(sock_path):
    """False when the folder of ``sock_path`` is there and is no
    ``private_folder`` (another user's, a symlink, open to others): the
    helper refuses to listen there (``place_problem``), so starting one
    would only start one again on every query.  A missing folder is fine:
    the helper makes it, mode 0700."""
    try:
        posix.lstat(sock_path.rsplit("/", 1)[0] or "/")
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return private_folder(sock_path)


S_IFSOCK, S_IFIFO = 0o140000, 0o010000  # stat.S_IFSOCK, S_IFIFO, without importing stat


def is_own(path, kind):
    """True when ``path`` is a ``kind`` (S_IFSOCK, S_IFIFO) of this
    user, not followed through a link: the only things the helper and
    its clients ever remove."""
    try:
        st = posix.lstat(path)
    except OSError:
        return False
    return (st.st_mode & 0o170000) == kind and st.st_uid == posix.getuid()


def remove_own(path, kind):
    """Remove ``path`` when it is ``is_own(path, kind)``; anything else
    there (a user's file, a link, someone else's) is left alone."""
    if is_own(path, kind):
        unlink(path)


def place_problem(sock_path):
    """Why the helper must not listen at ``sock_path`` (one line), or None:
    a relative path, a folder that is not the user's own closed to others,
    or a name already taken by something that is not a socket of the
    user's (a file, a link, a folder): never removed to make room."""
    if not sock_path.startswith("/"):
        return "the socket path %r is relative; give an absolute path" % sock_path
    folder = sock_path.rsplit("/", 1)[0] or "/"
    if not private_folder(sock_path):
        return ("not listening in %s: not a folder of this user closed to others (mode 0700); "
                "set SKILL_RETRIEVAL_SEMANTIC_SOCKET to a path in such a folder" % folder)
    try:
        st = posix.lstat(sock_path)
    except OSError:
        return None
    if not is_own(sock_path, S_IFSOCK):
        return "%s is %s, not the helper's socket; left as it is" % (
            sock_path, "a socket of another user" if st.st_mode & 0o170000 == S_IFSOCK else "another file")
    return None


def timeout_s():
    """How long a query waits for the helper (SKILL_RETRIEVAL_SEMANTIC_TIMEOUT, ms)."""
    from retriever import settings
    return settings.get("SKILL_RETRIEVAL_SEMANTIC_TIMEOUT") / 1000.0


def index_key(header):
    """The index build a request is about (the helper compares it with
    the file it has loaded, and reloads when the index changed)."""
    from retriever.store import build_key  # loaded already: the caller has the index
    return build_key(header)


def frame(payload):
    """One message: magic, u32 little-endian length, payload."""
    return MAGIC + len(payload).to_bytes(4, "little") + payload


def read_frame(sock, limit=1 << 24, deadline=None):
    """Read one framed message from ``sock``; raises OSError on a short
    read, a frame over ``limit`` bytes, or (``deadline``, a
    ``time.monotonic()`` value) one not whole by then: a deadline for the
    whole message, not for each read, so a client sending a byte now and
    then cannot hold it."""
    head = _read_n(sock, 8, deadline)
    if head[:4] != MAGIC:
        raise OSError("bad frame")
    n = int.from_bytes(head[4:8], "little")
    if n > limit:
        raise OSError("frame too large")
    return _read_n(sock, n, deadline)


def _read_n(sock, n, deadline=None):
    buf = b""
    while len(buf) < n:
        if deadline is not None:
            import time
            left = deadline - time.monotonic()
            if left <= 0:
                raise OSError("timed out")
            sock.settimeout(left)
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise OSError("connection closed")
        buf += chunk
    return buf


def connect(path=None, timeout=None):
    """A connected socket to the helper, or None (nothing listens)."""
    path = path or socket_path()
    if not private_folder(path):
        return None  # missing, or someone else's: never talk to it
    try:
        if posix.stat(path).st_mode & 0o170000 != 0o140000:
            return None  # not a socket
    except OSError:
        # No socket: no helper (an idle helper removes it on exit).  Said
        # by a stat, before paying for _socket's import and a connect.
        return None
    import _socket
    s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    s.settimeout(timeout_s() if timeout is None else timeout)
    try:
        s.connect(path)
    except OSError:
        s.close()
        return None
    return s


def request(sock, lines):
    """Send ``lines`` (str) as one request; return the reply's lines."""
    sock.sendall(frame("\n".join(lines).encode("utf-8", "surrogatepass")))
    return read_frame(sock).decode("utf-8", "replace").split("\n")


ASK = "ask"  # a question; the helper of an older version answers "bad request"
CANDS = "cands"  # over the FIFO: BM25's candidates for the question with this id
# Writes of at most PIPE_BUF bytes reach a FIFO whole, never interleaved
# with another client's (POSIX; 4096 on Linux): a longer question goes
# through the socket instead.
PIPE_BUF = 4096
REPLY_PREFIX = "r."  # reply FIFOs: <folder>/r.<question id>


def reply_path(folder, qid):
    """The reply FIFO of the question ``qid`` (``valid_id``) in ``folder``."""
    return "%s/%s%s" % (folder, REPLY_PREFIX, qid)


def question_id():
    """A fresh id for a FIFO question: the pid and 12 hex digits, so the
    helper can name the reply FIFO from it and nothing else."""
    return "%d-%s" % (posix.getpid(), posix.urandom(6).hex())


def valid_id(qid):
    """True for what ``question_id`` makes (the helper builds a path from it)."""
    pid, dash, rand = qid.partition("-")
    return bool(dash) and pid.isdigit() and len(rand) == 12 and all(c in "0123456789abcdef" for c in rand)


def open_fifo(path):
    """The helper's question FIFO at ``path``, opened for writing with
    ``posix`` only (no ``_socket``), or -1: there is none (no helper, or
    an older one), nobody reads it (ENXIO: the helper is gone), or it is
    not the user's own FIFO."""
    try:
        fd = posix.open(path, posix.O_WRONLY | posix.O_NONBLOCK | posix.O_CLOEXEC)
    except OSError:
        return -1
    try:
        st = posix.fstat(fd)
        if st.st_mode & 0o170000 == 0o010000 and st.st_uid == posix.getuid():
            return fd
    except OSError:
        pass
    posix.close(fd)
    return -1


def post(fd, payload):
    """Write one framed message to the question FIFO ``fd`` (``open_fifo``):
    True when it went out whole; False when the pipe is full or the
    message is longer than one atomic write."""
    if len(payload) > PIPE_BUF:
        return False
    try:
        return posix.write(fd, payload) == len(payload)
    except OSError:
        return False


def read_reply(fd, timeout):
    """One framed message from the reply FIFO ``fd`` (non-blocking) within
    ``timeout`` seconds; raises OSError("timed out") past it.  A short
    sleep between reads, not ``select`` (another 0.45 ms import): the
    wait is a few milliseconds, the sleep's granularity about 0.1."""
    import time
    deadline = time.monotonic() + timeout
    buf = b""
    while True:
        try:
            chunk = posix.read(fd, 1 << 16)
        except BlockingIOError:
            chunk = b""
        if chunk:
            buf += chunk
            if len(buf) >= 8:
                if buf[:4] != MAGIC:
                    raise OSError("bad frame")
                n = int.from_bytes(buf[4:8], "little")
                if len(buf) >= 8 + n:
                    return buf[8:8 + n]
        elif time.monotonic() > deadline:
            raise OSError("timed out")
        else:
            time.sleep(0.0001)


# Cosines travel as signed 16-bit integers (cosine x SCALE), one per skill
# the reply lists: the encoder's top, then the candidates this process
# sent once BM25 had chosen them.  ``int.from_bytes`` reads them: no
# ``json``, ``struct`` or ``array`` import; precision 3e-5.
SCALE = 32767
MAX_CANDIDATES = 10000
FIFO_CANDIDATES = 400  # a FIFO message stays one atomic write


def candidates_frame(candidates):
    """The second frame of a question: BM25's candidates (skill numbers)."""
    return frame(" ".join(map(str, candidates[:MAX_CANDIDATES])).encode("ascii"))


def parse_candidates(raw):
    """The skill numbers of a ``candidates_frame`` (the helper's side);
    raises ValueError on anything else."""
    out = [int(t) for t in raw.split()[:MAX_CANDIDATES]]
    if any(d < 0 for d in out):
        raise ValueError("negative skill number")
    return out


def parse(raw, key):
    """``{skill number: cosine}`` from the helper's reply to a question
    (``ok``, the index build, the skill numbers covered, then their
    packed cosines); None when it is not ``ok``.  Raises ValueError when
    the helper answered for another build of the index than ``key`` (the
    file changed between the two loads: skill numbers would not match)."""
    status, _, rest = raw.partition(b"\n")
    if status != b"ok":
        return None
    got_key, _, rest = rest.partition(b"\n")
    if got_key.decode("utf-8", "surrogateescape") != key:
        raise ValueError("the helper has another build of the index")
    ids_s, _, blob = rest.partition(b"\n")
    ids = [int(t) for t in ids_s.split()]
    if len(blob) != 2 * len(ids):
        raise ValueError("short reply")
    return {d: int.from_bytes(blob[2 * i:2 * i + 2], "little", signed=True) / SCALE for i, d in enumerate(ids)}


class Session:
    """One question to the helper.

    The question (index path and text) goes out as soon as the client
    knows them, before it loads its index and runs BM25 (``Provider.ask``),
    so the helper encodes the text and finds its own top skills while
    this process does its own work: the two overlap.  Calling the session
    with the text and BM25's candidates sends those, reads the reply
    (their cosines and the helper's top) within the deadline, and checks
    it is about the index build loaded here.

    Two ways to talk, chosen by ``Provider.ask``: ``via_fifo`` (the
    helper's question FIFO and a reply FIFO of this question's own:
    ``posix`` only, no ``_socket`` import) or ``via_socket``."""

    def __init__(self, provider, index_path, text):
        self.provider, self.index_path, self.text = provider, index_path, text
        self.key = None
        self.sock = None
        self.reply = self.qid = None
        self.fifo_fd = self.reply_fd = -1
        self.done = False
        self.waited = False  # a question asked again while the helper loads: never waits itself

    def _question(self, *head):
        return frame("\n".join((ASK,) + head + (self.index_path, self.text.replace("\n", " ")))
                     .encode("utf-8", "surrogateescape"))

    def via_fifo(self, fifo):
        """Ask through the question FIFO at ``fifo``; the reply comes
        through a FIFO made for it beside (the helper writes it, then
        removes it).  False (nothing left behind) when that cannot be done."""
        qid = question_id()
        payload = self._question(qid)
        if len(payload) > PIPE_BUF:
            return False
        self.fifo_fd = open_fifo(fifo)  # kept open for the candidates
        if self.fifo_fd < 0:
            return False
        reply = reply_path(fifo.rsplit("/", 1)[0], qid)
        try:
            posix.mkfifo(reply, 0o600)
            self.reply = reply
            # Opened for reading before the question goes out: the helper's
            # non-blocking open for writing needs a reader.
            self.reply_fd = posix.open(reply, posix.O_RDONLY | posix.O_NONBLOCK | posix.O_CLOEXEC)
        except OSError:
            self._close()
            return False
        self.qid = qid
        if not post(self.fifo_fd, payload):
            self._close()
            return False
        return True

    def via_socket(self, sock):
        """Ask over the connected socket ``sock``."""
        self.sock = sock
        try:
            sock.sendall(self._question())
        except OSError as exc:
            self._failed(exc)

    def _close(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        for fd in (self.fifo_fd, self.reply_fd):
            if fd >= 0:
                posix.close(fd)
        self.fifo_fd = self.reply_fd = -1
        if self.reply is not None:
            unlink(self.reply)  # the helper removes it too; whoever is first
            self.reply = None

    def _failed(self, exc):
        self.provider.status = "helper did not answer in time" if "timed out" in str(exc) else \
            "helper failed (%s)" % exc
        self._close()
        self.done = True

    def __call__(self, text, candidates):
        """``{skill number: cosine}`` or None (no answer in time, the
        helper is still loading, or it answered about another build)."""
        if self.done:
            return None
        if text != self.text:
            self._failed(ValueError("asked about another text"))
            return None
        try:
            if self.reply_fd >= 0:
                msg = "%s\n%s\n%s" % (CANDS, self.qid, " ".join(map(str, list(candidates)[:FIFO_CANDIDATES])))
                if not post(self.fifo_fd, frame(msg.encode("ascii"))):
                    raise OSError("the question FIFO took no candidates")
                raw = read_reply(self.reply_fd, timeout_s())
            else:
                try:
                    self.sock.sendall(candidates_frame(list(candidates)))
                except (BrokenPipeError, ConnectionResetError):
                    pass  # it answered already (still loading): the reply is there to read
                raw = read_frame(self.sock)
            scores = parse(raw, self.key)
        except (OSError, ValueError) as exc:
            self._failed(exc)
            return None
        self._close()
        self.done = True
        self.provider.status = "answered" if scores is not None else \
            " ".join(raw.decode("utf-8", "replace").split("\n")[:2]).strip()
        if scores is None and raw.startswith(b"pending") and not self.waited and may_wait():
            return self._again(text, candidates)
        if raw == b"error\nbad request":
            # A helper of another version of this package (it outlives an
            # upgrade): stop it, and the next question starts a current one.
            stopped = stop_helper()
            self.provider.status += "; stopped the helper of another version" if stopped else ""
            locate.log("semantic helper of another version %s" % ("stopped" if stopped else "did not stop"))
        return scores


    def _again(self, text, candidates):
        # Ask again every 25 ms, for at most FIRST_WAIT seconds in all,
        # while the helper says it is loading.
        import time
        deadline = time.monotonic() + FIRST_WAIT
        fifo = fifo_path()
        # Each round: a 25 ms pause, then a question the loading helper
        # answers at once ("pending"); the last round ends by the deadline.
        while time.monotonic() + 0.025 + timeout_s() < deadline:
            time.sleep(0.025)
            s = Session(self.provider, self.index_path, self.text)
            s.key, s.waited = self.key, True
            if not s.via_fifo(fifo):
                return None
            scores = s(text, candidates)
            if scores is not None or not self.provider.status.startswith("pending"):
                return scores
        return None


def may_wait(now=None):
    """True for the first question that finds the helper loading after it
    was started (its start stamp at most RECENT seconds old), once per
    start: the question then waits up to FIRST_WAIT seconds for it.  A
    marker beside the stamp, touched here, says it was taken."""
    import time
    d = runtime_dir()
    try:
        started = posix.stat(d + "/semantic.spawned").st_mtime
    except OSError:
        return False
    if (time.time() if now is None else now) - started > RECENT:
        return False
    mark = d + "/semantic.waited"
    try:
        if posix.stat(mark).st_mtime >= started:
            return False
    except OSError:
        pass
    try:
        fd = posix.open(mark, posix.O_WRONLY | posix.O_CREAT | posix.O_NOFOLLOW | posix.O_CLOEXEC, 0o600)
        posix.close(fd)
        posix.utime(mark, (started, started))  # taken for this start
    except OSError:
        return False
    return True


def unlink(path):
    """Remove ``path`` if it is there (a reply FIFO: client and helper
    each remove it, whichever is done first)."""
    try:
        posix.unlink(path)
    except OSError:
        pass


class Provider:
    """Cosines from the warm helper (see ``retriever.semantic.search``).

    ``ask(index_path, text)`` sends the question early (the answer path
    does it before loading the index); ``begin`` then hands that session
    to the fusion, or asks now when nothing was sent."""

    def __init__(self, spawn=True):
        self.spawn = spawn
        self.status = "not asked"
        self.session = None
        self.asked = False

    def ask(self, index_path, text):
        """Send ``text`` (what the encoder reads, ``encoder_text``) about
        the index file ``index_path`` now; False when no helper answers
        (one is started, detached, when allowed).  Through the helper's
        FIFO when it has one and the question fits one atomic write, else
        over its socket."""
        self.asked = True
        path = socket_path()
        s = Session(self, index_path, text)
        if private_folder(path) and s.via_fifo(fifo_path(path)):
            self.session = s
            return True
        sock = connect(path)
        if sock is None:
            self.status = "no helper"
            if self.spawn:
                start_detached()
            return False
        s.via_socket(sock)
        self.session = s
        return True

    def begin(self, index_path, idx, text=None):
        """A ``Session`` for ``idx`` (the one ``ask`` started when it was
        about this file), or None when no helper answers."""
        s = self.session
        if s is None or s.index_path != index_path:
            if self.asked and s is None:
                return None  # ask found no helper a moment ago
            if text is None:
                return None
            if not self.ask(index_path, text):
                return None
            s = self.session
        self.session = None  # one answer per question
        s.key = index_key(idx["header"])
        return s


def start_detached(force=False):
    """Start a helper in its own session, not waiting for it.  At most one
    attempt per _SPAWN_EVERY seconds; the helper itself refuses to run
    twice (a lock), so a race costs one short-lived process.  None is
    started where the socket's folder is refused (``may_listen``)."""
    import time
    d = runtime_dir()
    stamp = d + "/semantic.spawned"
    try:
        if not force and time.time() - posix.stat(stamp).st_mtime < _SPAWN_EVERY:
            return False
    except OSError:
        pass
    try:
        if not locate.isdir(d):
            import os
            os.makedirs(d, mode=0o700, exist_ok=True)
        fd = posix.open(stamp, posix.O_WRONLY | posix.O_CREAT | posix.O_TRUNC | posix.O_NOFOLLOW, 0o600)
        posix.close(fd)
        posix.utime(stamp)
    except OSError:
        return False
    path = socket_path()
    if not may_listen(path):
        # A folder the helper would refuse (another user's, a link, open
        # to others): say why, as the helper would, and start none, so a
        # squatted /tmp fallback costs a log line per _SPAWN_EVERY, not a
        # process.
        locate.log("semantic helper: %s" % place_problem(path))
        return False
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        pass
    repo = __file__.rsplit("/", 3)[0]
    code = "import sys; sys.path.insert(0, %r); from retriever.semantic.helper import main; " \
           "sys.exit(main(['--detached']))" % repo
    try:
        pid = posix.fork()
    except OSError:
        return False
    if pid:
        # The intermediate child exits at once (reaped here), so the helper
        # is re-parented to init and never becomes our zombie.
        try:
            posix.waitpid(pid, 0)
        except OSError:
            pass
        return True
    try:
        posix.setsid()
        if posix.fork():
            posix._exit(0)
        fd = posix.open("/dev/null", posix.O_RDWR)
        for n in (0, 1, 2):
            posix.dup2(fd, n)
        # Site enabled (no -S): the helper needs numpy from site-packages.
        posix.execv(sys.executable, [sys.executable, "-I", "-c", code])
    except BaseException:
        pass
    posix._exit(1)


def call(lines, path=None, timeout=None):
    """One request to the running helper on a connection of its own: the
    reply's lines, or None (no helper, or no answer within ``timeout``
    seconds; default SKILL_RETRIEVAL_SEMANTIC_TIMEOUT)."""
    s = connect(path, timeout)
    if s is None:
        return None
    try:
        return request(s, lines)
    except OSError:
        return None
    finally:
        s.close()


def stop_helper(path=None, timeout=None):
    """Ask the running helper to exit (``skill-retrieve serve --stop``);
    True when one answered."""
    return (call(["stop"], path, timeout) or [])[:1] == ["ok"]
