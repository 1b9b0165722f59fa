"""Score a query against a loaded index and pick the top skills.

Hot path: imports only the analyzer and the store.  Scores are sums of the
precomputed per-(term, skill) weights over the query's unique terms.
"""

from retriever.analyze import analyze
from retriever.store import build_key, doc, find_term, postings
from retriever.tokenize import is_cjk_token, tokenize, word_count

# A pasted log or a whole file should not drown the request around it: keep
# the head and the tail, where people put what they want.
_HEAD = 6000
_TAIL = 2000
MAX_QUERY_TERMS = 64


def clean_query(text):
    """Shorten very long input and drop URLs, which are noise to BM25."""
    if len(text) > _HEAD + _TAIL:
        text = text[:_HEAD] + "\n" + text[-_TAIL:]
    if "://" in text:
        text = " ".join(w for w in text.split() if "://" not in w)
    return text


# When the message has words of its own, at most this many terms of its
# pasted blocks (logs, code) count, each at this weight: the question
# decides, the paste helps.
MAX_PASTED_TERMS = 16
PASTED_WEIGHT = 0.25


def query_terms(idx, text, weights=None):
    """The unique analysed terms of ``text``: the message's own words
    first, in order of first appearance, then a few from pasted blocks
    (``message.split``), so a question before or after a long log keeps
    its terms within the MAX_QUERY_TERMS cap.  ``weights`` (a dict), when
    given, receives PASTED_WEIGHT for each term only a pasted block has."""
    return _terms(idx, text, weights)[0]


def _terms(idx, text, weights):
    # query_terms, and the message's shape: (terms, (words of its own
    # prose, whether it holds a pasted block, that prose, its foreign
    # language and the words left out for it: ``foreign``, and how many
    # of the terms are its prose's: they come first)).
    opts = idx["header"]["params"]["analyzer"]
    seen = {}
    prose, pasted = _split(text)
    # Words in any script: a Chinese sentence has no spaces, and is no
    # one-word reply for that (tokenize.word_count).
    lang, own, out = foreign(idx["header"], prose)
    shape = (word_count(prose), bool(pasted.strip()), prose, lang, out)
    for t in analyze(own, opts):
        if t not in seen:
            seen[t] = None
            if len(seen) >= MAX_QUERY_TERMS:
                return list(seen), shape + (len(seen),)
    shape += (len(seen),)
    if pasted:
        own = len(seen) >= 2
        cap = min(MAX_QUERY_TERMS, len(seen) + MAX_PASTED_TERMS) if own else MAX_QUERY_TERMS
        for t in analyze(clean_query(pasted), opts):
            if t not in seen:
                seen[t] = None
                if own and weights is not None:
                    weights[t] = PASTED_WEIGHT
                if len(seen) >= cap:
                    break
    return list(seen), shape


# A message is in a foreign language when it holds at least this many
# distinct function words of it (``languages.LISTS``), making at least
# this share of its distinct words: "kill the processes that die" is not
# German.
FOREIGN_HITS = 2
FOREIGN_SHARE = 0.2


def foreign(header, prose):
    """``(language, words, left out)``: the language ``prose`` is written
    in when the library (``header["lang"]``, written by the build) is not
    written in it, else "" ("cjk" for han, kana or hangul over a library
    in Latin script); the prose to rank, without the function words of
    the languages the library is not written in when the message is in
    one of them; and how many distinct words that left out.  Those words
    are not the library's: where they stray into it ("para", "la") they
    are no match, of coverage or of a rare term (docs/decision.md,
    "Languages"); they still count as words of the message no skill
    holds, so what is left is not "fully covered"."""
    info = header.get("lang")
    if not info or not prose:
        return "", prose, 0
    if not prose.isascii() and "cjk" not in info["library"]:
        letters = cjk = 0
        for ch in prose:
            if ch.isalpha():
                letters += 1
                if ch >= "\u3040" and is_cjk_token(ch):
                    cjk += 1
        if cjk * 2 > letters:
            return "cjk", prose, 0
    toks = tokenize(prose)
    distinct = set(toks)
    lists = info["foreign"]
    best, hits = "", FOREIGN_HITS - 1
    for lang, words in lists.items():
        n = len(distinct & words)
        if n > hits:
            best, hits = lang, n
    if not best or hits < FOREIGN_SHARE * len(distinct):
        return "", prose, 0
    kept = [t for t in toks if not any(t in words for words in lists.values())]
    return best, " ".join(kept), len(distinct) - len(set(kept))



def _split(text):
    # (the message's own words, cut as clean_query cuts, its pasted blocks)
    prose, pasted = text, ""
    if "\n" in text or len(text) > 300:
        from retriever.message import split
        prose, pasted = split(text)
    return clean_query(prose), pasted


