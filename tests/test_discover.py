"""Which SKILL.md files become skills, and under which id (issue 2, item 2).

Every case builds a real tree in tmp_path and runs the real executable;
the ids are read back from the index file it wrote.
"""

import os

import pytest

from skillret_helpers import assert_clean, index_ids, json_results, make_skill, warning_lines


def fm(name, desc=None):
    return {"name": name, "description": desc or "Skill %s for discovery tests" % name}


def build_ids(cli, tmp_path, *args, env=None):
    """Run ``build --index <tmp> args...`` and return the indexed ids."""
    index = tmp_path / "idx" / ("index-%d.skr" % len(list((tmp_path).glob("idx/*.skr"))))
    proc = cli("build", "--index", index, *args, env=env)
    assert_clean(proc)
    return index_ids(index), proc


EXCLUDED = (".git", "node_modules", ".venv", "venv", ".hub", ".archive", ".curator_backups",
            "__pycache__", "site-packages", ".github")


def test_excluded_folders_are_never_walked(tmp_path, cli):
    root = tmp_path / "skills"
    make_skill(root, "tools/kept", fm("kept"))
    for i, ex in enumerate(EXCLUDED):
        make_skill(root, "%s/hidden%d" % (ex, i), fm("hidden%d" % i))
        # Also below a normal category and inside a skill.
        make_skill(root, "tools/%s/deep%d" % (ex, i), fm("deep%d" % i))
        make_skill(root, "tools/kept/%s/inner%d" % (ex, i), fm("inner%d" % i))
    ids, proc = build_ids(cli, tmp_path, "--root", root)
    assert ids == ["tools/kept"]
    assert "hidden" not in proc.stderr


SUPPORT = ("references", "templates", "assets", "scripts")


def test_support_folders_inside_a_skill_are_skipped_but_walked_elsewhere(tmp_path, cli):
    root = tmp_path / "skills"
    make_skill(root, "cat/skill", fm("skill"))
    for s in SUPPORT:
        # Inside a skill: example SKILL.md files in support folders are not skills.
        make_skill(root, "cat/skill/%s/example-%s" % (s, s), fm("example-" + s))
        # The same names outside any skill are ordinary folders.
        make_skill(root, "%s/top-%s" % (s, s), fm("top-" + s))
        make_skill(root, "cat/%s/mid-%s" % (s, s), fm("mid-" + s))
    # A non-support folder inside a skill is still walked.
    make_skill(root, "cat/skill/variants/nested", fm("nested"))
    ids, _ = build_ids(cli, tmp_path, "--root", root)
    expected = ["cat/skill", "cat/skill/variants/nested"]
    expected += ["%s/top-%s" % (s, s) for s in SUPPORT] + ["cat/%s/mid-%s" % (s, s) for s in SUPPORT]
    assert ids == sorted(expected)


def test_ids_are_folder_paths_relative_to_the_root(tmp_path, cli):
    root = tmp_path / "lib"
    make_skill(root, "a/b/c/deep-skill", fm("named-differently"))
    make_skill(root, "flat", fm("flat"))
    res = json_results(cli("--root", root, "--index", tmp_path / "i.skr", "--format", "json", "-k", "5",
                           "discovery tests"))
    by_id = {r["id"]: r for r in res}
    assert sorted(by_id) == ["a/b/c/deep-skill", "flat"]
    assert by_id["a/b/c/deep-skill"]["name"] == "named-differently"
    assert by_id["a/b/c/deep-skill"]["path"] == str(root / "a/b/c/deep-skill")


# -- disabled skills ---------------------------------------------------------

@pytest.fixture
def hermes(tmp_path):
    """A HERMES_HOME with three skills; returns (hermes_home, env)."""
    hh = tmp_path / "hermes"
    make_skill(hh / "skills", "cat/alpha", fm("alpha"))
    make_skill(hh / "skills", "cat/beta", fm("beta"))
    # Hermes hides a skill when either its name or its folder is disabled.
    make_skill(hh / "skills", "cat/gamma-folder", fm("gamma"))
    return hh, {"HERMES_HOME": hh}


@pytest.mark.parametrize("config, hidden", [
    ("skills:\n  disabled: [alpha]\n", ["alpha"]),
    ("skills:\n  disabled:\n    - alpha\n    - beta\n", ["alpha", "beta"]),
    ("skills:\n  disabled: alpha\n", ["alpha"]),
    ("skills:\n  disabled: '[\"alpha\", \"gamma\"]'\n", ["alpha", "gamma-folder"]),
    ("skills:\n  disabled: [gamma-folder]\n", ["gamma-folder"]),
    ("skills:\n  disabled: []\n", []),
    ("skills: {}\n", []),
    ("model: x\n", []),
    # A broken config is ignored (with a warning), never fatal.
    ("skills: [unclosed\n", []),
])
def test_disabled_skills_from_config(tmp_path, cli, hermes, config, hidden):
    hh, env = hermes
    (hh / "config.yaml").write_text(config)
    expected = sorted({"cat/alpha", "cat/beta", "cat/gamma-folder"} - {"cat/" + h for h in hidden})
    # The default roots ...
    ids, _ = build_ids(cli, tmp_path, env=env)
    assert ids == expected
    # ... and explicit roots while HERMES_HOME is set.
    ids, _ = build_ids(cli, tmp_path, "--root", hh / "skills", env=env)
    assert ids == expected


