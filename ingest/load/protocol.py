"""The exactly-once protocol of a load: its vocabulary, and the steps a file and a batch share.

Each version of a file (its bytes: size, mtime, sha256) goes into the database exactly once,
whatever stops the load (``kill -9``, a dead worker, a server restart, Ctrl-C).  A file goes
alone (:mod:`ingest.load.files`: any file, streamed, its write pipelined with the next file's
parse) or, when it is small and new to the ledger, with up to 500 others
(:mod:`ingest.load.batch`: a constant number of round trips per batch, not per file).  Both
take the same seven steps, named by the same verbs in the code:

============  ================================================  ============================================
verb          a file                                            a batch
============  ================================================  ============================================
**claim**     its ledger entry, then its content (sha256)       every content, in one insert (the entries
              (:mod:`ingest.load.claims`)                       do not exist yet: the commit creates them)
**write**     its documents, through the pipelined writer       every file's documents, in a few bulk writes
**seal**      one journaled write: the final entry kept in      one journaled write: the batch's barrier
              ``pending.written``                               (``ingest_batches``)
**commit**    the entry says ``loaded`` (or ``failed``,         one journaled insert of every entry; one
              naming why): :func:`commit_entry`                 that appeared meanwhile goes per file
**roll back** a bad file's pending version, or the contents     the contents of a batch that could not be
              it replaces: :func:`drop_contents`                written, or of a file another loader took
**release**   the content claim; the entry's with the commit    the batch's claims and its barrier
**recover**   another loader's entry (``recover_entry``)        another loader's claims (``recover_claim``)
============  ================================================  ============================================

The seal is what makes a write durable: a server acknowledges ``w: 1`` writes before its journal
holds them, and one killed then loses the last ones; a journaled write is acknowledged only once
the journal holds it and everything before it, and if the server's identity (:func:`incarnation`,
``hello.topologyVersion.processId``) is the same before the documents and after the seal, one run
of the server took them all.  Otherwise the documents are written again (they are idempotent).

A batch of one is a file: whichever way a file goes, its entry is written by the same functions
(:func:`loaded_fields`, :func:`failed_fields`), its documents and records are the same, and the
load's report names it the same way, in the same order (``tests/test_batch_is_a_file.py`` loads a
landing folder both ways and compares everything stored).  What differs is the cost: a batch
spends a constant number of round trips on up to 500 files, a file alone about ten.

Rolling back a content deletes its documents unless another path's ledger entry stands for the same
content; records fall back to their next holder (:mod:`ingest.load.records`).  Recovery, of one
entry, one claim or a whole stopped run, is :mod:`ingest.load.recovery`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from pymongo.database import Database

from ingest.fileio import printable
from ingest.load.claims import Claims, Owner
from ingest.load.content import MAX_BAD_RECORDS, content_filters
from ingest.load.outcome import FileOutcome
from ingest.load.reading import Version
from ingest.load.records import drop_records
from ingest.load.writer import PipelinedWriter
from ingest.store.catalog import LEDGER
from ingest.store.ledger import Ledger
from ingest.store.retry import Retry
from ingest.timing import utcnow

__all__ = ["Context", "incarnation", "drop_contents", "commit_entry", "same_version", "loaded_fields",
           "failed_fields", "MAX_REWRITES"]

#: How often a file is written again because the server restarted while it was written.
MAX_REWRITES = 3


@dataclass
class Context:
    """What a loader needs for the protocol: the database, the ledger, its claims, the writer, the options.

    One per loader (a thread of a Dask worker, or the command's own process), reused across its tasks.
    A dry run has none: it writes nothing and claims nothing (:func:`ingest.load.files.dry_run`)."""

    db: Database
    run_id: str
    owner: Owner
    retry: Retry
    claims: Claims
    ledger: Ledger
    writer: PipelinedWriter
    batch_size: int = 1000
    force: bool = False
    max_bad_records: int = MAX_BAD_RECORDS  # a record file fails at this many bad records, unread further


def incarnation(ctx: Context) -> object:
    """Which run of the server process answers (changes when it restarts); None if it does not say."""
    hello = ctx.retry("asking the server hello", ctx.db.client.admin.command, "hello")
    return (hello.get("topologyVersion") or {}).get("processId")


def same_version(record: dict, size: int, mtime: float) -> bool:
    """Whether ``record`` (an entry, or its pending version) describes a file of this size and mtime."""
    return record.get("size") == size and record.get("mtime") == mtime


def loaded_fields(outcome: FileOutcome, version: Version, run_id: str,
                  finished: dt.datetime | None = None) -> dict:
    """A loaded file's entry, the same whichever way it went (alone, or in a batch: a batch of one is a
    file, ``tests/test_batch_is_a_file.py``): the version, what it holds, what was said of it, when."""
    o = outcome
    return {
        "status": "loaded", "sha256": version.sha256, "size": version.size, "mtime": version.mtime,
        "format": o.format, "records": o.records, "inserted": o.inserted, "updated": o.updated,
        "existing": o.existing, "error": None, "errors": [], "warnings": o.warnings,
        "warnings_total": o.warnings_total, "set_aside": o.set_aside, "set_aside_total": o.set_aside_total,
        "run_id": run_id, "finished": finished or utcnow(),
        "seconds": {"parse": round(o.parse_seconds, 6), "load": round(o.load_seconds, 6),
                    "total": round(o.parse_seconds + o.load_seconds, 6)}}


def failed_fields(outcome: FileOutcome, run_id: str, finished: dt.datetime | None = None) -> dict:
    """A failed file's entry (alone or in a batch): why, its first errors, and the version that failed
    (an entry's last loaded version, if it had one, stays beside it: ``sha256``, ``records``)."""
    o = outcome
    fields = {"status": "failed", "error": printable(o.reason or "", backslash=False), "errors": o.errors,
              "warnings": o.warnings, "warnings_total": o.warnings_total, "failed_sha256": o.sha256,
              "run_id": run_id, "finished": finished or utcnow()}
    if o.format:  # what it was read as; a file of no known format leaves what the entry said
        fields["format"] = o.format
    return fields


def commit_entry(ctx: Context, key: str, set_fields: dict, drop: Iterable[str] = (),
                 unset: tuple[str, ...] = ()) -> None:
    """Write the entry's final state and release it (it is the entry's claim); then roll back the
    contents it no longer holds (``drop``: recorded in the same write, so a stop in between leaves
    them for :func:`ingest.load.recovery.recover_entry`)."""
    shas = list(dict.fromkeys(drop))
    ctx.ledger.update(key, ctx.owner.id, set_fields, unset=("owner", "lease_until", *unset), push_drop=shas)
    ctx.claims.forget(LEDGER, key)
    if shas:
        drop_contents(ctx, shas, path=key)


def drop_contents(ctx: Context, shas: Iterable[str], *, path: str | None = None,
                  held: Collection[str] = ()) -> None:
    """Roll back each content of ``shas``: delete its documents unless a loaded path stands for it.

    ``path``: the entry that is letting the content go (its own reference does not count, and the
    content leaves its ``drop`` list once deleted); None for a batch's file, which has no entry.
    ``held``: the contents this loader already claims; any other is claimed for the deletion."""
    for sha in shas:
        if sha in held:
            _delete_unreferenced(ctx, sha, path)
        else:
            with ctx.claims.content(sha):
                _delete_unreferenced(ctx, sha, path)
        if path is not None:
            ctx.ledger.pull_drop(path, sha)


def _delete_unreferenced(ctx: Context, sha: str, path: str | None) -> None:
    if ctx.ledger.holds_content(sha, exclude=path):
        return  # another path stands for the same content: its documents stay
    for coll, selector in content_filters(sha):
        ctx.retry(f"removing documents of {sha[:12]} from {coll}", ctx.db[coll].delete_many, selector)
    drop_records(ctx.db, sha, ctx.retry)  # its records fall back to their next holder, or go
