"""Which languages a library is written in, and the function words of the
others: the build path's side of language-aware evidence.

A skill library is usually written in one language, and its requests may
come in another.  BM25 then matches a foreign request's function words
("para", "un", "la" in Spanish; "die", "und" in German) where they
stray into the library ("la" of a French example, "para" in "para-
virtualised"), and those matches passed for coverage and rare terms.  So
the build tells which languages the skills' names and descriptions are
written in (``library``), and writes into the index header the function
words of every other language (``header_entry``).  The query path reads
them from there (``query.foreign``), with no import of its own: it drops a
message's function words of a foreign language when the message is
written in that language, and says that the message is foreign.

Why compact hand-kept lists and not a package (``stop-words`` on PyPI is
well kept): its lists run to hundreds of words per language and hold
content words ("trabajo", "nuevo", "hacer"), which a request needs; these
hold only articles, prepositions, pronouns, conjunctions and the commonest
auxiliaries, about a hundred words each, so a word is dropped only when it
cannot carry what the request is about.  English is the analyzer's own
``STOPWORDS``.  Korean, Chinese and Japanese are told by their script: no
word list is needed to see that a message in hangul is not written in an
English library's language.
"""

from retriever.analyze import STOPWORDS

# Function words, lowercased as the tokenizer leaves them (accents kept;
# NFKC is what the tokenizer applies).  Some are English or technical
# words too ("die", "bin", "con", "des"): a message counts as written in a
# language only when they are a fair share of it (``query.foreign``), so
# "kill the processes that die" keeps its "die".
LISTS = {
    "es": """
        el la los las un una unos unas lo al del de y e o u ni que qué quien quién cual cuál como cómo
        cuando cuándo donde dónde por para con sin sobre entre hasta desde hacia según durante
        mi mis tu tus su sus nuestro nuestra nuestros nuestras vuestro me te se nos os le les
        yo tú él ella ellos ellas usted ustedes nosotros este esta estos estas ese esa esos esas
        aquel aquella esto eso es son está están estoy estás estamos ser estar fue era han ha he
        hay hemos tengo tiene tienen tenemos puedo puede pueden podemos quiero quieres necesito
        necesitamos muy más mas menos también pero porque pues si sí ya aún todavía cada otro
        otra otros otras todo toda todos todas algo alguno alguna nada mucho mucha muchos poco
        hazme dame ayúdame hacer puedes favor
        uno ningún ninguno ninguna algún algunos algunas cualquier cualquiera ambos ambas varios varias
    """,
    "pt": """
        o os a as um uma uns umas ao aos à às do da dos das de em no na nos nas num numa e ou
        nem que quem qual como quando onde por para com sem sobre entre até desde pelo pela
        pelos pelas meu minha meus minhas teu tua seu sua seus suas nosso nossa me te se nos
        lhe lhes eu tu ele ela eles elas você vocês este esta estes estas esse essa esses essas
        isto isso aquilo é são está estão estou estamos ser estar foi era tem têm temos tenho
        há posso pode podem podemos quero preciso precisamos muito muita mais menos também mas
        porque pois sim já ainda cada outro outra outros outras todo toda todos todas algo
        nada não faça faz favor ajude
        algum alguma alguns algumas nenhum nenhuma qualquer quaisquer ambos ambas vários várias
    """,
    "de": """
        der das dem den des ein eine einer eines einem einen und oder aber doch sondern denn
        weil dass ob wenn als wie wo wer wen wem warum welche welcher welches mit ohne für
        gegen durch über unter vor nach bei von zu zum zur aus seit bis im ins am ans vom die man
        ich du er sie es wir ihr mein meine meinen meinem meiner dein deine sein seine unser
        unsere euer ihre ihren ihrem mich dich sich uns euch mir dir ihm ihnen ist sind bin
        bist seid war waren wird werden wurde wurden habe hast hat haben hatte hatten kann
        kannst können muss musst müssen soll sollen möchte möchten will nicht kein keine
        keinen auch noch schon nur sehr mehr jetzt hier dort dieser diese dieses diesem
        diesen jeder jede jedes alle alles etwas nichts bitte mal
        derselbe dieselbe dasselbe derselben denselben demselben jemand niemand irgendein irgendeine beide
        beiden einige einigen mehrere manche solche
    """,
    "fr": """
        le la les un une des du de au aux et ou ni mais donc car que qui quoi quel quelle
        quels quelles comment quand où pour par avec sans sur sous dans entre vers chez
        depuis pendant selon mon ma mes ton ta tes son sa ses notre nos votre vos leur leurs
        je tu il elle nous vous ils elles on me te se lui moi toi ce cet cette ces cela
        ça est sont suis es sommes êtes être était été ai as avons avez ont avoir fait
        faire peux peut pouvons pouvez peuvent veux veut voudrais dois doit faut pas ne
        plus moins très aussi encore déjà tout toute tous toutes chaque autre autres rien
        quelque y en svp
        aucun aucune quelques plusieurs chacun chacune
    """,
}

# A language is the library's when at least this share of its skills is
# written in it (a few Spanish skills among a thousand English ones do not
# make Spanish requests the library's own).
LIBRARY_SHARE = 0.1
# A skill's name and description tell its language when they hold this
# many function words of it, more than of any other.
MIN_HITS = 2


def _words():
    # language -> its function words as a set ("en", the analyzer's, first:
    # it wins a tie).
    out = {"en": STOPWORDS}
    out.update((lang, frozenset(text.split())) for lang, text in LISTS.items())
    return out


def _script(text):
    # "cjk" when most letters of ``text`` are han, kana or hangul, else "".
    from retriever.tokenize import _is_cjk
    letters = cjk = 0
    for ch in text:
        if ch.isalpha():
            letters += 1
            cjk += _is_cjk(ord(ch))
    return "cjk" if letters and cjk * 2 > letters else ""


def language(text, words=None):
    """The language ``text`` is written in: "cjk" by script, else the
    language of ``LISTS`` (or "en", which wins a tie) of which it holds
    the most distinct function words, at least MIN_HITS ("UN data, un
    data" is not Spanish); "" when it does not say."""
    from retriever.tokenize import tokenize
    if not text.isascii() and _script(text):
        return "cjk"
    words = words or _words()
    toks = set(tokenize(text))
    best, hits = "", MIN_HITS - 1
    for lang, ws in words.items():
        n = sum(1 for t in toks if t in ws)
        if n > hits:
            best, hits = lang, n
    return best


def library(texts):
    """The languages a library is written in, sorted: those of at least
    LIBRARY_SHARE of the ``texts`` (each a skill's name and description)
    whose language shows; ``["en"]`` when none shows."""
    words = _words()
    counts = {}
    n = 0
    for text in texts:
        lang = language(text, words)
        if lang:
            counts[lang] = counts.get(lang, 0) + 1
            n += 1
    langs = sorted(lang for lang, c in counts.items() if c >= LIBRARY_SHARE * n)
    return langs or ["en"]


def header_entry(texts):
    """What the index header keeps (its ``lang``): ``{"library": [its
    languages], "foreign": {language: frozenset of function words}}``,
    the function words of each Latin-script language the library is not
    written in, less any word of a language it is written in (Spanish
    "no" is an English word too)."""
    langs = library(texts)
    words = _words()
    own = set()
    for lang in langs:
        own |= words.get(lang, frozenset())
    return {"library": langs,
            "foreign": {lang: frozenset(ws - own) for lang, ws in sorted(words.items()) if lang not in langs}}