def test_invalid_config_is_reported_once(tmp_path, cli, hermes):
    hh, env = hermes
    (hh / "config.yaml").write_text("skills: [unclosed\n")
    _, proc = build_ids(cli, tmp_path, env=env)
    lines = [l for l in warning_lines(proc.stderr) if str(hh / "config.yaml") in l]
    assert len(lines) == 1


PLATFORM_CFG = "skills:\n  disabled: [alpha]\n  platform_disabled:\n    telegram: [beta]\n    discord: '[\"gamma\"]'\n"


@pytest.mark.parametrize("how, platform, hidden", [
    (None, None, ["alpha"]),
    ("env", "telegram", ["alpha", "beta"]),
    ("flag", "telegram", ["alpha", "beta"]),
    ("env", "discord", ["alpha", "gamma-folder"]),
    ("flag", "discord", ["alpha", "gamma-folder"]),
    ("flag", "cli", ["alpha"]),
])
def test_platform_disabled(tmp_path, cli, hermes, how, platform, hidden):
    hh, env = hermes
    (hh / "config.yaml").write_text(PLATFORM_CFG)
    args = ["--platform", platform] if how == "flag" else []
    if how == "env":
        env = dict(env, HERMES_PLATFORM=platform)
    expected = sorted({"cat/alpha", "cat/beta", "cat/gamma-folder"} - {"cat/" + h for h in hidden})
    ids, _ = build_ids(cli, tmp_path, *args, env=env)
    assert ids == expected
    # A query (default index location, built on demand) sees the same set.
    res = json_results(cli("--format", "json", "-k", "10", *args, "discovery tests", env=env))
    assert sorted(r["id"] for r in res) == expected


def test_build_then_query_share_the_platform_index(tmp_path, cli, hermes):
    """``HERMES_PLATFORM=x skill-retrieve build`` prepares the very index a
    later query under the same platform answers from (no rebuild)."""
    hh, env = hermes
    (hh / "config.yaml").write_text(PLATFORM_CFG)
    env = dict(env, HERMES_PLATFORM="telegram")
    proc = cli("build", env=env)
    assert_clean(proc)
    q = cli("--format", "json", "-k", "10", "discovery tests", env=env)
    assert sorted(r["id"] for r in json_results(q)) == ["cat/gamma-folder"]
    assert "rebuilt" not in q.stderr


def test_explicit_index_is_not_reused_across_platforms(tmp_path, cli, hermes):
    hh, env = hermes
    (hh / "config.yaml").write_text(PLATFORM_CFG)
    index = tmp_path / "shared.skr"

    def ids(platform):
        res = json_results(cli("--index", index, "--platform", platform, "--format", "json", "-k", "10",
                               "discovery tests", env=env))
        return sorted(r["id"] for r in res)

    assert ids("telegram") == ["cat/gamma-folder"]
    assert ids("discord") == ["cat/beta"]


def test_plain_root_build_ignores_an_unrelated_home_config(tmp_path, cli):
    """Without HERMES_HOME, an explicit --root is not filtered by ~/.hermes."""
    home_hermes = tmp_path / "home" / ".hermes"
    home_hermes.mkdir(parents=True)
    (home_hermes / "config.yaml").write_text("skills:\n  disabled: [alpha]\n")
    root = tmp_path / "mine"
    make_skill(root, "alpha", fm("alpha"))
    ids, _ = build_ids(cli, tmp_path, "--root", root)
    assert ids == ["alpha"]


# -- default roots and plugin prefixes ---------------------------------------

