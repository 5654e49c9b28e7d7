# The book's two commands (see README.md):
#   make book   set up .venv, prepare CIFAR-10, build the HTML book
#   make test   set up, then every test: unit tests, strict nbval over every
#               notebook, the book build with warnings as errors, the browser test
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.requirements-installed
JB := $(VENV)/bin/jupyter-book
NOTEBOOKS := $(sort $(wildcard notebooks/*.ipynb)) $(wildcard book/*.ipynb)
NBVAL := --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg

# Where CIFAR-10 comes from. This project's machines and CI have a local mirror of
# the official archive next to the checkout (with its own checksum); everyone else
# downloads the official archive. Override: make data CIFAR10_SOURCE=... CIFAR10_MD5=...
MIRROR := ../shared/data/cifar-10-binary.tar.gz
ifneq ($(wildcard $(MIRROR)),)
CIFAR10_SOURCE ?= $(MIRROR)
CIFAR10_MD5 ?= f589d28b67d6155e7dae07c1a46334ef
else
CIFAR10_SOURCE ?= https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz
CIFAR10_MD5 ?=
endif

.PHONY: venv data book test unit-test reproduce-test nbval book-html browser-test system-deps clean

venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $@

data: venv
	$(PY) -m msresnet.prepare --source $(CIFAR10_SOURCE) --root data $(if $(CIFAR10_MD5),--md5 $(CIFAR10_MD5),)

# Chromium for the browser test (Debian's package; needs root or sudo).
system-deps:
	@command -v chromium >/dev/null || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; }

book-html: venv
	$(JB) build . -W -n --keep-going
	@echo "The book is at $(CURDIR)/_build/html/index.html"

book: data book-html

# unit-test includes the end-to-end papermill reproduction (every chapter under the
# smoke profile, tests/test_reproduce_smoke.py); reproduce-test runs only that.
unit-test: venv data
	$(PY) -m pytest -q --durations=15 -m "not browser" tests

reproduce-test: venv data
	$(PY) -m pytest -q tests/test_reproduce_smoke.py

nbval: venv data
	$(PY) -m pytest -q $(NBVAL) $(NOTEBOOKS)

browser-test: system-deps book-html
	$(PY) -m pytest -q -m browser tests

test: unit-test nbval browser-test
	@echo "make test: all checks passed"

clean:
	rm -rf _build runs
