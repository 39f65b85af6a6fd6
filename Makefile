# Two commands set everything up: `make run` (the service) and `make test` (the suite).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
PIP := $(BIN)/python -m pip install --disable-pip-version-check -q -c constraints.txt

.PHONY: run test install install-test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --disable-pip-version-check -q --upgrade "pip>=24"

$(VENV)/.installed: $(BIN)/python pyproject.toml constraints.txt
	$(PIP) -e ".[aic]"
	touch $@

# SMG (sgl-model-gateway) gets a virtualenv of its own inside this one: sglang-router 0.3.2 installs console
# scripts named `smg` too. The local runner finds it at $(VENV)/smg/bin/python.
$(VENV)/smg/.installed: constraints.txt
	$(PYTHON) -m venv $(VENV)/smg
	$(VENV)/smg/bin/python -m pip install --disable-pip-version-check -q -c constraints.txt smg
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed $(VENV)/smg/.installed
	$(PIP) -e ".[aic,ray,test]"
	touch $@

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test

run: install
	@echo "sglang-tuner: http://$(HOST):$(PORT)   (--dev: requests from loopback need no API key; SQLite file sglang-tuner.db)"
	@echo "  open http://$(HOST):$(PORT)/ui in a browser: start a playbook, watch its rounds and frontier"
	@echo "  curl -s http://$(HOST):$(PORT)/llms.txt"
	@echo "  curl -si -X POST http://$(HOST):$(PORT)/v1/jobs -H 'Content-Type: application/json' -d '{\"playbook\": \"coding-assistant\"}'"
	@echo "  curl -s 'http://$(HOST):$(PORT)/v1/jobs/<id from the Location header>?wait=30'"
	$(BIN)/sglang-tuner serve --host $(HOST) --port $(PORT) --dev

test: install-test
	$(BIN)/lint-imports
	$(BIN)/ruff check service plugins policies tests examples/plugin-example
	$(BIN)/mypy service
	$(BIN)/python -m pytest -q -p no:randomly
	PYTHON=$(BIN)/python scripts/test_plugin_wheel.sh

bench: install-test
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
