# Two entry points: `make run` and `make test`. Everything else they need is installed here.
VENV := .venv
PYTHON := $(VENV)/bin/python
STAMP := $(VENV)/.installed
INSTALL_LOG := $(VENV)/install.log
# The CPU wheel on these machines; an unpinned torch pulls GBs of CUDA packages.
TORCH := torch==2.13.0

.PHONY: install services run test lint bench clean

install: $(STAMP)

# pip's and the build backend's chatter goes to a log, shown only when the install fails.
$(STAMP): pyproject.toml
	@test -x $(PYTHON) || python3 -m venv $(VENV)
	@echo "Installing trainbot and its dependencies into $(VENV) (a few minutes the first time; log: $(INSTALL_LOG))"
	@{ $(PYTHON) -m pip install --upgrade pip && $(PYTHON) -m pip install $(TORCH) && $(PYTHON) -m pip install -e '.[dev]'; } \
		>$(INSTALL_LOG) 2>&1 || { cat $(INSTALL_LOG); echo "make install failed: the output above is in $(INSTALL_LOG)" >&2; exit 1; }
	@touch $(STAMP)

# The console: Slack in this terminal, against the real bot on embedded defaults (local Ray, sqlite MLflow).
# This checkout's .trainbot is its data directory (and its Ray head's): found from anywhere below it.
run: install
	mkdir -p -m 700 .trainbot
	$(VENV)/bin/trainbot console

# Debian's Prometheus and promtool for the live-collection tests, its Alertmanager for the alert-thread
# tests, and PostgreSQL 15 for the state store's tests on the production dialect; without apt and root
# they skip, saying why (CI fails instead).
services:
	@if ! command -v promtool >/dev/null 2>&1; then \
		if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null; \
		else \
			echo "prometheus is not installed and cannot be (no apt-get or not root): its tests will skip"; \
		fi; \
	fi
	@if ! command -v prometheus-alertmanager >/dev/null 2>&1; then \
		if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus-alertmanager >/dev/null; \
		else \
			echo "prometheus-alertmanager is not installed and cannot be (no apt-get or not root): its tests will skip"; \
		fi; \
	fi
	@if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then \
		if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; \
		else \
			echo "postgresql is not installed and cannot be (no apt-get or not root): its tests will skip"; \
		fi; \
	fi

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

test: lint services
	$(VENV)/bin/pytest

bench: install services
	$(PYTHON) bench/diagnose_scale.py
	$(PYTHON) bench/step_timer_overhead.py
	$(PYTHON) bench/sweep_overhead.py
	$(PYTHON) -m bench.collect_scale
	$(PYTHON) -m bench.ack_latency
	$(PYTHON) -m bench.scale_overhead

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
