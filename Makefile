# One entry point. `make test` is what CI runs (.ci/run).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: setup run test lab bench clean
setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	@touch $(STAMP)

run: setup            ## execute the notebooks headless; executed copies + report in reports/<UTC>/
	$(BIN)/python -m nbhelpers run-all

# Unit tests and every notebook under nbval in one session, a file per worker (a notebook's cells share one
# kernel); two workers on two cores take ~35% off the wall time. At most 2: more would crowd the bounded
# timeouts on a machine whose CPU quota is smaller than the cores it shows.
TEST_WORKERS ?= auto
test: setup           ## unit tests and every notebook under nbval, on up to 2 workers
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --maxprocesses 2 --dist loadfile --durations=12 \
		--nbval-lax --nbval-cell-timeout=600 -p no:cacheprovider tests notebooks $(PYTEST_ARGS)

lab: setup            ## JupyterLab on notebooks/ with this venv as the kernel
	$(BIN)/python -m ipykernel install --user --name nbhelpers --display-name "Python (nbhelpers)"
	$(BIN)/jupyter lab notebooks/

bench: setup          ## benchmarks, printed as tables with ratios against a same-run baseline
	$(BIN)/python bench/run.py

clean:
	rm -rf runs reports test-artifacts .pytest_cache
