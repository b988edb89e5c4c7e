# Assay: `make demo` (the dashboard with a demo run, embedded default) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Two stamps: `make demo` installs only what the product needs; `make test` adds the test tools.
PRODUCT_STAMP := $(VENV)/.product-stamp
STAMP := $(VENV)/.installed-stamp
export DEBUG ?= true

.PHONY: install demo test lint bench bench-peers

$(PRODUCT_STAMP): pyproject.toml
	@test -x $(BIN)/python || { echo "== make: creating the virtual environment $(VENV)"; $(PYTHON) -m venv $(VENV); }
	@echo "== make: installing Assay and what it needs (first run only; about a minute)"
	@$(BIN)/python -m pip install --quiet --upgrade pip
	@$(BIN)/python -m pip install --quiet -e .
	@touch $(PRODUCT_STAMP)

# The client package (clients/python) too: tests/clients drive assay-gate and its pytest plugin.
$(STAMP): $(PRODUCT_STAMP) pyproject.toml clients/python/pyproject.toml
	@echo "== make: installing the test tools (pytest, Playwright, schemathesis, ...) and clients/python"
	@$(BIN)/python -m pip install --quiet -e ".[test]" -e clients/python
	@touch $(STAMP)

install: $(STAMP)

# make demo DEMO_ARGS="--addrport 127.0.0.1:8123" serves elsewhere (python manage.py demo --help).
DEMO_ARGS ?=
demo: $(PRODUCT_STAMP)
	@echo "== make: starting the demo (python manage.py demo $(DEMO_ARGS))"
	$(BIN)/python manage.py demo $(DEMO_ARGS)

# Two test processes (pytest-xdist): the suite is process-safe (a database, a var folder and
# queues of its own per process) and takes about half the time on a 2-core machine.
TEST_WORKERS ?= 2
test: install
	$(BIN)/python -m pytest -n $(TEST_WORKERS)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/python .ci/module_lines.py
	$(BIN)/mypy

bench: install
	for script in bench/bench_*.py; do echo "== $$script"; DEBUG=false SECRET_KEY=bench-only ALLOWED_HOSTS=127.0.0.1,localhost SECURE_SSL_REDIRECT=false $(BIN)/python $$script || exit 1; done

# Issue 17's side-by-side with promptfoo and Inspect AI (bench/peers/README.md): installs the
# pinned peers under bench/peers/ the first time, then runs everything (about 2 hours on 2 cores).
# make bench-peers PEERS_ARGS="--cases 200 --repeats 1" for a short check.
PEERS_ARGS ?=
bench-peers: install
	@test -x bench/peers/inspect/.venv/bin/inspect -a -x bench/peers/promptfoo/node_modules/.bin/promptfoo || bench/peers/setup.sh
	DEBUG=false $(BIN)/python bench/peers/bench_peers.py $(PEERS_ARGS)
