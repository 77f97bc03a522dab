"""library_hits: how often each library sequence was hit ("which chromosomes are hit most").

Input: one row per hit with ``search_id, query_id, library, hit_id`` and the
first HSP's ``evalue`` and ``identity``.  Output: one row per library sequence
(``library`` + ``hit_id``; :data:`OUTPUTS`): ``n_hits`` (hits naming it, over
every search and program), ``n_queries`` (distinct queries that hit it),
``n_searches``, ``best_evalue`` (the lowest; 0 when a hit had E = 0),
every count of distinct searches and hits: copies of one search in several files
count once (:mod:`analytics.copies`; the copies left out are counted,
``copies``),
``mean_identity`` over the hits with an identity (``n_identity`` of them; summed in
millionths, so the same to the last bit however the hits are split), the longest
``hit_length`` and the description (the smallest, should its hits differ).  Rows are sorted by
``n_hits`` (most first), then ``n_queries``, then the best E-value, and
``rank`` numbers them from 1: the first rows answer the question.  ``sequence``,
the id, is ``<library>|<hit_id>`` with ``%`` and ``|`` percent-escaped in both
parts, so two different pairs never share an id.

Partition: per partition, the hits' sums per sequence and the distinct
(sequence, query) and (sequence, search) pairs (a query or a search may reach
several partitions); combine: sums, minima and distinct counts over all of them.  New
files' hits are merged into the published table (``merge``) without reading the others:
with the earlier hits that share a search or a query with them (a copy counts once, a
known pair is no new query).
Hits without a library or a hit id are left out, counted (``no_library``,
``no_hit_id``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analytics import copies
from analytics.registry import Analysis, Merge
from ingest.schema import OutputColumn, conform, empty, output_dtypes, require_columns
from ingest.store import curated
from ingest.store.catalog import HITS

COLUMNS = (
    *copies.COLUMNS,
    *curated.HITS.columns("query_id", "library", "hit_id", "hit_description", "hit_length", "evalue", "identity"),
)
INPUT_COLUMNS = tuple(c.name for c in COLUMNS)

#: The output columns: name, dtype, meaning, unit.
OUTPUTS = (
    OutputColumn("sequence", "str", "the row's id: `<library>|<hit_id>`, `%` and `|` percent-escaped", ""),
    OutputColumn("rank", "int64", "1 = most hit (by hits, then distinct queries, then best E-value)", ""),
    OutputColumn("library", "str", "the library searched", ""),
    OutputColumn("hit_id", "str", "the library sequence's identifier", ""),
    OutputColumn("hit_description", "str", "the library sequence's description (the smallest, should its hits "
                                           "differ)", ""),
    OutputColumn("hit_length", "Int64", "the library sequence's length (the longest reported)", "residues"),
    OutputColumn("n_hits", "int64", "hits naming the sequence, over every search and program (copies of a "
                                    "search in several files counted once)", "count"),
    OutputColumn("n_queries", "int64", "distinct queries that hit it", "count"),
    OutputColumn("n_searches", "int64", "distinct searches that hit it (by their fingerprint)", "count"),
    OutputColumn("best_evalue", "float64", "the lowest E-value of its hits' first HSPs (0 when one had E = 0)",
                 "E-value"),
    OutputColumn("mean_identity", "float64", "mean identity of its hits' first HSPs, over those with one",
                 "fraction (0-1)"),
    OutputColumn("n_identity", "int64", "hits with an identity (the mean's denominator)", "count"),
)
OUTPUT_TYPES: dict[str, str] = output_dtypes(OUTPUTS)

EXCLUDED = ("no_library", "no_hit_id", "copies")
#: Identities are summed in millionths (whole numbers): see :func:`library_partial`.
MICRO = 1e6
_KEY = ["library", "hit_id"]


def _escape(part: str) -> str:
    return part.replace("%", "%25").replace("|", "%7C")


def sequence_key(library: str, hit_id: str) -> str:
    """The output id of a library sequence: ``<library>|<hit_id>``, each part escaped."""
    return f"{_escape(library)}|{_escape(hit_id)}"


def library_partial(df: pd.DataFrame) -> tuple[dict[str, pd.DataFrame], dict[str, int]]:
    """One partition's sums per sequence and its distinct (sequence, query/search) pairs; counts left out."""
    require_columns(df, INPUT_COLUMNS, "library_hits")
    df, n_copies = copies.one_copy(df)
    no_library = df["library"].isna()
    no_hit = df["hit_id"].isna() & ~no_library
    excluded = {"no_library": int(no_library.sum()), "no_hit_id": int(no_hit.sum()), "copies": n_copies}
    data = df[~no_library & ~no_hit].copy()
    data["library"] = data["library"].astype("object")
    data["hit_id"] = data["hit_id"].astype("object")
    evalue = pd.to_numeric(data["evalue"], errors="coerce").astype("float64")
    data["evalue"] = evalue.where(evalue >= 0)  # a negative E-value is not one: missing
    identity = pd.to_numeric(data["identity"], errors="coerce").astype("float64")
    # in millionths, whole numbers: their sums are exact in any order (below 2**53), so a table
    # merged file by file and one summed at once agree to the last bit
    data["identity"] = (identity.where((identity >= 0) & (identity <= 1)) * MICRO).round()
    groups = data.groupby(_KEY, sort=False, dropna=False)
    sums = pd.DataFrame({
        "n_hits": groups.size(),
        "best_evalue": groups["evalue"].min(),
        "identity_sum": groups["identity"].sum(min_count=1),
        "n_identity": groups["identity"].count(),
        "hit_length": pd.to_numeric(data["hit_length"], errors="coerce").groupby(
            [data["library"], data["hit_id"]], sort=False).max(),
        "hit_description": groups["hit_description"].min(),
    }).reset_index()
    pairs = {name: data.loc[data[name].notna(), _KEY + [name]].drop_duplicates()
             for name in ("query_id", "search_fingerprint")}
    return {"sums": sums, **pairs}, excluded


