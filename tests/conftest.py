"""Test fixtures: a real MongoDB-wire server process over a socket, never a mock.

By default a private SecantusDB server is started for the session.  Set
``SCI_INGEST_TEST_URI`` to run the suite against a real MongoDB instead.

Commands the tests run without a URI get a private server each, stopped at their
end (``SCI_INGEST_SERVER_IDLE=0``), so no per-home server outlives a test's
temporary home; ``tests/test_server_keeper.py`` tests the per-home server.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import uuid
from pathlib import Path

import pymongo
import pytest
from hypothesis import settings

from ingest.server.embedded import EmbeddedServer

# Property tests draw the same examples on every run (derandomize: seeded by each test), so the
# suite's verdict never depends on the draw: a make test beside two CPU hogs once failed on a rare
# example that the next run did not draw.  SCI_INGEST_HYPOTHESIS=explore draws anew each run, and
# keeps what fails in .hypothesis/ to replay it (docs/development.md).
settings.register_profile("suite", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", print_blob=True)
settings.load_profile(os.environ.get("SCI_INGEST_HYPOTHESIS", "suite"))

os.environ["SCI_INGEST_SERVER_IDLE"] = "0"  # inherited by every command a test runs
os.environ["SCI_INGEST_KEEP"] = "0"  # no kept command process (ingest/cli/kept.py) but in tests/test_kept.py
# A command a test runs without naming its home would use the project's .sci-ingest (its out/, landing/,
# credentials and server state), shared with `make run` and, under pytest-xdist, with the tests of the
# other workers at the same moment: each test process has a home of its own instead.
_HOME = tempfile.mkdtemp(prefix="sci-ingest-test-home-")
os.environ["SCI_INGEST_HOME"] = _HOME
atexit.register(shutil.rmtree, _HOME, ignore_errors=True)

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_MATERIALS = REPO_ROOT.parent / "shared" / "data" / "materials"


@pytest.fixture(scope="session")
def mongo_uri(tmp_path_factory) -> str:
    external = os.environ.get("SCI_INGEST_TEST_URI")
    if external:
        yield external
        return
    state = tmp_path_factory.mktemp("server")
    server = EmbeddedServer(state / "db", log_path=state / "server.log")
    server.start()
    try:
        yield server.uri
    finally:
        server.stop()


@pytest.fixture(scope="session")
def mongo_client(mongo_uri) -> pymongo.MongoClient:
    client = pymongo.MongoClient(mongo_uri)
    yield client
    client.close()


@pytest.fixture()
def db(mongo_client):
    """A fresh database for one test, dropped afterwards."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    database = mongo_client[name]
    yield database
    mongo_client.drop_database(name)


@pytest.fixture()
def load_files(mongo_uri, db):
    """Load paths into the test's database in this process: ``load_files(paths, run_id=..., **options)``."""
    from ingest.load import LoadOptions, load_paths

    def load(paths, run_id: str = "test-run", **options):
        options.setdefault("workers", 1)
        options.setdefault("progress", False)
        return load_paths(mongo_uri, db.name, list(paths), run_id, LoadOptions(**options), server_kind="test")

    return load


@pytest.fixture(scope="session")
def shared_materials() -> Path:
    if not SHARED_MATERIALS.is_dir():
        pytest.skip(f"real Materials Project documents not available: {SHARED_MATERIALS} is absent")
    return SHARED_MATERIALS


@pytest.fixture(scope="session")
def real_materials_loaded(mongo_uri, mongo_client, shared_materials):
    """Every real Materials Project file (``../shared/data/materials/*.jsonl``) loaded once, as
    ``load_files`` loads (one worker, run id ``real``), into a database of its own: (database, the
    files, the load's summary), for the tests that only read it.  They carry
    ``pytest.mark.xdist_group("real_materials")``, so that under pytest-xdist one worker loads it."""
    from ingest.load import LoadOptions, load_paths

    files = sorted(shared_materials.glob("*.jsonl"))
    name = f"t_real_{uuid.uuid4().hex[:12]}"
    summary = load_paths(mongo_uri, name, files, "real", LoadOptions(workers=1, progress=False), server_kind="test")
    yield mongo_client[name], files, summary
    mongo_client.drop_database(name)


