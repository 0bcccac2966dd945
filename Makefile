# make demo: create .venv, install, convert a generated sample dataset, read it back.
# make test: create/update .venv with test extras and run the whole suite.
# make bench: conversion speed and memory against the copy floor and hand-written loops (README).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip setuptools wheel

$(VENV)/.installed: setup.py $(BIN)/python
	$(BIN)/python -m pip install -e .
	touch $@

# --upgrade pandas: the suite runs under the newest pandas setup.py allows, even in an existing .venv.
$(VENV)/.installed-test: setup.py $(BIN)/python
	$(BIN)/python -m pip install -e '.[test]' --upgrade pandas
	touch $(VENV)/.installed $@

demo: $(VENV)/.installed
	$(BIN)/python -m tfrecorder.demo

test: $(VENV)/.installed-test
	TF_CPP_MIN_LOG_LEVEL=2 $(BIN)/python -m pytest -q tests

bench: $(VENV)/.installed
	TF_CPP_MIN_LOG_LEVEL=2 $(BIN)/python benchmarks/convert_bench.py

clean:
	rm -rf $(VENV) demo_output .pytest_cache
