"""``sci-ingest query``, ``export`` and ``indexes``: the analysts' commands (:mod:`ingest.query`).

    sci-ingest query hits --where 'evalue < 1e-20 and identity > 0.9' --fields query_id,hit_id,evalue --format csv
    sci-ingest query materials --where 'elements has "O" and band_gap between 1 and 3' --sort band_gap
    sci-ingest query hits --where 'query_id == "X"' --explain          the plan: index or COLLSCAN, counts
    sci-ingest query hits --fields-list                                  the fields, questions and indexes
    sci-ingest export hits --format parquet --out hits.parquet
    sci-ingest export hits --force                                       hits.parquet here, replaced if it exists
    sci-ingest indexes                                                   (re)build the curated indexes

Registered by :mod:`ingest.cli.main` through :func:`register`.
"""

from __future__ import annotations

import argparse
import json
import os
import re

from ingest.cli.options import typed
from ingest.config import Number
from ingest.errors import Exit
from ingest.fileio import printable, stderr_line

__all__ = ["register", "cmd_query", "cmd_export", "cmd_indexes"]

LANGUAGE = """
the --where language (docs/querying.md):
  evalue < 1e-20 and identity > 0.9          comparisons < <= > >= == !=, and / or / not, ( )
  query_id in ["a", "b"]   rank not in [1]   1 <= band_gap <= 3   band_gap between 1 and 3
  elements has "O"   elements has all ["Fe", "O"]   elements has any ["S", "Se"]
  is_stable == true   z_score exists   hit_description missing   `params.pg_matrix` == "BL50"
  strings in double quotes (JSON escapes); fields by their curated names (`query COLLECTION
  --fields-list`), or a raw document path in backquotes
"""
#: What a bad query means for query and export (exit 64).
#: Documents an export reads and holds in one batch.
BATCH = Number("documents", least=1, most=100_000)
BAD_QUERY = ("an unknown collection or field, a bad --where (the column is named), a --filter operator off the "
             "allow-list ($where, $function, $accumulator, $expr, ...)")


def _say(level: str, message: str) -> None:
    """One line on stderr: the values of a message (a field's, a file's) are data, shown escaped."""
    stderr_line(f"{level}: {message}")


def _curated(name: str | None):
    from ingest.store.curated import UnknownCollection, get, names  # noqa: PLC0415 - lazy: the curated declarations (difflib, the schema); parse and --help must not pay them

    if not name:
        raise UnknownCollection("", names())
    return get(name)


def _print_fields(curated, as_json: bool) -> int:
    from ingest.report import dumps, table  # noqa: PLC0415 - lazy: ingest.report (typing); parse and --help must not pay it

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
    from ingest.report import dumps, table  # noqa: PLC0415 - lazy: as in _print_fields
    from ingest.store.curated import all_curated  # noqa: PLC0415 - lazy: as in _curated

    rows = [{"collection": c.name, "source": c.source, "fields": len(c.fields), "indexes": len(c.indexes),
             "one_per": c.one_per} for c in all_curated().values()]
    print(dumps({"collections": rows}) if as_json else
          table(rows, [("collection", "collection"), ("source", "written by"), ("fields", "fields"),
                       ("indexes", "indexes"), ("one_per", "one document per")], left=2))
    return Exit.OK


def _spec(args, curated, default_fields=None):
    from ingest.query.compile import build  # noqa: PLC0415 - lazy: bson and pymongo (0.3 s); parse and --help must not pay them

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
    from ingest.query import QueryError  # noqa: PLC0415 - lazy: as in _curated

    if args.json and args.format in ("table", "csv") and not args.out:
        raise QueryError("--json", f"prints JSON Lines on stdout, --format {args.format} prints text: give one "
                                   "of them (or --out FILE, which --json then reports on)")
    fmt = args.format or ("jsonl" if args.json else "table")
    if fmt == "parquet" and not args.out:
        raise QueryError("--out", "--format parquet writes a file: give --out FILE")
    return fmt


def _check_out(path: str | None) -> None:
    """--out names a file (replaced when the output is complete), never a folder: refused before any work."""
    from ingest.query import QueryError  # noqa: PLC0415 - lazy: as in _curated

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
    _check_out(args.out)
    from ingest.cli.common import settings_from  # noqa: PLC0415 - lazy: the settings (ingest.config); parse and --help must not pay them
    from ingest.query.output import run_query  # noqa: PLC0415 - lazy: pymongo costs 0.9 s; parse and --help must not pay it
    from ingest.query.plan import scan_warning  # noqa: PLC0415 - lazy: pymongo, as run_query
    from ingest.report import dumps  # noqa: PLC0415 - lazy: as in _print_fields
    from ingest.server.connection import database  # noqa: PLC0415 - lazy: pymongo, as run_query

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
        written = run_query(coll, spec, fmt, args.out, _say)
    if not written:
        _say("note", f"no document of {curated.name} matches")
    if args.out and args.json:
        print(dumps({"collection": curated.name, "format": fmt, "out": args.out, "rows": written}))
    elif args.out and written:
        _say("info", f"{written:,} rows written to {printable(args.out)}")
    return Exit.OK


