"""Frontmatter parsing never aborts a build (issue 2, item 3).

One library holds every kind of broken SKILL.md seen in the wild.  A single
``skill-retrieve build`` must index all of them, print one warning line per
problem naming the file and the reason, and never crash.
"""

import pathlib

import pytest

from retriever import frontmatter
from skillret_helpers import (assert_clean, base_env, index_docs, json_results, make_skill,
                              run_cli, warning_lines)

# folder -> (file bytes, expected name, text the description must contain,
#            keyword of the reason or None when the file must not be warned about)
CASES = {
    "clean": (b"---\nname: clean-skill\ndescription: A perfectly ordinary skill\n---\nBody.\n",
              "clean-skill", "perfectly ordinary", None),
    "bom": (b"\xef\xbb\xbf---\nname: bom-skill\ndescription: Starts with a byte order mark\n---\nbody\n",
            "bom-skill", "byte order mark", None),
    "crlf": (b"---\r\nname: crlf-skill\r\ndescription: Written with Windows line ends\r\n---\r\nbody\r\n",
             "crlf-skill", "Windows line ends", None),
    "bom-crlf": (b"\xef\xbb\xbf---\r\nname: bom-crlf-skill\r\ndescription: Both a BOM and CRLF\r\n---\r\n",
                 "bom-crlf-skill", "Both a BOM and CRLF", None),
    "cr-only": (b"---\rname: old-mac\rdescription: Classic Mac line ends\r---\rbody\r",
                "old-mac", "Classic Mac line ends", None),
    "dots-close": (b"---\nname: dots-close\ndescription: Closed with YAML dots\n...\nbody\n",
                   "dots-close", "Closed with YAML dots", None),
    "quoted-colon": (b'---\nname: quoted-colon\ndescription: "Use when: the colon is quoted"\n---\n',
                     "quoted-colon", "Use when: the colon is quoted", None),
    "block-scalar": (b"---\nname: block\ndescription: |\n  Spans\n  several lines\n---\n",
                     "block", "Spans several lines", None),
    "no-fence": (b"# Heading\n\nThe first paragraph explains the fenceless skill.\n\nMore.\n",
                 "no-fence", "first paragraph explains the fenceless skill", "frontmatter"),
    "unclosed": (b"---\nname: unclosed-skill\ndescription: the fence is never closed\n\nBody text.\n",
                 "unclosed", "never closed", "unclosed"),
    "invalid-yaml": (b"---\nname: bad-yaml\ndescription: Use this when: the build breaks badly\n"
                     b"tags: [ci, build]\n---\nbody\n",
                     "bad-yaml", "Use this when: the build breaks badly", "yaml"),
    "list-doc": (b"---\n- just\n- a list\n---\nThe body paragraph of a list document.\n",
                 "list-doc", "body paragraph of a list document", "mapping"),
    "scalar-doc": (b"---\njust a sentence\n---\nScalar document body.\n",
                   "scalar-doc", "Scalar document body", "mapping"),
    "int-name": (b"---\nname: 123\ndescription: A skill whose name is a number\n---\n",
                 "123", "name is a number", "name"),
    "bool-name": (b"---\nname: true\ndescription: A skill whose name is a boolean\n---\n",
                  "True", "name is a boolean", "name"),
    "list-desc": (b"---\nname: list-desc\ndescription:\n  - first part\n  - second part\n---\n",
                  "list-desc", "first part second part", "description"),
    "int-desc": (b"---\nname: int-desc\ndescription: 42\n---\n", "int-desc", "42", "description"),
    "no-name": (b"---\ndescription: This skill has no name field\n---\n",
                "no-name", "no name field", "name"),
    "null-name": (b"---\nname:\ndescription: This skill has an empty name\n---\n",
                  "null-name", "empty name", "name"),
    "no-desc": (b"---\nname: no-desc\n---\n# Title\n\nThe first paragraph\nspans two lines.\n\nSecond.\n",
                "no-desc", "The first paragraph spans two lines.", "description"),
    "empty-file": (b"", "empty-file", "", "frontmatter"),
    "latin1": (b"---\nname: latin1\ndescription: caf\xe9 menu translator\n---\n",
               "latin1", "menu translator", "utf-8"),
}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Build once over every case; returns (proc, {folder: doc}, root)."""
    tmp = tmp_path_factory.mktemp("frontmatter")
    root = tmp / "skills"
    for folder, (raw, *_rest) in CASES.items():
        make_skill(root, "cat/" + folder, raw=raw)
    env = base_env(tmp)
    index = tmp / "index.skr"
    proc = run_cli(["build", "--root", root, "--index", index], env)
    docs = {d[0].split("/", 1)[1]: d for d in index_docs(index)} if proc.returncode == 0 else {}
    return proc, docs, root, env, index


def test_build_survives_every_broken_file(built):
    proc, docs, *_ = built
    assert_clean(proc)
    assert sorted(docs) == sorted(CASES)
    assert "built %s" % built[4] in proc.stdout
    assert " %d skills" % len(CASES) in proc.stdout


@pytest.mark.parametrize("folder", sorted(CASES))
def test_name_and_description_are_recovered(built, folder):
    _, docs, *_ = built
    _raw, name, desc_part, _reason = CASES[folder]
    sid, got_name, path, desc, _vis = docs[folder]
    assert got_name == name
    assert desc_part in desc
    assert "\n" not in desc and "\r" not in desc
    assert path.endswith("/cat/" + folder)


@pytest.mark.parametrize("folder", sorted(CASES))
def test_each_problem_is_one_warning_naming_the_file(built, folder):
    proc, _, root, *_ = built
    reason = CASES[folder][3]
    md = str(root / "cat" / folder / "SKILL.md")
    mine = [l for l in warning_lines(proc.stderr) if md + ":" in l]
    if reason is None:
        assert mine == [], "a well-formed file must not be warned about"
        return
    assert mine, "no warning names %s:\n%s" % (md, proc.stderr)
    assert any(reason in l.split(md + ":", 1)[1].lower() for l in mine), mine
    # One line per problem: no line repeats.
    assert len(mine) == len(set(mine))


@pytest.mark.parametrize("folder", ["invalid-yaml", "int-name", "list-desc", "no-name", "no-desc",
                                    "no-fence", "unclosed", "latin1"])
def test_single_problem_files_get_exactly_one_warning(built, folder):
    proc, _, root, *_ = built
    md = str(root / "cat" / folder / "SKILL.md")
    assert len([l for l in warning_lines(proc.stderr) if md + ":" in l]) == 1, proc.stderr


def test_every_stderr_line_is_a_warning(built):
    proc, *_ = built
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert lines and lines == warning_lines(proc.stderr)


def test_lenient_fallback_keeps_the_skill_findable(built):
    """An unquoted ': ' in a description is the usual YAML error; the
    description read by the fallback still answers queries, tags included."""
    _, _, root, env, index = built
    res = json_results(run_cli(["--root", root, "--index", index, "--format", "json",
                                "the build breaks badly"], env))
    assert res and res[0]["id"] == "cat/invalid-yaml"
    assert res[0]["description"] == "Use this when: the build breaks badly"


def test_quiet_build_lists_no_problem_files(built, tmp_path):
    _, _, root, env, _ = built
    proc = run_cli(["build", "--quiet", "--root", root, "--index", tmp_path / "q.skr"], env)
    assert_clean(proc)
    assert str(root) not in proc.stderr


@pytest.mark.parametrize("text, fm, body", [
    ("---\na: 1\n---\nbody", "a: 1\n", "body"),
    ("\ufeff---\r\na: 1\r\n---\r\nbody\r\n", "a: 1\n", "body\n"),
    ("\n\n---\na: 1\n...\nbody", "a: 1\n", "body"),
    ("---\na: 1\n---", "a: 1\n", ""),
    # A "---" inside a value is not a fence; only a whole line is.
    ("---\na: x --- y\n---\nb", "a: x --- y\n", "b"),
])
def test_split_frontmatter(text, fm, body):
    got_fm, got_body, problem = frontmatter.split_frontmatter(text)
    assert (got_fm, got_body, problem) == (fm, body, None)


def test_lenient_parse_reads_top_level_key_value_lines():
    data = frontmatter.lenient_parse(
        "name: x\ndescription: Use when: it breaks\n  and continues here\ntags:\n  - a\n  - b\n# comment\n")
    assert data["name"] == "x"
    assert data["description"] == "Use when: it breaks and continues here"
    assert data["tags"] == ["a", "b"]


# -- the unchecked fast path never lets a bomb through ---------------------------

def _outcome(text, always_check):
    try:
        return "ok", frontmatter.load_yaml(text, always_check=always_check)
    except frontmatter.Rejected as exc:
        return "rejected", str(exc).split(" (")[0]
    except Exception as exc:  # invalid YAML: the caller falls back to key: value lines
        return "invalid", type(exc).__name__


def _nested(depth):
    # Each way YAML nests, `depth` levels deep, in a few hundred characters.
    return {
        "flow": "tags: " + "[" * depth + "x" + "]" * depth,
        "flow-pairs": "tags: " + "[?" * depth + "x" + "]" * depth,
        "flow-colons": "tags: " + "[a: " * depth + "x" + "]" * depth,
        "block-seq": "tags:\n" + "- " * depth + "x",
        "block-map": "\n".join(" " * i + "k%d:" % i for i in range(depth)) + " x",
        "explicit-keys": "? " * depth + "x",
    }


@pytest.mark.parametrize("depth", [1, 20, 30, 31, 32, 33, 62, 63, 64, 65, 66, 70, 130])
def test_a_frontmatter_parsed_without_the_node_count_still_keeps_the_bounds(depth):
    # Nearly every real frontmatter skips the node count and the timer
    # (load_yaml's within_bounds).  Whatever the nesting, the result must
    # be the counted parse's: the same value, or the same rejection.
    for kind, text in _nested(depth).items():
        fast, checked = _outcome(text, False), _outcome(text, True)
        assert fast == checked, (kind, depth, fast, checked)
        if checked[0] == "rejected":
            assert not frontmatter.within_bounds(text), (kind, depth)


# Flow openers and the levels each adds: ``[a: `` and ``[? `` open a
# sequence holding a one-pair mapping.  ``?`` makes the next collection a
# key, which YAML composes (and bounds) but cannot construct: "invalid".
_OPENS = {"[": ("]", 1), "{k: ": ("}", 1), "[a: ": ("]", 2), "[? ": ("]", 2), "{? ": ("}", 1)}
_VALUE_OPENS = ("[", "{k: ", "[a: ")


def _random_nest(rng, levels, opens):
    # Exactly ``levels`` collections from the root down (block levels,
    # then flow levels drawn from ``opens``) and a scalar below the last,
    # at depth ``levels``: valid YAML that a miscounted opener would let
    # through.
    block = rng.randint(0, min(40, levels - 1))
    lines, indent = [], 0
    for i in range(block):
        lines.append(" " * indent + ("k%d:" % i if rng.random() < 0.5 else "-"))
        indent += 2
    left = levels - (block or 1)  # without block lines, "tags: " opens the root mapping
    flow = []
    while left > 0:
        o = rng.choice([o for o in opens if _OPENS[o][1] <= left])
        flow.append(o)
        left -= _OPENS[o][1]
    inner = "".join(flow) + rng.choice(["x", "'q'", "1"]) + "".join(_OPENS[o][0] for o in reversed(flow))
    return "\n".join(lines + [" " * indent + inner]) if lines else "tags: " + inner


@pytest.mark.parametrize("opens", [_VALUE_OPENS, tuple(_OPENS)], ids=["values", "with-keys"])
def test_random_nestings_parse_the_same_with_or_without_the_count(opens):
    # Random shapes at every nesting from well under the bound to well
    # over it, the same number on each side whatever the random module
    # draws: the unchecked parse must give the counted parse's outcome,
    # and that outcome is decided by the depth alone.
    import random
    rng = random.Random(20261203)
    bound = frontmatter.MAX_YAML_DEPTH
    for levels in range(bound - 12, bound + 13):
        for _ in range(24):
            text = _random_nest(rng, levels, opens)
            fast, checked = _outcome(text, False), _outcome(text, True)
            assert fast == checked, (text, fast, checked)
            if levels > bound:
                assert checked[0] == "rejected", (levels, text, checked)
                assert not frontmatter.within_bounds(text), text
            elif opens == _VALUE_OPENS:
                assert checked[0] == "ok", (levels, text, checked)
            else:
                # A collection used as a key is composed but cannot be
                # constructed: such YAML is invalid, never rejected.
                assert checked[0] != "rejected", (levels, text, checked)


CORPORA = pathlib.Path(__file__).resolve().parents[2] / "shared" / "corpora"


@pytest.mark.skipif(not CORPORA.is_dir(), reason="../shared/corpora is not present")
def test_every_real_frontmatter_in_bounds_parses_as_the_counted_parser_does():
    seen = 0
    for md in sorted(CORPORA.rglob("SKILL.md"))[::7]:
        fm, _, _ = frontmatter.split_frontmatter(md.read_text("utf-8", "replace"))
        if fm and fm.strip() and frontmatter.within_bounds(fm):
            seen += 1
            assert _outcome(fm, False) == _outcome(fm, True), md
    assert seen > 300
