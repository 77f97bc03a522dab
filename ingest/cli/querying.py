"""The work of ``sci-ingest query``, ``export`` and ``indexes`` (their command lines: :mod:`ingest.cli.query`,
which imports this module when one of them runs: pymongo, the curated declarations and the query
language are this module's imports, paid by those commands only).
"""

from __future__ import annotations

import json
import os

from ingest.cli.common import settings_from
from ingest.errors import Exit
from ingest.fileio import printable, stderr_line
from ingest.query import QueryError
from ingest.query.compile import build
from ingest.query.genomic import FORMATS as GENOMIC
from ingest.query.genomic_export import BATCH as BATCH_GENOMIC, SUFFIX, summary_lines, write_genomic
from ingest.query.optimade import FORMATS as OPTIMADE, SUFFIX as OPTIMADE_SUFFIX, check_request as check_optimade
from ingest.query.output import run_query
from ingest.query.plan import explain, scan_warning
from ingest.report import dumps, table
from ingest.server.connection import database
from ingest.store.curated import UnknownCollection, all_curated, get, index_name, names
from ingest.store.indexes import build_indexes, index_state, numeric_keys_exact
from ingest.store.mongo import db_errors

__all__ = ["cmd_query", "cmd_export", "cmd_indexes"]


def _say(level: str, message: str) -> None:
    """One line on stderr: the values of a message (a field's, a file's) are data, shown escaped."""
    stderr_line(f"{level}: {message}")


def _curated(name: str | None):
    if not name:
        raise UnknownCollection("", names())
    return get(name)


def _print_fields(curated, as_json: bool) -> int:
    info = curated.describe()
    if as_json:
        print(dumps(info))
        return Exit.OK
    print(f"{curated.name}: one document per {curated.one_per}")
    columns = [("name", "field"), ("path", "path"), ("kind", "kind"), ("meaning", "meaning")]
    rows = info["fields"]
    if any("unit" in f for f in rows):  # an analysis output: each column's declared unit ("-": none)
        columns.insert(3, ("unit", "unit"))
        rows = [{**f, "unit": f["unit"] or "-"} for f in rows]
    print(table(rows, columns, left=len(columns)))
    if info["questions"]:
        print("\nquestions:")
        for q in info["questions"]:
            example = f"  --where '{q['where']}'" + (f" --sort {q['sort']}" if q["sort"] else "") if q["where"] else ""
            print(f"  - {q['question']}{example}" + (f"  [index {q['index']}]" if q["index"] else ""))
    print("\nindexes: " + (", ".join(info["indexes"]) or "none"))
    print(f"default --fields: {','.join(curated.defaults)}")
    for note in info["notes"]:
        print(f"note: {note}")
    return Exit.OK


def _list_collections(as_json: bool) -> int:
    rows = [{"collection": c.name, "source": c.source, "fields": len(c.fields), "indexes": len(c.indexes),
             "one_per": c.one_per} for c in all_curated().values()]
    print(dumps({"collections": rows}) if as_json else
          table(rows, [("collection", "collection"), ("source", "written by"), ("fields", "fields"),
                       ("indexes", "indexes"), ("one_per", "one document per")], left=2))
    return Exit.OK


def _spec(args, curated, default_fields=None):
    return build(curated, where=args.where, raw_filter=args.filter, fields=args.fields, sort=args.sort,
                 limit=args.limit, default_fields=default_fields)


def _guarded(func):
    """An output file that cannot be written (no such folder, no permission, disk full) -> one line,
    exit 1.  (Bad input, a QueryError or an unknown collection, is a UsageError: main() says it, exit 64.)"""
    def run(args) -> int:
        try:
            return func(args)
        except BrokenPipeError:
            raise  # `query ... | head`: the reader has all it wanted; main() ends quietly, as `parse` does
        except OSError as exc:  # the writers' temporary file is removed by then
            out = getattr(args, "out", None)
            _say("error", f"cannot write {printable(out) if out else 'the output'}: {exc.strerror or exc}")
            return Exit.FATAL
    run.__name__ = func.__name__
    return run


