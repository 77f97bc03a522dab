"""(``make test-scheduler``, in CI; ``make test`` deselects it.)  The DAG run the way Airflow runs it: ``sci-ingest airflow`` (api-server, scheduler with
LocalExecutor, dag-processor, triggerer), runs triggered through Airflow's REST API and the
daily run the scheduler creates, the tasks executed by the real scheduler in their own
processes - not ``dag.test()``.

This is what caught the analyze task failing under a real scheduler (Dask's spawned workers
re-imported Airflow's entry point, which may not touch the metadata database inside a
task); the samples being small work, the tasks here analyse in their own process, and
tests/test_airflow_ui.py (``make test-ui``, in CI) keeps the spawned workers under a real scheduler.  It also shows
what Airflow does with Asset events that arrive while the curated DAG's one active run is held
(issue #56050; docs/airflow.md).  About five minutes on 2 cores (265 s alone before that part; 321 s
with it, on a machine busy with other tests), most of it the tasks themselves and the scheduler
marking each backfill complete (a 30-s timer of its own).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
from pathlib import Path
from urllib.parse import quote

import psutil
import pymongo
import pytest
from airflow_harness import (  # noqa: F401  (local_airflow: the fixture)
    AIRFLOW_INSTALLED,
    DAG_IDS,
    REPO,
    Api,
    _all_done,
    _runs,
    _tasks,
    _wait,
    admin_and_mongo,
    land_day,
    local_airflow,
    materials_sample,
    wait_healthy,
)

from ingest.documents import prefix_range, search_id_prefix


def _listening(root: psutil.Process) -> list[tuple[str, str, int]]:
    found = []
    for proc in [root, *root.children(recursive=True)]:
        try:
            for conn in proc.net_connections(kind="inet"):
                if conn.status == psutil.CONN_LISTEN:
                    found.append((proc.name(), conn.laddr.ip, conn.laddr.port))
        except psutil.Error:
            pass
    return found


def _loaded_files(mongo_uri: str) -> list[dict]:
    client = pymongo.MongoClient(mongo_uri, serverSelectionTimeoutMS=10_000)
    try:
        return list(client["sci_ingest"]["ingest_files"].find({"status": "loaded"}))
    finally:
        client.close()


def _landing_days_and_assets(api, home: Path, port: int, mongo_uri: str) -> None:
    """Three landing days: a run loads its day's folder, announces the collections it wrote as
    Assets, the curated DAG runs on them; a backfill loads each day once; again, nothing."""
    from ingest.airflow.local import airflow_env

    pasta = sorted((REPO / "samples" / "pasta").glob("*.m10"))[:2]
    land_day(home, "2026-11-01", pasta)
    land_day(home, "2026-11-02", [materials_sample(home / "subset")])
    # 2026-11-03: nothing landed
    for dag_id in ("sci_ingest_landing", "sci_ingest_curated"):
        api.call("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False})
    # unpausing queues the latest daily run (nothing landed for it): let it finish first
    _wait("the latest daily landing run", lambda: _all_done(api, "sci_ingest_landing", 1), 180, every=1)
    before = {r["dag_run_id"] for r in _runs(api, "sci_ingest_landing")}

    run = api.call("POST", "/api/v2/dags/sci_ingest_landing/dagRuns",
                   {"logical_date": "2026-11-01T00:00:00Z", "conf": {}})  # fmt: skip
    _wait("the 2026-11-01 landing run", lambda: _all_done(api, "sci_ingest_landing", len(before) + 1), 180, every=1)
    states = _tasks(api, "sci_ingest_landing", run["dag_run_id"])
    assert states == {"load_day": "success", "searches_written": "success", "hits_written": "success",
                      "materials_written": "skipped", "tasks_written": "skipped"}, states  # fmt: skip
    # the Asset events started the curated DAG: analysed and validated, green
    curated = _wait("the Asset-triggered curated run", lambda: _all_done(api, "sci_ingest_curated", 1), 240, every=1)
    assert {r["run_type"] for r in curated} == {"asset_triggered"}
    assert _tasks(api, "sci_ingest_curated", curated[0]["dag_run_id"]) == {"analyze": "success", "validate": "success"}
    assert len(_loaded_files(mongo_uri)) == 2

    # a backfill over the three days, as Airflow does it: each day's folder loaded once
    env = airflow_env(home, port, mongo_uri)
    airflow = str(REPO / ".venv" / "bin" / "airflow")

    def backfill(reprocess: str) -> None:
        # Airflow's CLI on a SQLite metadata database meets "database is locked" while the scheduler writes (a
        # deferred transaction upgraded to a write gets no busy wait): tried again, as a user would.  Likewise
        # "Another backfill is running": while the scheduler has not yet marked the previous backfill complete,
        # and after a "database is locked" that came once the backfill's own row was committed (Airflow 3
        # commits it before creating its runs, and its clean-up of such an orphan can meet the same lock): the
        # scheduler marks an orphan complete two minutes after its creation, so this waits up to five.
        deadline = time.monotonic() + 300
        while True:
            proc = subprocess.run([airflow, "backfill", "create", "--dag-id", "sci_ingest_landing", "--from-date",
                                   "2026-11-01", "--to-date", "2026-11-03", "--reprocess-behavior", reprocess],
                                  env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
            if proc.returncode == 0 or time.monotonic() > deadline or not any(
                    m in proc.stderr for m in ("database is locked", "Another backfill is running")):
                break
            time.sleep(3)
        assert proc.returncode == 0, proc.stderr[-2000:]
        created[0] += 1

    created = [0]  # backfills created so far: an empty list from the API is not "all done"

    def backfills_done():
        found = api.call("GET", "/api/v2/backfills?dag_id=sci_ingest_landing")["backfills"]
        return len(found) >= created[0] and all(b.get("completed_at") for b in found)

    n = len(_runs(api, "sci_ingest_landing"))
    backfill("none")  # 11-01 has a run already: only 11-02 and 11-03 get one
    _wait("the backfill's runs", lambda: _all_done(api, "sci_ingest_landing", n + 2), 240, every=1)
    _wait("the backfill to complete", backfills_done, 120, every=1)  # one backfill at a time per DAG
    loaded = _loaded_files(mongo_uri)
    assert sorted(Path(f["_id"]).name for f in loaded) == sorted([f.name for f in pasta] + ["materials.jsonl.gz"])
    n = len(_runs(api, "sci_ingest_landing"))
    backfill("none")  # again: every day has its run, nothing is created
    _wait("the empty backfill to complete", backfills_done, 120, every=1)
    assert len(_runs(api, "sci_ingest_landing")) == n
    # every day again, as the UI's Clear does it (each day's run cleared and run again): the ledger loads
    # nothing new.  Not `backfill create --reprocess-behavior completed`, which does the same: on this SQLite
    # metadata database it met "database is locked" after committing its backfill's row in both suite runs read,
    # and that orphan blocks every other backfill until the scheduler drops it two minutes later (docs/airflow.md)
    days = [r for r in _runs(api, "sci_ingest_landing") if r["logical_date"][:10] in ("2026-11-01", "2026-11-02",
                                                                                       "2026-11-03")]  # fmt: skip
    assert len(days) == 3
    for r in days:
        _wait(f"the clearing of {r['dag_run_id']}", lambda r=r: _clear(api, "sci_ingest_landing", r["dag_run_id"]), 120)
    _wait("the re-run days", lambda: _all_done(api, "sci_ingest_landing", n), 240, every=1)
    for r in days:  # each day ran again (its load_day at a second try), and loaded nothing
        tis = api.call("GET", f"/api/v2/dags/sci_ingest_landing/dagRuns/{r['dag_run_id']}/taskInstances")
        load_day = next(t for t in tis["task_instances"] if t["task_id"] == "load_day")
        assert load_day["try_number"] >= 2 and load_day["state"] == "success", load_day
    assert len(_loaded_files(mongo_uri)) == len(loaded)
    # 11-01's searches/hits and 11-02's materials: two curated runs (three where the scheduler saw
    # 11-01's first event alone, as test_airflow_ui.py allows too), which consumed those three events,
    # each once; the re-run loaded nothing, so it emitted none and started none more
    _wait("the curated runs", lambda: _all_done(api, "sci_ingest_curated", 2), 240, every=1)
    time.sleep(5)
    curated = sorted(_runs(api, "sci_ingest_curated"), key=lambda r: r["run_after"])
    second_day = next(r["dag_run_id"] for r in days if r["logical_date"][:10] == "2026-11-02")
    events = sorted([(run["dag_run_id"], "hits_written"), (run["dag_run_id"], "searches_written"),
                     (second_day, "materials_written")])  # fmt: skip
    emitted = api.call("GET", "/api/v2/assets/events?source_dag_id=sci_ingest_landing&limit=100")["asset_events"]
    assert sorted((e["source_run_id"], e["source_task_id"]) for e in emitted) == events, emitted
    consumed = [sorted((e["source_run_id"], e["source_task_id"]) for e in _upstream_events(api, r["dag_run_id"]))
                for r in curated]  # fmt: skip
    assert sorted(e for c in consumed for e in c) == events, consumed
    assert len(curated) == (2 if len(consumed[0]) == 2 else 3), consumed
    # each analysis says what it read: best_hits the whole source at first, then nothing (only
    # materials landed since); the aggregate oxide_formation_energy its whole source at first, then
    # again only if the materials landed after that first read (the scheduler decides when it starts)
    first, *later = (_analyze_log(api, r["dag_run_id"]) for r in curated)
    assert "best_hits: whole collection: query_best_hits was never published here" in first, first[-3000:]
    assert "oxide_formation_energy: whole collection: oxide_formation_energy was never published" in first
    for log in later:
        assert "best_hits: nothing loaded into hits since best_hits last ran" in log, log[-3000:]
        assert ("oxide_formation_energy: whole collection: 1 file(s) changed materials" in log
                or "oxide_formation_energy: nothing loaded into materials since" in log), log[-3000:]
    validate_logs = [_task_log(api, r["dag_run_id"], "validate") for r in curated]
    assert all("validate: " in log for log in validate_logs)  # what it checked, what stood, and why


HOLD = "sci_ingest_curated_hold"  # ingest.airflow.support.CURATED_HOLD_VARIABLE


def _events_of(api, run_id: str) -> list[dict]:
    """The Asset events a landing run emitted (with their extra)."""
    return api.call("GET", f"/api/v2/assets/events?source_dag_id=sci_ingest_landing&source_run_id={quote(run_id)}"
                    "&limit=100")["asset_events"]  # fmt: skip


def _queued_events(api) -> list[dict]:
    """The curated DAG's queued Asset events (Airflow's asset Dag run queue), none: []."""
    try:
        return api.call("GET", "/api/v2/dags/sci_ingest_curated/assets/queuedEvents")["queued_events"]
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return []
        raise


def _land_and_run(api, home: Path, day: str, files) -> dict:
    """A landing day run through the REST API, to its end; its run."""
    land_day(home, day, files)
    n = len(_runs(api, "sci_ingest_landing"))
    run = api.call("POST", "/api/v2/dags/sci_ingest_landing/dagRuns", {"logical_date": f"{day}T00:00:00Z", "conf": {}})
    _wait(f"the {day} landing run", lambda: _all_done(api, "sci_ingest_landing", n + 1), 240, every=1)
    return run


def _events_during_an_active_run(api, home: Path, mongo_uri: str) -> None:
    """Airflow issue #56050: Asset events that arrive while the curated DAG's one active run
    (max_active_runs=1) is running.  Event A starts run R1, held after its analyses (the Variable
    sci_ingest_curated_hold, set and deleted through the REST API); event B arrives meanwhile. Airflow
    keeps B queued while R1 is active and, R1 over, starts R2 on it; R2's analyses read B's file, and
    what analysts read (query_best_hits) covers it.  Each event's extra says what its load did."""
    pasta_a, pasta_b = sorted((REPO / "samples" / "pasta").glob("*.m10"))[2:4]
    before = {r["dag_run_id"] for r in _runs(api, "sci_ingest_curated")}
    api.call("POST", "/api/v2/variables", {"key": HOLD, "value": "true"})
    landing_a = _land_and_run(api, home, "2026-11-04", [pasta_a])

    def held_run():
        new = [r for r in _runs(api, "sci_ingest_curated") if r["dag_run_id"] not in before]
        if len(new) == 1 and "held: the Airflow Variable" in _task_log(api, new[0]["dag_run_id"], "validate"):
            return new[0]
        return None

    r1 = _wait("the curated run of event A, held before it validates", held_run, 240, every=1)
    assert r1["run_type"] == "asset_triggered" and r1["state"] == "running", r1
    landing_b = _land_and_run(api, home, "2026-11-05", [pasta_b])  # event B, while R1 is active
    events_b = _events_of(api, landing_b["dag_run_id"])
    assert sorted(e["source_task_id"] for e in events_b) == ["hits_written", "searches_written"], events_b
    for e in events_b:  # what the load did, in the event itself (ingest.airflow.support.landing_event_extra)
        extra = e["extra"]
        assert extra["run_id"] == landing_b["dag_run_id"] and extra["day"] == "2026-11-05", extra
        assert extra["files_loaded"] == 1 and extra["files_failed"] == 0 and extra["load_checks"] == "clean", extra
        assert extra["collection"] == e["source_task_id"].removesuffix("_written") and extra["documents"] > 0, extra
        assert e.get("partition_key") is None, e  # a key would keep the curated DAG from running on it
    # R1 still active: B waits in Airflow's queue, no run is created for it
    assert _wait("event B queued for the curated DAG", lambda: len(_queued_events(api)) == 2, 60, every=1)
    assert [r["dag_run_id"] for r in _runs(api, "sci_ingest_curated") if r["dag_run_id"] not in before] == \
        [r1["dag_run_id"]]
    api.call("DELETE", f"/api/v2/variables/{HOLD}")

    def later_run():
        runs = _runs(api, "sci_ingest_curated")
        new = [r for r in runs if r["dag_run_id"] not in before | {r1["dag_run_id"]}]
        done = [r for r in runs if r["dag_run_id"] == r1["dag_run_id"] and r["state"] == "success"]
        return new[0] if done and new and new[0]["state"] == "success" else None

    r2 = _wait("the curated run that takes up event B", later_run, 240, every=1,
               describe=lambda: (_runs(api, "sci_ingest_curated"), _queued_events(api)))  # fmt: skip
    assert r2["run_type"] == "asset_triggered", r2
    consumed = {e["source_run_id"] for e in _upstream_events(api, r1["dag_run_id"])}
    assert consumed == {landing_a["dag_run_id"]}, consumed
    consumed = sorted((e["source_run_id"], e["source_task_id"]) for e in _upstream_events(api, r2["dag_run_id"]))
    assert consumed == [(landing_b["dag_run_id"], "hits_written"), (landing_b["dag_run_id"], "searches_written")]
    assert _queued_events(api) == []
    # the curated runs say what they react to; R2's analyses read B's file, loaded after R1's read
    log1, log2 = _analyze_log(api, r1["dag_run_id"]), _analyze_log(api, r2["dag_run_id"])
    assert f"reacting to sci_ingest.hits from sci_ingest_landing/{landing_a['dag_run_id']}" in log1, log1[-3000:]
    assert f"reacting to sci_ingest.searches from sci_ingest_landing/{landing_b['dag_run_id']}" in log2, log2[-3000:]
    assert "day 2026-11-05" in log2 and "load checks clean" in log2, log2[-3000:]
    assert "best_hits: only the groups of the 1 file(s) changed hits since best_hits last ran" in log2, log2[-3000:]
    client = pymongo.MongoClient(mongo_uri, serverSelectionTimeoutMS=10_000)
    try:
        db = client["sci_ingest"]
        sha_b = db["ingest_files"].find_one({"_id": str(home / "landing" / "2026-11-05" / pasta_b.name)})["sha256"]
        searches_b = set(db["hits"].distinct("search_id", {"search_id": prefix_range(search_id_prefix(sha_b))}))
        published = set(db["query_best_hits"].distinct("search_id"))
    finally:
        client.close()
    assert searches_b and searches_b <= published, (len(searches_b), len(searches_b - published))


