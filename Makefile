# Assay: `make demo` (the dashboard with a demo run, embedded default) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
export DEBUG ?= true

.PHONY: install demo test lint bench

# The client package (clients/python) too: tests/clients drive assay-gate and its pytest plugin.
$(STAMP): pyproject.toml clients/python/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]" -e clients/python
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/python manage.py demo

test: install
	$(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

bench: install
	for script in bench/bench_*.py; do echo "== $$script"; DEBUG=false SECRET_KEY=bench-only $(BIN)/python $$script || exit 1; done
