"""``--format bed|gff3|blast-tab`` of ``sci-ingest export hits`` and ``sci-ingest query hits``: streamed.

The hits of the query are read :data:`BATCH` documents at a time (only the fields the
lines need: no alignment text but for ``blast-tab``, which counts mismatches and gap
opens in it), each batch's searches looked up once (their query and library types, for
GFF3's type, and the query's length, BLAST's ``qlen``), and each HSP written as it comes
(:mod:`ingest.query.genomic` makes the lines).  Memory holds one batch, the types of the
searches seen, and for GFF3 the length of each library sequence (its
``##sequence-region``, read first by one aggregation over the same query: the header
comes before the features).

A library sequence gets a ``##sequence-region`` only when every document of the export
gives it the same ``hit_length`` and no alignment ends past it; two libraries holding one
id with different lengths, or a library subrange (``hit_length`` the piece's while the
coordinates count in the whole sequence), leave it without one, and a note says how many.

An HSP that cannot be written (no coordinates, an id BED cannot hold) is set aside: counted
by reason, named in ``OUT.rejects.jsonl`` (``_id``, ``hsp``, ``reason``) with ``--out``, the
first :data:`NAMED` on stderr without.  Output goes through
:func:`ingest.query.output.atomic_output` (a temporary file renamed when complete).
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ingest.query.genomic import FORMATS, Hsp, SetAside, gff3_header, hsps_of, line_for
from ingest.query.output import atomic_output, find_cursor
from ingest.store.mongo import db_errors

__all__ = ["BATCH", "NAMED", "SUFFIX", "GenomicResult", "write_genomic", "sequence_regions", "summary_lines"]

BATCH = 1000
NAMED = 5
#: The file suffix of each format, for export's default COLLECTION.SUFFIX.
SUFFIX = {"bed": "bed", "gff3": "gff3", "blast-tab": "tsv"}

_FIELDS = ("_id", "search_id", "query_id", "hit_id", "hit_length", "program", "rank")
_HSP_FIELDS = ("score", "opt_score", "z_score", "bits", "evalue", "identity", "similarity", "overlap", "query_start",
               "query_end", "hit_start", "hit_end", "query_strand", "hit_strand")
_ALIGNMENT = ("query_seq", "hit_seq", "extra")


@dataclass
class GenomicResult:
    path: str | None
    format: str
    documents: int = 0
    lines: int = 0
    set_aside: int = 0
    set_aside_by: dict = field(default_factory=dict)  # reason -> HSPs
    named: list = field(default_factory=list)  # the first NAMED set aside (without a rejects file)
    rejects_path: str | None = None
    sequence_regions: int = 0
    without_region: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "named"}


def projection(fmt: str) -> dict:
    fields = list(_FIELDS) + [f"hsps.{n}" for n in _HSP_FIELDS + (_ALIGNMENT if fmt == "blast-tab" else ())]
    return {name: 1 for name in fields}


def sequence_regions(coll, spec) -> tuple[dict[str, int], int]:
    """({library sequence id: length}, how many were left without one), over the documents of ``spec``."""
    pipeline: list[dict[str, Any]] = [{"$match": spec.filter}]
    if spec.limit:  # the same documents as the export's: its order, then its limit
        if spec.sort:
            pipeline.append({"$sort": dict(spec.sort)})
        pipeline.append({"$limit": spec.limit})
    pipeline += [{"$project": {"hit_id": 1, "hit_length": 1, "end": {"$max": "$hsps.hit_end"}}},
                 {"$group": {"_id": "$hit_id", "lengths": {"$addToSet": "$hit_length"}, "end": {"$max": "$end"}}}]
    regions, without = {}, 0
    with db_errors(f"reading the library sequences' lengths in {coll.name}"):
        for row in coll.aggregate(pipeline):
            seqid, lengths, end = row["_id"], row.get("lengths") or [], row.get("end")
            if not isinstance(seqid, str):
                continue
            length = lengths[0] if len(lengths) == 1 else None
            if (isinstance(length, int) and not isinstance(length, bool) and length >= 1
                    and (not isinstance(end, int) or end <= length)):
                regions[seqid] = length
            else:
                without += 1
    return regions, without


class _Searches:
    """The searches of the hits, looked up a batch at a time and kept (their types and query length)."""

    def __init__(self, db):
        self.coll, self.known = db["searches"], {}

    def fill(self, docs: list[dict]) -> None:
        wanted = {d.get("search_id") for d in docs} - self.known.keys()
        wanted.discard(None)
        if not wanted:
            return
        with db_errors("reading the hits' searches"):
            for s in self.coll.find({"_id": {"$in": sorted(wanted, key=str)}},
                                    {"query_type": 1, "library_type": 1, "query_length": 1}):
                self.known[s["_id"]] = s
        for missing in wanted - self.known.keys():
            self.known[missing] = None

    def get(self, search_id):
        return self.known.get(search_id)


def _batches(cursor, size: int):
    batch: list[dict] = []
    for doc in cursor:
        batch.append(doc)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _rejects_path(out: str) -> str:
    return f"{out}.rejects.jsonl"


def write_genomic(coll, spec, fmt: str, out: str | None, *, batch_size: int = BATCH) -> GenomicResult:
    """Write the HSPs of the hits of ``spec`` to ``out`` (stdout when None or ``-``) as ``fmt``."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {FORMATS}")
    started = time.perf_counter()
    to_file = bool(out) and out != "-"
    result = GenomicResult(path=out if to_file else None, format=fmt)
    searches = _Searches(coll.database)
    by: Counter[str] = Counter()
    header: list[str] = []
    if fmt == "gff3":
        regions, result.without_region = sequence_regions(coll, spec)
        result.sequence_regions = len(regions)
        header = gff3_header(regions)
    rejects_tmp = f"{_rejects_path(out)}.{os.getpid()}.part" if to_file and out else None
    rejects = None
    try:
        with db_errors(f"exporting {coll.name}"), atomic_output(out) as stream:
            for line in header:
                stream.write(line + "\n")
            for batch in _batches(find_cursor(coll, spec, projection(fmt), batch_size), batch_size):
                searches.fill(batch)
                for doc in batch:
                    result.documents += 1
                    for item in hsps_of(doc, searches.get(doc.get("search_id"))):
                        written = line_for(fmt, item) if isinstance(item, Hsp) else item
                        if isinstance(written, str):
                            stream.write(written + "\n")
                            result.lines += 1
                            continue
                        by[written.reason] += 1
                        result.set_aside += 1
                        if rejects_tmp:
                            if rejects is None:
                                rejects = open(rejects_tmp, "w", encoding="utf-8")
                            rejects.write(_reject_json(written) + "\n")
                        elif len(result.named) < NAMED:
                            result.named.append(written)
            stream.flush()
        if out and rejects_tmp:
            _settle_rejects(rejects, rejects_tmp, out, result)
            rejects = None
    finally:
        if rejects is not None:
            rejects.close()
        if rejects_tmp and os.path.exists(rejects_tmp):
            os.unlink(rejects_tmp)
    result.set_aside_by = dict(by.most_common())
    result.seconds = round(time.perf_counter() - started, 3)
    return result


