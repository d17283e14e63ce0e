# Everything a newcomer needs: `make demo` and `make test` (both create .venv on first use).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install demo test test-all lint format bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[test,dev]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) examples/polyfit.py
	$(PY) examples/train_gpt.py

test: $(STAMP)
	$(PY) -m pytest -n 2 --dist loadfile

test-all: $(STAMP)
	$(PY) -m pytest -n 2 --dist loadfile -m ""

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: $(STAMP)
	$(PY) benchmarks/run.py
	$(PY) benchmarks/bf16_gemm.py
	$(PY) benchmarks/comm.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
