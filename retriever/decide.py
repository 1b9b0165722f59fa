"""Decide which of the ranked skills to inject: one calibrated model.

The ranking (``query`` for BM25, ``semantic`` fused with the encoder)
orders the candidates; this module says which of them go into the prompt,
usually one or two, and nothing when nothing fits.  Two small logistic
models, learnt by ``make calibrate`` (``eval/calibrate.py``) from
hand-written session turns, and written into the block at the end of this
file:

- the **gate** looks at the message and its best candidate and gives the
  probability that the turn needs a skill at all ("thanks!", "make it
  shorter" and "what does deprecated mean" do not);
- once the gate passes, the best candidate is injected, and each further
  candidate is injected only when the **second** model says, on its own
  features, that it is relevant too.

A message that names a skill (``names``: its identifier, written exactly)
gets the skills it names and no others, whatever the models say.

Every feature means the same thing in any library: shares of the query
(how much of it the skill covers, in the whole skill and in its name and
description alone), scores relative to the best candidate, IDF relative
to the library's largest, and, with the semantic tier, raw cosines, the
spread between the library's best and tenth-best cosine for this message,
and how close the message is to a bank of turns that need no skill
(``semantic/no_skill_turns.txt``; the encoder is multilingual, so the
bank carries to languages a word list never would).

Hot path: imports only the analyzer; no ``math`` (the logistic is a
float power).  ``explain`` (a dict) receives every feature, probability
and verdict, for ``skill-retrieve explain`` and for the trainer, so
neither re-derives a formula.
"""

from retriever.analyze import analyze

_E = 2.718281828459045
# The chat feature when the helper sent none (an older helper): the bank's
# typical value for a task turn, so the gate leans on the other features.
CHAT_UNKNOWN = 0.3


def sigmoid(z):
    """The logistic function, without importing ``math``."""
    if z < -40.0:
        return 0.0
    return 1.0 / (1.0 + _E ** (-z))


def _sat(x, half):
    # A saturating transform (0 at 0, 0.5 at ``half``, towards 1): length
    # features without ``math.log``.
    return x / (x + half) if x > 0 else 0.0


def confidence(idx, found, best_doc, n_terms=None):
    """How much of the query the skill ``best_doc`` covers (0..1): the
    IDF-weighted share of the query's terms that occur in it.  Words no
    skill contains count at half the mean IDF of the known ones, so a
    message that shares one word with the library is not "fully
    covered".  Unlike a raw BM25 score it is comparable across queries
    and libraries."""
    return _share(idx, found, lambda t, docs: best_doc in docs, n_terms)


def head_coverage(idx, found, name, description, n_terms=None, toks=None):
    """The share of the query the skill's name and description cover:
    ``confidence`` counted over what the author says the skill is for,
    rather than a word somewhere in its body.  ``toks``: those terms
    (``head_terms``), when already analysed."""
    toks = head_terms(idx, name, description) if toks is None else toks
    return _share(idx, found, lambda t, docs: t in toks, n_terms)


def _share(idx, found, holds, n_terms):
    # The IDF-weighted share of the query's terms for which holds(term,
    # skills holding it) is true; unknown words as in ``confidence``.
    covered, total = _held(idx, found, holds, n_terms)
    return covered / total if total > 0 else 0.0


def _held(idx, found, holds, n_terms):
    # ``(covered, total)``: the IDF of the query's terms for which
    # holds(term, skills holding it) is true, and of all of them (unknown
    # words as in ``confidence``).
    idf = idx["idf"]
    total = covered = 0.0
    for t, (i, docs) in found.items():
        w = idf[i]
        total += w
        if holds(t, docs):
            covered += w
    if found and n_terms and n_terms > len(found):
        total += 0.5 * (total / len(found)) * (n_terms - len(found))
    return covered, total


def evidence(idx, covered):
    """How much a message says for a skill: ``covered``, the IDF of the
    message's terms the skill holds, summed (``_held``), against
    ``ln(1 + N)`` (one term that only this skill has is about 1, in a
    library of any size).  Coverage is a share, so a message of one common
    word ("why is that table better?") covers a skill whole; its evidence
    is small."""
    return covered / idf_scale(idx)


def head_terms(idx, name, description):
    """The set of analysed terms of a skill's name and description."""
    opts = idx["header"]["params"]["analyzer"]
    return set(analyze(name.replace("-", " ").replace("_", " ") + " " + description, opts))


# A name and description of more distinct words than this are stuffed to
# cover any message: of the 3,741 SKILL.md files of ../shared/corpora the
# largest real one holds 182 (a list of databases; p99.9 104), and only a
# router asking for every task more (334).
STUFFED = 190


