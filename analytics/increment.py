"""Incremental analysis: bring an analysis up to date with the files loaded since it last ran.

Which analyses can: those whose output has one row per group (``output_id ==
group_key``, the default combine) and whose group keys start with a prefix made from
the input file's content, declared as ``Analysis.file_prefix`` (a search's id is
``<sha256[:20]>:<query>``, so ``best_hits`` declares :func:`ingest.documents.search_id_prefix`).
The groups of a file then depend on that file alone, and an update is:

1. **what changed** -- the ledger (``ingest_files``) keeps, per entry and analysis, the
   content the analysis's published output covers (``analysed.<name>``).  Entries whose
   ``sha256`` differs, of files that wrote into the analysis's source collection, are
   pending: new files, and files whose content was replaced (their
   old content's groups must go: they are recomputed too, which finds nothing if the old
   documents are gone, or finds them again if another path still has that content);
2. **read and compute** only the groups of those contents: the declared filter AND a key
   range per content on the group key's path (an index seek), through the same runner;
3. **publish** the new rows by ``_id`` (replace, upsert), then delete the rows of those
   groups that this run did not write (a group that vanished), in one transaction where the
   server has them (a replica set, SecantusDB, mongos): a reader sees the old rows or the
   new ones.  The
   Parquet file is rewritten whole (the old rows outside the changed groups, the new rows,
   sorted by id) under a temporary name and renamed over the old one;
4. **record** what was seen: each pending entry is marked only if the path still has the
   content that was read (a file replaced meanwhile stays pending).

A failure before step 4 leaves the entries pending: the retry recomputes the same groups
(the writes are idempotent).  Otherwise the whole collection is read, and the scope says
why: the analysis has no incremental form, it was never published here (or its Parquet
file is missing or of another layout), or more than :data:`WHOLE_ABOVE` of the loaded
files changed (one pass over the collection is then cheaper), or more than
:data:`MAX_CHANGED` files (the key ranges would make a filter too large).  Whole-collection
runs of incremental analyses record what they saw too: the contents loaded when they
started.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from pymongo import ReplaceOne

from ingest.documents import prefix_range
from ingest.errors import ConfigError
from ingest.query.plan import ensure_exact_indexes, server_of
from ingest.store.ledger import Ledger
from ingest.store.mongo import db_errors, shared_client
from analytics.registry import output_table

__all__ = ["Scope", "plan_scope", "scoped_filter", "publish_changes", "record_scope", "WHOLE_ABOVE", "MAX_CHANGED"]

#: Above this share of the loaded files changed, the whole collection is read.
WHOLE_ABOVE = 0.5
#: Above this many changed files, the whole collection is read (one key range per file).
MAX_CHANGED = 5000
#: Up to this many changed rows are published in one transaction (MongoDB bounds a transaction's
#: time and cache): readers see the old rows or the new ones.  More, or a standalone server
#: (no transactions), are written in batches, and the run says so.
MAX_ATOMIC_ROWS = 100_000

log = logging.getLogger(__name__)


@dataclass
class Scope:
    """What one run of an analysis reads: ``whole``, ``changed`` (the groups of some
    files' contents) or ``none`` (nothing changed: the run is skipped), and why."""

    mode: str
    reason: str
    #: changed: the group-key prefixes to recompute (new contents and replaced ones).
    prefixes: tuple[str, ...] = ()
    #: changed: the (path, sha256) entries to mark as seen once published.
    entries: list[tuple[str, str]] = field(default_factory=list)
    #: whole: the contents loaded when the run started, marked as seen once published.
    contents: list[str] | None = None

    def describe(self) -> dict:
        out = {"mode": self.mode, "reason": self.reason}
        if self.mode == "changed":
            out["files"] = len(self.entries)
        return out


def _ledger(uri: str, db_name: str):
    return Ledger(shared_client(uri)[db_name])


def _parquet_layout_ok(path: Path, analysis) -> bool:
    import pyarrow.parquet as pq  # noqa: PLC0415 - lazy: analytics.runner imports this module and must stay light (tests/test_analytics.py); pyarrow costs 0.22 s

    try:
        found = pq.read_schema(path)
    except (OSError, ValueError):
        return False
    # the declared columns with their declared types: a file written before a column was declared
    # (or a list column typed list<null> by inference) is rewritten whole
    return found.equals(analysis.arrow_schema, check_metadata=False)


def _whole(analysis, uri: str, db_name: str, reason: str) -> Scope:
    contents = None
    if analysis.file_prefix is not None:
        with db_errors(f"reading the ledger of {db_name}", uri=uri):
            contents = _ledger(uri, db_name).loaded_contents()
    return Scope("whole", reason, contents=contents)


def plan_scope(analysis, uri: str, db_name: str, out_dir: Path, incremental: bool) -> Scope:
    """How this run of ``analysis`` reads its source (see the module docstring)."""
    if not incremental:
        return _whole(analysis, uri, db_name, "whole collection (asked for)")
    if analysis.file_prefix is None:
        return Scope("whole", f"whole collection: {analysis.name} aggregates over all of {analysis.source} "
                              "(it has no incremental form)")  # fmt: skip
    with db_errors(f"reading the ledger of {db_name}", uri=uri):
        exists = bool(shared_client(uri)[db_name].list_collection_names(filter={"name": analysis.output}))
        ledger = _ledger(uri, db_name)
        pending = ledger.analysis_pending(analysis.name, analysis.source, MAX_CHANGED + 1)
        loaded = ledger.count_loaded(analysis.source) if pending else 0
    parquet = Path(out_dir) / analysis.parquet_name
    if not exists:
        return _whole(analysis, uri, db_name, f"whole collection: {analysis.output} was never published here")
    if not parquet.is_file() or not _parquet_layout_ok(parquet, analysis):
        return _whole(analysis, uri, db_name, f"whole collection: {parquet} is missing or of another layout")
    if not pending:
        return Scope("none", f"nothing loaded since {analysis.name} last ran: its output is current")
    if len(pending) > MAX_CHANGED:
        return _whole(analysis, uri, db_name, f"whole collection: more than {MAX_CHANGED} files changed")
    if len(pending) > WHOLE_ABOVE * loaded:
        return _whole(analysis, uri, db_name, f"whole collection: {len(pending)} of {loaded} loaded files changed "
                                              f"(over {WHOLE_ABOVE:.0%}: one pass is cheaper)")  # fmt: skip
    contents = {e["sha256"] for e in pending}
    replaced = {e.get("analysed", {}).get(analysis.name) for e in pending} - {None} - contents
    prefixes = tuple(sorted({analysis.file_prefix(sha) for sha in contents | replaced}))
    entries = [(e["_id"], e["sha256"]) for e in pending]
    what = f"only the groups of the {len(entries)} file(s) loaded since {analysis.name} last ran"
    if replaced:
        what += f" ({len(replaced)} replaced: their old groups are recomputed or removed)"
    return Scope("changed", what, prefixes=prefixes, entries=entries)


def scoped_filter(analysis, scope: Scope) -> dict | None:
    """The source filter of this run: the declared one, and the changed groups' key ranges."""
    if scope.mode != "changed":
        return analysis.filter or None
    path = next(c.path for c in analysis.columns if c.name == analysis.group_key)
    ranges = {"$or": [{path: prefix_range(p)} for p in scope.prefixes]}
    return {"$and": [analysis.filter, ranges]} if analysis.filter else ranges


def publish_changes(uri: str, db_name: str, analysis, frame, run_id: str, out_dir: Path, scope: Scope,
                    metadata: dict, documents) -> tuple[str, Path]:
    """Replace the changed groups' rows in the output collection and the Parquet file."""
    import pyarrow as pa  # noqa: PLC0415 - lazy: analytics.runner imports this module and must stay light (tests/test_analytics.py); pyarrow costs 0.22 s
    import pyarrow.compute as pc  # noqa: PLC0415 - lazy: analytics.runner imports this module and must stay light (tests/test_analytics.py); pyarrow costs 0.22 s
    import pyarrow.parquet as pq  # noqa: PLC0415 - lazy: analytics.runner imports this module and must stay light (tests/test_analytics.py); pyarrow costs 0.22 s

    final = Path(out_dir) / analysis.parquet_name
    tmp_file = final.with_name(f".{analysis.name}.{uuid.uuid4().hex[:12]}.parquet.tmp")
    old = pq.read_table(final)
    ids = old.column(analysis.output_id)
    touched = None
    for length in sorted({len(p) for p in scope.prefixes}):
        heads = pc.utf8_slice_codeunits(ids, 0, length)
        hit = pc.is_in(heads, value_set=pa.array([p for p in scope.prefixes if len(p) == length]))
        touched = hit if touched is None else pc.or_(touched, hit)
    kept = old.filter(pc.invert(pc.fill_null(touched, False)))
    new = output_table(analysis, frame, run_id).replace_schema_metadata(None)  # the declared schema
    try:
        kept = kept.cast(new.schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as exc:
        raise ConfigError(f"{final}: its layout differs from {analysis.name}'s output ({exc})") from exc
    table = pa.concat_tables([kept, new])
    table = table.take(pc.sort_indices(table, [(analysis.output_id, "ascending")]))
    meta = dict(old.schema.metadata or {})
    meta[b"sci_ingest"] = _json({"analysis": analysis.name, "run_id": run_id, "scope": scope.describe(),
                                 **metadata})  # fmt: skip
    table = table.replace_schema_metadata(meta)
    try:
        pq.write_table(table, tmp_file)
    except OSError as exc:
        tmp_file.unlink(missing_ok=True)
        raise ConfigError(f"cannot write {tmp_file}: {exc}") from exc
    try:
        client = shared_client(uri)
        coll = client[db_name][analysis.output]
        with db_errors(f"publishing {db_name}.{analysis.output}", uri=uri):
            docs = documents(frame, analysis.output_id, run_id)
            # as the whole publish builds them (none led by a float on SecantusDB, whose index keys
            # lose the order of numbers; one an earlier run left dropped), before the rows: no index
            # is built inside a transaction
            ensure_exact_indexes(coll.database, {analysis.output: analysis.indexes})

            def write(session=None) -> None:
                for start in range(0, len(docs), 1000):
                    coll.bulk_write([ReplaceOne({"_id": d["_id"]}, d, upsert=True) for d in docs[start:start + 1000]],
                                    ordered=False, session=session)  # fmt: skip
                for start in range(0, len(scope.prefixes), 500):
                    gone = [{"_id": prefix_range(p)} for p in scope.prefixes[start:start + 500]]
                    coll.delete_many({"$or": gone, "run_id": {"$ne": run_id}}, session=session)

            if server_of(coll.database).topology == "standalone" or len(docs) > MAX_ATOMIC_ROWS:
                log.warning("%s.%s: the changed rows are written in batches, not in one transaction (%s): a "
                            "reader can see some groups updated and others not until it ends", db_name,
                            analysis.output, "a standalone server has none" if len(docs) <= MAX_ATOMIC_ROWS
                            else f"{len(docs):,} rows, more than {MAX_ATOMIC_ROWS:,}")
                write()
            else:  # readers see the old rows or the new ones, never a mix
                with client.start_session() as session:
                    session.with_transaction(write)
        os.replace(tmp_file, final)
    finally:
        tmp_file.unlink(missing_ok=True)
    return analysis.output, final


def record_scope(uri: str, db_name: str, analysis, scope: Scope) -> None:
    """Mark in the ledger what the published output of ``analysis`` now covers."""
    if analysis.file_prefix is None:
        return
    with db_errors(f"marking the ledger of {db_name}", uri=uri):
        if scope.mode == "changed":
            _ledger(uri, db_name).mark_analysed(analysis.name, scope.entries)
        elif scope.mode == "whole" and scope.contents:
            _ledger(uri, db_name).mark_contents_analysed(analysis.name, scope.contents)


def _json(value) -> bytes:
    return json.dumps(value, default=str).encode()
