"""``sci-ingest query``, ``export`` and ``indexes``: the analysts' commands (:mod:`ingest.query`).

    sci-ingest query hits --where 'evalue < 1e-20 and identity > 0.9' --fields query_id,hit_id,evalue --format csv
    sci-ingest query materials --where 'elements has "O" and band_gap between 1 and 3' --sort band_gap
    sci-ingest query hits --where 'query_id == "X"' --explain          the plan: index or COLLSCAN, counts
    sci-ingest query hits --fields-list                                  the fields, questions and indexes
    sci-ingest export hits --format parquet --out hits.parquet
    sci-ingest indexes                                                   (re)build the curated indexes

Registered by :mod:`ingest.cli.main` through :func:`register`.
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["register", "cmd_query", "cmd_export", "cmd_indexes"]

EXIT_QUERY = ("\nexit codes:\n  0  done (also when nothing matches: a note on stderr)\n"
              "  2  bad input: an unknown collection or field, a bad --where (the column is named), a --filter\n"
              "     operator off the allow-list ($where, $function, $accumulator, $expr, ...)\n  1  fatal error\n")
EXIT_EXPORT = ("\nexit codes:\n  0  written, every document read\n"
               "  2  bad input (nothing written), or written with documents set aside: their fields' types differ\n"
               "     from the declared schema; each is named in OUT.rejects.jsonl and counted on stderr\n"
               "  1  fatal error\n")
LANGUAGE = """
the --where language (README: Querying and exporting the curated collections):
  evalue < 1e-20 and identity > 0.9          comparisons < <= > >= == !=, and / or / not, ( )
  query_id in ["a", "b"]   rank not in [1]   1 <= band_gap <= 3   band_gap between 1 and 3
  elements has "O"   elements has all ["Fe", "O"]   elements has any ["S", "Se"]
  is_stable == true   z_score exists   hit_description missing   `params.pg_matrix` == "BL50"
  strings in double quotes (JSON escapes); fields by their curated names (--fields-list),
  or a raw document path in backquotes
