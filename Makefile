PYTHON ?= .venv/bin/python

.PHONY: install gen check lint test

install:  ## create .venv with the config layer and the dev tools
	test -x $(PYTHON) || python3 -m venv .venv
	$(PYTHON) -m pip install --quiet --upgrade pip
	$(PYTHON) -m pip install --quiet -e '.[dev]'

gen:  ## regenerate generated/ from schema/
	$(PYTHON) scripts/gen.py

lint:
	$(PYTHON) -m ruff check src tests scripts
	$(PYTHON) -m ruff format --check src tests scripts

check: lint  ## lint, and fail when generated/ is stale
	$(PYTHON) scripts/gen.py --check

test:
	$(PYTHON) -m pytest -q