def library_combine(partials: list[tuple[dict, dict[str, int]]]) -> tuple[pd.DataFrame, dict[str, int]]:
    """All partitions' sums per sequence, ranked by hits."""
    excluded = dict.fromkeys(EXCLUDED, 0)
    sums, queries, searches = [], [], []
    for part, counts in partials:
        for reason, n in counts.items():
            excluded[reason] = excluded.get(reason, 0) + int(n)
        if len(part["sums"]):
            sums.append(part["sums"])
            queries.append(part["query_id"])
            searches.append(part["search_fingerprint"])
    if not sums:
        return empty(OUTPUT_TYPES), excluded
    out = _added(sums)
    out["n_queries"] = pd.concat(queries).drop_duplicates().groupby(_KEY).size()
    out["n_searches"] = pd.concat(searches).drop_duplicates().groupby(_KEY).size()
    return _ranked(out), excluded


def _added(sums: list[pd.DataFrame]) -> pd.DataFrame:
    """Per-sequence sums of several frames of them, indexed by the sequence."""
    groups = pd.concat(sums, ignore_index=True).groupby(_KEY, sort=True)
    return pd.DataFrame({
        "n_hits": groups["n_hits"].sum(),
        "best_evalue": groups["best_evalue"].min(),
        "identity_sum": groups["identity_sum"].sum(min_count=1),
        "n_identity": groups["n_identity"].sum(),
        "hit_length": groups["hit_length"].max(),
        "hit_description": groups["hit_description"].min(),
    })


def _ranked(out: pd.DataFrame) -> pd.DataFrame:
    """The output table of per-sequence sums and distinct counts (indexed by the sequence): means,
    ranks and ids."""
    out = out.reset_index()
    n_identity = out["n_identity"].to_numpy(dtype="float64")
    with np.errstate(invalid="ignore", divide="ignore"):
        out["mean_identity"] = np.where(n_identity > 0,
                                        out["identity_sum"].to_numpy(dtype="float64") / MICRO / n_identity, np.nan)
    for column in ("n_queries", "n_searches"):
        out[column] = out[column].fillna(0).astype("int64")
    out = out.sort_values(["n_hits", "n_queries", "best_evalue", "library", "hit_id"],
                          ascending=[False, False, True, True, True], na_position="last", kind="mergesort")
    out["rank"] = np.arange(1, len(out) + 1)
    out["sequence"] = [sequence_key(lib, hit) for lib, hit in zip(out["library"], out["hit_id"])]
    return conform(out, OUTPUT_TYPES)  # the declared types: the documents' too, however it was summed


#: Past this many identities of one sequence, its sum (in millionths) is not read back from the
#: published mean exactly (float64 rounding): the table is computed whole.
MERGE_MAX_IDENTITIES = 10**7


