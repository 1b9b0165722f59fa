"""The tokenizer shared by skills and queries (issue 2, item 4).

Lowercase; split on Unicode punctuation, symbols, underscores and
whitespace; CJK runs (han incl. Extensions A and B, kana in full and half
width, hangul) are cut from the rest and indexed as overlapping bigrams, a
one-character run staying whole.
"""

import pytest

from retriever.tokenize import is_cjk_token, tokenize
from skillret_helpers import json_results, make_skill


@pytest.mark.parametrize("text, tokens", [
    ("Rotate My K8S Certs", ["rotate", "my", "k8s", "certs"]),
    ("foo_bar-baz.qux/quux", ["foo", "bar", "baz", "qux", "quux"]),
    ("snake_case_name", ["snake", "case", "name"]),
    ("(hello), [world]! \"quoted\" 'single'", ["hello", "world", "quoted", "single"]),
    ("tabs\tand\nnewlines\r\nand  spaces", ["tabs", "and", "newlines", "and", "spaces"]),
    ("em\u2014dash \u201ccurly\u201d \u00abguillemets\u00bb \u00bfqu\u00e9?", ["em", "dash", "curly", "guillemets", "qué"]),
    ("v1.2.3 + C++ & $HOME", ["v1", "2", "3", "c", "home"]),
    ("don't", ["don", "t"]),
    ("\u00dcN\u00cfC\u00d6D\u00c9 Stra\u00dfe", ["\u00fcn\u00efc\u00f6d\u00e9", "stra\u00dfe"]),
    # Combining marks belong to their word: NFKC composes them or keeps them attached.
    ("cafe\u0301", ["caf\u00e9"]),
    ("\u0939\u093f\u0928\u094d\u0926\u0940 \u092d\u093e\u0937\u093e", ["\u0939\u093f\u0928\u094d\u0926\u0940", "\u092d\u093e\u0937\u093e"]),
    # Full-width Latin folds to ASCII, so "ＰＹＴＨＯＮ" meets "python".
    ("\uff30\uff39\uff34\uff28\uff2f\uff2e\uff01", ["python"]),
    ("", []),
    ("   \n\t ", []),
    ("!!! --- ___ ...", []),
])
def test_lowercase_and_punctuation_split(text, tokens):
    assert tokenize(text) == tokens


@pytest.mark.parametrize("text, tokens", [
    # CJK Unified Ideographs: overlapping bigrams.
    ("数据库", ["数据", "据库"]),
    ("数据库迁移", ["数据", "据库", "库迁", "迁移"]),
    # A one-character run stays whole.
    ("用", ["用"]),
    ("写 代码", ["写", "代码"]),
    # CJK punctuation splits runs like any other punctuation.
    ("数据。库、表", ["数据", "库", "表"]),
    # Extension A and Extension B (astral plane) are CJK too.
    ("\u3400\u3401\u3402", ["\u3400\u3401", "\u3401\u3402"]),
    ("\U00020000\U00020001\U00020002", ["\U00020000\U00020001", "\U00020001\U00020002"]),
    ("\U0002A6D6", ["\U0002A6D6"]),
    ("中\U00020000文", ["中\U00020000", "\U00020000文"]),
    # Hiragana and katakana.
    ("ひらがな", ["ひら", "らが", "がな"]),
    ("カタカナ", ["カタ", "タカ", "カナ"]),
    ("日本語のテキスト", ["日本", "本語", "語の", "のテ", "テキ", "キス", "スト"]),
    # Hangul syllables; spaces between Korean words split runs.
    ("한국어", ["한국", "국어"]),
    ("한국어 문서", ["한국", "국어", "문서"]),
    ("한", ["한"]),
])
def test_cjk_runs_become_bigrams(text, tokens):
    assert tokenize(text) == tokens


@pytest.mark.parametrize("half, full", [
    ("\uff76\uff80\uff76\uff85", "カタカナ"),            # ｶﾀｶﾅ
    ("\uff76\uff9e\uff72\uff84\uff9e", "ガイド"),        # ｶﾞｲﾄﾞ: voiced marks fold in
    ("\uff83\uff7d\uff84", "テスト"),                    # ﾃｽﾄ
    ("\uff7a\uff70\uff84\uff9e", "コード"),              # ｺｰﾄﾞ: prolonged sound mark
])
def test_half_width_kana_fold_to_full_width_then_bigrams(half, full):
    assert tokenize(half) == tokenize(full)
    assert all(len(t) == 2 for t in tokenize(full))
    assert tokenize(half) == [full[i:i + 2] for i in range(len(full) - 1)]


