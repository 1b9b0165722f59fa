"""One record per agent runner: everything the hook, the installer and
``doctor`` need to know about it.  Adding a runner means adding a record
here (and its tests); nothing else names runners one by one.

A record is a plain dict:
  event     the hook event the runner fires per prompt
  start     the event it fires when a session starts, where ``install``
            registers ``skill-retrieve warm RUNNER`` beside the prompt hook
            (JSON-configured runners whose pinned version has one)
  prompt    the keys leading to the user's prompt in the stdin JSON
  output    the stdout for a retrieved block: a %-format taking the block
            as a JSON string literal
  empty     the stdout when there is nothing to add, or on any error
            (some runners require JSON on every run)
  cap       characters of output the runner accepts before it cuts
  install   how ``install`` registers the hook: a ``hook_record`` (below)
  timeout   (number, unit) registered with the hook
  switches  settings that turn every hook off: (dotted key, value that
            means off, how to fix it), for doctor
  skills    whether the runner has a skill set of its own: its folders in
            precedence order and how it names and hides skills, given by
            its function in ``retriever.runners.skillsets.SETS`` (False:
            Hermes' own folders and config rules)
  session   where the stdin JSON holds the session (retriever.session):
            {"id": keys to its session id, "transcript": keys to the
            runner's transcript file, "history": keys to the conversation
            as chat messages}; each optional, no "id": no session memory
  payload   a sample stdin for doctor's live probe (the prompt is filled in);
            it names no session, so a probe neither leaves session memory
            behind nor is silenced by its own warm-up run
  note      one line shown after install
  load      how the model loads a skill in this runner, for the injected
            block's guidance line ("with the Skill tool")

Hot path: the hook imports this module on every prompt, so it is data only.
"""

# The install record is a dict with fixed keys, each with one meaning
# (dicts, not classes: the hook imports this module on every prompt).


def place(env, folder, name):
    """Where a runner's user-level file is: ``{"env", "folder", "name"}``,
    the folder ``folder`` (``~`` for the home), or the value of the
    variable ``env`` when it is set, and the file ``name`` in it."""
    return {"env": env, "folder": folder, "name": name}


def hook_record(kind, user=None, project=None, keys=None, template=None, mode=0o644):
    """How ``install`` registers a runner's hook: ``{"kind", "user",
    "project", "keys", "template", "mode"}``.  ``kind``:
      "json"    merge one handler, with ``keys`` beside the command, into
                hooks[event] of the JSON settings file
      "script"  write ``template`` to the file, with permissions ``mode``;
                the template gets {command} (shell) and {argv} (a JSON array)
      "hermes"  the in-process plugin (retriever.runners.hermes_install):
                no file of ours here
    ``user`` is the user-level file (a ``place``), ``project`` the file's
    path relative to a project."""
    return {"kind": kind, "user": user, "project": project, "keys": keys or {}, "template": template,
            "mode": mode}


def json_hook(user, project, keys=None):
    """A handler merged into a JSON settings file."""
    return hook_record("json", user, project, keys=keys)


def script_hook(user, project, template, mode):
    """A file written from ``template``."""
    return hook_record("script", user, project, template=template, mode=mode)


_CLAUDE_SHAPE = '{"hookSpecificOutput": {"hookEventName": "%s", "additionalContext": %%s}}\n'

