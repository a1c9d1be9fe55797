# The README's two commands: `make demo` and `make test` (ruff, the docs site built with --strict into
# the git-ignored site/, then the tests). `make test` installs Debian's chromium where /usr/bin/chromium is
# missing (the review page's browser tests drive it through playwright; without it they skip).
# Each creates .venv when it is missing and installs the project into it. torch is installed FIRST with
# an exact pin: torch==2.13.0 is the CPU build on this machine's disk; a looser pin would let pip pick a
# multi-GB CUDA build. The install is redone only when pyproject.toml changes (stamp file).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
TORCH := torch==2.13.0

.PHONY: demo test install test-serving-notorch mutation peers opensearch opensearch-stop opensearch-clean

demo: $(STAMP)
	$(BIN)/esrerank demo

# The OpenSearch home the engine tests run on is laid out (mvn, a JVM start per module: about a minute on
# two cores) beside the install, which mostly waits on the network and leaves a core idle; the tests
# start only once both are done (the engine fixtures would otherwise lay it out again themselves).
# Where Java or Maven is missing, the layout says so in build/opensearch-assemble.log and the engine
# tests skip, naming what is missing, as before.
test:
	@mkdir -p build; $(PYTHON) -m es_plugin_bridge.opensearch_node assemble >build/opensearch-assemble.log 2>&1 & \
	 assembling=$$!; $(MAKE) --no-print-directory $(STAMP); installed=$$?; wait $$assembling || \
	 echo "the OpenSearch layout did not finish (build/opensearch-assemble.log); the engine tests will say why"; \
	 exit $$installed
	bash .ci/java_jars.sh
	@[ -x /usr/bin/chromium ] || apt-get install -y -q --no-install-recommends chromium >build/chromium-install.log 2>&1 || \
	 { apt-get update -q && apt-get install -y -q --no-install-recommends chromium; } >>build/chromium-install.log 2>&1 || \
	 echo "make: chromium could not be installed (build/chromium-install.log); the review page's browser tests will skip, saying why"
	$(BIN)/ruff check .
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir site
	$(BIN)/pytest -q -rs --durations=30 -n 2

install: $(STAMP)

# A real OpenSearch 2.19.1 node to try the product against, without Docker: the home is laid out from
# Maven Central with mvn into the git-ignored build/opensearch/ (once; reused), the node runs in the
# background on 127.0.0.1 and a free port, and its URL is printed (docs/opensearch.md, "A node without
# Docker"). Needs Java 17 and Maven; standard-library Python only, so no venv is needed. The node's data
# (build/opensearch/local/data) is kept across opensearch-stop, a crash and the next start, on the same
# port when it is free; opensearch-clean deletes it (the node must be stopped), saying so.
# `make opensearch NODES=3`: a cluster of three nodes (build/opensearch/cluster/node-N, 512 MB heap each),
# one URL a line once it is green; `make opensearch-stop` stops the single node and the cluster.
NODES ?= 1

opensearch:
	@$(PYTHON) -m es_plugin_bridge.opensearch_node start --nodes $(NODES)

opensearch-stop:
	@$(PYTHON) -m es_plugin_bridge.opensearch_node stop

opensearch-clean:
	@$(PYTHON) -m es_plugin_bridge.opensearch_node clean --nodes $(NODES)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The install goes through uv (from PyPI, into the venv): it resolves, downloads and links in parallel and
# compiles no bytecode ahead (Python does, on first import, for what is used). A fresh install took 18-38 s
# with uv against 203 s with pip (both from PyPI without a cache, torch from ../shared/wheels). uv reads
# UV_FIND_LINKS (comma-separated), not PIP_FIND_LINKS (space-separated), so a PIP_FIND_LINKS folder (where
# .ci/run finds the CPU torch) is passed on, and it uses the system's certificates, as pip does. Where uv
# cannot be had or fails, pip installs the same pins, as before.
comma := ,
space := $(subst ,, )
UV_FIND_LINKS ?= $(subst $(space),$(comma),$(strip $(PIP_FIND_LINKS)))
export UV_FIND_LINKS
UV := $(BIN)/uv pip install --native-tls --python $(BIN)/python

