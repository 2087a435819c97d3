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

# The full benchmark, one process per measurement (about 6 minutes on 2 quiet cores), then its
# table as Markdown (the head of benchmarks/RESULTS.md). `--quality` adds a 2,000-step loss race.
bench: install
	$(PYTHON) -m benchmarks.run --out benchmarks/results.json
	$(PYTHON) -m benchmarks.report benchmarks/results.json
