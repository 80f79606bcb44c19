# All set-up lives here: `make demo` and `make test` work on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test check lint typecheck bench bench-quick screenshots redis-server lock clean interop-venv

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# constraints.txt pins the whole dev environment (tools exactly as pyproject's dev extra names
# them), so lint and type checks report the same on every machine.
$(STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

# Refresh constraints.txt on purpose: resolve the dev extra afresh in a scratch venv.
LOCK_VENV := .lock-venv
lock:
	rm -rf $(LOCK_VENV)
	$(PY) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install -q --upgrade pip
	$(LOCK_VENV)/bin/python -m pip install -q -e '.[dev]'
	{ echo "# The dev environment \`make\` installs (pip install -c constraints.txt -e '.[dev]')."; \
	  echo "# Refresh on purpose with \`make lock\` (resolves afresh in a scratch venv), then review the diff."; \
	  $(LOCK_VENV)/bin/python -m pip freeze --exclude-editable; } > constraints.txt
	rm -rf $(LOCK_VENV)

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
	@# Debian's chromium runs the browser tests (tests/web, driven by Playwright: no
	@# browser download).
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing chromium (apt-get)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else \
	    echo "chromium is missing: install it (e.g. 'sudo apt-get install chromium') and re-run" >&2; exit 1; \
	  fi; }

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
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev,bench]'
	$(BIN)/python bench/run_all.py

# The same suite at small sizes, twice each: checks the scripts and the report, writes
# bench/results/BENCHMARKS-quick.md (not figures to quote).
bench-quick: $(STAMP) redis-server
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev,bench]'
	$(BIN)/python bench/run_all.py --quick

screenshots: $(STAMP) redis-server
	$(BIN)/python tools/screenshots.py screenshots

# The runbook sections of docs/operations.md, from worker_runtime/health.py (tests/unit/test_docs.py).
.PHONY: docs
docs: $(STAMP)
	$(BIN)/python tools/docs_alerts.py

clean:
	rm -rf $(VENV) $(LOCK_VENV) .venv-byf .mypy_cache .ruff_cache .pytest_cache