$(STAMP): pyproject.toml | $(BIN)/python
	@{ $(BIN)/pip install -q uv && $(UV) '$(TORCH)' && $(UV) -e '.[dev,train]'; } || \
	 { echo "make: installing with uv failed; installing with pip"; \
	   $(BIN)/pip install '$(TORCH)' && $(BIN)/pip install -e '.[dev,train]'; }
	touch $(STAMP)

# The sidecar's tests where torch is not installed (not part of `make test`): a second venv with the
# serving install plus the test tools and the `elastic` extra (scipy, ir-measures: the bridge and the
# evaluate CLI the tests also drive; still no torch), run against tiny models that the torch venv
# builds once into build/test-models (tests/tiny_models.py; the tests find them through
# ESRERANK_TEST_MODELS). One deselected test drives `esrerank evaluate`, whose ranker discovery still
# needs scikit-learn (es_plugin_bridge/rankers/__init__.py stops at rankers/baselines.py).
NOTORCH := .venv-notorch
TEST_MODELS := build/test-models

$(NOTORCH)/.installed-stamp: pyproject.toml
	$(PYTHON) -m venv $(NOTORCH)
	$(NOTORCH)/bin/pip install -e '.[dev,elastic]'
	touch $@

test-serving-notorch: $(STAMP) $(NOTORCH)/.installed-stamp
	$(BIN)/python tests/tiny_models.py $(TEST_MODELS)
	! $(NOTORCH)/bin/python -c 'import torch' 2>/dev/null
	ESRERANK_TEST_MODELS=$(abspath $(TEST_MODELS)) $(NOTORCH)/bin/pytest -q -rs -p no:cacheprovider \
		tests/serving/test_serving_*.py tests/bridge/test_bridge.py tests/bridge/test_bridge_client.py tests/test_core_imports.py \
		--deselect tests/serving/test_serving_hostile_input.py::test_evaluate_with_an_unwritable_output_leaves_none_behind

# Mutation testing of the scoring core (not part of `make test`; slow: hours on 2 cores for every
# module). mutmut 3 ([tool.mutmut] in pyproject.toml) reuses earlier results in mutants/ (delete it
# for a fresh run); `make mutation MUTANTS='es_plugin_bridge.core.fusion*'` runs one module. The
# report (per module, JSON and Markdown) goes to reports/mutation.{json,md}.
MUTANTS ?=
MUTATION_JOBS ?= 2

mutation: $(STAMP)
	$(BIN)/python tests/tiny_models.py $(TEST_MODELS)
	-ESRERANK_TEST_MODELS=$(abspath $(TEST_MODELS)) $(BIN)/mutmut run --max-children $(MUTATION_JOBS) $(MUTANTS)
	$(BIN)/python tests/tools/mutation_report.py reports

# The peers the serving benchmark measures the sidecar against (benchmarks/serving.py; not part of
# `make test`): infinity-emb in its own venv, since it pins numpy<2, sentence-transformers<4 and
# click<8.2, which the project's venv cannot hold. torch is installed first with the same exact pin
# as above (the CPU build on this machine's disk; a looser pin would let infinity-emb's torch extra pull
# a multi-GB CUDA build); the check after it refuses a venv that ended up with any nvidia-* package.
PEERS := build/peers-venv
INFINITY := infinity-emb[server,torch]

peers: $(PEERS)/.installed-stamp

$(PEERS)/.installed-stamp:
	$(PYTHON) -m venv $(PEERS)
	$(PEERS)/bin/pip install '$(TORCH)'
	$(PEERS)/bin/pip install '$(INFINITY)' '$(TORCH)'
	$(PEERS)/bin/pip list 2>/dev/null | grep -E '^torch +2\.13\.0\+cpu$$'
	! $(PEERS)/bin/pip list 2>/dev/null | grep -i '^nvidia-'
	touch $@
