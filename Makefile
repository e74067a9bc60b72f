# The two commands of the README:  `make demo`  and  `make test`.
# Both set everything up first (virtual environment, Python packages, SimGrid, Chromium).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
APT    := env DEBIAN_FRONTEND=noninteractive apt-get -y -q

.PHONY: setup system-deps aot demo test docs lint clean ns3-peer

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[test,docs]'
	touch $@

# SimGrid (the flow model's peer, Debian's python3-simgrid for /usr/bin/python3) and Chromium
# (the report's browser test). Installed only when missing; needs root or sudo.
system-deps:
	@missing=""; \
	/usr/bin/python3 -c 'import simgrid' 2>/dev/null || missing="$$missing python3-simgrid"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing" >&2; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -q >/dev/null && $$SUDO $(APT) install $$missing >/dev/null; \
	fi

# The flow model's kernels compiled ahead of time (topoopt/flowsim/aot.py), so that a simulating
# process starts without numba; built again when a kernel's source changed (a no-op otherwise).
# Needs a C compiler; a failed build says so on stderr and the kernels run under numba's JIT.
aot: $(VENV)/.installed
	$(BIN)/python -c "from topoopt.flowsim.aot import main; raise SystemExit(main())"

setup: $(VENV)/.installed system-deps aot

demo: setup
	$(BIN)/topoopt demo --force

# pytest's exit code 5 (no tests collected) is a failure here, never a silent pass.
test: setup
	@$(BIN)/python -m pytest; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "error: pytest collected no tests" >&2; exit 1; fi; \
	exit $$rc

# The documentation site (docs/ and the API reference from the numpydoc docstrings) in site/;
# warnings are errors (tests/test_docs_site.py builds it the same way).
docs: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict -q

lint: setup
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

# The packet-level peer of benchmarks/study_packet_level.py: the ns3 wheel (ns-3 with cppyy
# bindings) in a virtual environment of its own. Not needed by the tests; the pip install
# compiles CPyCppyy (about 15 minutes on 2 cores) and the first import takes about a minute.
ns3-peer:
	$(PYTHON) -m venv .venv-ns3
	.venv-ns3/bin/python -m pip install -q 'ns3==3.44.post0'

clean:
	rm -rf $(VENV) dist build site .pytest_cache .ruff_cache
