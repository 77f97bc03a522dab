"""Incremental analysis: bring an analysis up to date with what was loaded since it last read.

What changed is told by :mod:`analytics.changes` (the ledger's stamps against the analysis's
state in ``analysis_state``).  Per run:

1. **nothing changed** in its sources -- the run is skipped (scope ``none``) and its state moved on;
2. **an analysis that cannot be split** (no ``file_prefix``) is recomputed whole, and says why;
3. **an incremental one** (one output row per group, group keys prefixed by the input file's
   content, declared as ``Analysis.file_prefix``: ``best_hits``) reads only the groups of the
   changed contents and of the contents they replaced: one key range per content, each its own
   index seek (:func:`scoped_queries`: the embedded server answers an ``$or`` of ranges with a collection
   scan, even of one range), through the same runner; then publishes the new rows by ``_id``
   (replace, upsert) and deletes the rows of those groups that this run did not write (a group that
   vanished), in one transaction where the server has them (a replica set, the embedded server, mongos): a
   reader sees the old rows or the new ones.  The Parquet file is rewritten whole (the old rows
   outside the changed groups, the new rows, sorted by id) under a temporary name, checked against
   the collection (:func:`analytics.published.check_published`) and renamed over the old one;
4. **record** -- once published, the state is recorded (:func:`record_scope`).

A failure before step 4 leaves the state as it was: the retry recomputes the same groups (the
writes are idempotent).  The whole collection is read instead when the output was never
published here (or its Parquet file is missing, of another layout, or records another database,
server or run: :func:`analytics.published.unfit_reason`), when the analysis has no
state yet, when more than :data:`MAX_CHANGED` files changed (one seek each), or, past
:data:`COUNT_ABOVE` changed files, more than :data:`WHOLE_ABOVE` of the loaded ones (one pass
over the collection is then cheaper).
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

from pymongo import ReplaceOne

from analytics.changes import changes, count_loaded, record_state
from analytics.published import check_published, unfit_reason
from analytics.reading.streaming import StreamSpec, chunk_frame, read_chunks
from analytics.registry import output_table
from ingest.documents import prefix_range
from ingest.errors import ConfigError
from ingest.schema import conform
from ingest.store.indexes import ensure_exact_indexes
from ingest.store.mongo import db_errors, shared_client
from ingest.store.outputs import Outputs, as_outputs
from ingest.store.servers import server_of, traits

__all__ = ["Scope", "plan_scope", "scoped_queries", "publish_changes", "record_scope", "WHOLE_ABOVE",
           "MAX_CHANGED", "COUNT_ABOVE"]

#: Above this share of the loaded files changed, the whole collection is read.
WHOLE_ABOVE = 0.5
#: Above this many changed files, the whole collection is read: one key range per file is an index
#: seek of 1-5 ms on the embedded server (20,000 files), so 100,000 cost 2-8 minutes, about a whole read of
#: the study's 12 M hits at the 21,000 hits a second measured (issue 40).  Below it, past
#: COUNT_ABOVE files, more than WHOLE_ABOVE of the loaded ones also makes it read the whole.
MAX_CHANGED = 100_000
#: What a merged table is made of (an aggregate's published table is merged into only when the
#: state says this form made it: identities summed in millionths, descriptions the smallest).
MERGE_FORM = 1
#: Up to this many changed files are read by their key ranges without asking how many are loaded (a
#: count of the ledger, which the embedded server answers by a scan): a hundred seeks cost less than that.
COUNT_ABOVE = 100
#: Up to this many changed rows are published in one transaction (MongoDB bounds a transaction's
#: time and cache): readers see the old rows or the new ones.  More, or a standalone server
#: (no transactions), are written in batches, and the run says so.
MAX_ATOMIC_ROWS = 100_000
log = logging.getLogger(__name__)


@dataclass
class Scope:
    """What one run of an analysis reads: ``whole``, ``changed`` (the groups of some
    files' contents), ``merged`` (new files' rows, merged into an aggregate's table) or ``none``
    (nothing changed: the run is skipped), and why."""

    mode: str
    reason: str
    #: changed: the group-key prefixes to recompute (new contents and replaced ones).
    prefixes: tuple[str, ...] = ()
    #: changed: how many files changed.
    files: int = 0
    #: the analysis's state once this run is published (:func:`record_scope`); None: not known.
    state: dict | None = None
    #: the run that publishes (set by the runner)
    run_id: str = ""
    #: changed, merged: the documents the changed files wrote into the source (what the run reads)
    documents: int | None = None

    def describe(self) -> dict:
        out: dict[str, str | int] = {"mode": self.mode, "reason": self.reason}
        if self.mode in ("changed", "merged"):
            out["files"] = self.files
        return out


def plan_scope(analysis, uri: str, db_name: str, out_dir: Path | Outputs, incremental: bool) -> Scope:
    """How this run of ``analysis`` reads its sources (see the module docstring); ``out_dir``: the
    database's outputs (:func:`ingest.store.outputs.outputs_of`), or a folder of the caller's."""
    outputs = as_outputs(out_dir, uri, db_name)
    db = shared_client(uri)[db_name]
    sources = {c for c in (analysis.source, analysis.join and analysis.join.source) if c}
    with db_errors(f"reading the ledger of {db_name}", uri=uri):
        found = changes(db, analysis.name, sources, follow=incremental)
        exists = incremental and bool(db.list_collection_names(filter={"name": analysis.output}))
    after = found.after

    def whole(reason: str) -> Scope:
        return Scope("whole", reason, state=after)

    if not incremental:
        return whole("whole collection (asked for)")
    if not exists:
        return whole(f"whole collection: {analysis.output} was never published here")
    unfit = unfit_reason(outputs.path(analysis), analysis, outputs, (found.state or {}).get("published"))
    if unfit:
        return whole(f"whole collection: {unfit}")
    if found.state is None or not found.known:  # known: a state, with a "since"
        return whole(f"whole collection: no record of what {analysis.name}'s output covers (its first run "
                     "that follows changes)")
    pending = found.pending
    if not pending:
        return Scope("none", f"nothing loaded into {', '.join(sorted(sources))} since {analysis.name} last ran: "
                             "its output is current", state=after)  # fmt: skip
    files = f"{len(pending)} file(s) changed {', '.join(sorted(sources))} since {analysis.name} last ran"
    if analysis.file_prefix is None and analysis.merge is None:
        return whole(f"whole collection: {files}, and it aggregates over all of them (no incremental form)")
    if len(pending) > MAX_CHANGED:
        return whole(f"whole collection: {files}, more than {MAX_CHANGED}")
    if len(pending) > COUNT_ABOVE:  # a count of the ledger (a scan) only where a whole pass can pay
        with db_errors(f"reading the ledger of {db_name}", uri=uri):
            loaded = count_loaded(db, analysis.source)
        if len(pending) > WHOLE_ABOVE * loaded:
            return whole(f"whole collection: {len(pending)} of {loaded} loaded files changed (over "
                         f"{WHOLE_ABOVE:.0%}: one pass is cheaper)")
    if analysis.merge is not None:
        return _merge_scope(analysis, pending, files, found.state, after)
    contents = {e["sha256"] for e in pending if e.get("sha256")}
    replaced = {sha for e in pending for sha in e.get("previous") or () if isinstance(sha, str)} - contents
    prefixes = tuple(sorted({analysis.file_prefix(sha) for sha in contents | replaced}))
    what = f"only the groups of the {files}"
    if replaced:
        what += f" ({len(replaced)} replaced: the groups of their old contents are recomputed or removed)"
    return Scope("changed", what, prefixes=prefixes, files=len(pending), state=after,
                 documents=_written(pending, analysis.source))


def _written(entries: list[dict], source: str) -> int:
    """The documents ``entries`` (ledger entries) wrote into ``source``, as the ledger counts them."""
    counts = [(e.get("records") or {}).get(source) if isinstance(e.get("records"), dict) else 0 for e in entries]
    return sum(n for n in counts if isinstance(n, int) and not isinstance(n, bool) and n > 0)


def _merge_scope(analysis, pending: list[dict], files: str, state: dict, after: dict) -> Scope:
    """New files merged into an aggregate's published table; anything else: the whole source."""
    if state.get("merge_form") != MERGE_FORM:
        return Scope("whole", f"whole collection: {files}; its published table was not made to be merged into",
                     state=after)
    other = [e for e in pending if e.get("status") != "loaded" or e.get("previous")]
    if other:
        return Scope("whole", f"whole collection: {files}, {len(other)} of them replaced, reloaded or failed "
                              "(only new files are merged)", state=after)  # fmt: skip
    added = [e for e in pending if not e.get("duplicate_of") and isinstance(e.get("sha256"), str)]
    if not added:
        return Scope("none", f"{files}, each a copy of a loaded file: its output is current", state=after)
    prefixes = tuple(sorted({analysis.merge.prefix(e["sha256"]) for e in added}))
    return Scope("merged", f"the {len(added)} new file(s) merged into the published table ({files})",
                 prefixes=prefixes, files=len(added), state=after, documents=_written(added, analysis.source))


def _ranges(field: str, prefixes, shape) -> list[dict]:
    """The queries for the key ranges of ``prefixes`` on ``field``: ``$or`` s of them where the server
    answers one through the index (up to ``in_values`` ranges each), else one query a range
    (ingest.store.servers.Traits)."""
    ranges = [{field: prefix_range(p)} for p in prefixes]
    if not shape.or_of_ranges:
        return ranges
    groups = [ranges[i:i + shape.in_values] for i in range(0, len(ranges), shape.in_values)]
    return [group[0] if len(group) == 1 else {"$or": group} for group in groups]


def merge_new(analysis, uri: str, db_name: str, outputs: Outputs, scope: Scope):
    """(table, left-out counts, rows read, how) of a merged run, or None when the analysis cannot merge
    them (see :class:`analytics.registry.Merge`): the new files' rows (one key range each), the rows
    of files loaded before that share a ``before_by`` value with them (``$in`` in chunks), and the
    published table with its counts."""
    import pandas as pd  # noqa: PLC0415 - lazy: as above; pandas costs 0.3 s
    import pyarrow.parquet as pq  # noqa: PLC0415 - lazy: analytics.runner imports this module and must stay light (tests/test_analytics.py); pyarrow costs 0.22 s

    merge, columns = analysis.merge, analysis.columns
    path = {c.name: c.path for c in columns}
    with db_errors(f"asking the server of {db_name} what it is", uri=uri):
        shape = traits(shared_client(uri)[db_name])

    def rows(queries: list[dict]):
        spec = StreamSpec(uri=uri, db_name=db_name, collection=analysis.source, queries=tuple(queries),
                          columns=columns)
        frames = [chunk_frame(columns, raw) for _, raw in read_chunks(spec)] if queries else []
        return pd.concat(frames, ignore_index=True) if frames else analysis.schema.empty()

    new = rows(_ranges(path[merge.by], scope.prefixes, shape))
    before = []
    for name in merge.before_by:
        values = sorted(set(new[name].dropna()))
        size = shape.in_values  # values per $in: as the server answers best
        before.append(rows([{path[name]: {"$in": values[i:i + size]}} for i in range(0, len(values), size)]))
    before = pd.concat(before, ignore_index=True) if before else analysis.schema.empty()
    if len(before):  # the new files' own rows are not "before"
        mine = before[merge.by].astype("object").str.slice(0, len(scope.prefixes[0])).isin(scope.prefixes)
        before = before.loc[~mine.fillna(False).to_numpy()]
    table = pq.read_table(outputs.path(analysis))  # its database's and server's (plan_scope saw to it)
    meta = json.loads((table.schema.metadata or {}).get(b"sci_ingest", b"{}"))
    output = conform(table.drop([c for c in table.column_names if c == "run_id"]).to_pandas(), analysis.output_types)
    merged = merge.function(output, dict(meta.get("excluded") or {}), new, before)
    if merged is None:
        return None
    how = {"mode": "merged", "reason": f"{len(new):,} rows of {scope.files} new file(s) and {len(before):,} rows "
                                       f"of earlier files that share {', '.join(merge.before_by)} with them"}
    return merged[0], merged[1], len(new) + len(before), how


def scoped_queries(analysis, scope: Scope) -> tuple[dict, ...]:
    """The changed groups' queries: the declared filter and one key range each (each an index seek)."""
    path = next(c.path for c in analysis.columns if c.name == analysis.group_key)
    ranges = [{path: prefix_range(p)} for p in scope.prefixes]
    return tuple({"$and": [analysis.filter, r]} if analysis.filter else r for r in ranges)


def publish_changes(uri: str, db_name: str, analysis, frame, run_id: str, outputs: Outputs, scope: Scope,
                    metadata: dict, documents) -> tuple[str, Path, float]:
    """Replace the changed groups' rows in the output collection and the Parquet file, and check the
    file against the collection (:func:`analytics.published.check_published`): (the collection, the
    file, the seconds the check took)."""
    import pyarrow as pa  # noqa: PLC0415 - lazy: analytics.runner imports this module and must stay light (tests/test_analytics.py); pyarrow costs 0.22 s
    import pyarrow.compute as pc  # noqa: PLC0415 - lazy: analytics.runner imports this module and must stay light (tests/test_analytics.py); pyarrow costs 0.22 s
    import pyarrow.parquet as pq  # noqa: PLC0415 - lazy: analytics.runner imports this module and must stay light (tests/test_analytics.py); pyarrow costs 0.22 s

    final = outputs.path(analysis)
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
                                 **metadata, **outputs.origin()})  # fmt: skip
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
            # as the whole publish builds them (none led by a float where the server's index keys
            # lose the order of numbers; one an earlier run left dropped), before the rows: no index
            # is built inside a transaction
            ensure_exact_indexes(coll.database, {analysis.output: analysis.indexes})

            def write(session=None) -> None:
                for start in range(0, len(docs), 1000):
                    coll.bulk_write([ReplaceOne({"_id": d["_id"]}, d, upsert=True) for d in docs[start:start + 1000]],
                                    ordered=False, session=session)  # fmt: skip
                for query in _ranges(analysis.group_key, scope.prefixes, traits(coll.database)):
                    coll.delete_many({**query, "run_id": {"$ne": run_id}}, session=session)

            if server_of(coll.database).topology == "standalone" or len(docs) > MAX_ATOMIC_ROWS:
                log.warning("%s.%s: the changed rows are written in batches, not in one transaction (%s): a "
                            "reader can see some groups updated and others not until it ends", db_name,
                            analysis.output, "a standalone server has none" if len(docs) <= MAX_ATOMIC_ROWS
                            else f"{len(docs):,} rows, more than {MAX_ATOMIC_ROWS:,}")
                write()
            else:  # readers see the old rows or the new ones, never a mix
                with client.start_session() as session:
                    session.with_transaction(write)
        checked = check_published(uri, db_name, analysis, tmp_file, final)
        os.replace(tmp_file, final)
    finally:
        tmp_file.unlink(missing_ok=True)
    return analysis.output, final, checked


def record_scope(uri: str, db_name: str, analysis, scope: Scope) -> None:
    """Record what the published output of ``analysis`` now covers (its state, for the next run)."""
    if scope.state is None:
        return
    fields = {"mode": scope.mode, "output": analysis.output}
    if analysis.merge is not None:
        fields["merge_form"] = MERGE_FORM
    if scope.mode != "none":
        fields["published"] = scope.run_id
    with db_errors(f"recording the state of {analysis.name} in {db_name}", uri=uri):
        record_state(shared_client(uri)[db_name], analysis.name, scope.state, **fields)


def _json(value) -> bytes:
    return json.dumps(value, default=str).encode()