def _clear(api, dag_id: str, run_id: str) -> bool:
    """Clear every task instance of a run (the UI's Clear), so that the scheduler runs it again; False
    while the API server meets SQLite's "database is locked" (its transaction rolled back, nothing half done)."""
    try:
        api.call("POST", f"/api/v2/dags/{dag_id}/clearTaskInstances",
                 {"dry_run": False, "dag_run_id": run_id, "only_failed": False, "reset_dag_runs": True})
    except urllib.error.HTTPError as exc:
        if exc.code >= 500:
            return False
        raise
    return True


def _upstream_events(api, run_id: str) -> list[dict]:
    """The Asset events that started a curated run."""
    return api.call("GET", f"/api/v2/dags/sci_ingest_curated/dagRuns/{quote(run_id, safe='')}/upstreamAssetEvents"
                    )["asset_events"]  # fmt: skip


def _analyze_log(api, run_id: str) -> str:
    return _task_log(api, run_id, "analyze")


def _task_log(api, run_id: str, task: str) -> str:
    log = api.call("GET", f"/api/v2/dags/sci_ingest_curated/dagRuns/{run_id}/taskInstances/{task}/logs/1"
                          "?full_content=true")  # fmt: skip
    return json.dumps(log)


def _manual_backfill(api, home: Path) -> None:
    """sci_ingest_backfill over a glob: reprocess=none finds everything loaded (no batch);
    reprocess=all loads the landed files again, one mapped task per batch, in the pool."""
    api.call("PATCH", "/api/v2/dags/sci_ingest_backfill", {"is_paused": False})
    pattern = str(home / "landing" / "**" / "*.*")
    landed = len(list((home / "landing").glob("*/*.*")))  # the landing days' files, one batch each
    for reprocess, mapped in (("none", 0), ("all", landed)):
        n = len(_runs(api, "sci_ingest_backfill"))
        run = api.call("POST", "/api/v2/dags/sci_ingest_backfill/dagRuns",
                       {"logical_date": None, "conf": {"glob": pattern, "reprocess": reprocess, "batch_files": 1}})
        _wait(f"the manual backfill (reprocess={reprocess})", lambda n=n: _all_done(api, "sci_ingest_backfill", n + 1),
              240, every=1)  # fmt: skip
        tis = api.call("GET", f"/api/v2/dags/sci_ingest_backfill/dagRuns/{run['dag_run_id']}/taskInstances")
        batches = [t for t in tis["task_instances"] if t["task_id"] == "load_batch"]
        assert len([t for t in batches if t["state"] == "success"]) == mapped, batches
        assert all(t["pool"] == "sci_ingest_load" for t in batches if t["state"] == "success"), batches