def _settle_rejects(rejects, tmp: str, out: str, result: GenomicResult) -> None:
    """The rejects file beside ``out`` when some HSP was set aside; a stale one of the same name removed."""
    if rejects is not None:
        rejects.close()
        os.replace(tmp, _rejects_path(out))
        result.rejects_path = _rejects_path(out)
    elif os.path.exists(_rejects_path(out)):
        os.unlink(_rejects_path(out))  # from an earlier export of the same name: no longer true


def _reject_json(item: SetAside) -> str:
    return json.dumps({"_id": str(item.doc_id), "hsp": item.index, "reason": item.reason}, ensure_ascii=False)


def summary_lines(result: GenomicResult, collection: str) -> list[tuple[str, str]]:
    """(level, message) lines for stderr."""
    where = f" to {result.path}" if result.path else ""
    lines = [("info", f"exported {result.lines:,} HSP lines of {result.documents:,} {collection} documents{where} "
                      f"({result.format}) in {result.seconds:.2f} s")]
    if result.set_aside:
        detail = "; ".join(f"{reason} x{n}" for reason, n in result.set_aside_by.items())
        named = (f"each is named in {result.rejects_path}" if result.rejects_path else
                 "the first: " + ", ".join(f"{s.doc_id} HSP {s.index}" if s.index else str(s.doc_id)
                                          for s in result.named))
        lines.append(("warning", f"{result.set_aside:,} HSPs set aside: {detail}; {named}"))
    if result.without_region:
        lines.append(("note", f"{result.without_region:,} library sequences have no ##sequence-region: their "
                              "documents give several lengths (one id in several libraries) or an alignment past "
                              "the stated length (a library subrange)"))
    return lines
