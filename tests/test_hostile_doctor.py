"""Hostile input, round three (issue 36): ``doctor`` in a cloned repository.

- Defect 2: a clone whose ``.codex/hooks.json``, ``.gemini/settings.json``
  or ``.claude/settings.json`` (or Cline's project hook script) registers a
  command naming ``skill-retrieve … hook RUNNER`` made doctor run the
  clone's program: its "interpreter" with ``-c`` even under ``--no-probe``,
  and the whole command six times in the live probe.  Doctor now runs only
  a command install wrote (the digest it recorded) or this installation's
  own; anything else is named, "not run".
- The project folder is trusted no further than the runner trusts it:
  nothing from a project folder is executed by any command of ours.
- ``doctor`` never crashes: a seeded campaign over hostile set-ups, and
  a test named for each crash it found.

Real files, the real executable, temporary homes.
"""

import json
import os
import random
import re
import shutil
import stat

import pytest

from skillret_helpers import assert_clean, make_skill, run_cli
from test_hostile_status import FILES, FORMS, _env, _place, installed  # noqa: F401 (fixture)

TIMEOUT = 60


def _clone(tmp_path):
    """A cloned repository with a skill, and a program of its own that
    leaves a marker file when anything runs it."""
    clone = tmp_path / "clone"
    (clone / ".git").mkdir(parents=True)
    for root in (".claude/skills", ".agents/skills"):
        make_skill(clone / root, "pdf-text", {"name": "pdf-text",
                                             "description": "Pull the text out of PDF files"})
    marker = tmp_path / "ran"
    prog = clone / "tools" / "python3"
    prog.parent.mkdir()
    prog.write_text("#!/bin/sh\necho \"$@\" >> %s\necho '{}'\n" % marker)
    prog.chmod(prog.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    bin_ = clone / "bin" / "skill-retrieve"
    bin_.parent.mkdir()
    bin_.write_text("#!/bin/sh\necho \"$@\" >> %s\n" % marker)
    bin_.chmod(0o755)
    return clone, prog, bin_, marker


# runner: (project file, how the command is registered there)
PLANTS = {
    "codex": ".codex/hooks.json",
    "gemini": ".gemini/settings.json",
    "claude-code": ".claude/settings.json",
    "cline": ".clinerules/hooks/UserPromptSubmit",
}


def _plant(clone, runner, command):
    path = clone / PLANTS[runner]
    path.parent.mkdir(parents=True, exist_ok=True)
    if runner == "cline":
        # The runner runs the file itself: a line of the clone's own
        # before the one that names our hook.
        path.write_text("#!/bin/sh\n%s x\nexec %s\n" % (command.split()[0], command))
        path.chmod(0o755)
        return path
    from retriever.runners.registry import RUNNERS
    event = RUNNERS[runner]["event"]
    path.write_text(json.dumps({"hooks": {event: [{"hooks": [{"type": "command", "command": command}]}]}}))
    return path


@pytest.mark.parametrize("runner", sorted(PLANTS))
@pytest.mark.parametrize("dash_s", [False, True], ids=["no-S", "S"])
@pytest.mark.parametrize("probe", [False, True], ids=["no-probe", "probe"])
def test_doctor_never_runs_a_program_a_clone_registers(cli, tmp_path, runner, dash_s, probe):
    """Issue 36, defect 2: with the clone's command lacking -S, doctor
    asked the clone's "interpreter" for its .pth files (``-c``) even under
    --no-probe; the live probe ran the whole command."""
    clone, prog, bin_, marker = _clone(tmp_path)
    command = "%s %s%s hook %s" % (prog, "-I -S " if dash_s else "", bin_, runner)
    where = _plant(clone, runner, command)
    args = ["doctor", "--runner", runner, "--format", "json"] + ([] if probe else ["--no-probe"])
    proc = cli(*args, cwd=clone, timeout=TIMEOUT)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode in (0, 1)
    assert not marker.exists(), "doctor ran the clone's program: %s" % marker.read_text()
    rep = json.loads(proc.stdout)
    (info,) = rep["runners"]
    assert info["hook"]["trusted"] is False and info["hook"]["not_run"] == "registered by the project"
    assert any("registered by the project, so doctor does not run it" in f["what"] and str(where) in f["what"]
               for f in rep["findings"])
    assert all(str(clone) not in " ".join(p["argv"]) for p in rep["probes"])
    text = cli(*(["doctor", "--runner", runner] + ([] if probe else ["--no-probe"])), cwd=clone,
               timeout=TIMEOUT).stdout
    assert "registered by the project, so doctor does not run it" in text
    assert not marker.exists()


def test_a_clones_hook_options_are_neither_checked_nor_written(cli, tmp_path):
    """A clone's command chose ``--index`` (and ``--root``): doctor built
    and probed an index there and offered `build --root / --index ...`
    as the fix.  Our own program is probed on the runner's own index."""
    clone, _, _, marker = _clone(tmp_path)
    from retriever.runners import install
    planted = clone / "planted.skr"
    command = "%s --index %s --root / hook codex" % (install.hook_command("codex").rsplit(" hook ", 1)[0], planted)
    _plant(clone, "codex", command)
    proc = cli("doctor", "--runner", "codex", cwd=clone, timeout=TIMEOUT)
    assert_clean(proc, proc.returncode)
    assert "registered by the project, so doctor does not run it" in proc.stdout
    assert not planted.exists() and str(planted) not in proc.stdout and "--root /" not in proc.stdout
    assert not marker.exists()


@pytest.mark.parametrize("inside", [False, True], ids=["in-the-clone", "in-the-config-folder"])
def test_a_plugin_hook_runs_only_from_claude_codes_own_plugin_folder(cli, cli_env, tmp_path, inside):
    """This repository as a Claude Code plugin: Claude Code runs the hooks
    of a plugin it installed (under its config folder).  A plugin record
    whose install path is elsewhere (a clone) is named, not run."""
    clone, prog, _, marker = _clone(tmp_path)
    config = os.path.join(cli_env["HOME"], ".claude")
    plugin = os.path.join(config, "plugins", "cache", "skill-retrieval") if inside else str(clone / "plugin")
    os.makedirs(os.path.join(plugin, "hooks"))
    os.makedirs(os.path.join(plugin, ".claude-plugin"))
    open(os.path.join(plugin, "skill-retrieve"), "w").close()
    with open(os.path.join(plugin, ".claude-plugin", "plugin.json"), "w") as f:
        json.dump({"name": "skill-retrieval"}, f)
    with open(os.path.join(plugin, "hooks", "hooks.json"), "w") as f:
        json.dump({"hooks": {"UserPromptSubmit": [{"hooks": [
            {"type": "command", "command": "%s ${CLAUDE_PLUGIN_ROOT}/skill-retrieve hook claude-code" % prog}]}]}}, f)
    os.makedirs(os.path.join(config, "plugins"), exist_ok=True)
    with open(os.path.join(config, "plugins", "installed_plugins.json"), "w") as f:
        json.dump({"version": 2, "plugins": {"skill-retrieval@x": [{"installPath": plugin}]}}, f)
    proc = cli("doctor", "--runner", "claude-code", "--format", "json", cwd=clone, timeout=TIMEOUT)
    assert "Traceback" not in proc.stderr
    hook = json.loads(proc.stdout)["runners"][0]["hook"]
    assert hook["trusted"] is inside
    assert marker.exists() is inside  # (in Claude Code's own folder: its plugin, run as Claude Code runs it)


def test_doctor_probes_a_project_hook_the_user_installed(cli, cli_env, tmp_path):
    """The genuine case still works: ``install codex --project`` records
    the command's digest, and doctor's live probe runs it."""
    clone, _, _, marker = _clone(tmp_path)
    assert_clean(cli("install", "codex", "--project", clone, timeout=TIMEOUT))
    rec = json.load(open(os.path.join(cli_env["XDG_STATE_HOME"], "skill-retrieval", "changes.json")))
    (entry,) = [v["changes"] for k, v in rec.items() if k.endswith("hooks.json")]  # (config.toml: the MCP server's)
    assert len(entry["codex"]["command"]) == 64
    rep = json.loads(cli("doctor", "--runner", "codex", "--format", "json", cwd=clone, timeout=TIMEOUT).stdout)
    (info,) = rep["runners"]
    assert info["hook"]["trusted"] is True and "not_run" not in info["hook"]
    (probe,) = rep["probes"]
    assert probe["label"] == "codex hook" and probe["injected_chars"] > 0
    assert not marker.exists()


def test_a_recorded_project_hook_the_clone_changed_is_not_run(cli, tmp_path):
    """The digest is of the command: a pull that swaps the interpreter in
    the user's own project install is named, not run."""
    clone, prog, _, marker = _clone(tmp_path)
    assert_clean(cli("install", "codex", "--project", clone, timeout=TIMEOUT))
    path = clone / ".codex" / "hooks.json"
    data = json.loads(path.read_text())
    h = data["hooks"]["UserPromptSubmit"][0]["hooks"][0]
    h["command"] = h["command"].replace(h["command"].split()[0], str(prog), 1)
    path.write_text(json.dumps(data))
    proc = cli("doctor", "--runner", "codex", cwd=clone, timeout=TIMEOUT)
    assert_clean(proc, proc.returncode)
    assert not marker.exists()
    assert "so doctor does not run it" in proc.stdout


def test_a_hand_edited_user_hook_is_named_not_run(cli, cli_env, tmp_path):
    """A command in the user's own settings that install did not write is
    not run either (the user's settings may have come from anywhere):
    doctor says so, and probes our own program instead."""
    clone, prog, bin_, marker = _clone(tmp_path)
    settings = os.path.join(cli_env["HOME"], ".claude", "settings.json")
    os.makedirs(os.path.dirname(settings))
    make_skill(os.path.join(cli_env["HOME"], ".claude", "skills"), "git-bisect",
               {"name": "git-bisect", "description": "Find the commit that introduced a bug with git bisect"})
    with open(settings, "w") as f:
        json.dump({"hooks": {"UserPromptSubmit": [{"hooks": [
            {"type": "command", "command": "%s %s hook claude-code" % (prog, bin_)}]}]}}, f)
    proc = cli("doctor", "--runner", "claude-code", "--format", "json", timeout=TIMEOUT)
    assert "Traceback" not in proc.stderr
    assert not marker.exists()
    rep = json.loads(proc.stdout)
    assert rep["runners"][0]["hook"]["not_run"] == "not as skill-retrieve install wrote it"
    assert [p["label"] for p in rep["probes"]] == ["bin/skill-retrieve"]



# ------------------------------------------------- doctor never crashes
#
# A seeded campaign over set-ups: each runner installed, absent, damaged
# or registered by the project; skill sets kept, emptied or missing; our
# records and the runners' files replaced by each hostile form of
# test_hostile_status (FIFOs, folders, links, bad UTF-8, invalid syntax,
# wrong types) and by truncations, binary junk and type-swapped JSON.
# Every run must end in lines a user can read: exit 0 or 1 (1 exactly when
# an ERROR is shown), no traceback, no Python exception named by doctor's
# own catch-alls, no hang.  About 15 s in all.

SEED = 36
TRIALS = 40
FUZZ_TIMEOUT = 10  # a run takes ~0.2 s; past this it hangs (a FIFO opened for reading)
SKILL_PATHS = ("home/.claude/skills", "home/.agents/skills", "home/.claude/skills/demo/SKILL.md")
RECORDS = ("xdg-state/skill-retrieval/installed.json", "xdg-state/skill-retrieval/created.json",
           "xdg-state/skill-retrieval/listing.json", "home/.config/skill-retrieval/roots")
# Words only an exception that escaped into a finding would print.
LEAKED = re.compile(r"check failed|\b(?:Type|Attribute|Key|Index|Value|Recursion|UnicodeDecode|Name|Assertion)"
                    r"Error\b|\bTraceback\b")


def _junk(rng, path, syntax):
    """Damage beyond test_hostile_status's forms: the file cut short,
    binary bytes, or its JSON with one value swapped for another type."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        data = b""
    how = rng.choice(("truncated", "binary", "types"))
    if how == "truncated" and data:
        data = data[:rng.randrange(len(data))]
    elif how == "types" and syntax == "json":
        try:
            doc = json.loads(data.decode("utf-8"))
        except ValueError:
            doc = {}
        _swap(rng, doc)
        data = json.dumps(doc).encode()
    else:
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300)))
        if syntax == "text":
            # Not "/" or "." alone on a line of the roots file: a folder
            # the user names is walked as named, the whole disk included.
            data = data.replace(b"/", b"").replace(b".", b"")
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def _swap(rng, doc, depth=0):
    """Replace one value somewhere in ``doc`` (in place) with a value of
    another type."""
    values = [None, 0, -1, 1e308, "x", "", [], [1, "a", None], {}, {"a": [{}]}, True]
    keys = list(doc) if isinstance(doc, dict) else list(range(len(doc))) if isinstance(doc, list) else []
    if not keys:
        return
    k = rng.choice(keys)
    if depth < 6 and isinstance(doc[k], (dict, list)) and doc[k] and rng.random() < 0.7:
        _swap(rng, doc[k], depth + 1)
    else:
        doc[k] = rng.choice(values)


def _setup(rng, base, case):
    """A random set-up in ``case`` (a copy of ``base``, every runner
    installed); returns words naming it, for a failure message."""
    shutil.copytree(base, case, symlinks=True)
    said = []
    cwd = case / "cwd"
    for name, (rel, _, syntax) in sorted(FILES.items()):
        if rel in RECORDS:
            continue
        roll = rng.random()
        path = str(case / rel)
        if roll < 0.15:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            elif os.path.lexists(path):
                os.unlink(path)
            said.append("%s absent" % name)
        elif roll < 0.3:
            form = rng.choice(FORMS)
            _place(path, form, syntax)
            said.append("%s %s" % (name, form))
        elif roll < 0.4:
            _junk(rng, path, syntax)
            said.append("%s junk" % name)
        elif roll < 0.5 and rel.startswith("home/.") and os.path.isfile(path):
            # The same file registered by a project: a clone holding it.
            (cwd / ".git").mkdir(exist_ok=True)
            dest = cwd / rel.split("/", 2)[2]
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, dest)
            if rng.random() < 0.5:
                _junk(rng, str(dest), syntax)
            said.append("%s in the project" % name)
    for rel in RECORDS:
        roll = rng.random()
        syntax = "text" if rel.endswith("roots") else "json"
        if roll < 0.2:
            form = rng.choice(FORMS)
            _place(str(case / rel), form, syntax)
            said.append("%s %s" % (rel.rsplit("/", 1)[1], form))
        elif roll < 0.4:
            _junk(rng, str(case / rel), syntax)
            said.append("%s junk" % rel.rsplit("/", 1)[1])
    cache = case / "xdg-cache" / "skill-retrieval"
    for name in sorted(os.listdir(cache)) if cache.is_dir() else ():
        if rng.random() < 0.15:  # our index files and their side files
            if rng.random() < 0.5:
                _place(str(cache / name), rng.choice(FORMS), "text")
            else:
                _junk(rng, str(cache / name), "binary")
            said.append("%s damaged" % name)
    roll = rng.random()
    if roll < 0.2:
        for rel in SKILL_PATHS[:2]:
            shutil.rmtree(case / rel, ignore_errors=True)
        said.append("no skills")
    elif roll < 0.35:
        for rel in SKILL_PATHS[:2]:
            for dirpath, _, files in os.walk(case / rel):
                for f in files:
                    os.unlink(os.path.join(dirpath, f))
        said.append("empty skill folders")
    elif roll < 0.5:
        rel = rng.choice(SKILL_PATHS)
        form = rng.choice(FORMS)
        _place(str(case / rel), form, "text")
        said.append("%s %s" % (rel, form))
    return said


def _judge(proc, fmt):
    """What is wrong with one doctor run, or None."""
    text = proc.stdout + proc.stderr
    if proc.returncode not in (0, 1):
        return "exit %d" % proc.returncode
    leaked = LEAKED.search(text)
    if leaked:
        line = [l for l in text.splitlines() if leaked.group(0) in l][0]
        return "leaked %r" % line.strip()[:300]
    if proc.stderr.strip():
        return "stderr %r" % proc.stderr[:300]
    if fmt == "json":
        try:
            healthy = json.loads(proc.stdout)["healthy"]
        except (ValueError, KeyError, TypeError):
            return "unparseable JSON %r" % proc.stdout[:200]
        return None if proc.returncode == (0 if healthy else 1) else "exit %d, healthy %s" % (proc.returncode, healthy)
    last = proc.stdout.rstrip("\n").rsplit("\n", 1)[-1]
    if not last.startswith(("healthy: ", "NOT healthy: ")):
        return "last line %r" % last
    if proc.returncode != (1 if "\n  ERROR " in proc.stdout else 0):
        return "exit %d with%s an ERROR" % (proc.returncode, "" if "\n  ERROR " in proc.stdout else "out")
    return None


def test_doctor_never_crashes_over_hostile_set_ups(installed, tmp_path):  # noqa: F811
    """Issue 36, rule "doctor never crashes": TRIALS seeded set-ups, one
    doctor run each (text or JSON, one runner or all, one in eight with the
    live probe); every failure is listed with its set-up."""
    rng = random.Random(SEED)
    failures = []
    for i in range(TRIALS):
        case = tmp_path / ("t%d" % i)
        said = _setup(rng, installed, case)
        fmt = rng.choice(("text", "json"))
        args = ["doctor", "--format", fmt]
        if rng.random() < 0.3:
            args += ["--runner", rng.choice(("claude-code", "codex", "gemini", "opencode", "cline", "hermes"))]
        if i % 8:
            args.append("--no-probe")
        try:
            proc = run_cli(args, _env(case), cwd=case / "cwd", timeout=FUZZ_TIMEOUT)
        except Exception as exc:  # subprocess.TimeoutExpired: a hang
            failures.append("%d %s: %s: %s" % (i, args[1:], "; ".join(said), type(exc).__name__))
            continue
        why = _judge(proc, fmt)
        if why:
            failures.append("%d %s: %s: %s" % (i, args[1:], "; ".join(said), why))
        shutil.rmtree(case, ignore_errors=True)
    assert failures == [], "\n".join(failures)


def test_a_nul_byte_in_the_roots_file_is_skipped_not_a_crash(cli, cli_env, tmp_path):
    """Found by the campaign above: a roots file line holding a NUL byte
    (binary junk, a file cut short) made doctor, every query and `roots
    list` end in "error: ValueError: embedded null byte".  No folder name
    holds one: the line is skipped, the other lines still count."""
    good = tmp_path / "mine"
    make_skill(good, "git-bisect", {"name": "git-bisect",
                                    "description": "Find the commit that introduced a bug with git bisect"})
    roots = os.path.join(cli_env["HOME"], ".config", "skill-retrieval", "roots")
    os.makedirs(os.path.dirname(roots))
    with open(roots, "wb") as f:
        f.write(b"# mine\n/a\0b\n%s\n\xff\0\n" % str(good).encode())
    doctor = cli("doctor", "--no-probe", timeout=TIMEOUT)
    assert_clean(doctor, doctor.returncode)
    assert doctor.stderr == "" and str(good) in doctor.stdout
    query = cli("--", "find the commit that introduced a bug", timeout=TIMEOUT)
    assert_clean(query)
    assert "git-bisect" in query.stdout
    listed = cli("roots", "list", timeout=TIMEOUT)
    assert_clean(listed)
    assert str(good) in listed.stdout


# Every place retriever/ starts a process, and what it runs.  A new one
# must show here that its argv comes from this installation, never from
# a file of a project folder.
SPAWNS = {
    "retriever/cli/doctor.py": 2,  # _pth_files, _time (probe and floor): trusted commands only (may_run)
    "retriever/semantic/client.py": 1,  # start_detached: sys.executable -I -c, our own module
    "retriever/runners/mcp_config.py": 1,  # probe, for doctor: only a command install wrote (registered)
}


def test_every_process_we_start_is_accounted_for():
    """The rule "nothing from a project folder is executed by any command
    of ours": the call sites that start a process are the ones reviewed."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = {}
    pattern = re.compile(r"\b(?:subprocess\.(?:run|Popen|call|check_call|check_output)|os\.exec\w*|"
                         r"posix\.exec\w*|os\.spawn\w*|os\.system|os\.popen|posix_spawn\w*)\(")
    for base in ("retriever", "hermes_plugin"):
        for dirpath, _, files in os.walk(os.path.join(root, base)):
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(dirpath, name)
                    with open(path, encoding="utf-8") as f:
                        n = sum(len(pattern.findall(l)) for l in f if not l.lstrip().startswith("#"))
                    if n:
                        found[os.path.relpath(path, root)] = n
    assert found == SPAWNS


@pytest.mark.parametrize("value", [[1], "x", None, 5], ids=["list", "string", "null", "number"])
def test_a_wrong_type_in_the_install_record_reads_as_no_record(cli, cli_env, value):
    """The install record (changes.json) holding a list (a string, null) where a file's
    records go: doctor read it as nothing only through a catch-all, and
    install and uninstall ended in "error: AttributeError: 'list' object
    has no attribute 'get'".  It reads as no record now."""
    make_skill(os.path.join(cli_env["HOME"], ".claude", "skills"), "demo", {"name": "demo", "description": "demo"})
    assert_clean(cli("install", "claude-code", timeout=TIMEOUT))
    record = os.path.join(cli_env["XDG_STATE_HOME"], "skill-retrieval", "changes.json")
    data = json.load(open(record))
    with open(record, "w") as f:
        json.dump({k: value if i % 2 else {"changes": value, "created": value} for i, k in enumerate(data)}, f)
    doctor = cli("doctor", "--runner", "claude-code", "--no-probe", timeout=TIMEOUT)
    assert_clean(doctor, 0)
    for args in (("uninstall", "claude-code", "--dry-run"), ("install", "claude-code", "--force"),
                 ("uninstall", "claude-code"), ("install", "claude-code")):
        proc = cli(*args, timeout=TIMEOUT)
        assert_clean(proc)
        assert "error:" not in proc.stderr
