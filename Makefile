# Two commands do all the set-up: `make demo` (the main job on the bundled starter suite) and `make test`.
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
STAMP := $(VENV)/.solbench-installed

.PHONY: demo test test-gpu clean browser

demo: $(STAMP)
	$(VENV)/bin/solbench run --suite starter

# the CPU tests on every core (pytest-xdist; a core that runs out of tests takes some of another's: the tests' times
# differ a hundredfold); the GPU tests one at a time, below: timed tests never share a device
test: $(STAMP) browser
	$(PY) -m pytest -q -n auto --dist worksteal -m "not gpu"

# the HTML report's browser test runs in Debian's chromium and its driver: installed here where apt can
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && echo "solbench: installing chromium" && \
	    apt-get install -y -q chromium chromium-driver >/dev/null; } || \
	  echo "solbench: no chromium here: the report's browser test will be skipped"

# the GPU test set (pytest marker `gpu`); scripts/gpu-check.sh runs it on the device machine with a summary table
test-gpu: $(STAMP)
	$(PY) -m pytest -q -m gpu

$(STAMP): pyproject.toml
	@echo "solbench: setting up $(VENV) (a few minutes the first time)"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@echo "solbench: installing torch"
	# torch first and pinned: pip takes the local CPU build where one is provided, and never a newer CUDA build by surprise
	$(PY) -m pip install -q "torch==2.13.0"
	@echo "solbench: installing solbench and its test tools"
	$(PY) -m pip install -q -e ".[test]"
	touch $(STAMP)
	@echo "solbench: installed; the command is $(VENV)/bin/solbench (or: source $(VENV)/bin/activate)"

clean:
	rm -rf $(VENV) solbench.db