def test_default_roots_and_plugin_prefix(tmp_path, cli):
    home = tmp_path / "home"
    hh = tmp_path / "hermes-home"
    project = tmp_path / "project"
    make_skill(hh / "skills", "devops/k8s-certs", fm("k8s-certs", "Rotate kubernetes certificates"))
    make_skill(hh / "plugins/myplug/skills", "pdf-extract", fm("pdf-extract", "Extract text from pdf"))
    make_skill(hh / "plugins/myplug/skills", "group/nested", fm("nested", "Nested plugin skill"))
    make_skill(hh / "plugins/other/skills", "notes", fm("notes", "Take meeting notes"))
    (hh / "plugins/noskills").mkdir(parents=True)
    make_skill(home / ".claude/skills", "claude-one", fm("claude-one", "Claude personal skill"))
    make_skill(project / ".claude/skills", "claude-proj", fm("claude-proj", "Claude project skill"))
    make_skill(home / ".agents/skills", "agents-one", fm("agents-one", "Agents personal skill"))
    make_skill(project / ".agents/skills", "agents-proj", fm("agents-proj", "Agents project skill"))
    env = {"HERMES_HOME": hh, "CLAUDE_PROJECT_DIR": project}
    ids, _ = build_ids(cli, tmp_path, env=env)
    assert ids == sorted(["devops/k8s-certs", "myplug:pdf-extract", "myplug:group/nested", "other:notes",
                          "claude-one", "claude-proj", "agents-one"])
    # Run from the project folder, its .agents/skills joins too.
    proc = cli("build", "--index", tmp_path / "p.skr", env=env, cwd=project)
    assert_clean(proc)
    assert "agents-proj" in index_ids(tmp_path / "p.skr")
    # The query path answers from the default roots with the prefixed id.
    res = json_results(cli("--format", "json", "extract the text from my pdf", env=env))
    assert res[0]["id"] == "myplug:pdf-extract"
    assert res[0]["path"] == str(hh / "plugins/myplug/skills/pdf-extract")


def test_hermes_home_defaults_to_dot_hermes(tmp_path, cli):
    home = tmp_path / "home"
    make_skill(home / ".hermes/skills", "cat/local", fm("local"))
    make_skill(home / ".hermes/plugins/plug/skills", "bundled", fm("bundled"))
    (home / ".hermes/config.yaml").write_text("skills:\n  disabled: [local]\n")
    ids, _ = build_ids(cli, tmp_path)
    assert ids == ["plug:bundled"]


def test_external_dirs_from_config(tmp_path, cli):
    hh = tmp_path / "hh"
    ext = tmp_path / "ext-skills"
    make_skill(hh / "skills", "local", fm("local"))
    make_skill(ext, "external", fm("external"))
    make_skill(hh / "relative-ext", "rel", fm("rel"))
    (hh / "config.yaml").write_text("skills:\n  external_dirs:\n    - %s\n    - relative-ext\n" % ext)
    ids, _ = build_ids(cli, tmp_path, env={"HERMES_HOME": hh})
    assert ids == ["external", "local", "rel"]


def test_no_skill_folders_at_all(tmp_path, cli):
    """A fresh machine: nothing to index is not an error."""
    proc = cli("build", "--index", tmp_path / "i.skr")
    assert_clean(proc)
    assert proc.stdout.endswith(": no skills found; no skill folder exists (see above)\n")
    assert "no skill folders found (looked in ~/.hermes/skills" in proc.stderr
    q = cli("--index", tmp_path / "i.skr", "anything at all")
    assert_clean(q)
    assert q.stdout == ""


# -- symlinks and shadowing --------------------------------------------------

def test_symlink_loops_do_not_hang_and_each_skill_appears_once(tmp_path, cli):
    root = tmp_path / "skills"
    make_skill(root, "cat/one", fm("one"))
    make_skill(root, "cat/two", fm("two"))
    os.symlink(root, root / "cat" / "loop-to-root")             # ancestor loop
    os.symlink("..", root / "cat" / "one" / "up")               # relative loop inside a skill
    os.symlink(root / "cat", root / "cat-again")                # second path to the same folder
    os.symlink(root / "cat" / "two", root / "two-link")          # second path to one skill
    os.symlink(tmp_path / "missing", root / "dangling")         # broken link
    # A linked folder from outside the root is followed.
    make_skill(tmp_path / "elsewhere", "linked", fm("linked"))
    os.symlink(tmp_path / "elsewhere" / "linked", root / "linked")
    # (cli's timeout turns a hang into a failure.)
    ids, proc = build_ids(cli, tmp_path, "--root", root)
    # Each skill once, under whichever path the walk reached it first
    # (cat/two, cat-again/two or two-link).
    assert len(ids) == 3, ids
    assert "linked" in ids
    assert sum(i.endswith("/one") for i in ids) == 1
    assert sum(i.endswith("/two") or i == "two-link" for i in ids) == 1
    assert "shadowed" not in proc.stderr


