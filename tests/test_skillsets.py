"""Each runner's own skill set: Claude Code's names and hidden skills, one
cache file per set, ``query --runner`` and ``doctor --runner``.

Real skill trees in tmp_path, the real executable; the folders and naming
rules asserted here are the ones the pinned CLIs were seen to use
(retriever/runners/skillsets.py).
"""

import json
import os
import re

import pytest

from skillret_helpers import assert_clean, make_skill
from test_hooks import hook, parse, payload  # noqa: F401  (hook is a fixture)

from retriever import build, skills as skills_mod
from retriever.runners import skillsets


def _claude_tree(tmp_path):
    """A repo with a project skill, a parent-folder skill, a plugin skill
    and a disable-model-invocation skill, each with a frontmatter name that
    differs from its folder (Claude Code uses the folder)."""
    home = tmp_path / "home"
    repo = tmp_path / "repo"
    sub = repo / "sub"
    (repo / ".git").mkdir(parents=True)
    sub.mkdir()
    make_skill(sub / ".claude" / "skills", "zebra-project", {"name": "fm-project",
               "description": "Groom zebra manes in the project."})
    make_skill(repo / ".claude" / "skills", "zebra-parent", {"name": "fm-parent",
               "description": "Feed zebra herds from the parent folder."})
    make_skill(sub / ".claude" / "skills", "zebra-manual", {"name": "fm-manual",
               "description": "Paint zebra stripes by hand.", "disable-model-invocation": True})
    plug = home / ".claude" / "plugins" / "cache" / "mk" / "zoo" / "1.0.0"
    make_skill(plug / "skills", "zebra-plugin", {"name": "fm-plugin",
               "description": "Count zebra stripes for the plugin."})
    (plug / ".claude-plugin").mkdir(parents=True)
    (plug / ".claude-plugin" / "plugin.json").write_text(json.dumps({"name": "zoo", "version": "1.0.0"}))
    (home / ".claude" / "plugins" / "installed_plugins.json").write_text(json.dumps(
        {"version": 2, "plugins": {"zoo@mk": [{"scope": "user", "installPath": str(plug)}]}}))
    (home / ".claude" / "settings.json").write_text(json.dumps({"enabledPlugins": {"zoo@mk": True}}))
    return home, sub


def _names(block):
    return set(re.findall(r"- \*\*([^*]+)\*\*", block))


def test_claude_code_names_skills_by_folder_and_hides_manual_ones(hook, tmp_path):
    _, sub = _claude_tree(tmp_path)
    doc = parse(hook("claude-code", payload("claude-code", "zebra", cwd=str(sub)), "-k", "20"))
    block = doc["hookSpecificOutput"]["additionalContext"]
    assert _names(block) == {"zebra-project", "zebra-parent", "zoo:zebra-plugin"}
    assert "fm-" not in block and "manual" not in block


def test_other_runners_keep_frontmatter_names_and_manual_skills(hook, tmp_path):
    # Codex 0.171.0 lists a disable-model-invocation skill under its
    # frontmatter name (seen in its request): only Claude Code's rules differ.
    proj = tmp_path / "proj"
    make_skill(proj / ".agents" / "skills", "zebra-dir", {"name": "zebra-fm",
               "description": "Groom zebra manes.", "disable-model-invocation": True})
    doc = parse(hook("codex", payload("codex", "zebra", cwd=str(proj))))
    assert _names(doc["hookSpecificOutput"]["additionalContext"]) == {"zebra-fm"}