def stuffing(toks):
    """1.0 for a skill whose name and description (``toks``, its distinct
    terms) are a real skill's; for one stuffed past STUFFED words
    (hundreds of everyday words), ``(STUFFED / words)^4``:
    what its coverage features are multiplied by, so its text no longer
    speaks for every turn (0.33 at 250 words, 0.16 at 300)."""
    n = len(toks)
    return 1.0 if n <= STUFFED else (STUFFED / n) ** 4


def name_idf(idx, found, name, learnt=()):
    """The rarest query term that the skill's own name holds, its IDF
    against ``ln(1 + N)`` as in ``max_idf`` (0 when the name holds no
    query term): "find papers on arxiv" names the ``arxiv`` skill with a
    word few skills hold, in a library of any size, while "sounds good"
    shares a common word with a description at most.  ``learnt``: the
    user's own words for the skill (``retriever.learn``), names too."""
    idf = idx["idf"]
    toks = name_terms(name, idx["header"]["params"]["analyzer"])
    toks.update(learnt)
    best = max((idf[i] for t, (i, _) in found.items() if t in toks), default=0.0)
    return best / idf_scale(idx)


def name_terms(name, opts):
    """The analysed terms of a skill's name (its hyphens and underscores
    as spaces), under the analyzer ``opts``: a set."""
    return set(analyze(name.replace("-", " ").replace("_", " "), opts))


def max_idf(idx, found):
    """The rarest known query term's IDF against ``ln(1 + N)``, the scale
    of IDF in a library of N skills (near 1 for a term only one skill
    has, in a library of any size)."""
    idf = idx["idf"]
    best = max((idf[i] for i, _ in found.values()), default=0.0)
    return best / idf_scale(idx)


def idf_scale(idx):
    """``ln(1 + N)`` for a library of N skills: the IDF of a term only one
    skill holds, about, and so the scale every rarity feature is read
    against.  Computed once per loaded index."""
    scale = idx.get("_idf_scale")
    if scale is None:
        scale = idx["_idf_scale"] = _ln(1.0 + idx["header"]["n_docs"]) or 1.0
    return scale


def _ln(x):
    # Natural log for x >= 1 without ``math``: range-reduce by e, then a
    # short series of atanh.  Exact to ~1e-12, plenty for a feature.
    k = 0
    while x > _E:
        x /= _E
        k += 1
    y = (x - 1.0) / (x + 1.0)
    y2 = y * y
    s = term = y
    for n in range(3, 40, 2):
        term *= y2
        s += term / n
    return k + 2.0 * s


def gate_features(q, cands, sem):
    """The gate's feature vector for message ``q`` (``query.parse``) and
    its ranked ``cands`` (dicts, best first; see ``choose``); ``sem`` is
    None for BM25 alone, else the encoder's numbers for this message."""
    c0 = cands[0]
    s1 = cands[1]["score"] if len(cands) > 1 else 0.0
    x = [1.0, c0["cov"], c0["head"], _sat(q["words"], 6.0), 1.0 if q["pasted"] else 0.0,
         q["maxidf"], (c0["score"] - s1) / c0["score"] if c0["score"] > 0 else 0.0, q["known"],
         c0.get("named", 0.0)]
    if sem is not None:
        x += [c0["cos"], sem["spread"], sem["chat"], max(c["cos"] for c in cands[:3])]
    else:
        # BM25 alone: how much the message's words say for the skill, not
        # only what share of them it holds.  (With the tier the encoder
        # says it; given this feature there, the fused model silenced
        # less chat and served fewer non-English requests.)
        x.append(_sat(c0.get("mass", 0.0), 1.0))
    return x


def more_features(q, cands, i, sem):
    """The second model's feature vector for candidate ``i`` >= 1."""
    c, c0 = cands[i], cands[0]
    nxt = cands[i + 1]["score"] if i + 1 < len(cands) else 0.0
    x = [1.0, c["score"] / c0["score"] if c0["score"] > 0 else 0.0, c["cov"], c["head"],
         (c["score"] - nxt) / c["score"] if c["score"] > 0 else 0.0, q["maxidf"], _sat(q["words"], 6.0)]
    if sem is not None:
        x += [c["cos"], c["cos"] - sem["cos10"], c0["cos"] - c["cos"]]
    return x


def _dot(w, x):
    return sum(a * b for a, b in zip(w, x))


