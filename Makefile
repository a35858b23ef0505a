# simplellmfunc — every target installs what it needs.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export TIKTOKEN_CACHE_DIR := $(CURDIR)/.cache/tiktoken

.DEFAULT_GOAL := help
.PHONY: help install test test-live lint format typecheck bench soak demo clean

help: ## Show this help
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	$(BIN)/python scripts/offline_tiktoken.py "$(TIKTOKEN_CACHE_DIR)"
	touch $(STAMP)

install: $(STAMP) ## Create .venv and install the package editable with dev deps (idempotent)

test: install ## Run the test suite (offline, no real model needed)
	$(BIN)/python -m pytest -q

test-live: install ## End-to-end tests against a real local model (SmolLM2 via llama.cpp)
	$(BIN)/python scripts/local_model.py install
	$(BIN)/python scripts/llama_server.py build
	$(BIN)/python -m pytest -q -m live

lint: install ## ruff check + format check
	$(BIN)/ruff check src tests benchmarks examples scripts
	$(BIN)/ruff format --check src tests benchmarks examples scripts

format: install ## Apply ruff fixes and formatting
	$(BIN)/ruff check --fix src tests benchmarks examples scripts
	$(BIN)/ruff format src tests benchmarks examples scripts

typecheck: install ## mypy --strict on src/
	$(BIN)/mypy

bench: install ## Run every benchmark and print its table
	@for f in benchmarks/bench_*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

soak: install ## 1,000 concurrent sessions with injected faults: typed endings, valid histories, no leaks
	$(BIN)/python benchmarks/soak.py

demo: install ## Chat agent with tools, events streamed to the terminal (.env provider, else local SmolLM2)
	$(BIN)/python examples/demo.py

clean: ## Remove the virtualenv and caches
	rm -rf $(VENV) .cache .mypy_cache .ruff_cache
