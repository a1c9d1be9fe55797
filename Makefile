# The README's two commands: `make demo` and `make test`.
# Each creates .venv when it is missing and installs the project into it. torch is installed FIRST with
# an exact pin: torch==2.13.0 is the CPU build on this machine's disk; a looser pin would let pip pick a
# multi-GB CUDA build. The install is redone only when pyproject.toml changes (stamp file).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
TORCH := torch==2.13.0

.PHONY: demo test install

demo: $(STAMP)
	$(BIN)/esrerank demo

test: $(STAMP)
	if [ -f .ci/lucene.sh ]; then bash .ci/lucene.sh; fi
	$(BIN)/ruff check .
	$(BIN)/pytest -q -rs

install: $(STAMP)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install '$(TORCH)'
	$(BIN)/pip install -e '.[dev,train]'
	touch $(STAMP)
