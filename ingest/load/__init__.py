"""Loading files into MongoDB: in parallel, each file all-or-nothing, exact after any interruption.

* :mod:`~ingest.load.plan` — find the files, skip the known ones in bulk, group the rest;
* :mod:`~ingest.load.run` — run the groups on Dask workers (or in this process), report;
* :mod:`~ingest.load.protocol` — the exactly-once protocol: its verbs, and the steps a file and a batch share;
* :mod:`~ingest.load.files` — one file as a transaction (claim, write, seal, commit, or roll back);
* :mod:`~ingest.load.batch` — many small new files as one transaction (constant round trips);
* :mod:`~ingest.load.recovery` — what a stopped loader left, finished: an entry, a claim, a run;
* :mod:`~ingest.load.records` — records shared between files: every holder's version, the newest stored;
* :mod:`~ingest.load.reading` — one version of a file read, or the file named as changed;
* :mod:`~ingest.load.claims` — one loader at a time per file and per content, with leases;
* :mod:`~ingest.load.writer` — writes that overlap parsing;
* :mod:`~ingest.load.indexes` — which indexes a load keeps up, which it builds after;
* :mod:`~ingest.load.outcome` — what happened, per file and in all.
"""

from __future__ import annotations

from ingest.load.outcome import FileOutcome, LoadSummary
from ingest.load.plan import discover
from ingest.load.run import LoadJob, LoadOptions, LoadStopped, load_group, load_paths

__all__ = ["FileOutcome", "LoadSummary", "LoadOptions", "LoadJob", "LoadStopped", "load_paths",
           "load_group", "discover"]
