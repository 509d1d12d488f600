# Two entry points: `make run` and `make test`. Everything else they need is installed here.
VENV := .venv
PYTHON := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The CPU wheel on these machines; an unpinned torch pulls GBs of CUDA packages.
TORCH := torch==2.13.0

.PHONY: install run test lint bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --upgrade pip
	$(PYTHON) -m pip install --quiet $(TORCH)
	$(PYTHON) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# Until the console lands, the main job is diagnosing the example bundles.
run: install
	@for bundle in examples/bundles/*/; do \
		echo "== $$bundle"; $(VENV)/bin/trainbot diagnose "$$bundle" || exit $$?; echo; \
	done

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

test: lint
	$(VENV)/bin/pytest

bench: install
	$(PYTHON) bench/diagnose_scale.py
	$(PYTHON) bench/step_timer_overhead.py
	$(PYTHON) bench/sweep_overhead.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
