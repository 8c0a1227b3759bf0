# Two entry points: `make run` serves the example desks on the embedded offline stack,
# `make test` runs lint, types and the whole test suite. Both install what they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)
export HF_HUB_OFFLINE := 1

.PHONY: run test lint bench install

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet -e '.[dev,voice,server,openai]'
	rm -f $(VENV)/.installed-* && touch $(STAMP)

install: $(STAMP)

run: install
	$(BIN)/voicehub serve

lint: install
	$(BIN)/ruff check voicehub tests
	$(BIN)/ruff format --check voicehub tests
	$(BIN)/mypy voicehub

test: lint
	$(BIN)/python -m pytest -q

bench: install
	$(BIN)/voicehub bench --json bench.json