def choose(idx, q, cands, limit, sem=None, explain=None, named=()):
    """The candidates to inject, best first, at most ``limit``.

    ``cands``: ranked candidate dicts with ``score`` (the ranking's own,
    > 0), ``result`` (the result dict to return), ``n`` (skill number),
    and ``cos`` under the tier; ``cov`` and ``head`` are filled in here.
    ``sem``: None (BM25 alone) or ``{"spread", "cos10", "chat"}``.
    ``explain``, a dict, receives the features, probabilities and
    verdicts.  ``named``: candidates beyond ``cands`` of skills the message
    names (``query.named``).  When the message names skills (``names``,
    on ``q["prose"]``), those are injected and no others."""
    prose = q.get("prose", "")
    hit = [c for c in cands if names(prose, c["result"]) and not from_project(idx, c["result"])] + list(named)
    if hit and explain is None:
        return [c["result"] for c in hit[:limit]]
    if not cands:
        if explain is not None:
            explain.update(mode="fused" if sem else "bm25", gate=None, cands=[])
        return []
    q["maxidf"] = max_idf(idx, q["found"])
    _cover(idx, q, cands[0])
    cands[0]["named"] = name_idf(idx, q["found"], cands[0]["result"]["name"], (q.get("heads") or {}).get(
        cands[0]["n"], ())) if q["found"] and not cands[0]["clone"] else 0.0
    model = FUSED if sem is not None else BM25
    xg = gate_features(q, cands, sem)
    pg = sigmoid(_dot(model["gate"], xg))
    passed = pg >= model["gate_threshold"]
    rows = [{"x": xg, "p": pg, "inject": passed}]
    # A turn the gate silences (most of a session) needs no further
    # candidate's features, unless explain shows them.
    for i in range(1, len(cands) if passed or explain is not None else 1):
        _cover(idx, q, cands[i])
        xm = more_features(q, cands, i, sem)
        pm = sigmoid(_dot(model["more"], xm))
        rows.append({"x": xm, "p": pm, "inject": passed and pm >= model["more_threshold"]})
    out = _slots(idx, cands, rows, limit) if passed else []
    if explain is not None:
        # The models' features and verdicts are shown (and calibrated on)
        # as computed; a named skill overrides the verdicts only.
        taken = hit[:limit]
        if hit:
            out = [c["result"] for c in taken]
            for row, c in zip(rows, cands):
                row.update(inject=c in taken, named=c in hit)
            rows += [{"x": None, "p": None, "inject": c in taken, "named": True} for c in named]
        explain.update(mode="fused" if sem is not None else "bm25", gate=pg, passed=passed, named=bool(hit),
                       gate_threshold=model["gate_threshold"], more_threshold=model["more_threshold"],
                       gate_names=GATE_NAMES + (GATE_SEM if sem is not None else GATE_BM25),
                       more_names=MORE_NAMES + (MORE_SEM if sem is not None else ()),
                       cands=[dict(row, **_shown(c)) for row, c in zip(rows, cands + list(named))])
    return out


def copies_of(idx, cands):
    """``{candidate index: its group}`` for the candidates that have a
    near-copy among ``cands`` (the index's ``copies``, found at build
    time); {} for most turns."""
    groups = idx["header"].get("copies")
    if not groups or len(cands) < 2:
        return {}
    at = {c["n"]: i for i, c in enumerate(cands)}
    out = {}
    for g in groups:
        here = [at[n] for n in g if n in at]
        if len(here) > 1:
            for i in here:
                out[i] = g
    return out


def _slots(idx, cands, rows, limit):
    """The results to inject once the gate passed: the candidates whose
    row says inject, in rank order, at most ``limit``, one slot per group
    of copies (``copies_of``).  A group's slot goes to its best-described
    copy among those the models take: the one whose name and description
    cover more of the message; on a tie (a message in another script
    covers neither), the one the ranking puts first.  A copy the models
    do not take never takes the slot from one they do.  The ranking itself is left as it is;
    the rows of copies not injected get ``copy_of``, the name of the
    copy that is."""
    groups = copies_of(idx, cands)
    want = [row["inject"] for row in rows]
    out = []
    done = set()
    for row in rows:
        row["inject"] = False
    for i, w in enumerate(want):
        if not w or len(out) >= limit:
            continue
        pick = i
        g = groups.get(i)
        if g is not None:
            if g in done:
                continue
            done.add(g)
            here = [j for j in sorted(groups) if groups[j] is g and want[j]]
            pick = min(here, key=lambda j: (-cands[j].get("head", 0.0), j))
            for j in groups:
                if groups[j] is g and j != pick:
                    rows[j]["copy_of"] = cands[pick]["result"]["name"]
        rows[pick]["inject"] = True
        out.append(cands[pick]["result"])
    return out


