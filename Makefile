# sci-ingest: `make run` sets up and runs the main job; `make test` sets up and runs the tests.
# The virtualenv's interpreter: the distribution's own python3.11 where there is one (/usr/bin; an
# optimized build), else the first python3.11 on PATH; `make PYTHON=/path/to/python3.11` chooses.
# Measured on this 2-core machine (Debian 12): Debian's 3.11.2 against pyenv's 3.11.7 (built without
# --enable-optimizations): `sci-ingest run` of the samples 22.4-25.2 against 27.7-30.8 CPU-s (3 runs
# each), a fresh clone's `make test` 505 against 567-632 s.  An existing .venv keeps its interpreter.
PYTHON ?= $(firstword $(wildcard /usr/bin/python3.11) python3.11)
VENV   := .venv
BIN    := $(VENV)/bin
UV_VERSION := 0.13.9
STAMP  := $(VENV)/.installed

.PHONY: install compiled run test test-fast test-scheduler test-ui test-hosts test-install bench lock server-start server-stop airflow clean

install: $(STAMP)

# The project-local virtualenv, with exactly the pinned tree of requirements.lock.
# The project itself is installed editable as a plain path entry (editable_mode=compat:
# no import hook to load at every start-up) and byte-compiled, because PYTHONDONTWRITEBYTECODE
# environments would otherwise recompile it in every process (measured: the imports of
# `sci-ingest parse` took 0.13 s of CPU without the bytecode, 0.09 s with it).  The dependencies
# are compiled as Python imports them (the bytecode is written at the first import): a whole
# `make test` imports 4,698 of their 16,786 modules, 11 CPU-s to compile, where compiling them
# all took 55 CPU-s, 30 s of a fresh clone's `make test` on 2 cores.
$(STAMP): requirements.lock pyproject.toml Makefile
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	$(BIN)/uv pip sync --quiet --python $(BIN)/python requirements.lock
	$(BIN)/uv pip install --quiet --python $(BIN)/python --no-deps -e . -C editable_mode=compat
	@$(BIN)/python -m compileall -q ingest analytics
	@touch $@

# With PYTHONDONTWRITEBYTECODE set nothing is written at the first import, so every command would
# compile its imports again: for the targets that run commands in your environment (run, airflow,
# bench) the dependencies are compiled once here, all but their own test suites and the packages
# nothing here imports (pymatgen's optional sympy and networkx, plotly, pip, setuptools: 2 of their
# 3,329 modules imported in a whole `make test`).  `make test` needs none of it: its processes
# write the bytecode of what they import (PYTHONDONTWRITEBYTECODE unset for them: into the
# virtualenv, and __pycache__ folders in tests/ and dags/ that git ignores).
COMPILED := $(VENV)/.compiled
compiled: $(COMPILED)
$(COMPILED): $(STAMP)
ifneq ($(PYTHONDONTWRITEBYTECODE),)
	$(BIN)/python -m compileall -q -j 0 -x 'site-packages/(.*/(tests?|testing)|sympy|networkx|plotly|pip|setuptools)/' \
	  "$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
endif
	@touch $@

run: install compiled
	$(BIN)/sci-ingest run

# The suite on TEST_WORKERS pytest-xdist workers, each with its own embedded server and its own
# SCI_INGEST_HOME (tests/conftest.py);
# --dist loadgroup keeps the tests of one xdist_group on one worker: a module's, unless they name
# another (tests/conftest.py), and starts the longest groups first (--no-loadscope-reorder keeps that order).
# TEST_WORKERS=0 runs it in this one process.  3 on this 2-core machine: 4 was no faster (595 s against
# 600 at c829f46, quiet machine; earlier 21 min against 17-19 under other loads).
TEST_WORKERS ?= 3
test: install
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q -m "not ui and not hosts and not install and not scheduler" -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder --durations=20

# The inner loop's tier (under 2 minutes): the tests that need no database server fixture, are not marked
# slow and are not among the modules tests/conftest.py lists as starting servers or whole commands
# (SLOW_MODULES): parsers, schemas, the model, the layering and ruff, the CLI's quick paths.  `make test` runs
# them too, with everything else.
test-fast: install
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q --fast -m "not ui and not hosts and not install and not scheduler" -n $(TEST_WORKERS) --durations=10

# The DAGs under a real Airflow scheduler (tests/test_airflow_scheduler.py, about 3 minutes, most of it
# waiting on the scheduler's own timers): apart from `make test`, which it took to its 10 minutes; .ci/run runs it.
test-scheduler: install
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q -m scheduler tests/test_airflow_scheduler.py

# docs/install.md as a data engineer follows it (tests/test_install.py, about a minute): the built
# wheel into a separate virtualenv that has Airflow, its DAG files into a DAGs folder, Airflow parses them.
test-install: install
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q -m install tests/test_install.py

