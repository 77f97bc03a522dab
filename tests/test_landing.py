"""The landing-folder load of ``sci_ingest_landing`` (``ingest.pipeline.task_load_landing``),
on its own against the session's real server: a day's folder, nothing landed, again."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest

from ingest.errors import ConfigError
from ingest.pipeline import task_load_landing

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture()
def landing(tmp_path, monkeypatch, mongo_client):
    db = f"landing_{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("SCI_INGEST_LANDING", str(tmp_path / "landing"))
    monkeypatch.setenv("SCI_INGEST_DB", db)
    yield tmp_path / "landing", db
    mongo_client.drop_database(db)


def test_a_day_loads_its_folder_once_and_names_the_collections_written(landing, mongo_uri, mongo_client):
    root, db = landing
    day = root / "2026-11-01"
    day.mkdir(parents=True)
    pasta = sorted((REPO / "samples" / "pasta").glob("*.m10"))[:2]
    for f in pasta:
        shutil.copy(f, day / f.name)
    shutil.copy(REPO / "samples" / "materials" / "materials.jsonl.gz", day)
    lineage = {"dag_id": "sci_ingest_landing", "run_id": "r1", "task_id": "load_day", "try_number": 1,
               "map_index": None}  # fmt: skip
    first = task_load_landing("r1", "2026-11-01", mongo_uri=mongo_uri, lineage=lineage)
    assert first["day"] == "2026-11-01" and first["folder"] == str(day)
    assert first["changed"] == ["hits", "materials", "searches"]
    assert mongo_client[db]["ingest_files"].count_documents({"status": "loaded"}) == 3
    rows = list(mongo_client[db]["stage_timings"].find({"run_id": "r1"}))
    assert rows and all(r["airflow"] == lineage for r in rows)
    again = task_load_landing("r2", "2026-11-01", mongo_uri=mongo_uri)
    assert again["changed"] == [] and again["files_skipped"] == 3 and again["files_loaded"] == 0  # the ledger


def test_a_day_that_never_landed_loads_nothing_and_a_bad_day_is_refused(landing, mongo_uri):
    result = task_load_landing("r3", "2026-11-03", mongo_uri=mongo_uri)
    assert result["files"] == 0 and result["changed"] == []
    with pytest.raises(ConfigError, match="YYYY-MM-DD"):
        task_load_landing("r4", "../etc", mongo_uri=mongo_uri)