def _shown(c):
    # What explain shows of a candidate: the ranking's score, and the BM25
    # score under it (the fused results carry it; BM25's score is its own).
    r = c["result"]
    return {"n": c["n"], "id": r["id"], "name": r["name"], "path": r["path"], "score": c["score"],
            "cos": c.get("cos"), "bm25": r.get("bm25", c["score"])}


def _cover(idx, q, c):
    # The candidate's coverage features (each reads the query's postings,
    # and the second analyses the skill's name and description).
    found = q["found"]
    r = c["result"]
    if not found:
        c["cov"] = c["head"] = c["mass"] = 0.0
        return
    # A skill a project folder ships (a cloned repository's) is no
    # authority on its own name: "send a follow-up" is no request for a
    # clone's ``follow-up`` skill.  Its description alone speaks for it.
    c["clone"] = from_project(idx, r)
    toks = head_terms(idx, "" if c["clone"] else r["name"], r["description"])
    # A skill stuffed with common words covers any message: its coverage
    # says nothing and is damped (``stuffing``).
    damp = stuffing(toks)
    if q.get("heads") and c["n"] in q["heads"]:
        toks = toks | q["heads"][c["n"]]  # the user's own words for it (retriever.learn)
    n = c["n"]
    if c["clone"]:
        # Nor does a word of its name count as the message covered, unless
        # its description holds that word too.
        own = head_terms(idx, r["name"], "") - toks
        covered, total = _held(idx, found, lambda t, docs: n in docs and t not in own, q["n_scored"])
    else:
        covered, total = _held(idx, found, lambda t, docs: n in docs, q["n_scored"])  # as ``confidence``
    c["cov"] = (covered / total if total > 0 else 0.0) * damp
    c["mass"] = evidence(idx, covered) * damp
    c["head"] = head_coverage(idx, found, r["name"], r["description"], q["n_scored"], toks) * damp


def identifier(word):
    """True when ``word`` can stand for a skill on its own: two or more
    words (letters or digits) joined by ``-`` or ``_``, five characters
    or more ("systematic-debugging", "csv_clean").  A spaced name ("help
    me") is ordinary prose, and a skill named ``help-me`` must not be
    forced into every "help me with ..."."""
    if len(word) < 5:
        return False
    parts = word.replace("_", "-").split("-")
    return len(parts) >= 2 and all(p.isalnum() for p in parts)


def skill_names(result):
    """The names a user knows a skill by: its name and its folder (the
    last part of its id; Claude Code names a skill by its folder)."""
    folder = result["id"].rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    return (result["name"],) if folder == result["name"] else (result["name"], folder)


def names(text, result):
    """True when ``text`` names the skill of ``result``: its name or folder,
    when that is an ``identifier``, written exactly as it is (case and
    all) with no letter, digit, ``-`` or ``_`` either side, and written
    as a name the user meant (``meant``).  The one rule for a named
    skill: the decision injects it, session memory offers it again."""
    if "-" not in text and "_" not in text:
        return False  # most messages: no identifier at all
    return any(identifier(name) and _written(text, name) for name in skill_names(result))


def _written(text, name):
    # ``name`` stands in ``text`` on its own, at least once as ``meant``.
    i = text.find(name)
    while i >= 0:
        j = i + len(name)
        if (i == 0 or not _wordy(text[i - 1])) and (j == len(text) or not _wordy(text[j])) and \
                meant(text, i, j):
            return True
        i = text.find(name, i + 1)
    return False


# The word before a name that calls the skill by it ("use X", "用X": Chinese
# "use" touches the name, so those are matched as the word's end).
CALLS = frozenset(("use", "using", "run", "try", "apply", "load", "invoke", "call", "with", "via"))
CJK_CALLS = ("用", "使用", "调用", "運行", "运行")


def meant(text, i, j):
    """True when the identifier ``text[i:j]`` is written as a skill's name
    rather than as a word of the sentence ("send a follow-up", "update
    the user_id"):

    - as a reference, whatever the name: in backticks, after ``/``, ``$``
      or ``@`` at the start of a word (how runners call a skill), or as
      "the NAME skill" or "skill NAME";
    - after a word that calls it ("use NAME", "run NAME", "with NAME",
      ``CALLS``), or bare when it has three or more parts, if the name is
      ``distinctive``: everyday compounds ("e-mail", "log-in", "user_id",
      "up-to-date") are not, so only a reference names a skill called so.
    """
    name = text[i:j]
    before = text[i - 1] if i else " "
    if before in "/$@" and (i == 1 or text[i - 2].isspace()):
        return True
    if before == "`" and text[j:j + 1] == "`":
        return True
    prev, nxt = _word(text, i, -1), _word(text, j, 1)
    if prev == "skill" or (prev == "the" and nxt == "skill"):
        return True
    if not distinctive(name):
        return False
    parts = name.replace("_", "-").split("-")
    return prev in CALLS or prev.endswith(CJK_CALLS) or len(parts) >= 3


