"""Planning a manual backfill (``sci_ingest_backfill``): which files, in which batches.

The DAG takes files or directories (``paths``) and/or a glob, and what to do with files
the ledger already knows (``reprocess``):

* ``none``: only files the ledger has never seen;
* ``failed``: those and the ones whose last load failed (or never finished);
* ``all``: every file again (loaded with ``force``: documents replaced, nothing doubled).

The files are cut into batches of about ``batch_files``, each batch one mapped task
(dynamic task mapping, bounded by the ``sci_ingest_load`` pool).  Airflow refuses to map
over more than ``[core] max_map_length`` items (1024 by default), so the batches grow
until their count fits under ``max_batches``.
"""

from __future__ import annotations

import glob as globlib
import math

from ingest.config import Settings
from ingest.errors import ConfigError
from ingest.load.plan import discover
from ingest.server.connection import database
from ingest.store.ledger import Ledger
from ingest.store.retry import Retry

__all__ = ["REPROCESS", "plan_backfill", "batches"]

REPROCESS = ("none", "failed", "all")


def batches(files: list[str], batch_files: int, max_batches: int) -> list[list[str]]:
    """``files`` in order, cut into batches of ``batch_files`` or more, at most ``max_batches`` of them."""
    if batch_files < 1 or max_batches < 1:
        raise ConfigError(f"batch_files and max_batches must be at least 1 ({batch_files}, {max_batches})")
    if not files:
        return []
    size = max(batch_files, math.ceil(len(files) / max_batches))
    return [files[i:i + size] for i in range(0, len(files), size)]


def plan_backfill(paths: list[str] | None, pattern: str | None, reprocess: str, batch_files: int,
                  max_batches: int, mongo_uri: str | None = None, log=print) -> dict:
    """The batches of a manual backfill, and what was left out and why."""
    if reprocess not in REPROCESS:
        raise ConfigError(f"reprocess is one of {', '.join(REPROCESS)}, not {reprocess!r}")
    named = list(paths or [])
    if pattern:
        matched = sorted(globlib.glob(pattern, recursive=True))
        if not matched:
            log(f"the glob {pattern!r} matches nothing")
        named += matched
    if not named:
        raise ConfigError("a backfill needs paths or a glob")
    files, refused = discover(named)
    keys = [str(f) for f in files]  # discover() gives the files' keys
    known: dict[str, dict] = {}
    if reprocess != "all" and keys:
        with database(Settings.from_env(mongo_uri=mongo_uri, progress=False), log) as conn:
            known = Ledger(conn.db, Retry(60.0)).lookup(keys, {"status": 1})
    if reprocess == "none":
        chosen = [k for k in keys if k not in known]
    elif reprocess == "failed":
        chosen = [k for k in keys if known.get(k, {}).get("status") != "loaded"]
    else:
        chosen = keys
    for outcome in refused:
        log(f"left out: {outcome.line}")
    planned = batches(chosen, batch_files, max_batches)
    log(f"backfill: {len(files)} file(s) named, {len(chosen)} to load (reprocess={reprocess}, "
        f"{len(files) - len(chosen)} left to the ledger), in {len(planned)} batch(es)")
    return {"batches": planned, "files": len(files), "chosen": len(chosen), "refused": [o.line for o in refused],
            "force": reprocess == "all"}
