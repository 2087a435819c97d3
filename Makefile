# Two commands matter: `make test` (install + the whole suite) and `tito milestone run gpt`.
PYTHON ?= python3
PIP ?= $(PYTHON) -m pip

.PHONY: install test lint check bench

install:
	$(PIP) install --quiet -e ".[grade,dev,hf]"

lint:
	ruff check .
	ruff format --check .

check:
	tito module export --all --check

test: install lint check
	$(PYTHON) -m pytest -q

# The full benchmark with the 2,000-step quality run: about 10 minutes on 2 cores.
bench: install
	$(PYTHON) -m benchmarks.run --quality --out benchmarks/results.json
