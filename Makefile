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
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-13s %s\n", $$1, $$2}'

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

# The archive of the classes Spark's JVM loads (mvengine/cli/class_archive.py): each start maps them from one
# file instead of reading them from jars, 3 s less per `mv` command. Made once (~1 min), again when Java, PySpark or
# the jars change (its name carries their digest).
class-archive: $(STAMP) $(JARS)  ## Build the archive of Spark's classes that makes each Spark start faster (jars/)
	@$(VENV)/bin/python -m mvengine.cli.class_archive

setup: $(STAMP) $(JARS) $(BROWSER) class-archive  ## Create .venv, install mvengine with its test tools, fetch Delta's jars, a Chromium, build the class archive

run: $(STAMP) $(JARS) class-archive  ## Run the main job on the example project (views/, conf/)
	$(VENV)/bin/mv --project . refresh

# The tiers (tests/README.md): tests/unit (no Spark), tests/spark (one in-process session per worker),
# tests/system (real processes). Two workers: most of a test's time is Spark and subprocesses waiting.
PYTEST := $(VENV)/bin/python -m pytest
WORKERS ?= 2

test: $(JARS) $(BROWSER)  ## Lint, types, layers, the docs site, then every tier (CI runs this)
	@$(MAKE) --no-print-directory --output-sync=target -j2 lint docs class-archive  # side by side: mypy uses one core
	$(PYTEST) -q -n $(WORKERS) --dist loadfile --durations=20

# Coverage costs 6-12% of a Spark test's time (tests/README.md): measured on its own, out of the 25-minute budget.
coverage: $(STAMP) $(JARS) $(BROWSER) class-archive  ## Every tier with line and branch coverage of mvengine (coverage.xml)
	$(PYTEST) -q -n $(WORKERS) --dist loadfile \
	  --cov=mvengine --cov-branch --cov-report=term:skip-covered --cov-report=xml:coverage.xml

test-fast: $(STAMP)  ## The unit tier only: plans, goldens, operators, driver rules, errors (no Spark; < 1 min)
	$(PYTEST) -q -n 0 tests/unit

lint: $(STAMP)  ## ruff (lint and format), mypy, the layer and cycle contracts (import-linter)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

test-nightly: $(STAMP) $(JARS) $(BROWSER) class-archive  ## Every tier with ten times the generated examples (hypothesis profile nightly)
	HYPOTHESIS_PROFILE=nightly $(PYTEST) -q -n $(WORKERS) --dist loadfile --durations=20

test-long: $(STAMP) $(JARS) class-archive  ## The long variants: 200 boundary kills and MV_CRASH_KILLS random kills (crash_long)
	$(PYTEST) -q -n 0 -m crash_long

# The docs site (mkdocs.yml, docs/): the reference pages are generated from the code (scripts/docs_reference.py);
# the build fails when one is out of date, and on any warning (a broken link or anchor: --strict).
docs: $(STAMP)  ## Build the docs site into site/ (--strict), after checking the generated reference pages
	$(VENV)/bin/python scripts/docs_reference.py --check
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

docs-reference: $(STAMP)  ## Write the reference pages of the docs (docs/reference/) again from the code
	$(VENV)/bin/python scripts/docs_reference.py

docs-serve: $(STAMP)  ## Serve the docs site on http://127.0.0.1:8000, rebuilt as pages change
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve

bench: $(STAMP) $(JARS)  ## Measure read/write throughput of the Delta data source (1M rows, local[2])
	$(VENV)/bin/python benchmarks/storage_throughput.py --rows 1000000

# Nexmark side by side with Apache Flink (benchmarks/peers/): Flink from PyPI in a virtual environment of its own,
# Flink's Parquet format and Hadoop's client from Maven Central (benchmarks/peers/pom.xml).
PEERS := benchmarks/peers
PEERS_STAMP := $(PEERS)/.venv/.installed
PEERS_JARS := $(PEERS)/jars/.fetched

$(PEERS_STAMP): $(PEERS)/requirements.txt
	@bash scripts/ensure-java.sh
	@test -x $(PEERS)/.venv/bin/python || $(PYTHON) -m venv $(PEERS)/.venv
	$(PEERS)/.venv/bin/python -m pip install --quiet --upgrade pip
	$(PEERS)/.venv/bin/python -m pip install --quiet -r $(PEERS)/requirements.txt
	@touch $(PEERS_STAMP)

$(PEERS_JARS): $(PEERS)/pom.xml
	@bash scripts/ensure-java.sh
	@cd $(PEERS) && rm -rf jars && mvn -q -B dependency:copy-dependencies
	@touch $(PEERS_JARS)

peers-setup: $(PEERS_STAMP) $(PEERS_JARS)  ## Make Flink's virtual environment and fetch its Parquet jars (benchmarks/peers/)

# PEERS_ARGS, e.g. PEERS_ARGS="--events 2000000 --queries q0 q5": benchmarks/peers/run.py --help
bench-peers: $(STAMP) $(JARS) class-archive peers-setup  ## Nexmark at saturation on Flink, mvengine and Spark's recomputation, side by side
	$(VENV)/bin/python $(PEERS)/run.py $(PEERS_ARGS)

clean:  ## Remove the example warehouse, the built docs and caches (keeps .venv)
	rm -rf warehouse site .pytest_cache .hypothesis .mypy_cache .ruff_cache coverage.xml test-profile*.tsv

.PHONY: help jars class-archive setup run test coverage test-fast lint docs docs-reference docs-serve test-nightly test-long bench peers-setup bench-peers clean