@pytest.mark.parametrize("text, tokens", [
    ("用python写", ["用", "python", "写"]),
    ("用python写爬虫", ["用", "python", "写爬", "爬虫"]),
    ("Python脚本", ["python", "脚本"]),
    ("kubernetes证书轮换2024", ["kubernetes", "证书", "书轮", "轮换", "2024"]),
    ("a\U00020000b", ["a", "\U00020000", "b"]),
    ("서울Seoul도시", ["서울", "seoul", "도시"]),
    ("React와Vue", ["react", "와", "vue"]),
    ("テストをRUN", ["テス", "スト", "トを", "run"]),
])
def test_mixed_scripts_split_cjk_from_the_rest(text, tokens):
    assert tokenize(text) == tokens


def test_cjk_tokens_are_recognised_for_the_analyzer():
    # The analyzer must not stem CJK tokens; it asks is_cjk_token.
    for tok in ("数据", "用", "\U00020000\U00020001", "カタ", "한국"):
        assert is_cjk_token(tok)
    for tok in ("python", "k8s", "caf\u00e9", ""):
        assert not is_cjk_token(tok)


def test_queries_and_skills_meet_across_scripts_and_widths(tmp_path, cli):
    """The same tokenizer on both sides: a half-width or mixed-script query
    finds the skill written in full-width CJK."""
    root = tmp_path / "skills"
    make_skill(root, "zh/crawler", {"name": "crawler", "description": "使用python写爬虫抓取网页"})
    make_skill(root, "ja/katakana", {"name": "kana-tool", "description": "カタカナのテキストを変換する"})
    make_skill(root, "ko/docs", {"name": "korean-docs", "description": "한국어 문서 요약"})
    make_skill(root, "en/other", {"name": "other", "description": "Rotate kubernetes certificates"})
    idx = tmp_path / "i.skr"

    def top(q):
        res = json_results(cli("--root", root, "--index", idx, "--format", "json", q))
        return res[0]["id"] if res else None

    assert top("用python写爬虫") == "zh/crawler"
    assert top("\uff76\uff80\uff76\uff85") == "ja/katakana"  # ｶﾀｶﾅ
    assert top("한국어 문서를 요약해 줘") == "ko/docs"


@pytest.mark.parametrize("piece", [
    "Plain ASCII words — with an em dash, “curly quotes”, arrows → and emoji 🚀 only.",
    "Accented É and Straße, İstanbul, Deseret \U00010400, ΣΟΦΙΑ and σοφός, Kelvin \u212a.",
    "中文混合 text with カタカナ and 한국어, full-width ＰＹＴＨＯＮ, ｶﾀｶﾅ, ☃ snow.",
    "Combining e\u0301 and lone surrogate \udc80 next to words_with_underscores.",
])
def test_long_text_tokenizes_as_its_short_pieces(piece):
    """A skill body (over 200 characters) takes the tokenizer's bytes path;
    it must split exactly as the short pieces it is made of do."""
    pieces = [piece, piece.upper(), piece.lower(), "plain words"] * 8
    text = " ".join(pieces)
    assert len(text) > 200 and all(len(p) < 200 for p in pieces)
    assert tokenize(text) == [t for p in pieces for t in tokenize(p)]


def test_a_message_has_as_many_words_in_any_script(tmp_path):
    """The decision reads a message's length in words (``q["words"]``): a
    sentence in Chinese or Japanese has no spaces, and must not count as
    one word, like "ok".  One word per two han or kana characters; Hangul
    is spaced, so it counts as it is written."""
    from retriever import build, query, store
    make_skill(tmp_path / "skills", "sheet-clean", {"name": "sheet-clean", "description": "Remove duplicate rows"})
    index = str(tmp_path / "i.skr")
    scope = build.resolve([str(tmp_path / "skills")])
    scope["disabled"] = set()
    build.build(scope, index)
    idx = store.load(index)
    same = ["remove the duplicate rows from this spreadsheet",
            "删除这个电子表格里的重复行",
            "このスプレッドシートの重複行を削除して",
            "이 스프레드시트에서 중복 행을 삭제해 줘",
            "quita las filas duplicadas de esta hoja de cálculo"]
    english = query.parse(idx, same[0])["words"]
    assert english == 7
    for text in same:
        n = query.parse(idx, text)["words"]
        assert english / 2 <= n <= english * 2, (text, n)
    # A one-word reply is still one word, in any script.
    for text in ("ok", "好的", "はい", "네", "好", "ok!"):
        assert query.parse(idx, text)["words"] == 1, text
    # One rule, in one place: the tokenizer's.
    from retriever.tokenize import word_count
    assert [word_count(t) for t in same] == [query.parse(idx, t)["words"] for t in same]
    # Runs of other letters inside han or kana count as words of their own.
    assert word_count("用python写一个脚本") == 5
    assert word_count("PDFのテキストを抽出") == 1 + 4
