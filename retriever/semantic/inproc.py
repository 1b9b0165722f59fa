"""Cosines computed in this process (the Hermes plugin, the eval).

The model and the vectors are loaded by a background thread; until both
are ready ``begin`` returns None and the caller answers BM25 only: a turn
never waits for them.
"""

import threading


class Provider:
    """In-process cosines (see ``retriever.semantic.search``)."""

    def __init__(self, log=None, max_indexes=None):
        from retriever.semantic import helper
        self.log = log or (lambda m: None)
        # No fork inside the agent's process: the loading thread embeds, at low priority.
        self.indexes = helper.Indexes(self.log, max_indexes or helper.MAX_INDEXES, aside=False)
        self.model_ready = False
        self.status = "loading"
        threading.Thread(target=self._warm, daemon=True, name="skill-retrieval-model").start()

    def _warm(self):
        import time
        t0 = time.perf_counter()
        try:
            from retriever.semantic import embed
            embed.model()
            embed.no_skill_bank()
            self.model_ready = True
            self.status = "ready"
            self.log("model loaded in %.1fs" % (time.perf_counter() - t0))
        except Exception as exc:
            self.status = "failed (%s: %s)" % (type(exc).__name__, exc)
            self.log("model failed to load: " + self.status)

    def begin(self, index_path, idx, text=None):
        """A function giving cosines for ``idx``, or None while loading.
        The index's vectors start loading on the first call even while
        the model loads, so the first turn after the model is ready fuses."""
        from retriever.semantic import client, helper
        if not index_path:
            return None
        got = self.indexes.get(index_path, client.index_key(idx["header"]))
        if got is None or not self.model_ready:
            return None
        _, vecs = got
        return lambda text, candidates: helper.cosines(vecs, text, candidates)

    def wait(self, index_path, idx, timeout=60.0):
        """Block until cosines for ``idx`` are ready (tests, eval)."""
        import time
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.begin(index_path, idx) is not None:
                return True
            if self.status.startswith("failed"):
                return False
            time.sleep(0.05)
        return False
