# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
EXTRAS ?= dev,bench,multiagent,ray

.PHONY: setup demo test bench lint format clean

setup: $(STAMP)

# torch==2.13.0 goes in first: the project's torch range is then already satisfied and pip
# never downloads a CUDA build.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install torch==2.13.0
	$(PY) -m pip install -e ".[$(EXTRAS)]"
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/shoal train cartpole --out runs

test: $(STAMP)
	$(PY) -m pytest

bench: $(STAMP)
	$(PY) benchmarks/cartpole_time_to_solve.py
	$(PY) benchmarks/qtable_throughput.py
	$(PY) benchmarks/sudoku_transfer.py
	$(PY) benchmarks/learner_threads.py
	$(PY) benchmarks/gil_overlap.py
	$(PY) benchmarks/rollout_scaling.py
	$(PY) benchmarks/connect4_selfplay.py
	$(PY) benchmarks/startup.py
	$(PY) benchmarks/independent_agents.py
	$(PY) benchmarks/harvest_learning.py
	$(PY) benchmarks/ray_apex.py

lint: $(STAMP)
	$(VENV)/bin/ruff check shoal tests benchmarks
	$(VENV)/bin/ruff format --check shoal tests benchmarks

format: $(STAMP)
	$(VENV)/bin/ruff format shoal tests benchmarks
	$(VENV)/bin/ruff check --fix shoal tests benchmarks

clean:
	rm -rf $(VENV) build *.egg-info
