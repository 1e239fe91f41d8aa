# Two commands on a fresh machine (see README):
#   make demo   set everything up, then run the main job on the bundled default
#   make test   set everything up, then run the tests (make test-fast: unit + contract tests only)
# Setup is idempotent: stamps make a second run install nothing.

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.deploytool-setup
WEB_STAMP := web_harness/node_modules/.deploytool-setup
WORKSPACE ?= runs

.PHONY: setup system python web bytecode demo lint test test-fast test-unit test-integration bench clean

# The Debian packages first (npm among them), then the Python venv and the web harness side by side.
setup:
	@$(MAKE) --no-print-directory system
	@$(MAKE) --no-print-directory -j2 python web

system:
	@scripts/setup_system.sh

python: $(STAMP)

# scripts/install_python.sh: torch's CPU wheel (the one on disk; anything else would pull a CUDA build), the lock,
# then requirements-nodeps.txt without their dependencies (onnx2tf pins old versions of the whole stack but works
# on ours), then deploytool; with uv from pip's own configuration (a fresh venv: ~10 s where pip took 67 s), pip
# when uv cannot. Neither compiles: compileall compiles the ~25,600 files on every core (pip compiled them one by
# one: a fresh venv took 142 s -> 67 s of pip + 43 s of compileall on 2 cores). The bytecode is
# the same (timestamp pycs); a file no Python 3.11 can compile (a few examples and py3.12-only tests inside
# packages) is skipped the way pip skips it, so compileall's exit status is not ours to check. Nothing runs the
# packages' own tests nor transformers (only litert-torch's generative examples import it): not compiling them
# halves compileall (63 s -> 32 s on 2 cores, 25,600 -> 17,700 files); a module left out still imports, compiled
# in memory. Nor the packages and subpackages that came with the pins but that no test, command or worker imported in
# a whole `make test` (the .pyc files a clean clone's run never read, by their access times): 2,900 files fewer,
# compileall 40 -> 35 s beside a busy core. scripts/site_bytecode.py runs it, and keeps what it wrote for the next venv
# of the very same files (uv installs hard links into its cache: a clean clone's venv holds the same files, with the
# same times, which timestamp .pyc files name): a clean clone links them in (about 1 s) instead of compiling.
UNUSED_PACKAGES := xdsl orbax tensorboard skl2onnx kagglesdk kagglehub flax optax pydantic mypyc ydf markdown_it \
  markdown grpc treescope werkzeug fsspec lark typer wheel fire sympy/physics sympy/stats dask/dataframe dask/array \
  huggingface_hub/inference huggingface_hub/cli numpy/distutils setuptools/_distutils sqlalchemy/testing \
  litert_converter/tools torchao/_models jax/extend
empty :=
space := $(empty) $(empty)
NOT_COMPILED := (/tests?/|_test\.py$$|/site-packages/(transformers|$(subst $(space),|,$(strip $(UNUSED_PACKAGES))))/)
$(STAMP): requirements.lock requirements-nodeps.txt pyproject.toml scripts/install_python.sh scripts/site_bytecode.py
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] >= (3, 11), "deploytool needs Python 3.11+"'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	scripts/install_python.sh $(VENV)
	$(BIN)/python scripts/site_bytecode.py '$(NOT_COMPILED)'
	touch $(STAMP)

web: $(WEB_STAMP)

$(WEB_STAMP): web_harness/package-lock.json
	cd web_harness && npm ci --no-audit --no-fund --loglevel=error
	touch $(WEB_STAMP)

# Exit 1 from migrate means it ran and found failing combinations (they are in
# the report): the demo did its job. Exit 2 (a usage or setup problem) fails.
# deploytool's own bytecode, compiled once (-j 0: on every core): an editable install is not compiled by pip, and
# where PYTHONDONTWRITEBYTECODE is set every process (each CLI call, runtime worker, lab worker) would compile
# the sources again (~0.1 s of CPU each; stale files are recompiled in memory, never trusted).
bytecode: python
	@$(BIN)/python -m compileall -q -j 0 deploytool

demo: setup bytecode
	$(BIN)/deploytool migrate --model lenet5 --target host,web --format all --quantize all --workspace $(WORKSPACE); \
	  rc=$$?; if [ $$rc -eq 1 ]; then echo "demo: some combinations fail (see the report above)"; fi; [ $$rc -le 1 ]

# ruff, mypy (zero errors), then import-linter: the layers and no import cycles (all three configured in
# pyproject.toml). mypy keeps its cache beside the test models' (~/.cache/deploytool/mypy), not in the clone: a
# clean clone of the same sources checks in ~1 s of CPU instead of ~35 s (mypy validates each entry by the
# source's hash, whatever the clone's path; a changed file is checked again).
MYPY_CACHE ?= $${XDG_CACHE_HOME:-$$HOME/.cache}/deploytool/mypy
lint: python
	$(BIN)/ruff check deploytool tests
	$(BIN)/mypy --cache-dir "$(MYPY_CACHE)"
	PYTHONPATH=. $(BIN)/lint-imports --no-cache

# Three workers (pytest-xdist) on the two cores: the tests leave about half the CPU time idle, waiting on browsers,
# the simulated phones and the processes they start (a warm clean clone: 584 s of pytest with two workers, 524 s with
# three, 562 s with four); tests of the one adb server share a worker (tests/conftest.py).
# The longest test files start first (tests/conftest.py's LONGEST_FIRST; xdist's own order is by number of tests).
# The lint runs beside the tests (they leave ~25% of the CPUs idle, waiting on browsers and processes); its output
# follows theirs, and a lint failure fails `make test` whatever the tests said.
test: setup bytecode
	@$(MAKE) --no-print-directory lint > $(VENV)/lint.log 2>&1 & lint=$$!; \
	$(BIN)/python -m pytest -n 3 --dist loadgroup --no-loadscope-reorder --durations=30 tests; rc=$$?; \
	wait $$lint; lint_rc=$$?; echo "--- make lint:"; cat $(VENV)/lint.log; \
	if [ $$lint_rc -ne 0 ]; then echo "make test: the lint failed (above)"; exit 1; fi; exit $$rc

test-unit: python
	$(BIN)/python -m pytest tests/unit

# The edit loop: unit tests and the contract tests over the registries (in-process runtimes; the browser
# and phone runtimes keep the same contract in tests/integration/test_contract_devices.py). Tiny models
# are cached in ~/.cache/deploytool/tests/test-models/: the first run converts them (a few minutes), later ones take seconds.
test-fast: python bytecode
	$(BIN)/python -m pytest tests/unit tests/contract

bench: setup
	for b in bench/bench_*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) web_harness/node_modules runs
