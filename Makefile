# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
EXTRAS ?= dev,bench,multiagent,ray,envpool,pixels,box2d,tune,popgym,minigrid

RLLIB_VENV := benchmarks/.venv-rllib
RLLIB_STAMP := $(RLLIB_VENV)/.installed

.PHONY: setup demo test bench rllib-venv lint format clean

setup: $(STAMP)

# torch==2.13.0 goes in first: the project's torch range is then already satisfied and pip
# never downloads a CUDA build.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install torch==2.13.0
	$(PY) -m pip install -e ".[$(EXTRAS)]"
	touch $(STAMP)

# RLlib only for benchmarks/ray_apex.py's baseline, in a venv of its own: its pins are not
# the project's. torch first, as above.
rllib-venv: $(RLLIB_STAMP)

$(RLLIB_STAMP): benchmarks/requirements-rllib.txt
	test -x $(RLLIB_VENV)/bin/python || $(PYTHON) -m venv $(RLLIB_VENV)
	$(RLLIB_VENV)/bin/python -m pip install --upgrade pip
	$(RLLIB_VENV)/bin/python -m pip install torch==2.13.0
	$(RLLIB_VENV)/bin/python -m pip install -r benchmarks/requirements-rllib.txt
	touch $(RLLIB_STAMP)

demo: $(STAMP)
	$(VENV)/bin/shoal train cartpole --out runs

test: $(STAMP)
	$(PY) -m pytest -n 2 --dist loadgroup --durations=30

bench: $(STAMP) $(RLLIB_STAMP)
	$(PY) benchmarks/cartpole_time_to_solve.py
	$(PY) benchmarks/qtable_throughput.py
	$(PY) benchmarks/sudoku_transfer.py
	$(PY) benchmarks/learner_threads.py
	$(PY) benchmarks/gil_overlap.py
	$(PY) benchmarks/rollout_scaling.py
	$(PY) benchmarks/policy_lag.py
	$(PY) benchmarks/connect4_selfplay.py
	$(PY) benchmarks/startup.py
	$(PY) benchmarks/independent_agents.py
	$(PY) benchmarks/harvest_learning.py
	$(PY) benchmarks/ray_apex.py
	$(PY) benchmarks/mapf_learner_cost.py
	$(PY) benchmarks/recurrent_update.py
	$(PY) benchmarks/mapf_learning.py
	$(PY) benchmarks/collection.py
	$(PY) benchmarks/evaluation.py
	$(PY) benchmarks/pixels.py
	$(PY) benchmarks/minatar_breakout.py --seeds 3 --minutes 8
	$(PY) benchmarks/checkpoint_memory.py
	$(PY) benchmarks/learner_update.py
	$(PY) benchmarks/augment_cost.py
	$(PY) benchmarks/bench_check.py
	$(PY) benchmarks/bench_verdicts.py
	$(PY) benchmarks/sudoku_held_out.py
	$(PY) benchmarks/standard_tasks.py --seeds 3 --jobs 2

lint: $(STAMP)
	$(VENV)/bin/ruff check shoal tests benchmarks
	$(VENV)/bin/ruff format --check shoal tests benchmarks

format: $(STAMP)
	$(VENV)/bin/ruff format shoal tests benchmarks
	$(VENV)/bin/ruff check --fix shoal tests benchmarks

clean:
	rm -rf $(VENV) $(RLLIB_VENV) build *.egg-info