@pytest.mark.scheduler
@pytest.mark.skipif(not AIRFLOW_INSTALLED, reason="Airflow is not installed (make install)")
def test_the_dag_runs_green_under_the_real_scheduler(local_airflow):  # noqa: F811 - the fixture imported above
    proc, port, home, log_path = local_airflow
    base = f"http://127.0.0.1:{port}"
    wait_healthy(base, 180)
    password, mongo_uri = admin_and_mongo(log_path)
    api = Api(base, password)

    # nothing outside loopback: the UI/API, and no log server on every interface
    listening = _listening(psutil.Process(proc.pid))
    assert listening and all(ip in ("127.0.0.1", "::1") for _, ip, _ in listening), listening

    # the project's DAGs only (no example DAGs), parsed without errors
    dags = _wait("the DAGs to be parsed", lambda: api.call("GET", "/api/v2/dags")["dags"], 120)
    assert {d["dag_id"] for d in dags} == DAG_IDS
    assert api.call("GET", "/api/v2/importErrors")["total_entries"] == 0

    _landing_days_and_assets(api, home, port, mongo_uri)
    _events_during_an_active_run(api, home, mongo_uri)
    _manual_backfill(api, home)

    # scheduled ingestion: unpausing the daily DAG queues its latest daily run, which loads the bundled
    # samples (no paths given); that run, created by the scheduler itself, is the one checked (runs
    # triggered through the REST API with a conf are checked above)
    api.call("PATCH", "/api/v2/dags/sci_ingest", {"is_paused": False})
    runs = _wait("the daily run", lambda: _runs(api, "sci_ingest"), 120, every=1)
    assert [r["run_type"] for r in runs] == ["scheduled"], runs
    run_id = runs[0]["dag_run_id"]
    path = f"/api/v2/dags/sci_ingest/dagRuns/{run_id}"

    def summary() -> dict:
        tasks = api.call("GET", path + "/taskInstances")["task_instances"]
        return {t["task_id"]: (t["state"], t["try_number"]) for t in tasks}

    def finished():
        states = summary()
        bad = {k: v for k, v in states.items() if v[0] in ("up_for_retry", "failed", "upstream_failed")}
        assert not bad, f"a task did not succeed at its first try: {states}"  # fail fast, not after the retries
        state = api.call("GET", path)["state"]
        return state if state in ("success", "failed") else None

    assert _wait("the daily run to finish", finished, 240, every=1, describe=summary) == "success", summary()
    summary = summary()
    # green at the first try: a retry would hide a task that only works the second time
    assert summary == {"load": ("success", 1), "analyze": ("success", 1), "validate": ("success", 1)}

    # the tasks wrote their stage timings under the Airflow run id, in the MongoDB Airflow was given
    client = pymongo.MongoClient(mongo_uri, serverSelectionTimeoutMS=10_000)
    try:
        rows = list(client["sci_ingest"]["stage_timings"].find({"run_id": run_id}))
        # the per-file rows of the loaders (this run's, and those of the landing and backfill runs)
        file_rows = list(client["sci_ingest"]["stage_timings"].find({"file": {"$exists": True}}))
    finally:
        client.close()
    stages = {row["stage"] for row in rows}
    assert {"load", "validate"} <= stages and any(s.startswith("analyze") for s in stages), stages
    # each row names the Airflow task that wrote it (per-file rows of the loader's workers too)
    for row in rows:
        lineage = row.get("airflow")
        assert lineage and lineage["dag_id"] == "sci_ingest" and lineage["run_id"] == run_id, row
        assert lineage["try_number"] == 1 and lineage["map_index"] is None, row
        stage = row["stage"].split(".")[0]
        expected = {"parse": {"load"}, "load": {"load"}, "index": {"load"},
                    "cluster": {"analyze", "validate"}}.get(stage, {stage})  # the cluster row: its last starter
        assert lineage["task_id"] in expected, row
    assert any(r["run_id"] == run_id for r in file_rows)  # the samples the landing days did not bring
    assert file_rows and all(r["airflow"]["task_id"] in ("load", "load_day", "load_batch")
                             and r["airflow"]["run_id"] == r["run_id"]
                             for r in file_rows), file_rows[:2]  # fmt: skip
    # the task log ends with the stage table
    log = api.call("GET", f"{path}/taskInstances/analyze/logs/1?full_content=true")
    text = json.dumps(log)
    assert "stage timings of this task" in text and "analyze.best_hits" in text, text[-2000:]

    # Ctrl-C / SIGTERM stops every component; the command says it was interrupted, exit 130 (issue 42)
    os.killpg(proc.pid, signal.SIGTERM)
    assert proc.wait(60) == 130
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0, "the UI still answers after the stop"


