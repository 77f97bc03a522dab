"""sci_ingest_backfill: load months of old results on demand, in batches over a pool.

Trigger it with ``paths`` (files or directories) and/or ``glob``, and ``reprocess``:
``none`` (files the ledger has never seen), ``failed`` (also those whose load failed) or
``all`` (every file again, replacing its documents).  ``plan`` cuts the files into batches
(``batch_files`` each, fewer batches than Airflow's ``max_map_length``); ``load_batch`` is
mapped over them (dynamic task mapping) in the ``sci_ingest_load`` pool, which bounds how
many load at once (``sci-ingest airflow`` creates it; elsewhere ``airflow pools set
sci_ingest_load 2 "sci-ingest loads"``).  As ``sci_ingest_landing`` does, one task per
collection emits its Asset only if some batch wrote into it.
"""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.sdk import Param, dag, get_current_context, task

from ingest.airflow.support import ASSET_COLLECTIONS, collection_asset, task_defaults

POOL = "sci_ingest_load"


@dag(
    dag_id="sci_ingest_backfill",
    description="Load given files, directories or a glob in batches (dynamic task mapping, one pool).",
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    default_args=task_defaults(),
    params={
        "paths": Param([], type="array", items={"type": "string"}, title="Files or directories"),
        "glob": Param("", type="string", title="A glob (e.g. /data/ssearch/2025-*/**/*.m10)"),
        "reprocess": Param("none", enum=["none", "failed", "all"], title="Files the ledger already has"),
        "batch_files": Param(50, type="integer", minimum=1, title="Files per batch"),
    },
    tags=["sci-ingest"],
    doc_md=__doc__,
)
def sci_ingest_backfill():
    @task(task_id="plan", retries=0)
    def plan() -> list:
        """The batches to load (the log says what was left out and why)."""
        from airflow.sdk import conf

        from ingest.airflow.backfill import plan_backfill
        from ingest.airflow.support import resolve_mongo_uri, run_task

        params = get_current_context()["params"]
        max_batches = min(1024, conf.getint("core", "max_map_length", fallback=1024))
        planned = run_task(plan_backfill, params.get("paths") or None, params.get("glob") or None,
                           params.get("reprocess") or "none", int(params.get("batch_files") or 50), max_batches,
                           mongo_uri=resolve_mongo_uri(use_airflow=True))  # fmt: skip
        return [{"files": b, "force": planned["force"]} for b in planned["batches"]]

    @task(task_id="load_batch", pool=POOL, max_active_tis_per_dagrun=4)
    def load_batch(batch: dict) -> dict:
        from ingest.airflow.support import lineage_of, resolve_mongo_uri, run_task
        from ingest.pipeline import task_load_batch

        context = get_current_context()
        return run_task(task_load_batch, context["run_id"], batch["files"], batch["force"],
                        mongo_uri=resolve_mongo_uri(use_airflow=True), lineage=lineage_of(context))  # fmt: skip

    def announce(collection: str):
        @task(task_id=f"{collection}_written", outlets=[collection_asset(collection)], retries=0,
              trigger_rule="all_done")  # fmt: skip
        def written(results, batches: list) -> dict:
            """Succeed (emitting the collection's Asset event, its extra summing the batches) only if a
            batch wrote into it."""
            from ingest.airflow.support import announce_landing, backfill_result

            return announce_landing(get_current_context(), collection,
                                    backfill_result(list(results or []), len(batches or [])))

        return written

    batches = plan()
    loaded = load_batch.expand(batch=batches)
    for collection in ASSET_COLLECTIONS:
        announce(collection)(loaded, batches)


sci_ingest_backfill()
