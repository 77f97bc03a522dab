"""Airflow support: the glue the DAGs call (:mod:`.support`), planning a backfill
(:mod:`.backfill`) and the project-local Airflow of ``sci-ingest airflow`` (:mod:`.local`)."""
