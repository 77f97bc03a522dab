"""``python -m ingest.cli``: the same as ``sci-ingest``."""

from ingest.cli.main import run

run()