def prose(text):
    """The message's own words as ``parse`` reads them (its ``prose``):
    no pasted block, no URL.  Where ``decide.names`` looks for a name."""
    return _split(clean_query(text))[0]


# The session's context (``session.contextualize``): the earlier prompts'
# terms are a second query, weighted CONTEXT_WEIGHT * CONTEXT_HALF /
# (CONTEXT_HALF + words) for a message of ``words`` words of its own, so a
# short or referring turn ("would a sensor work here?") is ranked within
# its session's topic, and a long new request on its own words.
CONTEXT_WEIGHT = 0.6
CONTEXT_HALF = 8.0
# Terms a prompt leaves to the next ones: its rarest known terms.
CONTEXT_TERMS = 12
# A carried term is scored only when its IDF reaches this share of
# ln(1 + N), the IDF of a term one skill holds: held by at most about
# N^0.5 of N skills.
CONTEXT_MIN_IDF = 0.5
# The skills the session was given in its last turns (``context["skills"]``)
# join the ranking too, at this share of the message's own best score
# (decayed per turn since, and lower for a longer message, as the terms):
# a short edit that shares no word with the session's skill ranks it, so
# the turn continues the session's work instead of injecting a near one
# ("requests 250m / 256Mi, limits 1 cpu / 512Mi" after a Helm task, with
# BM25 alone, no longer brings senior-devops).
# Chosen on the session set, and held out: 0.3 moves no row down (tier on:
# silent 0.894 -> 0.902, Hit@3 0.740 -> 0.760; BM25 alone: silent 0.813 ->
# 0.837, Hit@1 0.480 -> 0.490); 0.6 costs 0.02 in context.
SKILL_PRIOR = 0.3
# The first candidates a ranking in context reports (``context["ranked"]``)
# for ``session.filter`` to see whether a turn continues the session's work.
CONTINUES_WITHIN = 3


def parse(idx, text, context=None):
    """The message as plain data, parsed once for the ranking and the
    decision: its ``terms`` and their ``weights``, the BM25 scores
    (``acc``) and postings (``found``) of ``score``, how many terms count
    for coverage (``n_scored``), its shape (``words`` of its own
    ``prose``, ``pasted``) and the share of its terms the library knows
    (``known``), and the ``lang`` of a message in a language the
    library is not written in (``foreign``), else "", and what the
    user's learnt words added (``learnt``: score per skill; ``heads``:
    terms per skill; ``retriever.learn``), else None.

    ``context`` (a dict from ``session.contextualize``, or None): its
    ``prior`` (``{term: weight}``, the session's earlier prompts) adds to
    ``acc`` only, so it moves the ranking, never the decision's evidence
    (``found``, ``n_scored``, ``known`` are the message's own); the
    message's rarest known terms go to its ``own``, for the next prompts,
    and the terms of its own words (no pasted block's) to its ``terms``,
    for the usage record."""
    text = clean_query(text)
    weights = {}
    terms, (words, pasted, prose, lang, out, mine) = _terms(idx, text, weights)
    if context is not None:
        # What the usage record keeps for learning (``usage.note``): the
        # message's own terms as ranked, so what is learnt is looked up
        # in the same words ("informe mañana" of "el informe de la
        # mañana"), never a pasted log's.
        context["terms"] = terms[:mine]
    acc, found = score(idx, terms, weights) if terms else ({}, {})
    learnt = heads = None
    if idx.get("learnt") and terms:  # the user's own words for skills
        from retriever import learn
        learnt, heads = learn.apply(idx, idx["learnt"], terms, acc, found)
    # After the learnt words joined ``found``: a CJK bigram the library
    # lacks counts for coverage once learnt, so ``known`` stays a share
    # (counted before, five learnt bigrams made it 5.0, and the gate,
    # which weighs it against injecting, silenced the skill they named).
    n = n_scored(terms, found) + out
    if context is not None:
        _with_context(idx, context, acc, found, words)
    return {"text": text, "terms": terms, "weights": weights, "acc": acc, "found": found, "n_scored": n,
            "words": words, "pasted": pasted, "prose": prose, "known": len(found) / n if n else 0.0,
            "lang": lang, "learnt": learnt or None, "heads": heads or None}


