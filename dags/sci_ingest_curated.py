"""sci_ingest_curated: refresh the curated collections when new data arrives, not on a clock.

Scheduled on the Assets ``sci_ingest_landing`` emits (any of searches, hits, materials,
tasks written): a run analyses and validates what is loaded.  The analyses read their
whole source collections (none of them has an incremental form yet; the task log says
so, with the Asset events that triggered the run).
"""

from __future__ import annotations

from datetime import datetime, timezone
from functools import reduce
from operator import or_

from airflow.sdk import dag, get_current_context, task

from ingest.airflow_support import ASSET_COLLECTIONS, collection_asset, task_defaults


@dag(
    dag_id="sci_ingest_curated",
    description="Analyse and validate when sci_ingest_landing wrote new documents (Asset-triggered).",
    schedule=reduce(or_, (collection_asset(c) for c in ASSET_COLLECTIONS)),
    start_date=datetime(2026, 1, 1, tzinfo=timezone.utc),
    catchup=False,
    max_active_runs=1,
    default_args=task_defaults(),
    tags=["sci-ingest"],
    doc_md=__doc__,
)
def sci_ingest_curated():
    @task(task_id="analyze")
    def analyze() -> dict:
        """The analyses over their whole source collections (no incremental form yet)."""
        from ingest.airflow_support import lineage_of, log_trigger, resolve_mongo_uri, run_task
        from ingest.pipeline import task_analyze

        context = get_current_context()
        log_trigger(context)
        return run_task(task_analyze, context["run_id"], mongo_uri=resolve_mongo_uri(use_airflow=True),
                        lineage=lineage_of(context))  # fmt: skip

    @task(task_id="validate")
    def validate() -> dict:
        """Great Expectations checks; a critical failure fails the task without retry, naming it."""
        from ingest.airflow_support import lineage_of, resolve_mongo_uri, run_task
        from ingest.pipeline import task_validate

        context = get_current_context()
        return run_task(task_validate, context["run_id"], mongo_uri=resolve_mongo_uri(use_airflow=True),
                        lineage=lineage_of(context))  # fmt: skip

    analyze() >> validate()


sci_ingest_curated()
