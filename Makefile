# Two entry points on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PW := $(VENV)/bin/pactwright

.PHONY: setup demo test lint typecheck golden bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

setup: $(VENV)/.installed

demo: setup
	$(PY) -m pactwright.demo

# One worker per core (pytest-xdist): every test makes its own store, schema, ports and files.
test: setup
	$(PY) -m pytest -n auto

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: setup
	PYTHON=$(abspath $(PY)) tools/typecheck.sh

# Regenerate golden files; review the diff before committing it.
golden: setup
	$(PY) -m tests.regenerate_golden

bench: setup
	$(PY) bench/parse_bench.py
	$(PY) bench/compile_bench.py
	$(PY) bench/verify_bench.py
	$(PY) bench/activate_bench.py
	$(PY) bench/runtime_bench.py
	$(PY) bench/claim_bench.py
	$(PY) bench/long_agreement_bench.py

clean:
	rm -rf build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
