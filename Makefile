# The book's two commands (see README.md):
#   make book   set up .venv, prepare CIFAR-10, build the HTML book
#   make test   set up, then the tests, three groups at once: unit tests (but the
#               chapter twins), strict nbval over every notebook, the book build
#               with warnings as errors and the browser test
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.requirements-installed
JB := $(VENV)/bin/jupyter-book
NOTEBOOKS := $(sort $(wildcard notebooks/*.ipynb)) $(wildcard book/*.ipynb)
NBVAL := --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg

# Where CIFAR-10 comes from. `auto`: the local mirror of the archive that
# MSRESNET_LOCAL_MIRROR names (msresnet.paths.local_mirror, checked against the
# mirror's own MD5), when it is set; the official archive (checked against the
# official MD5) when it is not. prepare prints which one it took.
# Override: make data CIFAR10_SOURCE=official|URL|path CIFAR10_MD5=...
CIFAR10_SOURCE ?= auto
CIFAR10_MD5 ?=
# The local mirror, set here and not in the library: this project's machines and CI
# keep it next to the checkout (../shared/data/ from the repository root), used when
# that file exists; elsewhere it is empty and auto downloads. MSRESNET_LOCAL_MIRROR
# in the environment (even empty) wins over that default; make data LOCAL_MIRROR=path
# names another copy (a missing one is an error, exit 2), and LOCAL_MIRROR= turns it
# off. Exported, absolute, to every recipe (prepare, the tests, nbval, the chapters,
# lab, reproduce).
LOCAL_MIRROR ?= $(if $(filter environment,$(origin MSRESNET_LOCAL_MIRROR)),$(MSRESNET_LOCAL_MIRROR),\
  $(wildcard $(CURDIR)/../shared/data/cifar-10-binary.tar.gz))
export MSRESNET_LOCAL_MIRROR := $(if $(strip $(LOCAL_MIRROR)),$(abspath $(LOCAL_MIRROR)),)

# Python's byte-code cache, on for everything make runs. Where PYTHONDONTWRITEBYTECODE
# is set (as on this project's machines), no process writes a .pyc, so each of the
# few hundred Python processes of make test compiles the package's modules it imports
# again (all of msresnet/: 0.25 CPU-s), and each pytest process rewrites and compiles
# every test module it collects (tests/: 2.9 CPU-s). With the cache the first process
# writes them (__pycache__/, ignored by git) and the others read them. So are the
# venv's packages, which are not compiled at install (below).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: nbval-data-check venv data book test quick-test quick-test-record compat-test param-test unit-test reproduce-test nbval book-html browser-test system-deps clean web-deps browser-model

venv: $(STAMP)

# The installer is uv (pinned here, put into the venv by its own pip): it resolves
# and unpacks on every core. requirements.txt took 34 s that way where pip took 153 s
# (2-core AMD EPYC, 2026-12-07): the same packages at the same versions, less what
# requirements-exclude.txt names (see there). Not byte-compiled at install: that
# compiled all 15,467 files of the venv in 43 s on both cores (86 CPU-s) before any
# test could start, where a whole make test imports 5,699 of them (fresh clone,
# 2026-12-07). About 2,700 are compiled once after the install (PYCACHE_WARM, below),
# the rest when a process under make first imports them (the byte-code cache above).
# Outside make, where PYTHONDONTWRITEBYTECODE=1 is set (this project's machines), a
# process compiles what no make run has cached yet.
# uv reads neither pip's configuration nor PIP_INDEX_URL: behind a package mirror,
# set UV_DEFAULT_INDEX to it.
UV_VERSION := 0.13.9
UV := $(VENV)/bin/uv
UV_INSTALL := $(UV) pip install --quiet --python $(PY)
$(STAMP): requirements.txt requirements-exclude.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet uv==$(UV_VERSION)
	$(UV_INSTALL) --excludes requirements-exclude.txt -r requirements.txt
	$(UV_INSTALL) --no-deps -e .
	touch $@

# The .pyc of what the tests import, written once, by one process, right after the
# install (which compiles nothing, above): otherwise the first processes of make
# test, started together, would each compile the same 2,700 files (6 at once: 44
# CPU-s more than with the cache written; this import alone: 17 CPU-s, measured
# 2026-12-07). Under make -j it runs beside data, web-deps and the book build.
PYCACHE_WARM := $(VENV)/.pycache-written
$(PYCACHE_WARM): $(STAMP)
	$(PY) -c "import msresnet.training.train, msresnet.deploy.export, matplotlib.pyplot, \
	  onnxruntime, onnx, nbval.plugin, xdist, ipykernel.kernelapp, playwright.sync_api, moto"
	touch $@

data: venv
	$(PY) -m msresnet prepare --source $(CIFAR10_SOURCE) --root data $(if $(CIFAR10_MD5),--md5 $(CIFAR10_MD5),)

# Chromium for the browser test (Debian's package; needs root or sudo).
system-deps:
	@command -v chromium >/dev/null || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; }

# onnxruntime-web for the in-browser classifier page (book/classify.md): pinned in
# package.json / package-lock.json, installed from the npm registry, and its
# WebAssembly build copied next to the committed model (web/classify/ort/, not
# committed). html_extra_path in _config.yml publishes web/ at the book's root.
ORT_DIST := node_modules/onnxruntime-web/dist
ORT_FILES := ort.wasm.min.js ort-wasm-simd-threaded.mjs ort-wasm-simd-threaded.wasm
WEB_ORT := web/classify/ort
web-deps: $(WEB_ORT)/.installed

# MathJax too, pinned the same way and copied to web/mathjax/ (published at the book's
# root): the pages load it from there, not from a CDN, so a reader who opens the HTML
# from disk without a network still sees the formulas (_config.yml: mathjax_path).
WEB_MATHJAX := web/mathjax
MATHJAX_DIST := node_modules/mathjax/es5
$(WEB_ORT)/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
	mkdir -p $(WEB_ORT) $(WEB_MATHJAX)/output/chtml/fonts
	cp $(addprefix $(ORT_DIST)/,$(ORT_FILES)) $(WEB_ORT)/
	cp $(MATHJAX_DIST)/tex-chtml.js $(WEB_MATHJAX)/
	cp -r $(MATHJAX_DIST)/output/chtml/fonts/woff-v2 $(WEB_MATHJAX)/output/chtml/fonts/
	touch $@

# The in-browser model from the reference run's best checkpoint (see book/classify.md).
REFERENCE_RUN ?= runs/cpu-reference-2/train
browser-model: venv data
	$(PY) -m msresnet export $(REFERENCE_RUN)/best.ckpt --browser --out web/classify

# Always a full build (about 15 s, the source archive included: book/_ext/source_archive.py
# writes _downloads/msresnet-book.tar.gz): an incremental Sphinx build that finds no page
# out of date skips copying html_extra_path, so an edited web/classify/ file would
# not reach _build/html (seen with classify.js).
book-html: venv web-deps
	rm -rf _build
	$(JB) build . -W -n --keep-going
	@echo "The book is at $(CURDIR)/_build/html/index.html"

book: data book-html

# The edit-test loop: the unit tests that neither train, launch msrun nor run
# notebooks (tests marked slow are the exceptions; see pyproject.toml).
QUICK_MARKERS := not slow and not browser and not params
quick-test: venv data $(PYCACHE_WARM)
	$(PY) -m pytest -q -m "$(QUICK_MARKERS)" \
	  $(if $(filter 0,$(UNIT_WORKERS)),,-n $(UNIT_WORKERS) --dist loadfile) tests

# The same, recorded: results/tests/quick-test.json (counts, time, commit, CPU), which
# the README quotes and tests/test_figures.py checks it against. Run it on an idle host.
quick-test-record: venv data
	$(PY) tests/record_tests.py --markers "$(QUICK_MARKERS)" --workers $(UNIT_WORKERS) \
	  --make "make quick-test-record" --out results/tests/quick-test.json

# The supported MindSpore range (pyproject.toml, book/setup.md "Which MindSpore"): make
# quick-test's selection under another MindSpore, in a venv of its own with every other
# package at requirements.txt's pins, recorded in results/compat/mindspore-VERSION.json
# and .txt. Not part of make test (it downloads that MindSpore, several hundred MB, once
# per COMPAT_VENV). One core by default (COMPAT_WORKERS=0 COMPAT_CPUS=1: taskset -c 1),
# so the machine stays usable. Example: make compat-test MINDSPORE=2.7.0
MINDSPORE ?= 2.7.0
COMPAT_VENV ?= /tmp/msresnet-compat/mindspore-$(MINDSPORE)
COMPAT_WORKERS ?= 0
COMPAT_CPUS ?= 1
compat-test: data
	test -x $(COMPAT_VENV)/bin/python || $(PYTHON) -m venv $(COMPAT_VENV)
	grep -v '^mindspore==' requirements.txt > $(COMPAT_VENV)/requirements.txt
	$(COMPAT_VENV)/bin/pip install --quiet -r $(COMPAT_VENV)/requirements.txt \
	  mindspore==$(MINDSPORE)
	$(COMPAT_VENV)/bin/pip install --quiet --no-deps -e .
	$(PY) tests/record_tests.py --python $(COMPAT_VENV)/bin/python \
	  --markers "$(QUICK_MARKERS)" --workers $(COMPAT_WORKERS) \
	  $(if $(COMPAT_CPUS),--taskset $(COMPAT_CPUS),) \
	  --make "make compat-test MINDSPORE=$(MINDSPORE)" \
	  --out results/compat/mindspore-$(MINDSPORE).json \
	  --txt results/compat/mindspore-$(MINDSPORE).txt

# Every unit test, slow ones included (the reproduce command runs chapter 2 and small
# notebooks of its own; nbval is the one run of every chapter). Two pytest-xdist
# workers, each test file in one of them (module fixtures stay shared): the unit
# tests keep about 1.3 of the 2 cores busy on their own (subprocesses, servers,
# waits), so two files at a time took 8 min 27 s where one at a time took 17 min 3 s
# (idle 2-core Intel Xeon, 2026-12-01). UNIT_WORKERS=0 runs them one at a time.
UNIT_WORKERS ?= 2
UNIT_MARKERS ?= not browser and not params
unit-test: venv data $(PYCACHE_WARM)
	$(PY) -m pytest -q --durations=40 -m "$(UNIT_MARKERS)" \
	  $(if $(filter 0,$(UNIT_WORKERS)),,-n $(UNIT_WORKERS) --dist loadfile) tests

# The training chapters with more parameter values (batch size 1, the cifar stem,
# other schedules, 224x224): tests/test_chapter_parameters.py, several minutes.
param-test: venv data
	$(PY) -m pytest -q -m params tests/test_chapter_parameters.py

reproduce-test: venv data
	$(PY) -m pytest -q tests/test_reproduce.py

# Strict nbval is the one run of every chapter in `make test`, on a second copy of
# CIFAR-10 that differs from the one that produced the stored outputs (records
# reordered, pixels nudged by +-1: tests/cifar10_variant.py), so no stored output
# may depend on which genuine copy a reader has. NBVAL_DATA=data uses data/ itself;
# any other folder inside the repository holds a variant copy (made here when missing),
# whose name conftest.py masks in the chapters' outputs (tests/nbval_sanitize.cfg).
NBVAL_DATA ?= data-variant
# Two chapters at a time (pytest-xdist; conftest.py keeps each notebook, and chapters
# 4, 5 and 8, which build on each other, in one worker). NBVAL_WORKERS=0: one at a time.
NBVAL_WORKERS ?= 2
# The prepared copy's record, written by `make data` (order-only: under make -j the
# variant must wait for it, but an existing record is not remade every time).
data/cifar-10-batches-bin/.prepared.json: | data ;
$(NBVAL_DATA)/cifar-10-batches-bin/.prepared.json: data/cifar-10-batches-bin/.prepared.json
	$(PY) tests/cifar10_variant.py data/cifar-10-batches-bin $(NBVAL_DATA)

# The run also keeps every executed cell's outputs (conftest.py) and gives chapter 6's
# local object store recognisable fake credentials; tests/test_nbval_outputs.py then
# checks that neither appears in anything the chapters printed or its job wrote.
NBVAL_ENV := MSRESNET_DATA_DIR=$(NBVAL_DATA) MSRESNET_METRICS_DIR=$(CURDIR)/runs/nbval-metrics \
  MSRESNET_NBVAL_OUTPUTS=$(CURDIR)/runs/nbval-outputs \
  LOCAL_S3_ACCESS_KEY_ID=AKIANBVALCANARY4X7Q LOCAL_S3_SECRET_ACCESS_KEY=nbval-canary-secret-R8tW2mK5pZ9vL3xQ
nbval: nbval-data-check venv data $(PYCACHE_WARM) $(if $(filter data,$(NBVAL_DATA)),,$(NBVAL_DATA)/cifar-10-batches-bin/.prepared.json)
	rm -rf runs/nbval-metrics runs/nbval-outputs
	$(NBVAL_ENV) $(PY) -m pytest -q --durations=12 $(NBVAL) \
	  $(if $(filter 0,$(NBVAL_WORKERS)),,-n $(NBVAL_WORKERS)) $(NOTEBOOKS)
	$(NBVAL_ENV) MSRESNET_NBVAL_NOTEBOOKS="$(NOTEBOOKS)" $(PY) -m pytest -q \
	  tests/test_chapter_metrics.py tests/test_nbval_outputs.py

# Refused before anything is made or deleted: the stored outputs name the data copy
# relative to the repository (conftest.py masks it), so it must lie inside it.
nbval-data-check:
	@case "$(NBVAL_DATA)" in /*|../*|..) echo "make nbval: NBVAL_DATA=$(NBVAL_DATA): name a \
	folder inside the repository, relative to its root (e.g. data-variant)" >&2; exit 2;; esac

# data: tests/test_source_archive.py installs the book's source archive from the setup
# page and runs msresnet doctor --profile cpu on a copy of data/ (as prepare would).
browser-test: system-deps book-html data $(PYCACHE_WARM)
	$(PY) -m pytest -q -m browser tests

# The three at once, each recipe's output shown when it ends (--output-sync): the unit
# tests and the browser test spend much of their time waiting (subprocesses, servers,
# Chromium), which strict nbval's training fills, and the two cores stay busy (about
# 90% over a fresh clone's run). The timings the chapters and tests check under that
# load are ratios of measurements taken side by side or bounds with wide margins.
# Tests marked twin repeat what another part of this command checks on its own run
# (a chapter under nbval, the doctor run from the source archive, nbval beside busy
# cores), so they are left out here (make unit-test runs them).
test:
	$(MAKE) --no-print-directory -j3 --output-sync=target \
	  UNIT_MARKERS="not browser and not params and not twin" unit-test nbval browser-test
	@echo "make test: all checks passed"

clean:
	rm -rf _build runs node_modules $(WEB_ORT)

# ---- Run the chapters interactively (README: "Run the chapters interactively") ----
# make lab      the same pinned .venv and CIFAR-10 as `make book`, the kernel
#               "ResNet50 book (MindSpore 2.10)" (msresnet-book) registered inside
#               .venv, then JupyterLab in notebooks/ on 127.0.0.1, no browser; it
#               prints the URL with its token and the ssh port-forwarding line.
#               Options: make lab LAB_ARGS="--port 9999" (0: any free port).
# make kernel   only register that kernel (for jupyter nbconvert/papermill -k msresnet-book).
# make restore  put back the chapters' stored outputs that running them rewrote
#               (only notebooks/, so `make nbval` passes again): in a clone, from the
#               last commit; in the unpacked source archive (no git), from the
#               archive, ../msresnet-book.tar.gz unless SOURCE_ARCHIVE=path says.
LAB_ARGS ?=
SOURCE_ARCHIVE ?= ../msresnet-book.tar.gz
.PHONY: lab kernel restore

lab: venv data
	$(PY) -m msresnet lab $(LAB_ARGS)

kernel: venv
	$(PY) -m msresnet lab --register-only

restore:
	@if [ "$$(git rev-parse --show-toplevel 2>/dev/null)" = "$$(pwd -P)" ]; then \
	  git checkout HEAD -- notebooks/; \
	elif [ -f "$(SOURCE_ARCHIVE)" ]; then \
	  tar -xzf "$(SOURCE_ARCHIVE)" --strip-components=1 msresnet-book/notebooks; \
	  echo "notebooks/ extracted again from $(SOURCE_ARCHIVE)"; \
	else \
	  echo "make restore: no git checkout here and no $(SOURCE_ARCHIVE);" \
	    "name the archive you unpacked: make restore SOURCE_ARCHIVE=path" >&2; exit 1; \
	fi