def _query_format(args) -> str:
    """The rows' format: --format; with --json and no --format, JSON Lines (as --format jsonl)."""
    if args.json and args.format in ("table", "csv") and not args.out:
        raise QueryError("--json", f"prints JSON Lines on stdout, --format {args.format} prints text: give one "
                                   "of them (or --out FILE, which --json then reports on)")
    if args.json and args.format in GENOMIC and not args.out:
        raise QueryError("--json", f"prints JSON Lines on stdout, --format {args.format} prints its own lines: give "
                                   "one of them (or --out FILE, which --json then reports on)")
    fmt = args.format or ("jsonl" if args.json else "table")
    if fmt == "parquet" and not args.out:
        raise QueryError("--out", "--format parquet writes a file: give --out FILE")
    return fmt


def _check_out(path: str | None) -> None:
    """--out names a file (replaced when the output is complete), never a folder: refused before any work."""
    if path and path != "-" and os.path.isdir(path):
        raise QueryError("--out", f"{printable(path)} is a folder: name a file (it is written whole, then renamed "
                                  "into place)")


@_guarded
def cmd_query(args) -> int:
    if args.collections:
        return _list_collections(args.json)
    curated = _curated(args.collection)
    if args.fields_list:
        return _print_fields(curated, args.json)
    spec = _spec(args, curated)
    fmt = _query_format(args)
    _check_genomic(args, curated, fmt)
    _check_out(args.out)
    with database(settings_from(args)) as conn:
        coll = conn.db[curated.name]
        spec.settle(coll, conn.info)
        if args.explain:
            return _explain(coll, spec, curated, args.json)
        warning = scan_warning(coll, spec.filter, spec.sort, spec.hint, [_name(ix) for ix in curated.indexes])
        for note in spec.notes:
            _say("note", note)
        if warning:
            _say("warning", warning)
        if fmt == "parquet":
            return _export(coll, spec, "parquet", args.out, args)
        if fmt in GENOMIC:
            return _genomic(coll, spec, fmt, args.out, args)
        written = run_query(coll, spec, fmt, args.out, _say)
    if not written:
        _say("note", f"no document of {curated.name} matches")
    if args.out and args.json:
        print(dumps({"collection": curated.name, "format": fmt, "out": args.out, "rows": written}))
    elif args.out and written:
        _say("info", f"{written:,} rows written to {printable(args.out)}")
    return Exit.OK


def _name(keys) -> str:
    return index_name(keys)


def _explain(coll, spec, curated, as_json: bool) -> int:
    plan = explain(coll, spec.filter, projection=spec.projection, sort=spec.sort, limit=spec.limit, hint=spec.hint)
    with db_errors(f"counting {coll.name}"):
        size = coll.estimated_document_count()
    here, absent = index_state(coll, curated.indexes)
    if as_json:
        print(dumps({**spec.describe(), "documents": size, **plan.as_dict(), "indexes_here": here,
                     "indexes_absent": absent, "notes": spec.notes}))
        return Exit.OK
    rows = [("collection", f"{coll.name} ({size:,} documents)"),
            ("filter", json.dumps(spec.filter, default=str)),
            ("plan", plan.label + ("  (hint $natural: a collection scan on purpose)" if spec.hint else "")),
            ("sort", ("in memory (a SORT stage)" if plan.blocking_sort else "by the index") if spec.sort else "none"),
            ("examined", f"{_n(plan.docs_examined)} documents, {_n(plan.keys_examined)} index keys"),
            ("returned", _n(plan.returned)),
            ("server time", f"{plan.millis} ms" if plan.millis is not None else "?"),
            ("indexes here", ", ".join(ix["index"] + (" (!)" if ix.get("note") else "") for ix in here) or "none")]
    rows += [("not here", f"{ix['index']}: {ix['reason']}") for ix in absent]
    for key, value in rows:
        print(f"{key:<13} {value}")
    for ix in here:
        if ix.get("note"):
            print(f"(!) {ix['index']}: {ix['note']}")
    for note in spec.notes:
        print(f"note: {note}")
    return Exit.OK


def _n(value) -> str:
    return "?" if value is None else f"{value:,}"


def _export(coll, spec, fmt: str, out: str, args) -> int:
    """Write ``out`` through pymongoarrow; its summary on stderr (with --json: on stdout, as one object)."""
    from ingest.query.export import export, summary_lines  # noqa: PLC0415 - lazy: pyarrow, pandas and pymongoarrow (ingest.query.export: 0.24 s); query and indexes must not pay them

    result = export(coll, spec, fmt, out, batch_size=getattr(args, "batch_size", None) or 2000)
    for level, message in summary_lines(result, coll.name):
        if level != "info" or not args.json:
            _say(level, message)
    if args.json:
        print(dumps(result.as_dict()))
    return Exit.PARTIAL if result.rejected else Exit.OK


