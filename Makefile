# The two commands a newcomer needs: `make run` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup run test test-sqlite test-postgres lint bench

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

## Serve API + dashboard + background loops on SQLite at http://127.0.0.1:8000
run: setup
	$(BIN)/python manage.py serve --bootstrap --host 127.0.0.1 --port 8000

## The whole suite, on SQLite unless DATABASE_URL points at PostgreSQL
test: setup
	$(BIN)/python -m pytest -q

## ruff and mypy (strict), as CI runs them
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: setup
	$(BIN)/python bench/kv.py
