# Each target bootstraps its own virtual environment from pyproject.toml.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The runtime install alone (about 50 MB): all the demos need. `make test` adds the dev extra.
RUNTIME_STAMP := $(VENV)/.installed-runtime

.PHONY: demo test test-oldest-otel test-integrations lint e2e e2e-ray bench online-demo clean browser

# The report's browser tests drive Debian's Chromium (a downloaded browser build cannot be
# fetched here). Installed once when missing; where it cannot be installed (no root, no apt)
# the browser tests skip and say why.
CHROMIUM := /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo -n)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP) $(RUNTIME_STAMP)

$(RUNTIME_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	touch $(RUNTIME_STAMP)

demo: $(RUNTIME_STAMP)
	$(BIN)/python examples/quickstart.py

online-demo: $(RUNTIME_STAMP)
	$(BIN)/python examples/online_quickstart.py

browser:
	@[ -x $(CHROMIUM) ] || { echo "installing chromium (Debian package) for the browser tests"; \
	  $(SUDO) apt-get update -qq >/dev/null 2>&1 && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    chromium >/dev/null 2>&1; } || echo "could not install chromium: the browser tests will skip"

# The suite waits on real timers (stalled platforms, in-flight windows, graces) more than it
# computes, so four pytest workers per usable core keep the cores busy: on 2 cores the whole
# suite took 218 s with one worker per core, 152 s with two and 120 s with four
# (docs/benchmarks.md).
TEST_WORKERS ?= $(shell $(PYTHON) -c "import os; print(4 * len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else 4 * (os.cpu_count() or 1))")

# mypy reads its settings (the files it checks among them) from pyproject.toml.
test: $(STAMP) browser
	$(BIN)/ruff check src tests examples bench e2e integrations
	$(BIN)/mypy
	$(BIN)/python -m pytest -n $(TEST_WORKERS)

lint: $(STAMP)
	$(BIN)/ruff check src tests examples bench e2e integrations
	$(BIN)/ruff format --check src tests examples bench e2e integrations
	$(BIN)/mypy

# The oldest OpenTelemetry the project declares (opentelemetry-api/-sdk >=1.27 in
# pyproject.toml), with the instrumentation and distro releases of its day, against the tests
# of the OpenTelemetry contract: the span hooks, processors and exporters, sampling, settings,
# entry points and zero-code setups, raw run spans and GenAI logs. The rest of the suite does
# not depend on the SDK's release and runs in `make test` on every Python.
OLDEST_OTEL := opentelemetry-api==1.27.0 opentelemetry-sdk==1.27.0 \
	opentelemetry-instrumentation==0.48b0 opentelemetry-distro==0.48b0
OLDEST_VENV := .venv-otel-oldest
OLDEST_STAMP := $(OLDEST_VENV)/.installed
OTEL_CONTRACT_TESTS := tests/test_otel_contracts.py tests/test_otel_count_limits.py \
	tests/test_otel_exporters.py tests/test_otel_private.py tests/test_otel_sampling.py \
	tests/test_otel_settings.py tests/test_span_hooks.py tests/test_entry_points.py \
	tests/test_zero_code.py tests/test_newcomer_zero_code.py tests/test_raw_run_registration.py \
	tests/test_exporters_delivery.py tests/test_exporters_online.py \
	tests/test_exporters_samples.py tests/test_exporters_traces.py tests/test_genai_logs.py \
	tests/test_genai_mapping.py tests/test_training_raw.py

$(OLDEST_STAMP): pyproject.toml
	$(PYTHON) -m venv $(OLDEST_VENV)
	$(OLDEST_VENV)/bin/pip install --quiet --upgrade pip
	$(OLDEST_VENV)/bin/pip install --quiet -e . $(OLDEST_OTEL) 'pytest>=8' 'pytest-timeout>=2.3' \
	  'pytest-xdist>=3.5' 'pydantic>=2' 'hatchling>=1.18' 'pyarrow>=15'
	touch $(OLDEST_STAMP)

test-oldest-otel: $(OLDEST_STAMP)
	$(OLDEST_VENV)/bin/python -m pytest -n $(TEST_WORKERS) $(OTEL_CONTRACT_TESTS)

# The recipes of docs/integrations.md (Langfuse, Logfire, MLflow, the OpenAI Agents SDK,
# LiteLLM), each run as written in both setup orders against the real package, a scripted
# model server and the stand-in: integrations/. Its own venv, with the `integrations` extra
# (about 500 MB), so `make test` stays light on every Python.
INTEGRATIONS_VENV := .venv-integrations
INTEGRATIONS_STAMP := $(INTEGRATIONS_VENV)/.installed

$(INTEGRATIONS_STAMP): pyproject.toml
	$(PYTHON) -m venv $(INTEGRATIONS_VENV)
	$(INTEGRATIONS_VENV)/bin/pip install --quiet --upgrade pip
	$(INTEGRATIONS_VENV)/bin/pip install --quiet -e '.[integrations]'
	touch $(INTEGRATIONS_STAMP)

test-integrations: $(INTEGRATIONS_STAMP)
	$(INTEGRATIONS_VENV)/bin/python -m pytest -c integrations/pytest.ini integrations

e2e: e2e-ray
	PYTHON=$(PYTHON) e2e/run.sh

# Runs spanning processes on a real local Ray cluster (tasks, actors, a retried task,
# node-local archives, Ray's working_dir) and a torchrun-style launch, against the
# stand-in: e2e/ray/. Its own venv, with the `ray` extra.
RAY_VENV := .venv-ray
RAY_STAMP := $(RAY_VENV)/.installed

$(RAY_STAMP): pyproject.toml
	$(PYTHON) -m venv $(RAY_VENV)
	$(RAY_VENV)/bin/pip install --quiet --upgrade pip
	$(RAY_VENV)/bin/pip install --quiet -e '.[ray]'
	touch $(RAY_STAMP)

e2e-ray: $(RAY_STAMP)
	RAY_AUTH_MODE=disabled $(RAY_VENV)/bin/python -m pytest -c e2e/ray/pytest.ini e2e/ray

bench: $(STAMP)
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) $(OLDEST_VENV) $(RAY_VENV) $(INTEGRATIONS_VENV) prime-runs build dist
