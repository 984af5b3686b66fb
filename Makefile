# The two commands a newcomer needs: `make run` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: setup test-deps run token test soak lint bench

setup: $(STAMP)

# Again when pyproject.toml changes (a new dependency).
$(STAMP): pyproject.toml
	@echo "installing dependencies into $(VENV) (first run only, about a minute)…"
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	@$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	@$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

## What the tests need beyond Python (.ci/install-system): Debian's chromium,
## pgbouncer, node and npm (apt, only what is missing), and the npm packages
## of tests/browser (axe-core) and tests/oidc (oidc-provider) (npm ci, again
## when a package-lock.json changes)
test-deps:
	@.ci/install-system

## Serve API + dashboard + background loops on SQLite at http://127.0.0.1:8000 (make run PORT=8080)
run: setup
	@$(BIN)/python manage.py serve --bootstrap --host $(HOST) --port $(PORT)

## A new API token, printed once: make token NAME=my-service [SCOPE=read|write|admin]
token: setup
	@test -n "$(NAME)" || { echo "usage: make token NAME=my-service [SCOPE=read|write|admin]"; exit 2; }
	@$(BIN)/python manage.py apitoken create "$(NAME)" --scope "$(or $(SCOPE),write)"

## The whole suite, on SQLite unless DATABASE_URL points at PostgreSQL; race,
## scale and soak tests at their CI size (QA_SCALE=ci, tests/scale.py).
## PYTEST_ARGS picks a part of it or adds options, as CI's legs do:
## make test PYTEST_ARGS="--durations=30 tests/unit"
test: setup test-deps
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

## The race, scale and soak tests at full size, on PostgreSQL (on demand):
## DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres make soak
soak: setup test-deps
	@case "$(DATABASE_URL)" in postgres*) ;; *) echo "make soak runs on PostgreSQL: set DATABASE_URL, e.g. DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres make soak"; exit 2;; esac
	QA_SCALE=full $(BIN)/python -m pytest -q -m scaled

## ruff and mypy (strict), as CI runs them
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: setup
	$(BIN)/python bench/kv.py