#: Under `--dist loadgroup --no-loadscope-reorder` (make test) the groups start in this order: the longest
#: first (each group's seconds in a whole run with -n 3, issue 27), so that none of them is left to run
#: alone at the end (test_server_keeper, a minute, last on its worker kept two cores half idle for 40 s;
#: test_static's mypy, 52 s cold in a fresh clone, ran among the last groups and took make test to 621 s).
LONG_GROUPS = ("test_airflow_scheduler", "test_static", "follow_changes_1", "load_exact_1", "load_exact_2", "follow_changes_2",
               "test_server_lifecycle", "test_cli_run",
               "bench", "test_paper_analyses", "test_dag", "real_materials", "test_server_keeper",
               "test_cli_contract", "test_html_report", "test_materials_dates", "test_materials_parser",
               "test_reading_plans", "test_access", "test_query", "test_hostile_inputs")


#: The fixtures that reach a database server: a test that asks for one is not in the fast tier.
SERVER_FIXTURES = {"mongo_uri", "mongo_client", "db", "load_files", "real_materials_loaded"}
#: Modules left out of the fast tier too: their tests start servers or whole commands as processes (seconds
#: of each module's tests that ask for no server fixture, summed, in `pytest --fast -n 3 --durations=0` at
#: commit 7e22d53 on the 2-core machine: 461 of the 564 seconds such tests took).
SLOW_MODULES = {"test_load_exact": 102, "test_server_lifecycle": 74, "test_outputs_per_database": 70,
                "test_server_keeper": 48, "test_disk_full": 26, "test_messages": 26, "test_access": 18,
                "test_bad_options": 17, "test_failed_reload": 16, "test_mongo_boundary": 14,
                "test_materials_dates": 13, "test_cli_contract": 12, "test_server_memory": 9,
                "test_server_and_mongo": 8, "test_bench_core": 8, "test_check": 13}


def pytest_addoption(parser):
    parser.addoption("--fast", action="store_true",
                     help="the fast tier (make test-fast): the tests that need no database server fixture, are not "
                          "marked slow and are not in tests/conftest.py's SLOW_MODULES")


def _fast_tier(config, items) -> None:
    """With ``--fast``, deselect every test that asks for a server fixture, is marked ``slow`` or is in
    one of SLOW_MODULES: the inner loop's tier (parsers, schemas, the model, layering, static checks,
    the CLI's quick paths); ``make test`` still runs everything."""
    if not config.getoption("fast"):
        return
    kept, dropped = [], []
    for item in items:
        needs_server = SERVER_FIXTURES & set(getattr(item, "fixturenames", ()))
        slow = item.get_closest_marker("slow") or Path(str(item.fspath)).stem in SLOW_MODULES
        (dropped if needs_server or slow else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """The fast tier first (``--fast``: :func:`_fast_tier`).  For pytest-xdist: a test without an
    ``xdist_group`` of its own is in its module's group, so that a module's fixtures (a loaded database, a Dask cluster, a corpus) are built by one worker, once;
    the groups of LONG_GROUPS go first.  Only in the workers of ``--dist loadgroup``."""
    _fast_tier(config, items)
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        if not any(item.iter_markers("xdist_group")):
            module = Path(str(item.fspath)).stem
            # the benchmarks' tests time what they run (a p50 ratio, a hot key's share, a time budget):
            # one after the other on one worker, not side by side (with -n 4 on a busy machine they failed)
            item.add_marker(pytest.mark.xdist_group("bench" if module.startswith("test_bench_") else module))

    def rank(item) -> int:
        group = next(item.iter_markers("xdist_group")).args[0]
        return LONG_GROUPS.index(group) if group in LONG_GROUPS else len(LONG_GROUPS)

    items.sort(key=rank)  # stable: the order of collection within each group and among the rest
