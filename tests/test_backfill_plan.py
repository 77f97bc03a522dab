"""Planning ``sci_ingest_backfill`` (``ingest.airflow.backfill``): batches under Airflow's map limit,
and what ``reprocess`` none / failed / all choose, against the session's real server."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest

from ingest.airflow.backfill import batches, plan_backfill
from ingest.errors import ConfigError
from ingest.pipeline import task_load_batch

REPO = Path(__file__).resolve().parent.parent


def test_batches_stay_under_the_map_limit_and_keep_every_file_once():
    files = [f"f{i}" for i in range(2500)]
    planned = batches(files, 1, 1024)
    assert len(planned) <= 1024 and [f for b in planned for f in b] == files
    assert batches(files[:7], 3, 1024) == [files[0:3], files[3:6], files[6:7]]
    assert batches([], 5, 10) == []
    with pytest.raises(ConfigError):
        batches(files, 0, 10)


@pytest.fixture()
def home(tmp_path, monkeypatch, mongo_client):
    db = f"backfill_{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("SCI_INGEST_DB", db)
    data = tmp_path / "data" / "2025-01"
    data.mkdir(parents=True)
    for f in sorted((REPO / "samples" / "pasta").glob("*.m10"))[:3]:
        shutil.copy(f, data / f.name)
    (data / "broken.m10").write_text("not a -m 10 report\n")
    yield tmp_path / "data", db
    mongo_client.drop_database(db)


def test_reprocess_none_failed_all(home, mongo_uri, mongo_client):
    data, db = home
    pattern = str(data / "**" / "*.m10")
    first = plan_backfill(None, pattern, "none", 2, 1024, mongo_uri=mongo_uri, log=lambda m: None)
    assert first["files"] == 4 and first["chosen"] == 4 and [len(b) for b in first["batches"]] == [2, 2]
    assert first["force"] is False
    results = [task_load_batch(f"b{i}", batch, mongo_uri=mongo_uri) for i, batch in enumerate(first["batches"])]
    assert sum(r["files_loaded"] for r in results) == 3 and sum(r["files_failed"] for r in results) == 1
    assert all(r["changed"] == ["hits", "searches"] for r in results)  # each batch has a good file
    ledger = {d["_id"]: d["status"] for d in mongo_client[db]["ingest_files"].find()}
    assert sorted(ledger.values()) == ["failed", "loaded", "loaded", "loaded"]
    again = plan_backfill([str(data)], None, "none", 2, 1024, mongo_uri=mongo_uri, log=lambda m: None)
    assert again["chosen"] == 0 and again["batches"] == []
    failed = plan_backfill([str(data)], None, "failed", 2, 1024, mongo_uri=mongo_uri, log=lambda m: None)
    assert [Path(f).name for b in failed["batches"] for f in b] == ["broken.m10"]
    everything = plan_backfill([str(data)], None, "all", 10, 1024, mongo_uri=mongo_uri, log=lambda m: None)
    assert everything["chosen"] == 4 and everything["force"] is True
    with pytest.raises(ConfigError, match="reprocess"):
        plan_backfill([str(data)], None, "some", 2, 1024, mongo_uri=mongo_uri)
    with pytest.raises(ConfigError, match="paths or a glob"):
        plan_backfill(None, None, "none", 2, 1024, mongo_uri=mongo_uri)
