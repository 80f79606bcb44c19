# All set-up lives here: `make demo` and `make test` work on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test check lint typecheck bench screenshots redis-server clean interop-venv

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

# Tests and the demo start their own redis-server; install Debian's when it is missing.
redis-server:
	@command -v redis-server >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing redis-server (apt-get)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools >/dev/null; \
	  else \
	    echo "redis-server is missing: install it (e.g. 'sudo apt-get install redis-server') and re-run" >&2; exit 1; \
	  fi; }
	@# tmux drives the end-to-end console tests; openssl makes the TLS test certificates.
	@for tool in tmux openssl; do command -v $$tool >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$tool >/dev/null; \
	  else \
	    echo "$$tool is missing: install it and re-run" >&2; exit 1; \
	  fi; }; done

demo: $(STAMP) redis-server
	$(BIN)/byconsole --demo

# The interoperability suite (tests/interop) runs the real by-framework pre-release,
# which needs Python >= 3.12: its own venv, built from pyenv's 3.12 or python3.12.
# Without such a Python this prints why and the suite skips itself.
interop-venv: $(STAMP)
	$(BIN)/python -m tests.interop.byf_env

test: $(STAMP) redis-server interop-venv
	$(BIN)/python -m pytest -q -p no:cacheprovider

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

check: lint typecheck test

bench: $(STAMP) redis-server
	$(BIN)/python -m pip install -q -e '.[dev,bench]'
	$(BIN)/python bench/run_all.py

screenshots: $(STAMP) redis-server
	$(BIN)/python -m byconsole.screenshots screenshots

clean:
	rm -rf $(VENV) .venv-byf .mypy_cache .ruff_cache .pytest_cache
