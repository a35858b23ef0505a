# simplellmfunc — every target installs what it needs.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DOCS_STAMP := $(VENV)/.docs-installed
export TIKTOKEN_CACHE_DIR := $(CURDIR)/.cache/tiktoken

.DEFAULT_GOAL := help
.PHONY: help install test test-live mcp-reference lint format typecheck bench bench-peers soak demo demo-ui docs docs-serve clean

help: ## Show this help
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	$(BIN)/python scripts/offline_tiktoken.py "$(TIKTOKEN_CACHE_DIR)"
	touch $(STAMP)

install: $(STAMP) ## Create .venv and install the package editable with dev deps (idempotent)

test: install ## Run the test suite (offline, no real model needed; in parallel worker processes)
	$(BIN)/python -m pytest -q -n auto --maxprocesses 4 --dist loadfile

# The local model of `make demo` and `make test-live`: LOCAL_MODEL=gemma3 for Gemma 3 270M.
LOCAL_MODEL ?= smollm2
export LOCAL_MODEL

test-live: install ## End-to-end tests against a real local model (SmolLM2 via llama.cpp; LOCAL_MODEL=gemma3)
	$(BIN)/python scripts/local_model.py install
	$(BIN)/simplellmfunc local build
	$(BIN)/python -m pytest -q -m live

# The npm reference MCP server, pinned by tests/test_mcp_reference.py (which skips without it).
EVERYTHING := @modelcontextprotocol/server-everything
EVERYTHING_VERSION := $(shell sed -n 's/^EVERYTHING_VERSION = "\(.*\)"/\1/p' tests/test_mcp_reference.py)

mcp-reference: install ## MCP client tests against the npm reference server (installs it with npm)
	npm install --prefix .cache/npm --no-audit --no-fund $(EVERYTHING)@$(EVERYTHING_VERSION)
	$(BIN)/python -m pytest -q tests/test_mcp_reference.py

lint: install ## ruff check + format check
	$(BIN)/ruff check src tests benchmarks examples scripts
	$(BIN)/ruff format --check src tests benchmarks examples scripts

format: install ## Apply ruff fixes and formatting
	$(BIN)/ruff check --fix src tests benchmarks examples scripts
	$(BIN)/ruff format src tests benchmarks examples scripts

typecheck: install ## mypy --strict on src/
	$(BIN)/mypy

BENCH_OUT := .cache/bench/results.json
BENCH_COMMITTED := docs/assets/bench/results.json

bench: install ## Run every benchmark; write .cache/bench/results.json and the plots in docs/assets/bench
	$(BIN)/python -m pip install -q -e '.[bench]'
	@for f in benchmarks/bench_*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done
	$(BIN)/python benchmarks/scale.py --out $(BENCH_OUT)
	@if [ -x .cache/llama-server/llama-server ]; then $(BIN)/python benchmarks/real_model.py --out $(BENCH_OUT); else echo "no llama-server: real-model figures skipped (simplellmfunc local build)"; fi
	$(BIN)/python benchmarks/plot_results.py $(BENCH_OUT) --out docs/assets/bench
	@# Every ratio against the last committed results: one more than 10 % worse fails the target.
	@git show HEAD:$(BENCH_COMMITTED) > .cache/bench/committed.json 2>/dev/null \
		&& $(BIN)/python benchmarks/compare_results.py .cache/bench/committed.json $(BENCH_OUT) \
		|| { test ! -s .cache/bench/committed.json || exit 1; echo "no committed $(BENCH_COMMITTED) to compare with"; }

PEERS := .cache/peers
PY312 ?= $(shell command -v python3.12 2>/dev/null)

bench-peers: install ## Peer columns (pydantic-ai, openai-agents; SimpleLLMFunc 0.7.8 given a python3.12), each in a benchmark-only venv
	@test -x $(PEERS)/venv/bin/python || $(PY) -m venv $(PEERS)/venv
	$(PEERS)/venv/bin/python -m pip install -q -r benchmarks/peers/requirements.txt
	@if [ -n "$(PY312)" ]; then \
		test -x $(PEERS)/venv312/bin/python || $(PY312) -m venv $(PEERS)/venv312; \
		$(PEERS)/venv312/bin/python -m pip install -q -r benchmarks/peers/requirements-py312.txt; \
	else echo "no python3.12: SimpleLLMFunc 0.7.8 (Requires-Python >= 3.12) skipped"; fi
	$(BIN)/python benchmarks/peers/bench_peers.py --out .cache/bench/peers.json

soak: install ## 1,000 concurrent sessions with injected faults: typed endings, valid histories, no leaks
	$(BIN)/python benchmarks/soak.py

demo: install ## A typed call and a tool-using agent turn, events in the terminal (.env provider, else local SmolLM2 on llama-server; LOCAL_MODEL=gemma3)
	$(BIN)/python examples/demo.py --model $(LOCAL_MODEL)

demo-ui: install ## Both chat front ends on the local model (SmolLM2; LOCAL_MODEL=gemma3): the demo's agent turn each, checked, screenshots to .cache/demo-ui/ (DEMO_UI_OUT=docs/assets to refresh the README's)
	@command -v chromium >/dev/null 2>&1 || { command -v apt-get >/dev/null 2>&1 && \
		(apt-get install -y -qq chromium || sudo apt-get install -y -qq chromium); } || \
		{ echo "demo-ui needs Debian's chromium (apt-get install chromium)"; exit 1; }
	$(BIN)/python scripts/demo_ui.py

$(DOCS_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q -e '.[docs]'
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP) ## Build the documentation site into site/ (strict: broken links and references fail)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

docs-serve: $(DOCS_STAMP) ## Serve the documentation site on http://127.0.0.1:8000 with live reload
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

clean: ## Remove the virtualenv, caches and the built site
	rm -rf $(VENV) .cache .mypy_cache .ruff_cache site