def distinctive(name):
    """True when no part of the identifier ``name`` is shorter than three
    characters or a function word (``analyze.STOPWORDS``): "follow-up",
    "e-mail", "up-to-date", "log-in", "user_id" and "drag-and-drop" are
    words of everyday prose, "pdf-text-extraction" is a name."""
    from retriever.analyze import STOPWORDS
    return all(len(p) >= 3 and p.lower() not in STOPWORDS for p in name.replace("_", "-").split("-"))


def _word(text, at, step):
    # The word (letters and digits, casefolded) before ``at`` (step -1) or
    # from ``at`` on (step 1), past the spaces between; "" when none.
    n = len(text)
    k = at
    if step < 0:
        while k > 0 and text[k - 1].isspace():
            k -= 1
        e = k
        while k > 0 and text[k - 1].isalnum():
            k -= 1
        return text[k:e].casefold()
    while k < n and text[k].isspace():
        k += 1
    s = k
    while k < n and text[k].isalnum():
        k += 1
    return text[s:k].casefold()


def identifiers(text):
    """The ``identifier`` words ``text`` writes as names (``meant``), in
    order, once each: what could name a skill (``query.named`` looks
    these up)."""
    if "-" not in text and "_" not in text:
        return []
    out = {}
    for chunk in text.split():
        if "-" not in chunk and "_" not in chunk:
            continue  # only the few chunks that can hold one are read by character
        word = []
        for ch in chunk + " ":
            if _wordy(ch):
                word.append(ch)
                continue
            if word:
                w = "".join(word)
                if ("-" in w or "_" in w) and w not in out and identifier(w) and _written(text, w):
                    out[w] = None
                word = []
    return list(out)


def from_project(idx, result):
    """True when the skill of ``result`` lies in a project's own skills
    folder (``locate.in_project``: what a cloned repository ships).  Such a skill is ranked like any other, but never forced in
    by its name alone."""
    from retriever.locate import in_project  # loaded already: the answer path uses it
    path = result.get("path") or ""
    for r in idx["header"].get("roots") or ():
        if isinstance(r, dict) and in_project(r):
            base = r["path"].rstrip("/") + "/"
            if path.startswith(base) or path + "/" == base:
                return True
    return False


def _wordy(c):
    # A character an identifier cannot touch: a letter or digit of a
    # spaced script, "-" or "_".  Han, kana and hangul are boundaries, so
    # "用systematic-debugging调试" names it as "use systematic-debugging" does.
    return c == "-" or c == "_" or (c < "\u3040" and c.isalnum())


def plain(cands, limit, sem=None, explain=None):
    """The top ``limit`` candidates, no decision (SKILL_RETRIEVAL_DECIDE
    off, and the ranking rows of ``make eval``)."""
    if explain is not None:
        explain.update(mode="off", cands=[dict(_shown(c), inject=i < limit) for i, c in enumerate(cands)])
    return [c["result"] for c in cands[:limit]]


GATE_NAMES = ("bias", "coverage", "name+description coverage", "length", "pasted block", "rarest term",
              "margin to #2", "known terms", "rare term in the name")
GATE_BM25 = ("evidence",)
GATE_SEM = ("cosine", "cosine spread", "no-skill likeness", "best cosine of top 3")
MORE_NAMES = ("bias", "score / best", "coverage", "name+description coverage", "margin to next",
              "rarest term", "length")
MORE_SEM = ("cosine", "cosine over 10th", "cosine under best")

# BEGIN calibrated: written by `make calibrate` (eval/calibrate.py); do not edit.
BM25 = {
    "gate": [-4.9614, 0.201, 2.7551, 2.4612, 0.7997, 1.4709, -0.2422, -1.1338, 2.3778, 5.6977],
    "gate_threshold": 0.52,
    "more": [-7.3804, 3.7274, 1.1866, 0.8746, -0.0478, 0.5934, 1.4662],
    "more_threshold": 0.14,
}
FUSED = {
    "gate": [-1.6709, 1.1751, 1.3619, 1.4123, 0.7612, 2.1146, 0.6737, -1.1812, 1.5614, 3.4861, 0.5135, -6.3604, 3.0207],
    "gate_threshold": 0.55,
    "more": [-7.4624, 4.497, 0.8034, 0.7405, -0.3161, 0.5559, 1.1227, 1.194, 1.6253, -2.223],
    "more_threshold": 0.16,
}
# END calibrated