def test_claude_code_when_to_use_and_first_paragraph_count(hook, tmp_path):
    proj = tmp_path / "proj"
    # no description: the first paragraph stands in; when_to_use is searched
    make_skill(proj / ".claude" / "skills", "okapi", "when_to_use: when a giraffe cousin shows up",
               body="Track okapi sightings in the rainforest.\n\n# Okapi\n")
    make_skill(proj / ".claude" / "skills", "other", {"description": "Unrelated gardening advice."})
    make_skill(proj / ".claude" / "skills", "titled", raw="# Tapir tracking\n\nFollow tapir trails.\n")
    for word in ("giraffe", "sightings"):
        block = parse(hook("claude-code", payload("claude-code", word, cwd=str(proj))))[
            "hookSpecificOutput"]["additionalContext"]
        assert _names(block) == {"okapi"}
    assert "Track okapi sightings" in block
    # a heading counts as the first paragraph, as Claude Code 2.1.197 and
    # 2.1.332 list it ("# Title" -> "Title")
    block = parse(hook("claude-code", payload("claude-code", "tapir", cwd=str(proj))))[
        "hookSpecificOutput"]["additionalContext"]
    assert "- **titled** (titled): Tapir tracking" in block


@pytest.mark.parametrize("runner,folder,loaded", [
    # what each real CLI listed (Codex 0.171.0, Gemini CLI 0.61.0, Cline 3.0.65)
    ("codex", ".agents/skills", {"full", "no-name"}),
    ("gemini", ".gemini/skills", {"full"}),
    ("cline", ".cline/skills", {"full", "no-desc"}),
    ("claude-code", ".claude/skills", {"full", "no-name", "no-desc"})])
def test_skills_a_runner_does_not_load_are_left_out(runner, folder, loaded, hook, tmp_path):
    proj = tmp_path / "proj"
    root = proj / folder
    make_skill(root, "full", raw="---\nname: full\ndescription: Zebra care.\n---\n")
    make_skill(root, "no-name", raw="---\ndescription: Zebra feeding.\n---\n")
    make_skill(root, "no-desc", raw="---\nname: no-desc\n---\nZebra grooming.\n")
    doc = parse(hook(runner, payload(runner, "zebra care feeding grooming", cwd=str(proj)), "-k", "20"))
    block = json.dumps(doc)
    assert {n for n in ("full", "no-name", "no-desc") if "**%s**" % n in block} == loaded


def test_disabled_plugin_and_foreign_project_install_are_left_out(tmp_path, monkeypatch):
    home, sub = _claude_tree(tmp_path)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("CLAUDE_PROJECT_DIR", raising=False)
    plugin_roots = [r for r in skillsets.claude_code({"cwd": str(sub)}) if r["prefix"]]
    assert [r["prefix"] for r in plugin_roots] == ["zoo:"]
    # a project setting turns the plugin off
    (sub / ".claude").mkdir(exist_ok=True)
    (sub / ".claude" / "settings.json").write_text(json.dumps({"enabledPlugins": {"zoo@mk": False}}))
    assert not [r for r in skillsets.claude_code({"cwd": str(sub)}) if r["prefix"]]
    (sub / ".claude" / "settings.json").unlink()
    # a project-scoped install counts only inside that project
    data = json.loads((home / ".claude" / "plugins" / "installed_plugins.json").read_text())
    data["plugins"]["zoo@mk"][0]["projectPath"] = str(tmp_path / "elsewhere")
    (home / ".claude" / "plugins" / "installed_plugins.json").write_text(json.dumps(data))
    assert not [r for r in skillsets.claude_code({"cwd": str(sub)}) if r["prefix"]]


def test_collect_applies_a_roots_rules(tmp_path):
    root = tmp_path / "skills"
    make_skill(root, "dir-name", {"name": "fm-name", "description": "A."})
    make_skill(root, "manual", "name: manual\ndescription: B.\ndisable-model-invocation: 'true'")
    plain = {"path": str(root), "source": "root", "prefix": ""}
    recs, _, counts = skills_mod.collect([plain])
    assert sorted(r["name"] for r in recs) == ["fm-name", "manual"]
    ruled = dict(plain, prefix="p:", naming="folder", hide_manual=True)
    recs, _, counts = skills_mod.collect([ruled])
    assert [r["name"] for r in recs] == ["p:dir-name"]
    assert counts[str(root)]["hidden"] == 1


