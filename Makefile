# Each target bootstraps its own virtual environment from pyproject.toml.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint e2e bench online-demo clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/quickstart.py

online-demo: $(STAMP)
	$(BIN)/python examples/online_quickstart.py

test: $(STAMP)
	$(BIN)/ruff check src tests examples bench e2e
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check src tests examples bench e2e
	$(BIN)/ruff format --check src tests examples bench e2e

e2e:
	PYTHON=$(PYTHON) e2e/run.sh

bench: $(STAMP)
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) prime-runs build dist
