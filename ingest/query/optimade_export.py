"""``sci-ingest export materials --format optimade | optimade-parquet``: OPTIMADE structures, streamed.

Each document matching the query is read with :data:`ingest.query.optimade.PROJECTION` (a
legacy document's megabytes of DOS and band structure stay on the server) and mapped by
:func:`ingest.query.optimade.to_structure`:

* ``optimade``: JSON Lines, one OPTIMADE structures resource a line
  (``{"id": ..., "type": "structures", "attributes": {...}}``), as an OPTIMADE API would
  return it in ``data``;
* ``optimade-parquet``: the same resources flattened, one row each: ``id``, ``type`` and one
  column per attribute (:data:`SCHEMA`; nested types kept: ``lattice_vectors`` a
  ``list<list<double>>``, ``species`` a ``list<struct<name, chemical_symbols,
  concentration>>``, ``last_modified`` a ``timestamp[ms, UTC]``); a field a record lacks is null.

What a record could not fill is named per record in ``OUT.unmapped.jsonl``
(``{"id": ..., "unmapped": [{"field": ..., "reason": ...}]}``), in ``--json`` and, one line per
field and reason with its count and first record, on stderr.  A document that is not a
structure is set aside: named in ``OUT.rejects.jsonl`` and on stderr (the first
:data:`NAMED`), exit 2.  Every file is written to a temporary name and renamed when complete.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

import pyarrow as pa
import pyarrow.parquet as pq

from ingest.errors import Exit
from ingest.query.optimade import PROJECTION, to_structure
from ingest.report import dumps
from ingest.store.mongo import db_errors

__all__ = ["SCHEMA", "NAMED", "OptimadeResult", "write_optimade", "summary_lines", "side_paths", "run"]

BATCH = 500
ROW_GROUP = 16_384
NAMED = 5
_F64, _STR = pa.float64(), pa.string()
#: The Parquet columns: id, type, then the attributes (nested where OPTIMADE nests them).
SCHEMA = pa.schema([
    ("id", _STR), ("type", _STR), ("immutable_id", _STR), ("last_modified", pa.timestamp("ms", tz="UTC")),
    ("elements", pa.list_(_STR)), ("nelements", pa.int64()), ("elements_ratios", pa.list_(_F64)),
    ("chemical_formula_descriptive", _STR), ("chemical_formula_reduced", _STR),
    ("chemical_formula_anonymous", _STR), ("dimension_types", pa.list_(pa.int64())),
    ("nperiodic_dimensions", pa.int64()), ("lattice_vectors", pa.list_(pa.list_(_F64))),
    ("cartesian_site_positions", pa.list_(pa.list_(_F64))), ("nsites", pa.int64()),
    ("species_at_sites", pa.list_(_STR)),
    ("species", pa.list_(pa.struct([("name", _STR), ("chemical_symbols", pa.list_(_STR)),
                                    ("concentration", pa.list_(_F64))]))),
    ("space_group_it_number", pa.int64()), ("space_group_symbol_hermann_mauguin", _STR),
    ("space_group_symbol_hall", _STR), ("structure_features", pa.list_(_STR)),
])


@dataclass
class OptimadeResult:
    path: str
    format: str
    records: int = 0
    documents: int = 0
    set_aside: list = field(default_factory=list)  # {"id", "reason"}
    unmapped: list = field(default_factory=list)  # {"id", "unmapped": [{"field", "reason"}]}
    unmapped_by: dict = field(default_factory=dict)  # "field: reason" -> records
    unmapped_path: str | None = None
    rejects_path: str | None = None

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def side_paths(out: str) -> tuple[str, str]:
    """The files beside ``out``: the unmapped fields per record, the documents set aside."""
    return f"{out}.unmapped.jsonl", f"{out}.rejects.jsonl"


def _tmp(path: str) -> str:
    folder, base = os.path.split(os.path.abspath(path))
    return os.path.join(folder, f".{base}.{os.getpid()}.part")


def _row(resource: dict) -> dict:
    attrs = dict(resource["attributes"])
    if attrs.get("last_modified"):
        attrs["last_modified"] = datetime.fromisoformat(attrs["last_modified"].replace("Z", "+00:00"))
    return {"id": resource["id"], "type": resource["type"], **attrs}


class _Out:
    """The main file: JSON Lines written as records come, or Parquet in row groups of :data:`ROW_GROUP`."""

    def __init__(self, fmt: str, tmp: str):
        self.fmt = fmt
        self.rows: list[dict] = []
        if fmt == "optimade":
            self.handle = open(tmp, "w", encoding="utf-8")
        else:
            self.writer = pq.ParquetWriter(tmp, SCHEMA)

    def write(self, resource: dict) -> None:
        if self.fmt == "optimade":
            self.handle.write(json.dumps(resource, allow_nan=False) + "\n")
            return
        self.rows.append(_row(resource))
        if len(self.rows) >= ROW_GROUP:
            self._flush()

    def _flush(self) -> None:
        if self.rows:
            self.writer.write_table(pa.Table.from_pylist(self.rows, schema=SCHEMA))
            self.rows = []

    def close(self) -> None:
        if self.fmt == "optimade":
            self.handle.close()
        else:
            self._flush()
            self.writer.close()


def write_optimade(coll, spec, fmt: str, out: str, *, batch_size: int = BATCH) -> OptimadeResult:
    """The documents of ``spec`` (:class:`ingest.query.compile.Spec`) as OPTIMADE structures in ``out``."""
    result = OptimadeResult(path=out, format=fmt)
    unmapped_out, rejects_out = side_paths(out)
    tmps = {out: _tmp(out), unmapped_out: _tmp(unmapped_out), rejects_out: _tmp(rejects_out)}
    by: Counter[str] = Counter()
    writer = _Out(fmt, tmps[out])
    try:
        with open(tmps[unmapped_out], "w", encoding="utf-8") as unmapped, \
                open(tmps[rejects_out], "w", encoding="utf-8") as rejects, db_errors(f"exporting {coll.name}"):
            for doc in coll.find(spec.filter, PROJECTION, **spec.find_options(batch_size)):
                result.documents += 1
                mapped = to_structure(doc)
                notes = [{"field": f, "reason": r} for f, r in mapped.unmapped]
                if mapped.resource is None:
                    entry = {"id": mapped.id, "reason": mapped.set_aside, "unmapped": notes}
                    result.set_aside.append(entry)
                    rejects.write(json.dumps(entry) + "\n")
                    continue
                writer.write(mapped.resource)
                result.records += 1
                if notes:
                    result.unmapped.append({"id": mapped.id, "unmapped": notes})
                    unmapped.write(json.dumps({"id": mapped.id, "unmapped": notes}) + "\n")
                    by.update(f"{n['field']}: {n['reason']}" for n in notes)
        writer.close()
        for final, tmp in tmps.items():
            if final == out or (final == unmapped_out and result.unmapped) or (final == rejects_out
                                                                                and result.set_aside):
                os.replace(tmp, final)
            else:
                os.unlink(tmp)
                if os.path.exists(final):
                    os.unlink(final)  # from an earlier export of the same name: no longer true
    except BaseException:
        for tmp in tmps.values():
            try:
                os.unlink(tmp)
            except OSError:
                pass
        raise
    result.unmapped_by = dict(by.most_common())
    result.unmapped_path = unmapped_out if result.unmapped else None
    result.rejects_path = rejects_out if result.set_aside else None
    return result


def summary_lines(result: OptimadeResult, collection: str) -> list[tuple[str, str]]:
    """(level, message) lines for stderr: the count, each record set aside (the first NAMED), and per
    unmapped field and reason its first record and how many more."""
    kind = "JSON Lines" if result.format == "optimade" else "Parquet"
    lines = [("info", f"exported {result.records:,} OPTIMADE structures of {result.documents:,} {collection} "
                      f"documents to {result.path} ({kind})")]
    for entry in result.set_aside[:NAMED]:
        lines.append(("warning", f"set aside: {entry['id']}: {entry['reason']}"))
    if result.set_aside:
        more = len(result.set_aside) - NAMED
        lines.append(("warning", f"{len(result.set_aside):,} of {result.documents:,} documents set aside"
                                 + (f" ({more:,} more not shown)" if more > 0 else "")
                                 + f"; each is named in {result.rejects_path}"))
    first: dict[str, str] = {}
    for record in result.unmapped:
        for note in record["unmapped"]:
            first.setdefault(f"{note['field']}: {note['reason']}", record["id"])
    for key, count in result.unmapped_by.items():
        others = f" (and {count - 1:,} more records)" if count > 1 else ""
        lines.append(("note", f"{first[key]}: {key}{others}; left out, never invented: all in {result.unmapped_path}"))
    return lines


def run(coll, spec, fmt: str, out: str, *, as_json: bool, say, batch_size: int | None = None) -> int:
    """The command's part: write, say the summary on stderr (``say(level, message)``; with ``--json`` the
    result on stdout, as one object, and no info line), exit 2 when a document was set aside."""
    result = write_optimade(coll, spec, fmt, out, batch_size=batch_size or BATCH)
    for level, message in summary_lines(result, coll.name):
        if level != "info" or not as_json:
            say(level, message)
    if not result.documents:
        say("note", f"no document of {coll.name} matches")
    if as_json:
        print(dumps({"collection": coll.name, **result.as_dict()}))
    return Exit.PARTIAL if result.set_aside else Exit.OK