def test_rules_are_part_of_the_index_identity(tmp_path):
    root = tmp_path / "skills"
    make_skill(root, "dir-name", {"name": "fm-name", "description": "A."})
    plain = {"path": str(root), "source": "root", "prefix": ""}
    ruled = dict(plain, naming="folder", hide_manual=True)
    # a plain folder keys as before (existing caches stay valid) ...
    assert skillsets.locate.spec_key([str(root)], None) == skillsets.locate.spec_key([plain], None)
    # ... a skill set with rules gets its own cache file and signature
    assert skillsets.locate.spec_key([ruled], None) != skillsets.locate.spec_key([plain], None)
    s_plain, s_ruled = build.resolve([plain]), build.resolve([ruled])
    assert build.signature(s_plain) != build.signature(s_ruled)
    assert s_ruled["roots"][0]["naming"] == "folder"


def test_one_cache_file_per_skill_set(hook, tmp_path, cli_env):
    # The same folder through Claude Code (folder names) and Codex
    # (frontmatter names): two sets, two files, neither rebuilt by the other.
    proj = tmp_path / "proj"
    make_skill(proj / ".claude" / "skills", "zebra-dir", {"name": "zebra-fm", "description": "Zebra care."})
    (proj / ".agents").mkdir()
    (proj / ".agents" / "skills").symlink_to(proj / ".claude" / "skills")
    cache = os.path.join(cli_env["XDG_CACHE_HOME"], "skill-retrieval")
    for _ in range(2):
        a = parse(hook("claude-code", payload("claude-code", "zebra", cwd=str(proj))))
        b = parse(hook("codex", payload("codex", "zebra", cwd=str(proj))))
        assert _names(a["hookSpecificOutput"]["additionalContext"]) == {"zebra-dir"}
        assert _names(b["hookSpecificOutput"]["additionalContext"]) == {"zebra-fm"}
    assert len([f for f in os.listdir(cache) if f.endswith(".skr")]) == 2
    log = open(os.path.join(cache, "skill-retrieval.log")).read()
    assert log.count("built index") == 2


def test_query_runner_ranks_the_runners_set(cli, tmp_path):
    _, sub = _claude_tree(tmp_path)
    proc = cli("query", "--runner", "claude-code", "--format", "json", "-k", "20", "zebra", cwd=sub)
    assert_clean(proc)
    names = {r["name"] for r in json.loads(proc.stdout)["results"]}
    assert names == {"zebra-project", "zebra-parent", "zoo:zebra-plugin"}
    # the fast path and argparse agree; an unknown runner is a usage error
    proc = cli("--runner", "claude-code", "zebra", cwd=sub)
    assert_clean(proc)
    assert "zoo:zebra-plugin" in proc.stdout
    proc = cli("query", "--runner", "nope", "zebra", cwd=sub)
    assert proc.returncode == 2 and "unknown runner" in proc.stderr and "Traceback" not in proc.stderr


def test_doctor_runner_shows_where_each_folder_came_from(cli, tmp_path):
    _, sub = _claude_tree(tmp_path)
    proc = cli("doctor", "--runner", "claude-code", "--format", "json", "--no-probe", cwd=sub)
    assert "Traceback" not in proc.stderr
    report = json.loads(proc.stdout)
    sources = {r["path"]: r["source"] for r in report["roots"]}
    assert sources[str(sub / ".claude" / "skills")] == "claude-code project"
    assert sources[str(tmp_path / "repo" / ".claude" / "skills")] == "claude-code project"
    plugin = [s for p, s in sources.items() if p.endswith("/zoo/1.0.0/skills")]
    assert plugin == ["claude-code plugin zoo@mk"]


