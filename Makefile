# The two commands users need: `make bench` and `make test`. Both set up what
# is missing (engine, Python env, images) and skip what is already there.
VENV  := .venv
BIN   := $(VENV)/bin
ARGS  ?=

.PHONY: bench test perf perf-sessions perf-ray soak lint format setup engine venv images clean

bench: setup
	$(BIN)/fixos bench $(ARGS)

test: setup
	$(BIN)/pytest $(ARGS)

perf: setup
	$(BIN)/python scripts/perf.py $(ARGS)

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

clean: venv
	$(BIN)/fixos clean
