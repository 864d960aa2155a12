# rlcore — every command the README uses. `make help` lists the targets.
#
# Every target runs in the project's own virtual environment, .venv/: the first target that needs it
# creates it from $(PYTHON) (python3 on PATH, 3.11 or newer), later ones reuse it, and nothing is ever
# installed into the system's Python. `make run PY=/path/to/python` runs in that interpreter instead
# and installs into it as it is (an active venv, a conda env, ...).
PYTHON ?= python3
VENV ?= .venv
ifeq ($(origin PY),undefined)
PY := $(VENV)/bin/python
OWN_VENV := 1
endif
PIP ?= $(PY) -m pip
RUN_STEPS ?= 5000
BENCH_ARGS ?=
# the oldest Rust that builds the crates (Cargo.toml's rust-version)
RUST_MIN := 1.80

.DEFAULT_GOAL := help
.PHONY: help check install install-test install-docs run demo test test-rust test-python docs lint bench wheel clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-13s %s\n", $$1, $$2}'

# ------------------------------------------------------------------------------------------------
# prerequisites, the virtual environment, the installs

check: ## check the prerequisites (Python >= 3.11 with venv, Rust >= 1.80, a C linker); one line per missing piece
	@fail=0; \
	if [ -n "$(OWN_VENV)" ] && [ -x "$(VENV)/bin/python" ]; then \
	  "$(VENV)/bin/python" -c 'import sys' 2>/dev/null || { \
	    echo "rlcore: $(VENV)/ is broken (its Python no longer runs): remove it (rm -rf $(VENV)) and run make again" >&2; fail=1; }; \
	else \
	  py="$(if $(OWN_VENV),$(PYTHON),$(PY))"; \
	  if ! command -v "$$py" >/dev/null 2>&1; then \
	    echo "rlcore: needs Python >= 3.11, but '$$py' is not on PATH: install Python 3.11+ (Debian/Ubuntu: apt-get install python3 python3-venv) or pass PYTHON=/path/to/python3.11" >&2; fail=1; \
	  elif ! "$$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1; then \
	    echo "rlcore: needs Python >= 3.11, but $$py is $$("$$py" -c 'import platform; print(platform.python_version())' 2>/dev/null): install Python 3.11+ and pass PYTHON=/path/to/python3.11" >&2; fail=1; \
	  elif [ -n "$(OWN_VENV)" ] && ! "$$py" -c 'import venv, ensurepip' 2>/dev/null; then \
	    echo "rlcore: $$py cannot create a virtual environment (no venv/ensurepip): Debian/Ubuntu: apt-get install python3-venv" >&2; fail=1; \
	  fi; \
	fi; \
	if ! command -v cargo >/dev/null 2>&1 || ! command -v rustc >/dev/null 2>&1; then \
	  echo "rlcore: needs a Rust toolchain >= $(RUST_MIN) (cargo and rustc on PATH), none found: install it with rustup (rust-lang.org/tools/install), then open a new shell" >&2; fail=1; \
	elif ! rustc --version | awk -v min=$(RUST_MIN) '{ split($$2, v, "."); split(min, m, "."); exit !(v[1] > m[1] || (v[1] == m[1] && v[2] >= m[2])) }'; then \
	  echo "rlcore: needs Rust >= $(RUST_MIN), found $$(rustc --version): run 'rustup update' (distribution packages are often too old)" >&2; fail=1; \
	fi; \
	if ! command -v cc >/dev/null 2>&1; then \
	  echo "rlcore: needs a C compiler and linker (cc) for the Rust build: Debian/Ubuntu: apt-get install build-essential" >&2; fail=1; \
	fi; \
	if [ -n "$(OWN_VENV)" ] && [ ! -d "$(VENV)" ]; then \
	  free_kb=$$(df -Pk . | awk 'NR == 2 { print $$4 }'); \
	  if [ -n "$$free_kb" ] && [ "$$free_kb" -lt 8000000 ]; then \
	    echo "rlcore: warning: $$((free_kb / 1000000)) GB free here; the first install needs about 6 GB (torch with its CUDA libraries)" >&2; \
	  fi; \
	fi; \
	exit $$fail