RUNNERS = {
    "claude-code": {
        "load": 'with the Skill tool',
        "event": "UserPromptSubmit",
        "start": "SessionStart",
        "prompt": ("prompt",),
        "output": _CLAUDE_SHAPE % "UserPromptSubmit",
        "empty": "",
        "cap": 10000,
        "install": json_hook(place("CLAUDE_CONFIG_DIR", "~/.claude", "settings.json"), ".claude/settings.json"),
        "timeout": (5, "s"),
        "switches": (("disableAllHooks", True, 'remove "disableAllHooks" from %s'),),
        "skills": True,
        "session": {"id": ("session_id",), "transcript": ("transcript_path",)},
        "payload": {"session_id": None, "transcript_path": None, "hook_event_name": "UserPromptSubmit"},
        "note": "Claude Code runs it on every prompt (check with /hooks).",
    },
    "codex": {
        "load": 'by reading its SKILL.md',
        "event": "UserPromptSubmit",
        "start": "SessionStart",
        "prompt": ("prompt",),
        # Codex validates against a strict schema: no other keys.
        "output": _CLAUDE_SHAPE % "UserPromptSubmit",
        "empty": "",
        "cap": 10000,
        "install": json_hook(place("CODEX_HOME", "~/.codex", "hooks.json"), ".codex/hooks.json"),
        "timeout": (5, "s"),
        "switches": (),
        "skills": True,
        "session": {"id": ("session_id",), "transcript": ("transcript_path",)},
        "payload": {"session_id": None, "transcript_path": None, "hook_event_name": "UserPromptSubmit",
                    "turn_id": "doctor", "model": "doctor", "permission_mode": "default"},
        "note": ("Codex skips hooks it does not trust, silently: open codex and approve both in /hooks "
                 "(project hooks also need the project trusted); CI can pass "
                 "--dangerously-bypass-hook-trust to codex exec."),
    },
    "gemini": {
        "load": 'with the activate_skill tool',
        "event": "BeforeAgent",
        "start": "SessionStart",
        "prompt": ("prompt",),
        "output": _CLAUDE_SHAPE % "BeforeAgent",
        "empty": "{}\n",  # empty stdout would make Gemini read stderr instead
        "cap": 10000,
        "install": json_hook(place(None, "~/.gemini", "settings.json"), ".gemini/settings.json",
                             {"name": "skill-retrieval", "description": "Inject the few skills relevant to this prompt"}),
        "timeout": (5000, "ms"),
        "switches": (("hooksConfig.enabled", False, 'set "hooksConfig": {"enabled": true} in %s'),),
        "skills": True,
        "session": {"id": ("session_id",), "transcript": ("transcript_path",)},
        "payload": {"session_id": None, "transcript_path": None, "hook_event_name": "BeforeAgent"},
        "note": ("Gemini CLI runs it before each turn; if your version has hooks off by default, "
                 "enable them in settings.json (hooksConfig.enabled or, in older releases, tools.enableHooks)."),
    },
    "cline": {
        "load": 'by reading its SKILL.md',
        "event": "UserPromptSubmit",
        "prompt": ("userPromptSubmit", "prompt"),
        "output": '{"cancel": false, "contextModification": %s}\n',
        "empty": '{"cancel": false}\n',  # Cline requires valid JSON on every run
        "cap": 10000,
        "install": script_hook(place(None, "~/Documents/Cline/Hooks", "UserPromptSubmit"),
                    ".clinerules/hooks/UserPromptSubmit",
                    "#!/bin/sh\n"
                    "# skill-retrieve hook cline: inject the skills relevant to this prompt.\n"
                    "# Written by `skill-retrieve install cline`; `skill-retrieve uninstall cline` removes it.\n"
                    "exec {command}\n", 0o755),
        "timeout": (30, "s"),
        "switches": (),
        "skills": True,
        "session": {"id": ("taskId",)},
        "payload": {"hookName": "UserPromptSubmit", "taskId": None},
        "note": ("Cline runs it when hooks are enabled (Settings > Features > Hooks); its context "
                 "reaches the model in the VS Code extension.  The Cline CLI never reads it: it gets the "
                 "block through the plugin in ~/.cline/plugins (written next)."),
    },
    "hermes": {
        "load": 'with skill_view(name)',
        "event": "pre_llm_call",
        "prompt": ("extra", "user_message"),
        "output": '{"context": %s}\n',
        "empty": "",
        "cap": 10000,
        "install": hook_record("hermes"),
        "timeout": (5, "s"),
        "switches": (),
        "skills": False,
        "session": {"id": ("session_id",), "history": ("extra", "conversation_history")},
        "payload": {"hook_event_name": "pre_llm_call", "session_id": None},
        "note": "",
    },
    # OpenCode has no hook subprocess contract: its plugin API runs
    # JS in process.  The plugin below asks `skill-retrieve hook opencode`
    # on each user message and adds the block as a synthetic text part.
    "opencode": {
        "load": 'with the skill tool',
        "event": "chat.message",
        "prompt": ("prompt",),
        "output": '{"context": %s}\n',
        "empty": "",
        "cap": 10000,
        "install": script_hook(place("OPENCODE_CONFIG_DIR", "~/.config/opencode", "plugins/skill-retrieval.js"),
                    ".opencode/plugins/skill-retrieval.js",
                    "// skill-retrieve hook opencode: add the skills relevant to each user message.\n"
                    "// Written by `skill-retrieve install opencode`; `skill-retrieve uninstall opencode` removes it.\n"
                    "// command: {command}\n"
                    "import {{ spawn, spawnSync }} from \"node:child_process\";\n"
                    "const ARGV = {argv};\n"
                    "export const SkillRetrieval = async ({{ directory }}) => {{\n"
                    "  try {{\n"
                    "    // Loaded as a session starts: warm the semantic helper for the first message.\n"
                    "    const w = spawn(ARGV[0], ARGV.slice(1, -2).concat([\"warm\", \"opencode\"]),\n"
                    "      {{ stdio: [\"pipe\", \"ignore\", \"ignore\"], detached: true }});\n"
                    "    w.on(\"error\", () => {{}});\n"
                    "    w.stdin.on(\"error\", () => {{}});\n"
                    "    w.stdin.end(JSON.stringify({{ cwd: directory }}));\n"
                    "    w.unref();\n"
                    "  }} catch (e) {{ /* fail open: the first message starts the helper */ }}\n"
                    "  return {{\n"
                    "  \"chat.message\": async (input, output) => {{\n"
                    "    try {{\n"
                    "      const prompt = (output.parts || []).filter((p) => p.type === \"text\" && !p.synthetic)\n"
                    "        .map((p) => p.text).join(\"\\n\");\n"
                    "      if (!prompt.trim()) return;\n"
                    "      const r = spawnSync(ARGV[0], ARGV.slice(1), {{\n"
                    "        input: JSON.stringify({{ prompt, cwd: directory, session_id: input.sessionID }}),\n"
                    "        encoding: \"utf8\", timeout: 5000 }});\n"
                    "      const context = r.status === 0 && r.stdout.trim() ? JSON.parse(r.stdout).context : \"\";\n"
                    "      if (!context) return;\n"
                    "      // OpenCode 1.18 stores every part: it needs the ids the user's part carries.\n"
                    "      const first = (output.parts || [])[0] || {{}};\n"
                    "      const ids = first.id ? {{ id: first.id + \"r\", messageID: first.messageID, sessionID: first.sessionID }} : {{}};\n"
                    "      output.parts.push({{ ...ids, type: \"text\", text: context, synthetic: true }});\n"
                    "    }} catch (e) {{ /* fail open: the message goes as it is */ }}\n"
                    "  }},\n"
                    "  }};\n"
                    "}};\n", 0o644),
        "timeout": (5, "s"),
        "switches": (),
        "skills": True,
        "session": {"id": ("session_id",)},
        "payload": {"session_id": None},
        "note": "OpenCode loads it at start-up: restart OpenCode.",
    },
}

NAMES = tuple(RUNNERS)


def get(name):
    """The record of runner ``name``; KeyError naming the known runners."""
    try:
        return RUNNERS[name]
    except KeyError:
        raise KeyError("unknown runner %r (expected one of: %s)" % (name, ", ".join(NAMES))) from None