def test_airflow_env_keeps_airflow_local_and_hands_it_the_mongodb(tmp_path):
    from ingest.airflow.local import _mongo_conn_uri, airflow_env

    env = airflow_env(tmp_path, 8123, "mongodb://127.0.0.1:4000/?directConnection=true", base={"PATH": "/usr/bin"})
    assert env["AIRFLOW_HOME"] == str(tmp_path / "airflow")
    assert env["AIRFLOW__CORE__DAGS_FOLDER"] == str(REPO / "dags") and env["AIRFLOW__CORE__LOAD_EXAMPLES"] == "False"
    assert env["AIRFLOW__API__HOST"] == "127.0.0.1" and env["AIRFLOW__API__BASE_URL"] == "http://127.0.0.1:8123"
    assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
    module, _, name = env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS"].rpartition(".")
    assert getattr(__import__(module, fromlist=[name]), name)["timeout"] >= 30  # SQLite waits for its lock
    assert env["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)  # airflow finds its own commands
    assert env["AIRFLOW_CONN_MONGO_DEFAULT"] == "mongo://127.0.0.1:4000/?directConnection=true"
    assert _mongo_conn_uri("mongodb://u:p@h:1") == "mongo://u:p@h:1/"
    assert _mongo_conn_uri("mongodb+srv://c.example.net/db?tls=true") == "mongo://c.example.net/db?tls=true&srv=true"
    with pytest.raises(ValueError):
        _mongo_conn_uri("http://example.net/")
    assert "AIRFLOW_CONN_MONGO_DEFAULT" not in airflow_env(tmp_path, 8123, None, base={})