# One stamp file per set of extras, newer than every file the install builds from, so a second
# `make run` starts at once; with PY= there is no stamp and every install runs pip again.
BUILD_INPUTS := pyproject.toml Cargo.toml Cargo.lock .cargo/config.toml $(shell find rust -name '*.rs' -o -name 'Cargo.toml' 2>/dev/null)
ifdef OWN_VENV
STAMP := $(VENV)/.rlcore-installed
STAMP_DEPS := $(BUILD_INPUTS) | $(VENV)/bin/python check
else
STAMP := build/.rlcore-installed-into-PY
STAMP_DEPS := force | check
endif
.PHONY: force _pip

$(VENV)/bin/python: | check
	@echo "== [1/3] creating the virtual environment $(VENV)/ with $$($(PYTHON) -c 'import sys; print(sys.executable, sys.version.split()[0])')"
	$(PYTHON) -m venv $(VENV)
	@echo "== [1/3] updating pip in $(VENV)/ (a recent pip also shows a progress bar while it installs)"
	$(VENV)/bin/python -m pip install --progress-bar on --upgrade pip

install: $(STAMP)-run ## create .venv if needed, build the Rust core (release) and install rlcore with the training extras
install-test: $(STAMP)-test ## as install, plus the peer-compat, Ray, Atari, EnvPool, video, docs and test extras
install-docs: $(STAMP)-docs ## as install, plus the docs extra (MkDocs, Material, mkdocstrings)

$(STAMP)-run: $(STAMP_DEPS)
	@$(MAKE) --no-print-directory _pip EXTRAS=torch,robotics
	@$(if $(OWN_VENV),touch $@)
$(STAMP)-docs: $(STAMP_DEPS)
	@$(MAKE) --no-print-directory _pip EXTRAS=torch,robotics,docs
	@$(if $(OWN_VENV),touch $@ $(STAMP)-run)
$(STAMP)-test: $(STAMP_DEPS)
	@$(MAKE) --no-print-directory _pip EXTRAS=torch,robotics,compat,ray,atari,envpool,video,docs,test FEATURES=bench
	@$(if $(OWN_VENV),touch $@ $(STAMP)-run $(STAMP)-docs)

# The two install stages (the stamps above and `bench` call them). Stage 2 lists the dependencies of
# the extras and the build backend from pyproject.toml and lets pip install them with its progress (a
# line per package, a bar per download): torch with its CUDA libraries is most of the size and time.
# Stage 3 builds the Rust core in release mode with cargo's progress (pip -v shows the backend's output;
# the backend, maturin, was installed in stage 2 and runs from the environment's scripts folder);
# FEATURES=bench builds the binding's bench-only code (RawBuffer._floor_gather) in.
_pip:
	@echo "== [2/3] installing the dependencies of rlcore[$(EXTRAS)] into $(if $(OWN_VENV),$(VENV)/,$$($(PY) -c 'import sys; print(sys.prefix)')) (the first time: ~3 GB to download, ~5.7 GB installed, several minutes)"
	@mkdir -p build
	@$(PY) -c 'import sys, tomllib; t = tomllib.load(open("pyproject.toml", "rb")); p = t["project"]; x = p["optional-dependencies"]; print("\n".join(p["dependencies"] + [r for e in sys.argv[1].split(",") for r in x[e]] + t["build-system"]["requires"]))' $(EXTRAS) > build/requirements.txt
	$(PIP) install --progress-bar on -r build/requirements.txt
	@echo "== [3/3] building the Rust core (cargo, release build with LTO: a few minutes the first time) and installing rlcore, editable"
	PATH="$$($(PY) -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$$PATH" $(if $(FEATURES),MATURIN_PEP517_ARGS="--features $(FEATURES)") $(PIP) install -v --no-deps --no-build-isolation -e .
	@echo "== rlcore installed in $(if $(OWN_VENV),$(VENV)/ (to use it in your shell: source $(VENV)/bin/activate),$$($(PY) -c 'import sys; print(sys.prefix)'))"

