# The two commands users need: `make bench` and `make test`. Both set up what
# is missing (engine, Python env, images) and skip what is already there,
# printing `[setup]` lines only: the tools' own output (apt-get, pip, image
# builds) goes to FIXOS_SETUP_LOG (default results/setup.log), whose last lines
# a failing step prints. A fresh set-up beside the real one:
# `make setup VENV=/tmp/v FIXOS_IMAGE_NAMESPACE=scratch FIXOS_SETUP_LOG=/tmp/v.log`.
VENV  := .venv
BIN   := $(VENV)/bin
ARGS  ?=

HARBOR_VERSION ?= 0.26.0

.PHONY: bench test setup-browser nightly perf perf-sessions perf-ray perf-price perf-failing perf-harbor soak harbor-check train-smoke lint format setup engine venv images clean

bench: setup
	@$(BIN)/fixos bench $(ARGS)

test: setup setup-browser
	@$(BIN)/pytest $(ARGS)

# The full sweep CI only samples: every scenario x seeds 1-3 x oracle/nop/partial and every
# adversarial strategy where it applies. ARGS="--shard 2/4" for one of 4 machines;
# ARGS=--harbor adds every scenario under Harbor itself. Not part of `make test`.
nightly: setup
	$(BIN)/python scripts/nightly.py $(ARGS)

perf: setup
	@scripts/ensure-compose
	$(BIN)/python scripts/perf.py $(ARGS)

# Only the price of a valid episode: each phase's wall and machine CPU-s, episodes/min.
perf-price: setup
	$(BIN)/python scripts/perf_price.py $(ARGS)

# Only a failing episode's verify against a passing one's (oracle, nop, partial; target <= 1.5).
perf-failing: setup
	$(BIN)/python scripts/perf_failing.py $(ARGS)

# Only Harbor side by side with FixOS: 8 easy_1 oracle trials 4 at a time, each runner in turn.
perf-harbor: setup
	@scripts/ensure-compose
	$(BIN)/python scripts/perf_harbor.py $(ARGS)

# Only the concurrent OpenEnv sessions part of perf: reset p50/p95 and steps/s at 8, 32, 64.
perf-sessions: setup
	$(BIN)/python scripts/perf_sessions.py $(ARGS)

# Only the Ray part of perf: oracle episodes/min on 1 node and on 2 nodes (root: a netns engine).
perf-ray: setup
	$(BIN)/python scripts/perf_ray.py $(ARGS)

# 10 minutes of hostile agents (fork bomb, disk filler, output flood, kill -9 -1,
# bash removed, memory hog) and oracle episodes at -j 4; reports what they left.
soak: setup
	$(BIN)/python scripts/soak.py $(ARGS)

# Exported tasks under Harbor itself (its own Python >= 3.12 env, `docker compose`):
# one task per family, oracle 1.0 and nop 0.0 on every trial, and a tampered export
# that must fail. ARGS=--all: every scenario (nightly). Not part of `make test`.
harbor-check: setup
	@scripts/ensure-compose
	$(BIN)/python scripts/harbor_check.py --harbor-version $(HARBOR_VERSION) $(ARGS)

# TRL itself, not part of CI (it installs torch, transformers and TRL, ~1 GB, into .venv/train):
# a few GRPO steps of a tiny local model with FixOSToolEnv against live hosts (docs/rl-training.md).
train-smoke: setup
	@$(BIN)/python scripts/train_smoke.py $(ARGS)

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: venv
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

setup: engine venv images

engine:
	@scripts/ensure-engine

venv:
	@scripts/ensure-venv $(VENV)

images: engine venv
	@$(BIN)/fixos setup

# Only the tests need it (tests/test_run_page_browser.py looks at the run page in a real
# browser): Debian's chromium and Playwright for Python, which drives it, never a browser
# build of Playwright's own. `make bench` does not ask for it.
setup-browser: venv
	@scripts/ensure-browser $(VENV)

clean: venv
	$(BIN)/fixos clean
