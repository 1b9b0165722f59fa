"""Near-copies of one skill across collections, found at build time.

Collections hold near-copies of one skill under other names
(``helm-chart-scaffolding`` and ``helm-chart-builder``, ``mcp-builder``
and ``mcp-server-builder``).  Injecting both spends the turn's second slot
on the same advice, so the decision gives a group of copies one slot
(``decide.choose``); the ranking is left as it is.

Two skills are copies when their names share a word and the IDF-weighted
cosine of what their authors say they are for (the terms of the name,
counted twice, and of the description) is at least THRESHOLD when they
come from different collections (``collection``), and at least
SAME_COLLECTION_THRESHOLD from one.  Groups are cliques, made greedily from the most alike
pair down: a skill joins a group only when it is a copy of every member,
so a chain of look-alikes (a Stripe integration, a Stripe CLI, a Stripe
payment link) is not one group.  docs/decision.md gives the figures on the
corpora behind the threshold.
"""

# Measured on the mixed corpus (1,050 skills of 12 collections): most
# cross-collection pairs at 0.5 or more are the same tool for the same job;
# under it, siblings (one job for two languages or two vendors) come first.
THRESHOLD = 0.5
# Within one collection, siblings made from one template come close: up
# to 0.82 on the corpora (agent-designer and agent-workflow-designer, the
# .NET CI skills).  Two skills of one collection are copies only above.
SAME_COLLECTION_THRESHOLD = 0.9
NAME_WEIGHT = 2.0
# A name word more than this many skills' names hold ("patterns",
# "skill") does not make two skills candidates.  It bounds the search:
# at most 15 candidates a skill.  At 20,000 skills made of 19 renamed
# copies of the mixed corpus (the bench's kind of library, where every
# name word is held 19 times or more) the search takes 0.08 s and finds
# no group; at 64 it compared 280,000 pairs in 2.5 s.
MAX_NAME_DF = 16


def collection(path, root):
    """The collection a skill (its folder's ``path``) belongs to: the
    folder under its ``root`` that holds its folder (``team-a`` of
    ``team-a/pdf-ocr``), or the root itself for a skill folder right
    under it.  A folder of skill folders is how a collection is vendored;
    a flat library is one collection."""
    parts = path[len(root):].split("/")
    return root + parts[0] if len(parts) > 1 else root


def _split_name(name):
    return name.replace("-", " ").replace("_", " ")


def find(docs, where, idf_of, opts):
    """The groups of copies: a sorted tuple of tuples of skill numbers,
    each of two or more skills, in ``order``.

    ``docs``: per skill number, ``(name, description)``; ``where``: per
    skill number, its ``collection``; ``idf_of(term)``, the library's
    IDF of a term (0 for none); ``opts``, the analyzer."""
    from retriever.analyze import analyze
    by_word = {}
    names = []
    for n, (name, _) in enumerate(docs):
        words = set(analyze(_split_name(name), opts))
        names.append(words)
        for w in words:
            by_word.setdefault(w, []).append(n)
    # Candidates: each skill with the skills whose names hold its rarest
    # name word (copies share the word that says what they are: "helm",
    # "worktree"), not every pair sharing "chart".
    pairs = set()
    for a, words in enumerate(names):
        ns = min((by_word[w] for w in words if 1 < len(by_word[w]) <= MAX_NAME_DF), key=len, default=())
        pairs.update((a, b) if a < b else (b, a) for b in ns if b != a)
    if not pairs:
        return ()
    vecs = {}

    def vec(n):
        v = vecs.get(n)
        if v is None:
            name, desc = docs[n]
            v = {}
            for t in set(analyze(_split_name(name) + " " + desc, opts)):
                w = idf_of(t)
                if w > 0:
                    v[t] = w * (NAME_WEIGHT if t in names[n] else 1.0)
            norm = sum(x * x for x in v.values()) ** 0.5
            v = vecs[n] = (v, norm)
        return v
    alike = []
    for a, b in pairs:
        (va, na), (vb, nb) = vec(a), vec(b)
        if na and nb:
            c = sum(va[t] * vb[t] for t in va.keys() & vb.keys()) / (na * nb)
            if c >= (THRESHOLD if where[a] != where[b] else SAME_COLLECTION_THRESHOLD):
                alike.append((-c, a, b))
    alike.sort()
    near = {}
    for _, a, b in alike:
        near.setdefault(a, set()).add(b)
        near.setdefault(b, set()).add(a)
    group_of = {}
    groups = []
    for _, a, b in alike:
        ga, gb = group_of.get(a), group_of.get(b)
        if ga is None and gb is None:
            group_of[a] = group_of[b] = len(groups)
            groups.append([a, b])
        elif ga is None or gb is None:
            g, new = (gb, a) if ga is None else (ga, b)
            if all(m in near[new] for m in groups[g]):
                group_of[new] = g
                groups[g].append(new)
    return tuple(sorted(tuple(sorted(g, key=lambda n: order(docs[n], n))) for g in groups))


def order(doc, n):
    """A copy's place in its group, as ``explain`` lists it: the longer
    description first (more said about what it is for), then the lower
    skill number (id order).  Which copy a turn injects is the
    decision's (``decide._slots``)."""
    return (-len(doc[1].split()), n)
