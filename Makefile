# One entry point. `make test` is what CI runs (.ci/run).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?=
# BUSY=N runs `make run` / `make test` with N busy loops beside them (bench/busy.py): a slower, busier machine.
BUSY   ?= 0
BESIDE := $(if $(filter-out 0,$(BUSY)),$(BIN)/python bench/busy.py $(BUSY) --,)

.PHONY: setup sysdeps run test test-unit test-integration lab docs bench clean
setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,frameworks]'
	@touch $(STAMP)
	@$(BIN)/python -m nbhelpers.runtime.systools

# Optional system tools (Debian, root): nftables for notebook 05's firewall faults, chromium for the browser
# tests. Without them those parts skip with a note; `make setup` says which are missing.
SYSDEPS := iproute2 nftables chromium
sysdeps:
	@if [ "$$(id -u)" != 0 ]; then echo "make sysdeps needs root: sudo apt-get install -y $(SYSDEPS)"; exit 1; fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(SYSDEPS) >/dev/null 2>&1 || \
		{ apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(SYSDEPS) >/dev/null; }
	@$(PYTHON) -c "import shutil; print('installed:', *[c for c in ('nft', 'chromium', 'ip', 'tc') if shutil.which(c)])"

run: setup            ## execute the notebooks headless; executed copies + report in reports/<UTC>/
	$(BESIDE) $(BIN)/python -m nbhelpers run-all

# Unit tests and every notebook under nbval in one session, a file per worker (a notebook's cells share one
# kernel).  Most of a test's time is spent waiting on real timeouts, so one worker more than the cores keeps
# them busy: 3 workers on 2 cores take the suite from ~6 to ~5 minutes.  At most 3: more would crowd the
# bounded timeouts (and a container may show more cores than its CPU quota).
TEST_WORKERS ?= $(shell $(PYTHON) -c "import os; print(min(3, len(os.sched_getaffinity(0)) + 1))")
test: setup           ## unit tests and every notebook under nbval, on up to 3 workers
	$(BESIDE) $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --durations=12 \
		--nbval-lax --nbval-cell-timeout=600 -p no:cacheprovider tests notebooks $(PYTEST_ARGS)

test-unit: setup      ## the pure tests alone: no process started, about a minute
	$(BIN)/python -m pytest -m unit -n $(TEST_WORKERS) --dist loadfile -p no:cacheprovider tests $(PYTEST_ARGS)

test-integration: setup  ## the tests that start real processes, and the notebooks
	$(BESIDE) $(BIN)/python -m pytest -m integration -n $(TEST_WORKERS) --dist loadfile --durations=12 \
		--nbval-lax --nbval-cell-timeout=600 -p no:cacheprovider tests notebooks $(PYTEST_ARGS)

lab: setup            ## JupyterLab on notebooks/ with this venv as the kernel
	$(BIN)/python -m ipykernel install --user --name nbhelpers --display-name "Python (nbhelpers)"
	$(BIN)/jupyter lab notebooks/

docs: setup           ## regenerate docs/culprit-rules.md and docs/doctor-knows.md from the code
	$(BIN)/python -m nbhelpers.views.docs

bench: setup          ## benchmarks, printed as tables with ratios against a same-run baseline
	$(BIN)/python bench/run.py

clean:
	rm -rf runs reports test-artifacts .pytest_cache
