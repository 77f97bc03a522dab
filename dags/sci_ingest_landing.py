"""sci_ingest_landing: load each day's landing folder, and announce what changed as Assets.

Every day's run loads ``<landing>/YYYY-MM-DD/`` for the day its data interval starts
(``<landing>``: ``$SCI_INGEST_LANDING``, default ``<home>/landing``) with the parallel
loader.  Folders by day, not arrival times: a day is a name a backfill can address, and
the files of a day stay the files of that day wherever they are copied from.  Running a
day again loads nothing new: the ledger knows every file already loaded by its sha256.

Then one small task per data collection (searches, hits, materials, tasks) declares that
collection's Asset as its outlet and succeeds only when the load wrote documents into it;
otherwise it is skipped and no Asset event is emitted.  The event's extra says what the load
did (run id, day, documents of that collection, files loaded/skipped/failed, values set aside,
warnings, the loader's own checks); no partition key (docs/airflow.md says why).
``sci_ingest_curated`` runs on those events.  Backfills: ``airflow backfill create --dag-id sci_ingest_landing --from-date ...
--to-date ...`` (each day once; ``--reprocess-behavior`` decides about days already run).
"""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.sdk import dag, get_current_context, task

from ingest.airflow.support import ASSET_COLLECTIONS, collection_asset, task_defaults


@dag(
    dag_id="sci_ingest_landing",
    description="Load each day's landing folder; emit an Asset event per collection written.",
    schedule="@daily",
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=4,
    default_args=task_defaults(),
    tags=["sci-ingest"],
    doc_md=__doc__,
)
def sci_ingest_landing():
    @task(task_id="load_day")
    def load_day() -> dict:
        """Load <landing>/<day>/ (nothing landed: nothing to do); returns the collections written."""
        from ingest.airflow.support import data_day, lineage_of, resolve_mongo_uri, run_task
        from ingest.pipeline import task_load_landing

        context = get_current_context()
        return run_task(task_load_landing, context["run_id"], data_day(context),
                        mongo_uri=resolve_mongo_uri(use_airflow=True), lineage=lineage_of(context))  # fmt: skip

    def announce(collection: str):
        @task(task_id=f"{collection}_written", outlets=[collection_asset(collection)], retries=0)
        def written(result: dict) -> dict:
            """Succeed (emitting the collection's Asset event, its extra saying what the load did)
            only if the load wrote into it."""
            from ingest.airflow.support import announce_landing

            return announce_landing(get_current_context(), collection, result)

        return written

    loaded = load_day()
    for collection in ASSET_COLLECTIONS:
        announce(collection)(loaded)


sci_ingest_landing()
