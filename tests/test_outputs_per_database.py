"""Outputs belong to their database (issue 41): the CLI as subprocesses against a home's embedded server.

The Parquet outputs of a database live in ``<home>/out/embedded/<db>/`` (a server given by URI:
``<home>/out/<hosts>[+<set>]/<db>/``), record the database and server they were computed from, are
extended only by runs of that database on that server, and are checked against their collection after
every publish: a file that disagrees with its collection fails the run (one line, both counts) and is
set aside, never left quietly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pymongo
import pytest

from ingest.store.outputs import uri_server

REPO = Path(__file__).resolve().parent.parent
PASTA = REPO / "samples" / "pasta"
BIN = Path(sys.executable).parent / "sci-ingest"


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """(a home whose embedded server runs, started by `server start`; its MongoDB client)."""
    home = tmp_path_factory.mktemp("outputs") / "home"
    started = _cli(home, "server", "start")
    assert started.returncode == 0, started.stderr[-2000:]
    client = pymongo.MongoClient(_uri(home))
    try:
        yield home, client
    finally:
        client.close()
        _cli(home, "server", "stop")


def _cli(home: Path, *args, uri: str = "", timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "SCI_INGEST_HOME": str(home), "MONGODB_URI": uri}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    env.pop("SCI_INGEST_DB", None)
    return subprocess.run([str(BIN), *map(str, args)], capture_output=True, text=True, env=env, timeout=timeout)


def _json(proc: subprocess.CompletedProcess, code: int = 0) -> dict:
    assert proc.returncode == code, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def _uri(home: Path) -> str:
    return json.loads((home / "server.json").read_text())["uri"]


def _copy(src: Path, dest: Path) -> Path:
    """A -m 10 file of ``src``'s searches, another content (a space after its command line): new searches."""
    dest.write_text(src.read_text().replace("\n", " \n", 1))
    return dest


def _parquet(report: dict, name: str = "best_hits") -> Path:
    return Path(next(a for a in report["analysis"] if a["name"] == name)["parquet_path"])


def _scope(report: dict, name: str = "best_hits") -> dict:
    return next(a for a in report["analysis"] if a["name"] == name)["scope"]


def _same(db, path: Path, collection: str = "query_best_hits", id_column: str = "search_id") -> int:
    """The Parquet file holds the collection's rows, value for value (run ids aside); their number."""
    rows = sorted(pq.read_table(path).drop(["run_id"]).to_pylist(), key=lambda r: r[id_column])
    docs = [{k: v for k, v in d.items() if k not in ("_id", "run_id")} for d in db[collection].find().sort("_id")]
    assert [r[id_column] for r in rows] == [d[id_column] for d in docs]
    # a missing value: absent from the document, null in the file
    assert [{k: v for k, v in r.items() if v is not None} for r in rows] == docs
    return len(rows)


def _origin(path: Path) -> tuple[str, str]:
    meta = json.loads(pq.read_schema(path).metadata[b"sci_ingest"])
    return meta["db"], meta["server"]


