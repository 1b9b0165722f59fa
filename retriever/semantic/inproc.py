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
        self.indexes = helper.Indexes(log or (lambda m: None), max_indexes or helper.MAX_INDEXES)
        self.model_ready = False
        self.status = "loading"
        threading.Thread(target=self._warm, daemon=True, name="skill-retrieval-model").start()

    def _warm(self):
        try:
            from retriever.semantic import embed
            embed.model()
            self.model_ready = True
            self.status = "ready"
        except Exception as exc:
            self.status = "failed (%s: %s)" % (type(exc).__name__, exc)

    def begin(self, index_path, idx, text=None):
        """A function giving cosines for ``idx``, or None while loading."""
        from retriever.semantic import client, helper
        if not self.model_ready or not index_path:
            return None
        got = self.indexes.get(index_path, client.index_key(idx["header"]))
        if got is None:
            return None
        _, mat = got
        return lambda text, candidates: helper.cosines(mat, text, candidates)

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
