# rlcore — every command the README uses. `make help` lists the targets.
PY ?= python3
PIP ?= $(PY) -m pip
RUN_STEPS ?= 5000
BENCH_ARGS ?=

.DEFAULT_GOAL := help
.PHONY: help install install-test run demo test test-rust test-python lint bench clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-13s %s\n", $$1, $$2}'

install: ## build the Rust core in release mode and install rlcore with the training extras
	$(PIP) install -q -e ".[torch,robotics]"

install-test: ## install rlcore with the training, peer-compat, Ray and test extras
	$(PIP) install -q -e ".[torch,robotics,compat,ray,test]"

run: install ## the main job: train DDPG+HER on FetchReach-v4 and print the eval success rate
	rlcore train --algo ddpg --env FetchReach-v4 --her --steps $(RUN_STEPS) --seed 0

demo: install ## fill a buffer from a real env with random actions, sample, print
	$(PY) -m rlcore.demo

test: install-test test-rust test-python ## install, then cargo test and pytest

test-rust: ## unit tests and property tests of the Rust core
	cargo test -p rlcore-core

test-python: ## pytest (benchmarks excluded)
	$(PY) -m pytest -q

lint: ## rustfmt, clippy, ruff, mypy stubtest of the native module
	cargo fmt --all -- --check
	cargo clippy --all-targets -- -D warnings
	$(PY) -m ruff check python tests benches examples
	$(PY) -m mypy.stubtest rlcore._core

bench: ## benchmarks side by side with the peers (installs rlcore[bench]); writes docs/benchmarks.md
	$(PIP) install -q -e ".[torch,robotics,bench]"
	$(PY) benches/report.py $(BENCH_ARGS)

clean: ## remove build outputs
	cargo clean
	rm -rf build dist .pytest_cache .benchmarks python/rlcore/*.so
