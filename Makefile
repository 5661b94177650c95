# The README's two commands: `make serve` and `make test`. Both set everything up first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000
STAMP := $(VENV)/.installed

.PHONY: setup serve test test-deploy lint bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e '.[test]'
	touch $(STAMP)

serve: setup
	$(BIN)/python -m app --host 0.0.0.0 --port $(PORT)

test: setup
	$(BIN)/ruff check app model tests bench training
	$(BIN)/lint-imports --no-cache --no-logo  # the layer contracts of pyproject.toml
	$(BIN)/python -m pytest -q

# The deployment lane (root, podman): prepare podman and build the images, then run the container tests.
test-deploy: setup
	bash deploy/podman/prepare.sh
	MT_TEST_DEPLOY=1 $(BIN)/python -m pytest -q -m container tests/deploy

lint: setup
	$(BIN)/ruff check app model tests bench training
	$(BIN)/lint-imports --no-cache --no-logo  # the layer contracts of pyproject.toml

bench: setup
	$(BIN)/python -m bench.model_speed

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
