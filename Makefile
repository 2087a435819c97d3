# Two commands matter: `make test` (install + the whole suite) and `tito milestone run gpt`.
#
# Everything runs with $(PYTHON): the active virtual environment's Python, else .venv's, made on
# first use (so pip never installs into the system's Python). `make test PYTHON=/path/python`
# picks another. Tools are called as `$(PYTHON) -m ...`, so nothing needs to be on PATH.
ifneq ($(VIRTUAL_ENV),)
PYTHON ?= $(VIRTUAL_ENV)/bin/python
else
PYTHON ?= .venv/bin/python
endif
PIP ?= $(PYTHON) -m pip

.PHONY: install system test lint check bench

.venv/bin/python:
	python3 -m venv .venv

install: $(if $(filter .venv/bin/python,$(PYTHON)),.venv/bin/python)
	$(PIP) install --quiet -e ".[grade,dev,hf]"

# PostgreSQL's programs, for the shared-gradebook tests (which start a server of their own when
# none runs): installed with apt-get when root on Debian, else one line saying what is missing.
system:
	@bash .ci/install-postgres

lint:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .

check:
	$(PYTHON) -m tito module export --all --check

# in `make test` a missing PyTorch fails the torch checks instead of setting them aside
test: export TINYTORCH_REQUIRE_TORCH = 1
test: install system lint check
	$(PYTHON) -m pytest -q

# The full benchmark, one process per measurement (about 14 minutes on 2 quiet cores), then its
# table as Markdown (the head of benchmarks/RESULTS.md). `--quality` adds a 2,000-step loss race.
bench: install
	$(PYTHON) -m benchmarks.run --out benchmarks/results.json
	$(PYTHON) -m benchmarks.report benchmarks/results.json
