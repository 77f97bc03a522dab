"""Settings: where MongoDB is, which database, where local state lives.

Resolution order for the MongoDB URI: explicit argument (``--mongo-uri``) >
``MONGODB_URI`` environment variable > (inside Airflow) the ``mongo_default``
connection > none, which means "start the embedded SecantusDB server".
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DB = "sci_ingest"
SAMPLES_DIR = PROJECT_ROOT / "samples"
SCHEMAS_DIR = PROJECT_ROOT / "schemas"


def default_workers() -> int:
    """Worker processes by default (loading, a private Dask cluster): the cores this process may use."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def _state_dir() -> Path:
    return Path(os.environ.get("SCI_INGEST_HOME", PROJECT_ROOT / ".sci-ingest"))


@dataclass(frozen=True)
class Settings:
    mongo_uri: str | None = None
    db_name: str = DEFAULT_DB
    state_dir: Path = field(default_factory=_state_dir)
    dask_scheduler: str | None = None
    batch_size: int = 1000
    progress: bool = True
    landing: Path | None = None  # $SCI_INGEST_LANDING: where results land, one folder per day

    @property
    def landing_dir(self) -> Path:
        """The landing folder of the scheduled ingestion (``<home>/landing`` unless set)."""
        return self.landing or self.state_dir / "landing"

    @property
    def db_dir(self) -> Path:
        return self.state_dir / "db"

    @property
    def out_dir(self) -> Path:
        return self.state_dir / "out"

    @classmethod
    def from_env(cls, **overrides) -> "Settings":
        env = os.environ
        base = cls(
            mongo_uri=env.get("MONGODB_URI") or None,
            db_name=env.get("SCI_INGEST_DB", DEFAULT_DB),
            dask_scheduler=env.get("DASK_SCHEDULER_ADDRESS") or None,
            landing=Path(env["SCI_INGEST_LANDING"]) if env.get("SCI_INGEST_LANDING") else None,
        )
        clean = {k: v for k, v in overrides.items() if v is not None}
        return replace(base, **clean)