def test_two_roots_with_the_same_name_first_root_wins(tmp_path, cli):
    first = tmp_path / "first"
    second = tmp_path / "second"
    make_skill(first, "a/dup", fm("dup", "Deploy from the first root"))
    make_skill(second, "b/dup-folder", fm("dup", "Deploy from the second root"))
    make_skill(second, "b/unique", fm("unique", "Only in the second root"))
    index = tmp_path / "i.skr"
    proc = cli("build", "--root", first, "--root", second, "--index", index)
    assert_clean(proc)
    assert index_ids(index) == ["a/dup", "b/unique"]
    shadow = [l for l in warning_lines(proc.stderr) if str(second / "b/dup-folder/SKILL.md") in l]
    assert len(shadow) == 1 and "shadowed" in shadow[0]
    assert str(first / "a/dup") in shadow[0]
    assert "1 shadowed" in proc.stdout
    res = json_results(cli("--root", first, "--root", second, "--index", index, "--format", "json",
                           "deploy root"))
    assert [r["path"] for r in res if r["name"] == "dup"] == [str(first / "a/dup")]
    # Reversing the order reverses the winner.
    proc = cli("build", "--root", second, "--root", first, "--index", index)
    assert_clean(proc)
    assert index_ids(index) == ["b/dup-folder", "b/unique"]


def test_hermes_local_skill_shadows_claude_skill_of_the_same_name(tmp_path, cli):
    hh = tmp_path / "hh"
    make_skill(hh / "skills", "x/shared", fm("shared", "Hermes copy"))
    make_skill(tmp_path / "home/.claude/skills", "shared", fm("shared", "Claude copy"))
    ids, proc = build_ids(cli, tmp_path, env={"HERMES_HOME": hh})
    assert ids == ["x/shared"]
    assert any("shadowed" in l and ".claude/skills/shared/SKILL.md" in l for l in warning_lines(proc.stderr))


def test_the_same_root_twice_is_walked_once(tmp_path, cli):
    root = tmp_path / "skills"
    make_skill(root, "only", fm("only"))
    os.symlink(root, tmp_path / "alias")
    ids, proc = build_ids(cli, tmp_path, "--root", root, "--root", tmp_path / "alias", "--root", str(root) + "/")
    assert ids == ["only"]
    assert "shadowed" not in proc.stderr


def test_setting_hermes_home_gives_explicit_roots_their_own_index(tmp_path, cli):
    """Issue 10: the cache key says whether Hermes' config applied, so the
    index built before HERMES_HOME was set is not reused after."""
    hh = tmp_path / "hh"
    hh.mkdir()
    (hh / "config.yaml").write_text("skills:\n  disabled: [alpha]\n")
    root = tmp_path / "mine"
    make_skill(root, "alpha", fm("alpha", "Alpha discovery skill"))
    make_skill(root, "beta", fm("beta", "Beta discovery skill"))

    def names(**env):
        proc = cli("--root", root, "--format", "json", "-k", "10", "discovery skill", env=env)
        assert proc.returncode == 0, proc.stderr
        return sorted(r["name"] for r in json_results(proc))

    assert names() == ["alpha", "beta"]
    assert names(HERMES_HOME=hh) == ["beta"]
    assert names() == ["alpha", "beta"]


def test_hermes_scope_holds_enabled_plugins_skills_by_their_hermes_name(tmp_path, cli):
    """The folders a Hermes session loads skills from: local, external and
    the skills of enabled plugins, named ``<manifest name>:<skill>``."""
    hh = tmp_path / "hh"
    make_skill(hh / "skills", "devops/local", fm("local"))
    make_skill(hh / "plugins/my-plug/skills", "ftp-mirror", fm("mirror-skill", "Mirror a folder over ftp"))
    (hh / "plugins/my-plug/plugin.yaml").write_text("name: myplug\nversion: 1\n")
    make_skill(hh / "plugins/off/skills", "notes", fm("notes"))
    make_skill(hh / "plugins/denied/skills", "denied-skill", fm("denied-skill"))
    make_skill(hh / "plugins/memory/skills", "mem", fm("mem"))
    (hh / "plugins/memory/plugin.yaml").write_text("name: memory\nkind: exclusive\n")
    (hh / "config.yaml").write_text("plugins:\n  enabled: [myplug, denied, memory]\n  disabled: [denied]\n")
    from retriever import build
    import os
    old = dict(os.environ)
    try:
        os.environ.update(HERMES_HOME=str(hh), HOME=str(tmp_path / "home"))
        scope = build.resolve(None, only_hermes=True)
        everything = build.resolve(None)
    finally:
        os.environ.clear()
        os.environ.update(old)
    assert [(r["source"], r["prefix"]) for r in scope["roots"]] == [("hermes", ""), ("hermes-plugin", "myplug:")]
    assert {r["prefix"] for r in everything["roots"]} == {"", "myplug:", "off:", "denied:", "memory:"}
    from retriever import skills
    recs, _, _ = skills.collect(scope["roots"])
    assert sorted((r["id"], r["name"]) for r in recs) == [("devops/local", "local"),
                                                          ("myplug:ftp-mirror", "myplug:ftp-mirror")]
