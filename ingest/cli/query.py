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
import re

from ingest.cli.options import typed
from ingest.config import Number
from ingest.errors import Exit

__all__ = ["register", "cmd_query", "cmd_export", "cmd_indexes"]

LANGUAGE = """
the --where language (docs/querying.md):
  evalue < 1e-20 and identity > 0.9          comparisons < <= > >= == !=, and / or / not, ( )
  query_id in ["a", "b"]   rank not in [1]   1 <= band_gap <= 3   band_gap between 1 and 3
  elements has "O"   elements has all ["Fe", "O"]   elements has any ["S", "Se"]
  elements has only Li, Fe, P, O             (no other element: chemsys in every sub-system)
  is_stable == true   z_score exists   hit_description missing   `params.pg_matrix` == "BL50"
  strings in double quotes (JSON escapes); fields by their curated names (`query COLLECTION
  --fields-list`), or a raw document path in backquotes
"""
#: What a bad query means for query and export (exit 64).
#: Documents an export reads and holds in one batch.
BATCH = Number("documents", least=1, most=100_000)
BAD_QUERY = ("an unknown collection or field, a bad --where (the column is named), a --filter operator off the "
             "allow-list ($where, $function, $accumulator, $expr, ...)")


def cmd_query(args) -> int:
    from ingest.cli.querying import cmd_query as run  # noqa: PLC0415 - lazy: pymongo, the curated declarations and the query language (ingest.cli.querying: 0.17 s; 0.3 s cold); parse and --help must not pay them

    return run(args)


def cmd_export(args) -> int:
    from ingest.cli.querying import cmd_export as run  # noqa: PLC0415 - lazy: as cmd_query

    return run(args)


def cmd_indexes(args) -> int:
    from ingest.cli.querying import cmd_indexes as run  # noqa: PLC0415 - lazy: as cmd_query

    return run(args)


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
    p.add_argument("--format", choices=["table", "csv", "jsonl", "parquet", "bed", "gff3", "blast-tab"],
                   help="output format (default table, with --json jsonl; parquet needs --out); hits only: bed, "
                        "gff3, blast-tab, one line per HSP (see `sci-ingest export --help`)")
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
            "\nHits as genome-browser and BLAST-table lines (also `query hits --format ...`), one line per\n"
            "HSP, on the library sequence (hit_id); strand + / - on it (a reverse-complement hit: -), . for\n"
            "a protein library; an HSP without coordinates (a table-only hit) set aside, exit 2:\n"
            "  bed        BED6+7, 0-based half-open; name the query id, score the bit score rounded and held\n"
            "             to 0..1000; then evalue, bits, pident, qstart, qend (0-based half-open), qstrand,\n"
            "             hsp (<hit _id>#<k>); an id with whitespace, a control or non-ASCII character: set aside\n"
            "  gff3       GFF3, 1-based closed; type nucleotide_match / protein_match /\n"
            "             translated_nucleotide_match; score the E-value; Target the query's range; ids\n"
            "             percent-encoded; ##sequence-region from hit_length where it is one length\n"
            "  blast-tab  -outfmt 6: qseqid sseqid pident length mismatch gapopen qstart qend sstart send\n"
            "             evalue bitscore, 1-based, minus strand end to start (sstart > send), then FASTA's\n"
            "             zscore opt score psim qlen slen; NA where the document has no value; no header\n"
            "  (--fields does not apply; default file hits.bed, hits.gff3, hits.tsv)\n"
            "\nMaterials as OPTIMADE structures (spec v1.2 names: chemical_formula_reduced alphabetical,\n"
            "chemical_formula_anonymous largest count first (A8B2C2D), elements, nsites, lattice_vectors,\n"
            "cartesian_site_positions (Å), species_at_sites, space_group_symbol_hermann_mauguin (P 63/m m c),\n"
            "space_group_it_number, space_group_symbol_hall, last_modified (RFC 3339, UTC), immutable_id):\n"
            "  optimade          JSON Lines, one resource a line: {id, type: structures, attributes}\n"
            "  optimade-parquet  the same flattened: id, type and one column per attribute (nested lists kept)\n"
            "  What a document does not hold is left out and named per record (stderr: one line per field and\n"
            "  reason; all in OUT.unmapped.jsonl and --json); a document that is not a structure (xas,\n"
            "  phonon) is set aside, named in OUT.rejects.jsonl, exit 2.  (default file\n"
            "  materials.optimade.jsonl / materials.optimade.parquet; --fields does not apply)\n"
            "\nWhere: --out FILE (replaced when the export is complete: written to a temporary file, then\n"
            "renamed); without --out, COLLECTION.FORMAT in the current folder, which is never replaced\n"
            "unless --force (an existing one: exit 64, nothing written).  --out naming a folder: exit 64.\n"
            + LANGUAGE,
            json="print what was written as one JSON object on stdout (rows, columns, documents set aside, ...)",
            here={Exit.PARTIAL: "written, with documents set aside: their fields' types differ from the declared "
                                "schema (bed, gff3, blast-tab: HSPs that cannot be written); each is named in "
                                "OUT.rejects.jsonl and counted on stderr",
                  Exit.USAGE: BAD_QUERY + "; without --out, a COLLECTION.FORMAT that exists (--force replaces "
                                          "it); --out naming a folder; nothing was written"})
    p.add_argument("collection", metavar="COLLECTION", help="hits, searches, materials, tasks or an analysis output")
    _query_options(p)
    p.add_argument("--format", choices=["parquet", "arrow", "csv", "bed", "gff3", "blast-tab", "optimade",
                                        "optimade-parquet"], default="parquet",
                   help="parquet (default), arrow (Arrow IPC file, Feather v2) or csv; for hits also bed, gff3 and "
                        "blast-tab (one line per HSP, below); for materials also optimade and optimade-parquet "
                        "(OPTIMADE structures, below)")
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
