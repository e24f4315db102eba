# mvengine: `make run` sets up and runs the example project, `make test` sets up and runs the tests.
# Both create .venv on first use (Python 3.11+), install Java 17 when no Java 17+ is found, and fetch Delta Lake's
# Spark connector into jars/ with Maven (installed when missing) from pom.xml. `make test` also installs a
# Chromium for the browser tests of `mv ui` (scripts/ensure-chromium.sh).
.DEFAULT_GOAL := help
PYTHON ?= python3.11
VENV   := .venv
STAMP  := $(VENV)/.installed
JARS   := jars/.fetched
BROWSER := $(VENV)/.browser

help:  ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@bash scripts/ensure-java.sh
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

$(JARS): pom.xml
	@bash scripts/ensure-java.sh
	@bash scripts/fetch-jars.sh
	@touch $(JARS)

$(BROWSER): $(STAMP)
	@bash scripts/ensure-chromium.sh $(VENV)/bin/python
	@touch $(BROWSER)

jars: $(JARS)  ## Fetch Delta Lake's Spark connector (pom.xml) into jars/

setup: $(STAMP) $(JARS) $(BROWSER)  ## Create .venv, install mvengine with its test tools, fetch Delta's jars, a Chromium

run: $(STAMP) $(JARS)  ## Run the main job on the example project (views/, conf/)
	$(VENV)/bin/mv --project . refresh

test: $(STAMP) $(JARS) $(BROWSER)  ## Run the test suite (a real local Spark and real Delta tables)
	$(VENV)/bin/python -m pytest -q --durations=10

bench: $(STAMP) $(JARS)  ## Measure read/write throughput of the Delta data source (1M rows, local[2])
	$(VENV)/bin/python benchmarks/storage_throughput.py --rows 1000000

clean:  ## Remove the example warehouse and caches (keeps .venv)
	rm -rf warehouse .pytest_cache .hypothesis

.PHONY: help jars setup run test bench clean