def _with_context(idx, context, acc, found, words):
    # Adds the context's scores to acc (in place); leaves the message's
    # own rarest known terms in context["own"].
    idf = idx["idf"]
    own = [t for t, (i, _) in found.items() if _carried(t)]
    own.sort(key=lambda t: -idf[found[t][0]])
    context["own"] = own[:CONTEXT_TERMS]
    # How rare each is (its IDF against ln(1 + N), as the decision's "rare
    # term in the name"), for ``session.asks_for_new``.
    from retriever.decide import idf_scale  # loaded already: the decision needs it; no math import
    scale = idf_scale(idx)
    context["rarity"] = {t: idf[found[t][0]] / scale for t in context["own"]}
    context["analyzer"] = idx["header"]["params"]["analyzer"]
    context["words"] = words
    top_own = max(acc.values()) if acc else 0.0
    skills = context.get("skills")
    context["build"] = build = build_key(idx["header"])
    if skills and SKILL_PRIOR > 0.0:
        weight = SKILL_PRIOR * CONTEXT_HALF / (CONTEXT_HALF + words) * (top_own if top_own > 0.0 else 1.0)
        # The skills' numbers in this build, as the session remembers them
        # (``session.record``); a binary search for the others.
        known = context.get("numbers")
        known = known[1] if known and known[0] == build else {}
        n_docs = idx["header"]["n_docs"]
        for rid, w in skills.items():
            d = known.get(rid)
            if d is None or not 0 <= d < n_docs:  # (a state file is checked, not trusted)
                d = _doc_number(idx, rid)
            if d >= 0:
                acc[d] = acc.get(d, 0.0) + w * weight
    prior = context.get("prior")
    if not prior:
        return
    extra = {t: w for t, w in prior.items() if t not in found}
    if not extra:
        return
    if len(extra) > CONTEXT_TERMS:
        # Scoring every carried term (three prompts' worth) cost 4.8 ms a
        # prompt at 3,741 skills; the newest prompts' terms are kept, each
        # prompt's rarest first (sorted is stable).
        extra = {t: extra[t] for t in sorted(extra, key=lambda t: -extra[t])[:CONTEXT_TERMS]}
    # Only the context's rarer terms are scored: they carry the session's
    # topic, and a common one's long postings cost the most (at 3,741
    # skills the context took half of a deep prompt's 9 ms).
    more, _ = score(idx, list(extra), extra, CONTEXT_MIN_IDF * scale)
    if not more:
        return
    # Relative to the message's own best score: the context reorders what
    # the message leaves open, and cannot outweigh a request with words
    # of its own (a topic switch is ranked on them).
    scale = CONTEXT_WEIGHT * CONTEXT_HALF / (CONTEXT_HALF + words) / max(more.values())
    if top_own > 0.0:
        scale *= top_own
    get = acc.get
    for d, w in more.items():
        acc[d] = get(d, 0.0) + w * scale


def _doc_number(idx, rid):
    # The number of the skill with id ``rid``, or -1: skills are numbered
    # in id order.  A binary search reads about log2(N) records (12 at
    # 3,741 skills, 0.7 ms a deep prompt when it ran for every recent
    # skill on every turn), so the session keeps what it found.
    lo, hi = 0, idx["header"]["n_docs"]
    while lo < hi:
        mid = (lo + hi) >> 1
        m = doc(idx, mid)[0]
        if m < rid:
            lo = mid + 1
        elif m > rid:
            hi = mid
        else:
            return mid
    return -1


def _carried(term):
    """A term worth carrying to the next prompts: not a number or a
    single character (they match anything, anywhere)."""
    return len(term) > 1 and not term.isdigit()


def score(idx, terms, term_weights=None, min_idf=0.0):
    """``({skill number: score}, {term: (term number, skill numbers)})``
    for the given terms (each scaled by ``term_weights[term]`` when that
    is given, default 1; a term under ``min_idf`` left out); the skill
    lists are kept for ``confidence``, so no term's postings are read
    twice."""
    acc = {}
    found = {}
    idf = idx["idf"]
    for t in terms:
        i = find_term(idx, t)
        if i < 0 or idf[i] < min_idf:
            continue
        docs, weights = postings(idx, i)
        found[t] = (i, docs)
        tw = term_weights.get(t, 1.0) if term_weights else 1.0
        if tw != 1.0:
            weights = [w * tw for w in weights]
        if not acc:
            # The first term's scores are its weights (0.0 + w is w):
            # built in C, about twice as fast as the loop below.
            acc = dict(zip(docs, weights))
            get = acc.get
            continue
        for d, w in zip(docs, weights):
            acc[d] = get(d, 0.0) + w
    return acc, found


