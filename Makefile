# Quick start:  make app        (install, then start the app on the embedded model)
#               make test-fast  (the tests a developer runs while working: no slow, browser, embedded-model or GPU ones)
#               make test       (lint, then every test; .ci/run calls this)
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
PORT   ?= 8501
# the markers are registered in pyproject.toml and explained in docs/development.md
FAST   ?= not slow and not browser and not embedded and not gpu
# test processes (pytest-xdist): each test runs on one torch thread, so two use both cores of a
# 2-core machine. A test file goes to one worker whole (--dist loadfile), so a module's fixtures
# (a browser test's app server) start once, and files are handed out in the order collected
# (--no-loadscope-reorder; xdist would otherwise hand out the files with most tests first, and
# the two long Chromium walks, two tests, came last). JOBS=0 runs everything in this process.
JOBS   ?= 2
PYTEST  = HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q -n $(JOBS) --dist loadfile --no-loadscope-reorder

.PHONY: install install-dev app test test-fast lint bench gpu-check

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# circuitviz itself, editable (the app and assets/ stay in this checkout), with its pinned
# dependencies from pyproject.toml; the stamp is rebuilt whenever those files change
$(VENV)/.installed: pyproject.toml requirements-nodeps.txt | $(BIN)/python
	$(BIN)/pip install -q -e .
	$(BIN)/pip install -q --no-deps -r requirements-nodeps.txt
	touch $@

# what the tests and the lint need: the `dev` extra, and the `ray` extra (tests/test_batch_ray.py
# starts a local Ray with 2 CPUs)
$(VENV)/.installed-dev: $(VENV)/.installed
	$(BIN)/pip install -q -e '.[dev,ray]'
	touch $@

# Debian's chromium for the browser tests (a system package, so a stamp of its own)
$(VENV)/.chromium: scripts/install-test-deps.sh | $(BIN)/python
	bash scripts/install-test-deps.sh
	touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev $(VENV)/.chromium

# the package's bytecode written first (0.06 s when current): with PYTHONDONTWRITEBYTECODE set,
# as on our machines, Python would otherwise compile every module anew at each start (0.3 CPU s)
app: install
	$(BIN)/python -m compileall -q circuitviz > /dev/null
	HF_HUB_OFFLINE=1 $(BIN)/python -m circuitviz.ui.serve --server.port $(PORT) --server.headless true

# CI: fails on lint before it runs the whole suite
test: install-dev
	$(BIN)/ruff check . && $(BIN)/ruff format --check .
	$(PYTEST)

test-fast: $(VENV)/.installed-dev
	$(PYTEST) -m "$(FAST)"

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

bench: install
	HF_HUB_OFFLINE=1 $(BIN)/python benchmarks/bench_engine.py

# every method on the GPU against the CPU, then the GPU timings (docs/benchmarks.md)
gpu-check: install
	HF_HUB_OFFLINE=1 $(BIN)/python benchmarks/gpu_check.py