@_guarded
def cmd_export(args) -> int:
    curated = _curated(args.collection)
    spec = _spec(args, curated, default_fields=tuple(f.name for f in curated.fields))
    fmt = args.format
    _check_genomic(args, curated, fmt)
    if fmt in OPTIMADE:
        check_optimade(curated.name, args.fields, fmt)
    out = args.out or f"{curated.name}.{SUFFIX.get(fmt, OPTIMADE_SUFFIX.get(fmt, fmt))}"
    _check_out(args.out)
    if not args.out and os.path.lexists(out) and not args.force:
        raise QueryError("export", f"{printable(out)} exists and no --out names it: nothing written; give --out "
                                   "FILE, or --force to replace it")
    with database(settings_from(args)) as conn:
        coll = conn.db[curated.name]
        spec.settle(coll, conn.info)
        for note in list(curated.notes) + spec.notes:  # e.g. an output column without a kind, not exported
            _say("note", note)
        if fmt in GENOMIC:
            return _genomic(coll, spec, fmt, out, args)
        if fmt in OPTIMADE:
            from ingest.query import optimade_export  # noqa: PLC0415 - lazy: pyarrow (ingest.query.optimade_export: 73 ms), as _export's
            return optimade_export.run(coll, spec, fmt, out, as_json=args.json, say=_say,
                                       batch_size=getattr(args, "batch_size", None))
        return _export(coll, spec, fmt, out, args)


def _check_genomic(args, curated, fmt: str) -> None:
    """bed, gff3 and blast-tab write hits, one line per HSP, in columns of their own: another collection
    or --fields is a usage error (exit 64), before any work."""
    if fmt not in GENOMIC:
        return
    if curated.name != "hits":
        raise QueryError("--format", f"{fmt} writes the HSPs of hits (positions on the library sequences): "
                                     f"{printable(curated.name)} has none; use parquet, arrow or csv")
    if args.fields:
        raise QueryError("--fields", f"--format {fmt} has columns of its own (docs/querying.md, \"Genome-browser "
                                     "and BLAST-table exports\"): leave --fields out")


def _genomic(coll, spec, fmt: str, out: str | None, args) -> int:
    """One line per HSP (:mod:`ingest.query.genomic_export`); the summary on stderr (with --json and a
    file: on stdout, as one object).  Exit 2 when an HSP was set aside."""
    result = write_genomic(coll, spec, fmt, out, batch_size=getattr(args, "batch_size", None) or BATCH_GENOMIC)
    to_file = bool(out) and out != "-"
    for level, message in summary_lines(result, coll.name):
        if level != "info" or (to_file and not args.json):  # the rows on stdout: no info line beside them
            _say(level, message)
    if not result.documents:
        _say("note", f"no document of {coll.name} matches")
    if args.json and to_file:
        print(dumps({"collection": coll.name, **result.as_dict()}))
    return Exit.PARTIAL if result.set_aside else Exit.OK


@_guarded
def cmd_indexes(args) -> int:
    only = [c.strip() for c in args.collections.split(",")] if args.collections else None
    for name in only or ():
        if name not in names():
            raise UnknownCollection(name, names())
    with database(settings_from(args)) as conn:
        rows = build_indexes(conn.db, only, dry_run=args.dry_run)
        exact = numeric_keys_exact(conn.db, conn.info)
    note = None if exact else (f"{conn.info.kind}'s index keys lose the order of numbers beyond 1e±128: queries with "
                               "a range on a float field (evalue, band_gap, ...) or sorted on one are answered by a "
                               "collection scan here; those indexes serve equality and a real MongoDB")
    if args.json:
        print(dumps({"indexes": rows, "note": note}))
    else:
        print(table(rows, [("collection", "collection"), ("index", "index"), ("outcome", "outcome")], left=3))
        if note:
            print(f"note: {note}")
    return Exit.PARTIAL if any(r["outcome"].startswith("refused") for r in rows) else Exit.OK