def _name(keys) -> str:
    from ingest.store.curated import index_name  # noqa: PLC0415 - lazy: as in _curated

    return index_name(keys)


def _explain(coll, spec, curated, as_json: bool) -> int:
    from ingest.query.plan import explain  # noqa: PLC0415 - lazy: pymongo costs 0.9 s; parse and --help must not pay it
    from ingest.report import dumps  # noqa: PLC0415 - lazy: as in _print_fields
    from ingest.store.indexes import index_state  # noqa: PLC0415 - lazy: as explain
    from ingest.store.mongo import db_errors  # noqa: PLC0415 - lazy: pymongo, as explain

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
    from ingest.query.export import export, summary_lines  # noqa: PLC0415 - lazy: pyarrow and pymongoarrow (seconds)
    from ingest.report import dumps  # noqa: PLC0415 - lazy: as in _print_fields

    result = export(coll, spec, fmt, out, batch_size=getattr(args, "batch_size", None) or 2000)
    for level, message in summary_lines(result, coll.name):
        if level != "info" or not args.json:
            _say(level, message)
    if args.json:
        print(dumps(result.as_dict()))
    return Exit.PARTIAL if result.rejected else Exit.OK


@_guarded
def cmd_export(args) -> int:
    from ingest.cli.common import settings_from  # noqa: PLC0415 - lazy: as in cmd_query
    from ingest.query import QueryError  # noqa: PLC0415 - lazy: as in _curated
    from ingest.server.connection import database  # noqa: PLC0415 - lazy: pymongo costs 0.9 s; parse and --help must not pay it

    curated = _curated(args.collection)
    spec = _spec(args, curated, default_fields=tuple(f.name for f in curated.fields))
    fmt = args.format
    out = args.out or f"{curated.name}.{fmt}"
    _check_out(args.out)
    if not args.out and os.path.lexists(out) and not args.force:
        raise QueryError("export", f"{printable(out)} exists and no --out names it: nothing written; give --out "
                                   "FILE, or --force to replace it")
    with database(settings_from(args)) as conn:
        coll = conn.db[curated.name]
        spec.settle(coll, conn.info)
        for note in list(curated.notes) + spec.notes:  # e.g. an output column without a kind, not exported
            _say("note", note)
        return _export(coll, spec, fmt, out, args)


@_guarded
def cmd_indexes(args) -> int:
    from ingest.cli.common import settings_from  # noqa: PLC0415 - lazy: as in cmd_query
    from ingest.report import dumps, table  # noqa: PLC0415 - lazy: as in _print_fields
    from ingest.server.connection import database  # noqa: PLC0415 - lazy: pymongo, as build_indexes
    from ingest.store.curated import UnknownCollection, names  # noqa: PLC0415 - lazy: as in _curated
    from ingest.store.indexes import build_indexes, numeric_keys_exact  # noqa: PLC0415 - lazy: pymongo costs 0.9 s; parse and --help must not pay it

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


def _query_options(p: argparse.ArgumentParser) -> None:
    which = p.add_mutually_exclusive_group()
    which.add_argument("--where", metavar="EXPR", help="the documents to read, in the expression language below")
    which.add_argument("--filter", metavar="JSON", help="a raw MongoDB filter (JSON; only the allow-listed "
                       "operators: no $where, $function, $accumulator, $expr)")
    p.add_argument("--fields", metavar="A,B", help="columns by curated name (* for all; `sci-ingest query COLLECTION "
                   "--fields-list` lists them)")
    p.add_argument("--sort", metavar="[-]A,...", help="order by these fields (a leading - : descending)")
    p.add_argument("--limit", type=int, metavar="N", help="at most N documents")
    p.add_argument("--out", metavar="FILE", help="write to FILE (a temporary file renamed when complete)")


def _descending_sort_values(p: argparse.ArgumentParser) -> None:
    """Let ``--sort -evalue,rank`` through: argparse takes any word that starts with ``-`` for an option
    unless it looks like a negative number, so here a ``-name[,...]`` of two or more characters does
    (``-h`` stays an option).  Python 3.11's argparse reads this matcher at parse time."""
    p._negative_number_matcher = re.compile(r"^-\d+$|^-\d*\.\d+$|^-[A-Za-z_][A-Za-z0-9_]+(,[-+]?[A-Za-z_]\w*)*$")