@pytest.mark.parametrize("runner", ["claude-code", "codex", "gemini", "cline"])
def test_skill_set_lists_existing_folders_only(runner, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    for var in ("CLAUDE_CONFIG_DIR", "CLAUDE_PROJECT_DIR", "CODEX_HOME", "GEMINI_PROJECT_DIR", "CLINE_DIR"):
        monkeypatch.delenv(var, raising=False)
    assert skillsets.skill_set(runner, {"cwd": str(tmp_path), "workspaceRoots": [str(tmp_path)]}) == []
    assert skillsets.skill_set("hermes", {}) == []


def test_first_build_works_without_pyyaml(tmp_path, cli_env):
    # The Claude Code plugin runs under the system python3, where PyYAML
    # may be missing: the hook's first index build must still work.
    import subprocess
    import sys
    venv = tmp_path / "no-yaml"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python3"
    assert subprocess.run([str(py), "-c", "import yaml"], capture_output=True).returncode != 0
    home = tmp_path / "home"
    make_skill(home / ".claude" / "skills", "zebra-care",
               raw='---\nname: fm\ndescription: "Zebra: care and feeding"\n'
                   'when_to_use:\n  - feeding zebras\ndisable-model-invocation: false\n---\nBody.\n')
    make_skill(home / ".claude" / "skills", "zebra-manual",
               raw="---\ndescription: Zebra feeding by hand.\ndisable-model-invocation: true\n---\n")
    from skillret_helpers import run_cli
    env = dict(cli_env, SKILL_RETRIEVAL_PYTHON=str(py))
    proc = run_cli(["hook", "claude-code"], env, input=json.dumps(payload("claude-code", "zebra feeding")))
    block = parse(proc)["hookSpecificOutput"]["additionalContext"]
    assert _names(block) == {"zebra-care"}
    assert "Zebra: care and feeding" in block


@pytest.mark.parametrize("runner,folder,nested_seen", [
    ("claude-code", ".claude/skills", False), ("gemini", ".gemini/skills", False),
    ("cline", ".cline/skills", False), ("codex", ".agents/skills", True)])
def test_nested_skills_only_where_the_runner_looks(runner, folder, nested_seen, hook, tmp_path):
    # Claude Code, Gemini CLI and Cline list <folder>/<skill>/SKILL.md only
    # (seen with the real CLIs); Codex walks the whole tree.
    proj = tmp_path / "proj"
    make_skill(proj / folder, "zebra-top", {"name": "zebra-top", "description": "Zebra grooming."})
    make_skill(proj / folder, "group/zebra-deep", {"name": "zebra-deep", "description": "Zebra feeding."})
    doc = parse(hook(runner, payload(runner, "zebra grooming feeding", cwd=str(proj)), "-k", "20"))
    text = json.dumps(doc)
    assert "zebra-top" in text
    assert ("zebra-deep" in text) == nested_seen


def test_doctor_fix_for_a_runner_sets_index_keeps_its_rules(cli, tmp_path):
    # The fix doctor prints must rebuild the index the hook opens: a plain
    # `build --root ...` would write Claude Code's index without its names.
    _, sub = _claude_tree(tmp_path)
    assert cli("install", "claude-code").returncode == 0
    report = json.loads(cli("doctor", "--runner", "claude-code", "--format", "json", "--no-probe",
                            cwd=sub).stdout)
    hook_index = [i for i in report["indexes"] if "claude-code" in i["used_by"]]
    assert hook_index
    fixes = [f["fix"] for f in report["findings"] if hook_index[0]["path"] in f["what"]]
    # (the program as it runs here: bin/skill-retrieve is not on PATH)
    from skillret_helpers import BIN
    assert fixes and all(f.startswith("%s query --runner claude-code" % BIN) for f in fixes), fixes
    # and running it writes exactly the index the hook will use
    assert_clean(cli("query", "--runner", "claude-code", "--fresh", "skills", cwd=sub))
    assert os.path.exists(hook_index[0]["path"])


def test_doctor_sees_the_claude_code_plugin_install(cli, tmp_path):
    # Installed with `claude plugin install`, the hook lives in the plugin's
    # hooks/hooks.json, not in settings.json: doctor must not call it missing.
    import shutil
    from skillret_helpers import REPO
    home = tmp_path / "home"
    make_skill(home / ".claude" / "skills", "zebra", {"name": "zebra", "description": "Zebra care."})
    plug = home / ".claude" / "plugins" / "cache" / "skill-retrieval" / "skill-retrieval" / "0.1.0"
    for item in (".claude-plugin", "hooks", "bin", "retriever"):
        shutil.copytree(REPO / item, plug / item, ignore=shutil.ignore_patterns("__pycache__"))
    (home / ".claude" / "plugins" / "installed_plugins.json").write_text(json.dumps(
        {"version": 2, "plugins": {"skill-retrieval@skill-retrieval": [
            {"scope": "user", "installPath": str(plug)}]}}))
    (home / ".claude" / "settings.json").write_text(json.dumps(
        {"enabledPlugins": {"skill-retrieval@skill-retrieval": True}}))
    report = json.loads(cli("doctor", "--runner", "claude-code", "--format", "json").stdout)
    (info,) = report["runners"]
    assert info["installed"] and info["enabled"], info
    assert info["state"] == "installed (plugin skill-retrieval@skill-retrieval)"
    assert report["healthy"], report["findings"]
    (probe,) = [p for p in report["probes"] if p["label"] == "claude-code hook"]
    assert probe["injected_chars"] > 0, probe  # the plugin's own command answers


def test_gemini_reads_the_skills_of_extensions_enabled_here(hook, tmp_path):
    # ~/.gemini/extensions/<dir>/skills, unless extension-enablement.json
    # turns the extension off for this folder; a linked extension is read
    # from its source (Gemini CLI 0.61.0's extension loader).
    home, proj = tmp_path / "home", tmp_path / "proj"
    ext = home / ".gemini" / "extensions"

    def extension(folder, name, skill):
        (folder).mkdir(parents=True, exist_ok=True)
        (folder / "gemini-extension.json").write_text(json.dumps({"name": name, "version": "1.0.0"}))
        make_skill(folder / "skills", skill, {"name": skill, "description": "Zebra %s." % skill})

    extension(ext / "on", "on-ext", "zebra-on")
    extension(ext / "off", "off-ext", "zebra-off")
    extension(tmp_path / "linked-src", "linked-ext", "zebra-linked")
    (ext / "linked").mkdir()
    (ext / "linked" / ".gemini-extension-install.json").write_text(
        json.dumps({"type": "link", "source": str(tmp_path / "linked-src")}))
    (ext / "extension-enablement.json").write_text(json.dumps(
        {"off-ext": {"overrides": ["!%s/*" % tmp_path]}, "on-ext": {"overrides": ["!/elsewhere/*"]}}))
    proj.mkdir()
    doc = parse(hook("gemini", payload("gemini", "zebra", cwd=str(proj)), "-k", "20"))
    assert _names(doc["hookSpecificOutput"]["additionalContext"]) == {"zebra-on", "zebra-linked"}


def test_claude_code_plugin_packaging_is_consistent():
    # The repository is a one-plugin marketplace; the hook it registers is
    # ours and starts from the plugin's own folder.
    from skillret_helpers import REPO
    from retriever import __version__
    from retriever.runners import install
    plugin = json.loads((REPO / ".claude-plugin" / "plugin.json").read_text())
    market = json.loads((REPO / ".claude-plugin" / "marketplace.json").read_text())
    hooks = json.loads((REPO / "hooks" / "hooks.json").read_text())
    assert plugin["name"] == "skill-retrieval" and plugin["version"] == __version__
    assert [(p["name"], p["source"]) for p in market["plugins"]] == [("skill-retrieval", "./")]
    (group,) = hooks["hooks"]["UserPromptSubmit"]
    (handler,) = group["hooks"]
    assert install.is_ours(handler["command"], "claude-code")
    assert handler["command"].startswith('"${CLAUDE_PLUGIN_ROOT}/bin/skill-retrieve"')
    assert handler["timeout"] <= 10


def test_every_registry_record_names_a_skill_set_function():
    from retriever.runners.registry import RUNNERS
    for name, record in RUNNERS.items():
        fn = skillsets.SETS.get(name)
        assert record["skills"] is (fn is not None) and (fn is None or callable(fn)), name
    assert [n for n, r in RUNNERS.items() if not r["skills"]] == ["hermes"]