def library_merge(output: pd.DataFrame, excluded: dict[str, int], new: pd.DataFrame,
                  before: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, int]] | None:
    """The published table (and its left-out counts) with the hits of new files added: what a whole
    run over all of them gives.  ``before``: the hits of files loaded earlier that share a search
    (fingerprint) or a query with the new ones: their copies in ``new`` are counted once already,
    and a (sequence, query) pair they hold is not a new distinct query.  None when the table
    cannot be merged exactly (a sequence with more than :data:`MERGE_MAX_IDENTITIES` identities)."""
    if len(output) and pd.to_numeric(output["n_identity"]).max() > MERGE_MAX_IDENTITIES:
        return None
    new, known = copies.drop_known(new, before)
    part, counts = library_partial(new)
    counts = {reason: excluded.get(reason, 0) + counts.get(reason, 0) for reason in {*EXCLUDED, *excluded, *counts}}
    counts["copies"] += known
    old = output.set_index(_KEY)
    was = pd.DataFrame({
        "n_hits": old["n_hits"].astype("int64"),
        "best_evalue": pd.to_numeric(old["best_evalue"]).astype("float64"),
        "identity_sum": (pd.to_numeric(old["mean_identity"]).astype("float64") * old["n_identity"] * MICRO).round(),
        "n_identity": old["n_identity"].astype("int64"),
        "hit_length": pd.to_numeric(old["hit_length"]).astype("float64"),
        "hit_description": old["hit_description"].astype("object"),
    }).reset_index()
    out = _added([was, part["sums"]]) if len(part["sums"]) else _added([was])
    if not len(out):
        return empty(OUTPUT_TYPES), counts
    pairs = before.dropna(subset=["library", "hit_id", "query_id"])
    seen = set(zip(pairs["library"].astype("object"), pairs["hit_id"].astype("object"),
                   pairs["query_id"].astype("object")))
    queries = part["query_id"]
    fresh = queries.loc[np.array([key not in seen for key in zip(queries["library"], queries["hit_id"],
                                                                queries["query_id"])], dtype=bool)]
    for column, added in (("n_queries", fresh.groupby(_KEY).size()),
                          ("n_searches", part["search_fingerprint"].groupby(_KEY).size())):
        out[column] = old[column].reindex(out.index).fillna(0).astype("int64").add(
            added.reindex(out.index).fillna(0).astype("int64"))
    return _ranked(out), counts


def library_hits(df: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, int]]:
    """The whole analysis on one in-memory frame: (table, left-out counts)."""
    return library_combine([library_partial(df)])


def plot_library_hits(frame: pd.DataFrame, top: int = 20):
    """The ``top`` most-hit library sequences: hits and distinct queries."""
    import matplotlib  # noqa: PLC0415 - lazy: only the plot draws; `query` and `analyze --list` import every analysis, matplotlib costs 0.4 s

    matplotlib.use("Agg")
    from matplotlib.figure import Figure  # noqa: PLC0415 - lazy: only the plot draws; `query` and `analyze --list` import every analysis, matplotlib costs 0.4 s

    data = frame.assign(n_hits=pd.to_numeric(frame["n_hits"], errors="coerce").fillna(0),
                        n_queries=pd.to_numeric(frame["n_queries"], errors="coerce").fillna(0))
    data = data.sort_values(["n_hits", "n_queries"], ascending=False, kind="mergesort").head(top)
    labels = [f"{hit} ({str(lib).rsplit('/', 1)[-1]})" for lib, hit in zip(data["library"], data["hit_id"])]
    fig = Figure(figsize=(9.0, max(3.0, 0.28 * len(data) + 1.4)))
    ax = fig.subplots()
    y = np.arange(len(data))
    ax.barh(y - 0.2, data["n_hits"], height=0.4, color="#4c72b0", label="hits")
    ax.barh(y + 0.2, data["n_queries"], height=0.4, color="#dd8452", label="distinct queries")
    ax.set_yticks(y, labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("count (hits, or distinct queries)")
    ax.set_ylabel("library sequence: hit id (library)")
    ax.set_title(f"the {len(data)} most-hit library sequences, of {len(frame):,} hit", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


ANALYSIS = Analysis(
    name="library_hits",
    description="per library sequence: hits, distinct queries, best E-value, mean identity, most hit first",
    source=HITS,
    columns=COLUMNS,
    partition=library_partial,
    combine=library_combine,
    group_key=copies.GROUP_KEY,
    output="library_hits",
    output_id="sequence",
    outputs=OUTPUTS,
    questions=("which library sequences (chromosomes) are hit most",
               "how often was sequence Y of library L hit, by how many queries, how well",
               "the library sequences of library L, most hit first"),
    indexes=((("rank", 1),), (("hit_id", 1),), (("library", 1), ("n_hits", -1))),
    plot=plot_library_hits,
    merge=Merge(function=library_merge, before_by=(copies.GROUP_KEY, "query_id")),
)