def register(add, common: argparse.ArgumentParser) -> None:
    p = add("query", cmd_query, "read a curated collection: a filter in a small language, columns, order, a format",
            "examples:\n  sci-ingest query hits --where 'evalue < 1e-20 and identity > 0.9' "
            "--fields query_id,hit_id,evalue --format csv\n"
            "  sci-ingest query materials --where 'elements has \"O\" and 1 <= band_gap <= 3' --sort -band_gap\n"
            "  sci-ingest query hits --where 'query_id == \"sp|P62158|CALM_HUMAN\"' --explain\n"
            "  sci-ingest query hits --fields-list          fields, questions, indexes\n"
            "  sci-ingest query --collections\n" + LANGUAGE
            + "\n--explain prints the plan (index or COLLSCAN) and the documents/keys examined, and no rows;\n"
              "a query no index serves on a collection of 100,000+ documents (SCI_INGEST_SCAN_WARN) warns.\n"
              "\n--json prints the rows as JSON Lines, one object a row (what --format jsonl prints), so that\n"
              "`| head` and `| jq` read them as they come; with --out the rows go to FILE (in --format, default\n"
              "jsonl) and stdout gets one JSON object: {collection, format, out, rows} (--format parquet:\n"
              "what `export --json` prints); with --explain, --fields-list or --collections, one JSON object.\n"
              "--json with --format table or csv and no --out is refused (exit 64).\n",
            json="rows as JSON Lines (as --format jsonl); with --out, --explain, --fields-list or --collections: "
                 "one JSON object (see below)",
            here={Exit.USAGE: BAD_QUERY})
    p.add_argument("collection", nargs="?", metavar="COLLECTION", help="hits, searches, materials, tasks or an "
                   "analysis output (--collections lists them)")
    _query_options(p)
    p.add_argument("--format", choices=["table", "csv", "jsonl", "parquet"],
                   help="output format (default table, with --json jsonl; parquet needs --out)")
    p.add_argument("--explain", action="store_true", help="print how the server runs the query, not its rows")
    p.add_argument("--fields-list", action="store_true", help="list the collection's fields, questions, indexes")
    p.add_argument("--collections", action="store_true", help="list the curated collections")
    _descending_sort_values(p)

    p = add("export", cmd_export, "export a curated collection to Parquet, Arrow or CSV through pymongoarrow",
            "examples:\n  sci-ingest export hits --format parquet --out hits.parquet\n"
            "  sci-ingest export materials --where 'elements has \"O\"' --format arrow --out oxides.arrow\n"
            "  sci-ingest export tasks --fields task_id,material_id,band_gap --format csv --out tasks.csv\n"
            "\nColumns: every curated field (--fields to choose), typed by its declared kind; a document\n"
            "whose field has another type is set aside, never converted: counted on stderr and named in\n"
            "OUT.rejects.jsonl.  Streams in batches (--batch-size, default 2000 documents).\n"
            "\nWhere: --out FILE (replaced when the export is complete: written to a temporary file, then\n"
            "renamed); without --out, COLLECTION.FORMAT in the current folder, which is never replaced\n"
            "unless --force (an existing one: exit 64, nothing written).  --out naming a folder: exit 64.\n"
            + LANGUAGE,
            json="print what was written as one JSON object on stdout (rows, columns, documents set aside, ...)",
            here={Exit.PARTIAL: "written, with documents set aside: their fields' types differ from the declared "
                                "schema; each is named in OUT.rejects.jsonl and counted on stderr",
                  Exit.USAGE: BAD_QUERY + "; without --out, a COLLECTION.FORMAT that exists (--force replaces "
                                          "it); --out naming a folder; nothing was written"})
    p.add_argument("collection", metavar="COLLECTION", help="hits, searches, materials, tasks or an analysis output")
    _query_options(p)
    p.add_argument("--format", choices=["parquet", "arrow", "csv"], default="parquet",
                   help="parquet (default), arrow (Arrow IPC file, Feather v2) or csv")
    p.add_argument("--batch-size", type=typed(BATCH), metavar="N", help=f"documents per batch read, {BATCH.range()} "
                   "(default 2000)")
    p.add_argument("--force", action="store_true", help="without --out: replace an existing COLLECTION.FORMAT "
                   "(refused otherwise, exit 64); a file --out names is always replaced")
    _descending_sort_values(p)

    p = add("indexes", cmd_indexes, "(re)build the curated collections' indexes, idempotently",
            "examples:\n  sci-ingest indexes\n  sci-ingest indexes --dry-run --json\n"
            "  sci-ingest indexes --collections hits,materials --mongo-uri mongodb://mongos:27017/\n"
            "\nEach index of `sci-ingest query COLLECTION --fields-list` that is missing is created; none is\n"
            "dropped; an index the server refuses is reported (exit 2), never replaced by another.\n",
            here={Exit.PARTIAL: "the server refused some indexes (each named); the others are present or created",
                  Exit.USAGE: "--collections names a collection that is not curated"})
    p.add_argument("--collections", metavar="A,B", help="only these collections")
    p.add_argument("--dry-run", action="store_true", help="report what is missing, create nothing")
