"""sci_ingest: load -> analyze -> validate, once a day.

A thin Airflow 3 DAG over ``ingest.pipeline``: each task calls one pipeline
function with the Airflow ``run_id`` (so every step of one DAG run shares the
same ingest run id, and a retried task reuses it).  The DAG file itself only
declares: the pipeline, pymongo, Dask, pandas and Great Expectations are
imported inside the task functions, at run time, never at parse time.

Where the data goes: ``MONGODB_URI`` if set, else the Airflow connection
``mongo_default`` (e.g. ``AIRFLOW_CONN_MONGO_DEFAULT=mongo://mongos:27017/``),
else the embedded server (see ``ingest.airflow.support``).

Ad-hoc loads / backfills: trigger with conf ``{"paths": ["/data/x.m10", ...]}``
(files or directories); an empty list loads the bundled samples.

Like ``sci-ingest run``, analyze and validate follow changes: an analysis whose sources no loaded
file changed is skipped, ``best_hits`` reads only the changed files' searches, a suite nothing of
which changed keeps its verdict; each task log says what it read and why.  Trigger with conf
``{"full": true}`` to analyse and validate everything again (``sci-ingest run --full``).

Retries: transient failures (database/server unreachable) are retried;
deterministic ones (unparseable input, bad config, a failed critical
expectation) fail the task at once (``AirflowFailException``).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow.sdk import Param, dag, get_current_context, task

DAG_ID = "sci_ingest"

DEFAULT_ARGS = {
    "owner": "sci-ingest",
    "retries": 2,
    "retry_delay": timedelta(minutes=2),
    "retry_exponential_backoff": True,
    "max_retry_delay": timedelta(minutes=20),
    "execution_timeout": timedelta(hours=2),
}


@dag(
    dag_id=DAG_ID,
    description="Ingest FASTA -m 10 searches and Materials-Project records into MongoDB, analyse, validate.",
    schedule="@daily",
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    dagrun_timeout=timedelta(hours=6),
    default_args=DEFAULT_ARGS,
    params={
        "paths": Param(
            [],
            type="array",
            items={"type": "string"},
            title="Input paths",
            description=(
                "Files or directories to load (PASTA -m 10 output, Materials-Project JSON). "
                "Empty: the bundled samples."
            ),
        ),
        "full": Param(False, type="boolean", title="Analyse and validate everything",
                      description="Off: only what changed since each analysis and suite last ran."),
        "on_validation_failure": Param("fail", enum=["fail", "warn"], title="A failed expectation (severity error)",
                                       description="fail: the validate task fails; warn: its log says so and it "
                                                   "succeeds. A failed critical expectation always fails it."),
    },
    tags=["sci-ingest"],
    doc_md=__doc__,
)
def sci_ingest():
    @task(task_id="load", multiple_outputs=False)
    def load() -> dict:
        """Parse and load the input files; returns the load summary (pushed as XCom)."""
        from ingest.airflow.support import lineage_of, paths_param, resolve_mongo_uri, run_task
        from ingest.pipeline import task_load

        context = get_current_context()
        return run_task(
            task_load,
            context["run_id"],
            paths=paths_param(context["params"]),
            mongo_uri=resolve_mongo_uri(use_airflow=True),
            lineage=lineage_of(context),
        )

    @task(task_id="analyze", multiple_outputs=False)
    def analyze() -> dict:
        """Run the analyses (Dask, reading MongoDB in partitions) over what changed (all: param full)."""
        from ingest.airflow.support import lineage_of, resolve_mongo_uri, run_task
        from ingest.pipeline import task_analyze

        context = get_current_context()
        return run_task(task_analyze, context["run_id"], mongo_uri=resolve_mongo_uri(use_airflow=True),
                        lineage=lineage_of(context), incremental=not context["params"].get("full"))

    @task(task_id="validate", multiple_outputs=False)
    def validate() -> dict:
        """Great Expectations checks; a failed expectation of severity critical or error fails the task without
        retry (error: unless param on_validation_failure is warn)."""
        from ingest.airflow.support import lineage_of, resolve_mongo_uri, run_task
        from ingest.pipeline import task_validate

        context = get_current_context()
        return run_task(task_validate, context["run_id"], mongo_uri=resolve_mongo_uri(use_airflow=True),
                        lineage=lineage_of(context), incremental=not context["params"].get("full"),
                        on_failure=context["params"].get("on_validation_failure", "fail"))

    load() >> analyze() >> validate()


sci_ingest()