# Hosts on one machine (tests/test_hosts.py, about 3 minutes, as root): a database host, a Dask
# scheduler host, two worker hosts and the client, each a network namespace with its own address on
# one bridge (tests/netns.py); TLS between the Dask processes; loads and analyses compared with one
# host's, under a pulled cable, a dead host, a slow lossy link and a database outage.  pytest runs
# under `unshare --net`: the client host's cable is plugged there, never into this machine's network.
test-hosts: install
	@if [ "$$(id -u)" != 0 ]; then echo "make test-hosts: needs root (network namespaces); run it as root" >&2; exit 1; fi
	@command -v unshare >/dev/null 2>&1 && command -v ip >/dev/null 2>&1 && command -v tc >/dev/null 2>&1 \
	  || { echo "make test-hosts: needs unshare (util-linux), ip and tc (iproute2)" >&2; exit 1; }
	unshare --net -- env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q -s -m hosts tests/test_hosts.py

# The Airflow UI in a real browser (tests/test_airflow_ui.py, about 2 minutes): Debian's chromium
# driven through its chromedriver by selenium, never a downloaded browser or driver.  Installs
# chromium and chromium-driver with apt-get when missing (as root, or through `sudo -n`).
# Screenshots: test-output/ui/ ($SCI_INGEST_TEST_OUTPUT/ui); SCI_INGEST_UPDATE_FIGURES=1 also
# refreshes docs/figures/airflow-green-run.png, the figure of docs/airflow.md.
test-ui: install
	@missing=; for c in chromium chromedriver; do command -v $$c >/dev/null 2>&1 || missing="$$missing $$c"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; \
	  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; \
	  else echo "make test-ui: missing:$$missing (not root, no sudo -n); install as root: apt-get install -y chromium chromium-driver" >&2; exit 1; fi; \
	  echo "make test-ui: missing:$$missing; installing Debian's chromium and chromium-driver (apt-get) ..."; \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver >/dev/null \
	    || { $$SUDO apt-get update -q >/dev/null && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver >/dev/null; } \
	    || { echo "make test-ui: apt-get install chromium chromium-driver failed; install them as root" >&2; exit 1; }; \
	fi
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q -s -m ui tests/test_airflow_ui.py

# bench_small_files.py: 2,000 small files against one file of the same content (records, and
# ssearch36 -m 10 outputs: Debian's fasta3), a re-run of 10,000 unchanged files and a gzip bomb's
# peak RSS (about 6 minutes, corpus built once).  bench_load.py builds its corpora when missing (benchmarks/make_load_corpus.sh: 1x about a
# minute, 10x about ten, 2 GB under $TMPDIR/sci-ingest-bench) and starts and stops its own
# embedded server (about 30 minutes on 2 cores; --quick: one minute).  bench_analysis.py
# builds the SCALE-3 corpus when missing (about 4 minutes), loads its 1x and 10x databases
# (about 7 minutes) and measures every analysis stage and validate against a bare read of
# the same fields, three rounds at each scale, then the whole commands (about 25 minutes).
# bench_study.py: the study's shape, 20,000 one-query ssearch36 -m 10 files (built once, about a
# minute on 2 cores) loaded, re-loaded, analysed (each stage against a bare read), validated,
# grown by 1 % and analysed with --changed, `run` with nothing new, the --changed outputs against
# a full analyze, the server's RSS at each step, and a linear projection to 1.1 million files
# (about 7 minutes; --quick: 2,000 files, about 2).
bench: install compiled
	$(BIN)/python benchmarks/bench_pasta.py
	$(BIN)/python benchmarks/bench_json_layouts.py --mb 200
	$(BIN)/python benchmarks/bench_load.py --build-10x
	$(BIN)/python benchmarks/bench_small_files.py
	$(BIN)/python benchmarks/bench_analysis.py
	$(BIN)/python benchmarks/bench_fixed_costs.py
	$(BIN)/python benchmarks/bench_study.py

# Re-resolve the pins after editing requirements.in.
lock:
	$(BIN)/uv pip compile --python-version 3.11 --prerelease=if-necessary-or-explicit --quiet requirements.in -o requirements.lock

# Airflow 3 on the project's DAGs, on 127.0.0.1:8080 (PORT=...), until Ctrl-C: see `sci-ingest airflow --help`.
airflow: install compiled
	$(BIN)/sci-ingest airflow --port $(or $(PORT),8080)

server-start: install
	$(BIN)/sci-ingest server start

server-stop: install
	$(BIN)/sci-ingest server stop

clean:
	rm -rf .sci-ingest .pytest_cache