"""


def _err(message: str) -> None:
    print(f"error: {message}", file=sys.stderr, flush=True)


def _say(level: str, message: str) -> None:
    print(f"{level}: {message}", file=sys.stderr, flush=True)


def _curated(name: str | None):
    from ingest.store.curated import UnknownCollection, get, names

    if not name:
        raise UnknownCollection("", names())
    return get(name)


def _print_fields(curated, as_json: bool) -> int:
    from ingest.report import dumps, table

    info = curated.describe()
    if as_json:
        print(dumps(info))
        return 0
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
    return 0


def _list_collections(as_json: bool) -> int:
    from ingest.store.curated import all_curated
    from ingest.report import dumps, table

    rows = [{"collection": c.name, "source": c.source, "fields": len(c.fields), "indexes": len(c.indexes),
             "one_per": c.one_per} for c in all_curated().values()]
    print(dumps({"collections": rows}) if as_json else
          table(rows, [("collection", "collection"), ("source", "written by"), ("fields", "fields"),
                       ("indexes", "indexes"), ("one_per", "one document per")], left=2))
    return 0


def _spec(args, curated, default_fields=None):
    from ingest.query.compile import build

    return build(curated, where=args.where, raw_filter=args.filter, fields=args.fields, sort=args.sort,
                 limit=args.limit, default_fields=default_fields)


def _guarded(func):
    """Bad input (QueryError, an unknown collection) -> one line on stderr and exit 2; an output
    file that cannot be written (no such folder, no permission, disk full) -> one line, exit 1."""
    def run(args) -> int:
        from ingest.store.curated import UnknownCollection
        from ingest.query import QueryError

        try:
            return func(args)
        except (QueryError, UnknownCollection) as exc:
            _err(str(exc))
            return 2
        except BrokenPipeError:
            raise  # `query ... | head`: the reader has all it wanted; main() ends quietly, as `parse` does
        except OSError as exc:  # the writers' temporary file is removed by then
            _err(f"cannot write {getattr(args, 'out', None) or 'the output'}: {exc.strerror or exc}")
            return 1
    run.__name__ = func.__name__
    return run


@_guarded
def cmd_query(args) -> int:
    if args.collections:
        return _list_collections(args.json)
    curated = _curated(args.collection)
    if args.fields_list:
        return _print_fields(curated, args.json)
    spec = _spec(args, curated)
    if args.format == "parquet" and not args.out:
        from ingest.query import QueryError

        raise QueryError("--out", "--format parquet writes a file: give --out FILE")
    from ingest.cli.common import settings_from
    from ingest.store.connection import database

    with database(settings_from(args)) as conn:
        coll = conn.db[curated.name]
        spec.settle(coll, conn.info)
        if args.explain:
            return _explain(coll, spec, curated, args.json)
        from ingest.query.plan import scan_warning

        warning = scan_warning(coll, spec.filter, spec.sort, spec.hint, [_name(ix) for ix in curated.indexes])
        for note in spec.notes:
            _say("note", note)
        if warning:
            _say("warning", warning)
        if args.format == "parquet":
            return _export(coll, spec, "parquet", args.out, args)
        from ingest.query.output import run_query

        written = run_query(coll, spec, args.format, args.out, _say)
    if not written:
        _say("note", f"no document of {curated.name} matches")
    elif args.out:
        _say("info", f"{written:,} rows written to {args.out}")
    return 0


def _name(keys) -> str:
    from ingest.store.curated import index_name

    return index_name(keys)


def _explain(coll, spec, curated, as_json: bool) -> int:
    from ingest.store.mongo import db_errors
    from ingest.query.plan import explain
    from ingest.report import dumps

    plan = explain(coll, spec.filter, projection=spec.projection, sort=spec.sort, limit=spec.limit, hint=spec.hint)
    with db_errors(f"counting {coll.name}"):
        size = coll.estimated_document_count()
    if as_json:
        print(dumps({**spec.describe(), "documents": size, **plan.as_dict(), "notes": spec.notes}))
        return 0
    import json

    rows = [("collection", f"{coll.name} ({size:,} documents)"),
            ("filter", json.dumps(spec.filter, default=str)),
            ("plan", plan.label + ("  (hint $natural: a collection scan on purpose)" if spec.hint else "")),
            ("sort", ("in memory (a SORT stage)" if plan.blocking_sort else "by the index") if spec.sort else "none"),
            ("examined", f"{_n(plan.docs_examined)} documents, {_n(plan.keys_examined)} index keys"),
            ("returned", _n(plan.returned)),
            ("server time", f"{plan.millis} ms" if plan.millis is not None else "?"),
            ("indexes here", ", ".join(_name(ix) for ix in curated.indexes) or "none")]
    for key, value in rows:
        print(f"{key:<13} {value}")
    for note in spec.notes:
        print(f"note: {note}")
    return 0


def _n(value) -> str:
    return "?" if value is None else f"{value:,}"


def _export(coll, spec, fmt: str, out: str, args) -> int:
    from ingest.query.export import export, summary_lines
    from ingest.report import dumps

    result = export(coll, spec, fmt, out, batch_size=getattr(args, "batch_size", None) or 2000)
    for level, message in summary_lines(result, coll.name):
        if level != "info" or not args.quiet:
            _say(level, message)
    if args.json:
        print(dumps(result.as_dict()))
    return 2 if result.rejected else 0


@_guarded
def cmd_export(args) -> int:
    from ingest.query import QueryError

    curated = _curated(args.collection)
    spec = _spec(args, curated, default_fields=tuple(f.name for f in curated.fields))
    fmt = args.format
    out = args.out or f"{curated.name}.{fmt}"
    if args.batch_size is not None and args.batch_size < 1:
        raise QueryError("--batch-size", f"must be at least 1, not {args.batch_size}")
    from ingest.cli.common import settings_from
    from ingest.store.connection import database

    with database(settings_from(args)) as conn:
        coll = conn.db[curated.name]
        spec.settle(coll, conn.info)
        for note in list(curated.notes) + spec.notes:  # e.g. an output column without a kind, not exported
            _say("note", note)
        return _export(coll, spec, fmt, out, args)


def cmd_indexes(args) -> int:
    from ingest.cli.common import settings_from
    from ingest.store.connection import database
    from ingest.query.plan import build_indexes
    from ingest.query.plan import numeric_keys_exact
    from ingest.report import dumps, table

    only = [c.strip() for c in args.collections.split(",")] if args.collections else None
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
    return 2 if any(r["outcome"].startswith("refused") for r in rows) else 0


def _query_options(p: argparse.ArgumentParser) -> None:
    which = p.add_mutually_exclusive_group()
    which.add_argument("--where", metavar="EXPR", help="the documents to read, in the expression language below")
    which.add_argument("--filter", metavar="JSON", help="a raw MongoDB filter (JSON; only the allow-listed "
                       "operators: no $where, $function, $accumulator, $expr)")
    p.add_argument("--fields", metavar="A,B", help="columns by curated name (* for all; see --fields-list)")
    p.add_argument("--sort", metavar="[-]A,...", help="order by these fields (a leading - : descending)")
    p.add_argument("--limit", type=int, metavar="N", help="at most N documents")
    p.add_argument("--out", metavar="FILE", help="write to FILE (a temporary file renamed when complete)")


def _descending_sort_values(p: argparse.ArgumentParser) -> None:
    """Let ``--sort -evalue,rank`` through: argparse takes any word that starts with ``-`` for an option
    unless it looks like a negative number, so here a ``-name[,...]`` of two or more characters does
    (``-q`` and ``-h`` stay options).  Python 3.11's argparse reads this matcher at parse time."""
    import re

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
              "a query no index serves on a collection of 100,000+ documents (SCI_INGEST_SCAN_WARN) warns\n",
            exit_codes=EXIT_QUERY)
    p.add_argument("collection", nargs="?", metavar="COLLECTION", help="hits, searches, materials, tasks or an "
                   "analysis output (--collections lists them)")
    _query_options(p)
    p.add_argument("--format", choices=["table", "csv", "jsonl", "parquet"], default="table",
                   help="output format (default table; parquet needs --out)")
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
            "OUT.rejects.jsonl.  Streams in batches (--batch-size, default 2000 documents).\n" + LANGUAGE,
            exit_codes=EXIT_EXPORT)
    p.add_argument("collection", metavar="COLLECTION", help="hits, searches, materials, tasks or an analysis output")
    _query_options(p)
    p.add_argument("--format", choices=["parquet", "arrow", "csv"], default="parquet",
                   help="parquet (default), arrow (Arrow IPC file, Feather v2) or csv")
    p.add_argument("--batch-size", type=int, metavar="N", help="documents per batch read (default 2000)")
    _descending_sort_values(p)

    p = add("indexes", cmd_indexes, "(re)build the curated collections' indexes, idempotently",
            "examples:\n  sci-ingest indexes\n  sci-ingest indexes --dry-run --json\n"
            "  sci-ingest indexes --collections hits,materials --mongo-uri mongodb://mongos:27017/\n"
            "\nEach index of `sci-ingest query COLLECTION --fields-list` that is missing is created; none is\n"
            "dropped; an index the server refuses is reported (exit 2), never replaced by another.\n",
            exit_codes="\nexit codes:\n  0  every index present or created\n  2  the server refused some\n"
                       "  1  fatal error\n")
    p.add_argument("--collections", metavar="A,B", help="only these collections")
    p.add_argument("--dry-run", action="store_true", help="report what is missing, create nothing")