# A wheel of rlcore for another environment (rlcore is not on PyPI). abi3: the binding is built
# against CPython's stable ABI (PyO3's abi3-py311 feature), so one wheel installs into any CPython
# >= 3.11 on this platform; WHEEL_FEATURES= builds a wheel for this interpreter's version only.
# maturin is the build backend of pyproject.toml, installed on demand.
WHEEL_DIR ?= dist
WHEEL_FEATURES ?= pyo3/abi3-py311

wheel: $(if $(OWN_VENV),$(VENV)/bin/python) | check ## build a release wheel into dist/ (abi3: one wheel for CPython >= 3.11); pip install dist/rlcore-*.whl
	@$(PY) -m maturin --version >/dev/null 2>&1 || $(PIP) install --progress-bar on "$$($(PY) -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"][0])')"
	PATH="$$($(PY) -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$$PATH" $(PY) -m maturin build --release --out $(WHEEL_DIR) -i $(PY) $(if $(WHEEL_FEATURES),--features $(WHEEL_FEATURES))
	@echo "== the wheel is in $(WHEEL_DIR)/: pip install $(WHEEL_DIR)/rlcore-*.whl (extras: pip install '$(WHEEL_DIR)/rlcore-<version>-<tags>.whl[torch,robotics]')"

# ------------------------------------------------------------------------------------------------
# what the README runs

run: install ## the main job: train DDPG+HER on FetchReach-v4 and print the eval success rate (the first time ~16 min with the install, then ~5 min on 2 cores)
	$(PY) -m rlcore.cli train --algo ddpg --env FetchReach-v4 --her --steps $(RUN_STEPS) --seed 0

demo: install ## fill a buffer from a real env with random actions, sample, print (~10 s)
	$(PY) -m rlcore.demo

test: install-test test-rust test-python ## install, then cargo test and pytest (with the README/docs snippets and the docs site)

test-rust: | check ## unit tests and property tests of the Rust core
	cargo test -p rlcore-core

test-python: ## pytest (benchmarks excluded; the docs site and every README/docs code block included)
	rm -f build/docs-shots/api-ReplayBuffer.sample.png
	RLCORE_DOCS_SHOTS=$(CURDIR)/build/docs-shots $(PY) -m pytest -q
	@if [ -f build/docs-shots/api-ReplayBuffer.sample.png ]; then \
	  echo "== the docs site's ReplayBuffer.sample page as Chromium drew it: build/docs-shots/api-ReplayBuffer.sample.png"; fi

docs: install-docs ## build the documentation site into site/ (warnings are errors); open site/index.html
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site
	@echo "== the site is in site/: open site/index.html, or serve it with '$(PY) -m mkdocs serve'"

lint: ## rustfmt, clippy, ruff, mypy stubtest of the native module
	cargo fmt --all -- --check
	cargo clippy --all-targets --all-features -- -D warnings
	$(PY) -m ruff check python tests benches examples
	$(PY) -m pytest -q tests/test_native_stubs.py

bench: ## benchmarks side by side with the peers (installs rlcore[bench]); writes docs/benchmarks.md and checks benches/targets.toml
	@$(MAKE) --no-print-directory _pip EXTRAS=torch,robotics,bench FEATURES=bench
	$(PY) benches/report.py --out docs/benchmarks.md --targets benches/targets.toml $(BENCH_ARGS)

clean: ## remove build outputs (the virtual environment .venv/ stays: rm -rf .venv to remove it)
	cargo clean
	rm -rf build dist site .pytest_cache .benchmarks python/rlcore/*.so
