"""Querying and exporting the curated collections (``sci-ingest query`` / ``export``).

* :mod:`ingest.query.language`: the ``--where`` expression language: a lark grammar,
  its abstract syntax tree, field names resolved and values typed through the curated
  declarations (:mod:`ingest.store.curated`);
* :mod:`ingest.query.compile`: the tree compiled to a MongoDB filter of plain query
  operators, the same tree evaluated in Python (the reference semantics the tests hold
  the server to), and a whole query (:class:`~ingest.query.compile.Spec`: filter,
  columns, order, limit) from the command line's strings;
* :mod:`ingest.query.safety`: the operator allow-list, and ``--filter`` raw filters
  parsed and checked against it (no server-side JavaScript can be expressed);
* :mod:`ingest.query.plan`: how a query runs on the server at hand: ``explain``, the
  collection-scan warning, the float paths a range must not walk an index for where the
  server's index keys lose numbers (the indexes themselves: :mod:`ingest.store.indexes`);
* :mod:`ingest.query.output`: ``sci-ingest query``: rows streamed as a table, CSV or
  JSON Lines (Parquet through the export);
* :mod:`ingest.query.arrow`: raw BSON batches to Arrow through pymongoarrow with a declared
  schema, documents of other types named, counted and set aside;
* :mod:`ingest.query.export`: ``sci-ingest export``: those batches streamed to Parquet,
  Arrow IPC or CSV.

The command line is :mod:`ingest.cli.query`.
"""

from __future__ import annotations

from ingest.errors import UsageError

__all__ = ["QueryError"]


class QueryError(UsageError):
    """A bad ``--where`` / ``--filter`` / ``--fields`` / ``--sort``: one line, naming the option and,
    for an expression, the 1-based column where it went wrong (``column``)."""

    def __init__(self, option: str, message: str, column: int | None = None, text: str | None = None):
        self.option, self.reason, self.column, self.text = option, message, column, text
        where = f" column {column}" if column is not None else ""
        shown = ""
        if text is not None and column is not None:
            shown = f": {_excerpt(text, column)}"
        super().__init__(f"{option}{where}: {message}{shown}")


def _excerpt(text: str, column: int, width: int = 60) -> str:
    """The expression with a marker before ``column`` (one line): ``evalue < >>>< 1``."""
    flat = " ".join(text.splitlines())
    i = max(0, min(len(flat), column - 1))
    before, after = flat[:i], flat[i:]
    if len(before) > width // 2:
        before = "..." + before[-(width // 2):]
    if len(after) > width // 2:
        after = after[:width // 2] + "..."
    return f"{before}>>>{after}"
