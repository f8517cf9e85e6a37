# Quick start:  make app   (install, then start the app on the embedded model)
#               make test  (install what the tests need, then run them; .ci/run calls this)
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
PORT   ?= 8501

.PHONY: install install-dev app test lint bench gpu-check

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# the stamp is rebuilt whenever a requirements file changes
$(VENV)/.installed: requirements.txt requirements-nodeps.txt | $(BIN)/python
	$(BIN)/pip install -q -r requirements.txt
	$(BIN)/pip install -q --no-deps -r requirements-nodeps.txt
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed requirements-dev.txt scripts/install-test-deps.sh
	$(BIN)/pip install -q -r requirements-dev.txt
	bash scripts/install-test-deps.sh
	touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

app: install
	HF_HUB_OFFLINE=1 $(BIN)/streamlit run app.py --server.port $(PORT) --server.headless true

test: install-dev
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q

lint: install-dev
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

bench: install
	HF_HUB_OFFLINE=1 $(BIN)/python benchmarks/bench_engine.py

# every method on the GPU against the CPU, then the GPU timings (docs/benchmarks.md)
gpu-check: install
	HF_HUB_OFFLINE=1 $(BIN)/python benchmarks/gpu_check.py