def test_another_database_leaves_the_default_databases_outputs_alone(home, tmp_path):
    """The issue's scenario: run on the samples, `run --db other FILE`, then in the default database
    `load new.m10` and `analyze --changed best_hits`: its Parquet file equals its collection."""
    home, client = home
    ours, other = client["sci_ingest"], client["other"]
    first = _json(_cli(home, "run", "-q", "--json"))
    mine = home / "out" / "embedded" / "sci_ingest"
    assert {_parquet(first, a["name"]) for a in first["analysis"]} == {
        mine / f"{a['name']}.parquet" for a in first["analysis"]}
    assert _origin(mine / "best_hits.parquet") == ("sci_ingest", f"embedded:{home.resolve()}")
    before = _same(ours, mine / "best_hits.parquet")

    theirs = _json(_cli(home, "run", "-q", "--json", "--db", "other", PASTA / "ssearch36_prot.m10"))
    assert _parquet(theirs) == home / "out" / "embedded" / "other" / "best_hits.parquet"
    assert _origin(_parquet(theirs))[0] == "other"
    _same(other, _parquet(theirs))
    assert _same(ours, mine / "best_hits.parquet") == before  # untouched by the other database

    _json(_cli(home, "load", "-q", "--json", _copy(PASTA / "ssearch36_prot_multi.m10", tmp_path / "new.m10")))
    changed = _json(_cli(home, "analyze", "--changed", "best_hits", "--json"))
    assert _scope(changed)["mode"] == "changed", _scope(changed)
    assert _parquet(changed) == mine / "best_hits.parquet"
    assert _same(ours, mine / "best_hits.parquet") > before  # the new file's searches, and the rest

    # the home's server reached by its URI (as `sci-ingest airflow` hands it to its tasks): the same outputs
    by_uri = _json(_cli(home, "analyze", "--changed", "best_hits", "--json", uri=_uri(home)))
    assert _parquet(by_uri) == mine / "best_hits.parquet" and _scope(by_uri)["mode"] == "none", _scope(by_uri)

    # a file computed from another database, where this one's belongs (the old layout's mix-up): a
    # run following changes does not extend it but computes the output whole, saying why
    (mine / "best_hits.parquet").write_bytes(_parquet(theirs).read_bytes())
    _json(_cli(home, "load", "-q", "--json", _copy(PASTA / "ssearch36_prot_alt.m10", tmp_path / "new2.m10")))
    again = _json(_cli(home, "analyze", "--changed", "best_hits", "--json"))
    assert _scope(again)["mode"] == "whole" and "from database 'other'" in _scope(again)["reason"], _scope(again)
    _same(ours, mine / "best_hits.parquet")
    assert _origin(mine / "best_hits.parquet")[0] == "sci_ingest"


def test_a_parquet_file_that_disagrees_with_its_collection_fails_the_run(home, tmp_path):
    """A Parquet file edited by hand (rows removed, its metadata kept): the run that extends it fails
    with one line naming both counts, sets it aside, and the next run computes the output whole."""
    home, client = home
    db = client["handmade"]
    first = _json(_cli(home, "run", "-q", "--json", "--db", "handmade", PASTA / "ssearch36_prot.m10",
                       PASTA / "ssearch36_prot_multi.m10", PASTA / "fasta36_prot.m10"))
    path = _parquet(first)
    assert path == home / "out" / "embedded" / "handmade" / "best_hits.parquet"
    rows = _same(db, path)
    table = pq.read_table(path)
    pq.write_table(table.slice(0, rows - 2), path)  # two rows removed by hand; the metadata stays
    _json(_cli(home, "load", "-q", "--json", "--db", "handmade", _copy(PASTA / "ssearch36_prot.m10",
                                                                       tmp_path / "new.m10")))

    failed = _cli(home, "analyze", "--changed", "best_hits", "--db", "handmade")
    assert failed.returncode == 1, failed.stderr[-3000:]
    errors = [line for line in failed.stderr.splitlines() if line.startswith("error:")]
    documents = db.query_best_hits.count_documents({})
    assert len(errors) == 1, failed.stderr[-3000:]
    assert (f"would hold {documents - 2:,} rows but handmade.query_best_hits holds {documents:,} documents "
            "(2 ids only in the collection, 0 only in the file)") in errors[0], errors[0]
    assert not path.exists() and path.with_name("best_hits.parquet.mismatch").is_file()

    repaired = _json(_cli(home, "analyze", "--changed", "best_hits", "--db", "handmade", "--json"))
    assert _scope(repaired)["mode"] == "whole" and "missing" in _scope(repaired)["reason"], _scope(repaired)
    assert _same(db, path) == documents


def test_the_folder_of_a_server_given_by_uri_holds_no_credentials():
    """A URI's folder: its hosts (sorted, lower case, default port) and replica set, never its user,
    password or other options; every other character percent-encoded."""
    folder, identity = uri_server("mongodb://alice:s3cret@DB2.example.org,db1.example.org:27018/x?replicaSet=rs0"
                                  "&authSource=admin&tls=true")
    assert folder == "db1.example.org_27018,db2.example.org_27017+rs0"
    assert identity == "db1.example.org:27018,db2.example.org:27017/rs0"
    assert uri_server("mongodb+srv://bob:pw@cluster0.example.net/?retryWrites=true")[0] == "cluster0.example.net_srv"
    assert uri_server("mongodb://[::1]:27019/?directConnection=true")[0] == "%3A%3A1_27019"
    assert uri_server("mongodb://h:1/?replicaSet=../x")[0] == "h_1+..%2Fx"
