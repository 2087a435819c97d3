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
# The suite runs as two pytest processes side by side, as most tests keep one core busy
# (`--half`, tests/conftest.py): tito's tests, and the rest with two long walks over every
# module. The second one's report is printed when both are done; `make test` fails when either
# does. `python -m pytest -q` runs it all in one process (the bare `pytest` script would find
# tests/tito before the installed tito package).
test: install system lint check
	@log=$$(mktemp); \
	$(PYTHON) -m pytest -q -p no:cacheprovider --half 2 >"$$log" 2>&1 & other=$$!; \
	echo "tito's tests (pytest --half 1), beside the others:"; \
	$(PYTHON) -m pytest -q --half 1; first=$$?; \
	wait $$other; second=$$?; \
	echo; echo "every other test (pytest --half 2):"; cat "$$log"; rm -f "$$log"; \
	test $$first = 0 && test $$second = 0

# The full benchmark, one process per measurement (about 14 minutes on 2 quiet cores), then its
# table as Markdown (the head of benchmarks/RESULTS.md). `--quality` adds a 2,000-step loss race.
bench: install
	$(PYTHON) -m benchmarks.run --out benchmarks/results.json
	$(PYTHON) -m benchmarks.report benchmarks/results.json