def top(acc, k):
    """The ``k`` best ``(skill number, score)`` pairs: score descending,
    ties by skill number (skills are numbered in id order)."""
    if k <= 0 or not acc:
        return []
    items = acc.items()
    n = len(acc)
    if n > 4 * k + 256:
        # Sort only the pairs reaching the k-th best score of an evenly
        # spaced sample: the sample is part of the scores, so at least k
        # pairs reach it, and every pair of the top k (ties at the cut
        # too, so ids still decide).  About 16 k pairs pass.  This needs
        # no heapq (0.45 ms to load, and nlargest loops in Python) and
        # sorts no more than a sixteenth of the scores: at 20,000 skills
        # a query can score 16,000.
        cut = sorted(list(acc.values())[::min(16, n // (4 * k))], reverse=True)[k - 1]
        items = [kv for kv in items if kv[1] >= cut]
    return sorted(items, key=lambda x: (-x[1], x[0]))[:k]


def n_scored(terms, found):
    """How many query terms count for coverage: the known ones, plus
    unknown words except CJK bigrams (most bigrams of a sentence are not
    words, so their absence says nothing)."""
    return len(found) + sum(1 for t in terms if t not in found and not is_cjk_token(t))


def _result(idx, n, s):
    rid, name, path, desc, vis = doc(idx, n)
    return {"id": rid, "name": name, "path": path, "score": round(s, 6),
            "description": desc, "vis": vis, "n": n}


def ranked(idx, acc, k, keep=None):
    """The ``k`` best ``(skill number, score, result dict)`` triples of
    ``acc``, best first, counting only results ``keep`` accepts (all when
    None): a skill the caller will hide never takes a place, sets the
    floor or decides abstention.  Candidates are read in rank order, the
    window widening only while too few are kept."""
    if keep is None:
        return [(n, s, _result(idx, n, s)) for n, s in top(acc, k)]
    out = []
    want = k
    seen = 0
    while True:
        window = top(acc, want)
        for n, s in window[seen:]:
            r = _result(idx, n, s)
            if keep(r):
                out.append((n, s, r))
                if len(out) >= k:
                    return out
        if len(window) < want:
            return out
        seen = len(window)
        want *= 4


# Skills read per name the message writes that no candidate has (named):
# the best-scoring of those holding each of its words.
NAMED_CHECKS = 16


def named(idx, q, cands, keep=None):
    """Candidate dicts of the skills the message names (``decide.names``)
    that are not among ``cands``, for ``decide.choose``: a named skill
    gets in however it ranks.  For each identifier the message writes
    that no candidate answers to, the NAMED_CHECKS best-scoring skills
    holding all its words are read; ``keep`` as in ``search``.  A skill
    of a project's own folder (``decide.from_project``) is never taken."""
    from retriever import decide as dc
    words = dc.identifiers(q["prose"])
    if not words:
        return []  # most messages: the hot path stops here
    have = set(c["n"] for c in cands)
    known = set()
    for c in cands:
        known.update(dc.skill_names(c["result"]))
    opts = idx["header"]["params"]["analyzer"]
    acc, found = q["acc"], q["found"]
    out = []
    for w in words:
        if w in known:
            continue
        terms = list(dict.fromkeys(analyze(w, opts)))
        if not terms or any(t not in found for t in terms):
            continue  # a word no skill holds: no skill has this name
        docs = set(found[terms[0]][1])
        for t in terms[1:]:
            docs.intersection_update(found[t][1])
        for n in sorted(docs - have, key=lambda d: (-acc.get(d, 0.0), d))[:NAMED_CHECKS]:
            r = _result(idx, n, acc.get(n, 0.0))
            if w in dc.skill_names(r) and (keep is None or keep(r)) and not dc.from_project(idx, r):
                out.append({"n": n, "score": acc.get(n, 0.0), "result": r})
                have.add(n)
    return out


def search(idx, text, k, keep=None, decide=True, explain=None, context=None):
    """Rank skills for ``text`` with BM25 and return what to inject: a
    list of result dicts (id, name, path, score, description, vis), best
    first, at most ``k``; often one or two, and [] when nothing fits
    (``retriever.decide``).

    ``keep`` (a predicate on result dicts) limits the ranking to what the
    caller can show: it applies before the top-``k`` cut and the
    decision.  ``decide=False`` returns the plain ranking, top ``k``.
    ``explain``, a dict, receives the decision's numbers.  ``context``:
    the session's, as in ``parse``; it receives the ranking's first ``ranked`` (id, score) pairs."""
    q = parse(idx, text, context)
    if not q["terms"]:
        return []
    from retriever import decide as dc
    cands = [{"n": n, "score": s, "result": r} for n, s, r in ranked(idx, q["acc"], k, keep) if s > 0.0]
    if context is not None:
        context["ranked"] = [(c["result"]["id"], c["score"]) for c in cands[:CONTINUES_WITHIN]]
    if not decide:
        return dc.plain(cands, k, None, explain)
    return dc.choose(idx, q, cands, k, None, explain, named(idx, q, cands, keep))
