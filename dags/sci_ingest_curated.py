"""sci_ingest_curated: refresh the curated collections when new data arrives, not on a clock.

Scheduled on the Assets ``sci_ingest_landing`` and ``sci_ingest_backfill`` emit (any of
searches, hits, materials, tasks written), or daily at 06:00 UTC: the catch-up that bounds how
long an event Airflow holds back while a run is active waits (Airflow issue #56050; docs/airflow.md).
A run analyses and validates what is loaded.
An analysis with an incremental form (``best_hits``: one row per search) reads only the
searches of the files loaded since it last ran; the others read their whole source when a
file changed it and are skipped otherwise; a suite nothing of which changed keeps its verdict.
The analyze task's log names each Asset event that triggered the run (source run, collection, what
its extra says) and says, per analysis and suite, what it read and why (see ``analytics/changes.py``).
With the Variable ``sci_ingest_curated_hold`` on, a run waits after its analyses, before it validates.
"""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.sdk import dag, get_current_context, task

from ingest.airflow.support import curated_schedule, task_defaults


@dag(
    dag_id="sci_ingest_curated",
    description="Analyse and validate when sci_ingest_landing wrote new documents (Asset-triggered).",
    schedule=curated_schedule(),
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    default_args=task_defaults(),
    tags=["sci-ingest"],
    doc_md=__doc__,
)
def sci_ingest_curated():
    @task(task_id="analyze")
    def analyze() -> dict:
        """Each analysis over what changed since it last ran where it can, else its whole source."""
        from ingest.airflow.support import lineage_of, log_trigger, resolve_mongo_uri, run_task
        from ingest.pipeline import task_analyze

        context = get_current_context()
        log_trigger(context)
        return run_task(task_analyze, context["run_id"], mongo_uri=resolve_mongo_uri(use_airflow=True),
                        lineage=lineage_of(context), incremental=True)  # fmt: skip

    @task(task_id="validate")
    def validate() -> dict:
        """Great Expectations checks; a failed expectation of severity critical or error fails the task without
        retry, naming it."""
        from ingest.airflow.support import lineage_of, resolve_mongo_uri, run_task, wait_while_held
        from ingest.pipeline import task_validate

        context = get_current_context()
        wait_while_held()
        return run_task(task_validate, context["run_id"], mongo_uri=resolve_mongo_uri(use_airflow=True),
                        lineage=lineage_of(context), incremental=True)  # fmt: skip

    analyze() >> validate()


sci_ingest_curated()
