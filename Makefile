# sci-ingest: `make run` sets up and runs the main job; `make test` sets up and runs the tests.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
UV_VERSION := 0.13.9
STAMP  := $(VENV)/.installed

.PHONY: install run test bench lock server-start server-stop airflow clean

install: $(STAMP)

# The project-local virtualenv, with exactly the pinned tree of requirements.lock.
# The project itself is installed editable as a plain path entry (editable_mode=compat:
# no import hook to load at every start-up) and byte-compiled, like the dependencies,
# because PYTHONDONTWRITEBYTECODE environments would otherwise recompile it in every
# process (measured: the imports of `sci-ingest parse` took 0.13 s of CPU without the
# bytecode, 0.09 s with it).
$(STAMP): requirements.lock pyproject.toml Makefile
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	$(BIN)/uv pip sync --quiet --compile-bytecode --python $(BIN)/python requirements.lock
	$(BIN)/uv pip install --quiet --python $(BIN)/python --no-deps -e . -C editable_mode=compat
	@$(BIN)/python -m compileall -q ingest analytics
	@touch $@

run: install
	$(BIN)/sci-ingest run

test: install
	$(BIN)/python -m pytest -q

# bench_load.py builds its corpora when missing (benchmarks/make_load_corpus.sh: 1x about a
# minute, 10x about ten, 2 GB under $TMPDIR/sci-ingest-bench) and starts and stops its own
# embedded server (about 30 minutes on 2 cores; --quick: one minute).  bench_analysis.py
# builds the SCALE-3 corpus when missing (about 4 minutes), loads its 1x and 10x databases
# (about 7 minutes) and measures every analysis stage and validate against a bare read of
# the same fields, three rounds at each scale, then the whole commands (about 25 minutes).
bench: install
	$(BIN)/python benchmarks/bench_pasta.py
	$(BIN)/python benchmarks/bench_json_layouts.py --mb 200
	$(BIN)/python benchmarks/bench_load.py --build-10x
	$(BIN)/python benchmarks/bench_analysis.py

# Re-resolve the pins after editing requirements.in.
lock:
	$(BIN)/uv pip compile --python-version 3.11 --prerelease=if-necessary-or-explicit --quiet requirements.in -o requirements.lock

# Airflow 3 on the project's DAGs, on 127.0.0.1:8080 (PORT=...), until Ctrl-C: see `sci-ingest airflow --help`.
airflow: install
	$(BIN)/sci-ingest airflow --port $(or $(PORT),8080)

server-start: install
	$(BIN)/sci-ingest server start

server-stop: install
	$(BIN)/sci-ingest server stop

clean:
	rm -rf .sci-ingest .pytest_cache
