"""best_hits: for each search, its best hit and the distribution of its hits' scores.

Input: one row per hit with ``search_id, query_id, library, program, rank,
hit_id`` and the first (best) HSP's ``score, evalue, bits, identity``.
Output: one row per search (see :data:`OUTPUTS`).  The best hit has the
highest score; ties go to the lower E-value, then the lower rank, then the
smaller hit_id.  Missing values sort last and are never invented: a best hit
without identity has ``best_identity`` NaN.  Score statistics ignore missing
scores (``n_scored`` counts the rest); quantiles use linear interpolation
(numpy's default).  Every row of one search must be in the same frame: the
declaration partitions ``hits`` on ``search_id`` ranges (``$bucketAuto`` never
splits one value across ranges), and the runner shuffles on ``search_id`` when
asked to partition on another key.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analytics.registry import Analysis
from ingest.documents import search_id_prefix
from ingest.errors import AnalysisError
from ingest.schema import OutputColumn, conform, empty, output_dtypes, require_columns
from ingest.store import curated
from ingest.store.catalog import HITS

#: The hits' fields it reads, as the curated declaration names them (paths and kinds declared there
#: once); the raw score is read as a float: its quantiles and mean are.
COLUMNS = (
    *curated.HITS.columns("search_id", "query_id", "library", "program", "rank", "hit_id"),
    curated.HITS.column("score", kind="float64"),
    *curated.HITS.columns("evalue", "bits", "identity"),
)
INPUT_COLUMNS = tuple(c.name for c in COLUMNS)

#: The output columns: name, dtype, meaning, unit.  Scores are the first HSP's raw scores (the
#: scoring matrix's units); the statistics ignore hits without one.
OUTPUTS = (
    OutputColumn("search_id", "str", "the search (query block): `searches.search_id`", ""),
    OutputColumn("query_id", "str", "the query sequence's identifier", ""),
    OutputColumn("library", "str", "the library searched", ""),
    OutputColumn("program", "str", "the FASTA-suite program (ssearch36, fasta36, ...)", ""),
    OutputColumn("n_hits", "int64", "hits the search reported", "count"),
    OutputColumn("n_scored", "int64", "hits with a score (the score statistics are over them)", "count"),
    OutputColumn("score_min", "float64", "lowest score of the search's hits", "raw score"),
    OutputColumn("score_p25", "float64", "25th percentile of the hits' scores (linear interpolation)", "raw score"),
    OutputColumn("score_median", "float64", "median score of the hits", "raw score"),
    OutputColumn("score_p75", "float64", "75th percentile of the hits' scores (linear interpolation)", "raw score"),
    OutputColumn("score_max", "float64", "highest score of the hits", "raw score"),
    OutputColumn("score_mean", "float64", "mean score of the hits", "raw score"),
    OutputColumn("best_hit_id", "str", "the best hit's library sequence (highest score; ties: lower E-value, "
                                       "then rank, then hit id)", ""),
    OutputColumn("best_rank", "Int64", "the best hit's 1-based rank in the search", ""),
    OutputColumn("best_score", "float64", "raw score of the best hit's first HSP", "raw score"),
    OutputColumn("best_evalue", "float64", "E-value of the best hit's first HSP", "E-value"),
    OutputColumn("best_bits", "float64", "bit score of the best hit's first HSP", "bits"),
    OutputColumn("best_identity", "float64", "identity of the best hit's first HSP (missing when not reported)",
                 "fraction (0-1)"),
)
OUTPUT_TYPES: dict[str, str] = output_dtypes(OUTPUTS)


#: The score quantiles: output column, quantile (linear interpolation between the sorted scores).
QUANTILES = (("score_p25", 0.25), ("score_median", 0.5), ("score_p75", 0.75))


def best_hits(df: pd.DataFrame) -> pd.DataFrame:
    """Best hit and score distribution per search; one row per ``search_id``, sorted.

    Array code over the whole frame (two stable sorts, no per-group call): a
    chunk of 5,000 hits costs about 6 ms, a third of the pandas group-by it
    replaced, with the same output to the bit (tests/test_best_hits.py holds
    it to that version on generated frames).
    """
    require_columns(df, INPUT_COLUMNS, "best_hits")
    if df["search_id"].isna().any():
        raise AnalysisError("best_hits: some hits have no search_id")
    if df.empty:
        return empty(OUTPUT_TYPES)
    codes, keys = pd.factorize(df["search_id"], sort=True)
    groups = len(keys)
    score, evalue, bits, identity = (_floats(df[c]) for c in ("score", "evalue", "bits", "identity"))
    rank = df["rank"].astype("Int64")
    hit_codes = pd.factorize(df["hit_id"], sort=True)[0]  # -1: missing
    n_hits = np.bincount(codes, minlength=groups)
    first = np.concatenate(([0], np.cumsum(n_hits)[:-1]))  # where each group starts in either order below
    # the best hit: highest score, then lower E-value, rank, hit id; a missing value sorts last
    # (np.lexsort is stable and puts NaN last; a missing hit id gets a code above every other)
    best = np.lexsort((np.where(hit_codes < 0, len(hit_codes), hit_codes),
                       rank.to_numpy(dtype="float64", na_value=np.nan), evalue, -score, codes))[first]
    ordered = score[np.lexsort((score, codes))]  # each group's scores ascending, missing last
    n_scored = np.bincount(codes[~np.isnan(score)], minlength=groups)
    by_search = pd.Series(score).groupby(codes, sort=True)  # pandas' own: the first of equal extremes, a compensated sum
    out = pd.DataFrame({
        "search_id": keys.array,
        # first non-missing value of the search's metadata
        "query_id": _first_present(df["query_id"], codes, groups),
        "library": _first_present(df["library"], codes, groups),
        "program": _first_present(df["program"], codes, groups),
        "n_hits": n_hits,
        "n_scored": n_scored,
        "score_min": by_search.min().to_numpy(),
        **{name: _quantile(ordered, first, n_scored, q) for name, q in QUANTILES},
        "score_max": by_search.max().to_numpy(),
        "score_mean": by_search.mean().to_numpy(),
        "best_hit_id": df["hit_id"].array.take(best),
        "best_rank": rank.array.take(best),
        "best_score": score[best],
        "best_evalue": evalue[best],
        "best_bits": bits[best],
        "best_identity": identity[best],
    })
    return conform(out, OUTPUT_TYPES)


def _floats(column) -> np.ndarray:
    return pd.to_numeric(column, errors="coerce").to_numpy(dtype="float64", na_value=np.nan)


def _first_present(column, codes: np.ndarray, groups: int):
    """Each group's first non-missing value of ``column`` in row order; missing where it has none."""
    present = np.flatnonzero(column.notna().to_numpy())
    rows = np.full(groups, -1, dtype="int64")
    if len(present):
        seen, at = np.unique(codes[present], return_index=True)
        rows[seen] = present[at]
    return column.array.take(rows, allow_fill=True)


def _quantile(ordered: np.ndarray, first: np.ndarray, n: np.ndarray, q: float) -> np.ndarray:
    """Quantile ``q`` of each group's ``n`` sorted values at ``first``, interpolated linearly as pandas
    does (``value + (next - value) * frac``, the value itself when ``frac`` is 0); NaN for none."""
    out = np.full(len(first), np.nan)
    has = n > 0
    position = q * (n[has] - 1).astype("float64")
    below = position.astype("int64")
    frac = position % 1
    value = ordered[first[has] + below]
    above = ordered[first[has] + np.minimum(below + 1, n[has] - 1)]
    with np.errstate(invalid="ignore"):  # inf - inf: NaN, as pandas gives
        out[has] = np.where(frac == 0.0, value, value + (above - value) * frac)
    return out


def plot_best_hits(frame: pd.DataFrame):
    """The output as a figure (``sci-ingest report``): histograms of each search's best-hit
    score (log bins when the scores span more than two decades) and best-hit identity."""
    import matplotlib  # noqa: PLC0415 - lazy: only the plot draws; `query` and `analyze --list` import every analysis, matplotlib costs 0.4 s

    matplotlib.use("Agg")
    from matplotlib.figure import Figure  # noqa: PLC0415 - lazy: only the plot draws; `query` and `analyze --list` import every analysis, matplotlib costs 0.4 s

    fig = Figure(figsize=(9.0, 3.6))
    score_ax, ident_ax = fig.subplots(1, 2)
    scores = pd.to_numeric(frame["best_score"], errors="coerce").dropna().to_numpy(dtype="float64")
    identity = pd.to_numeric(frame["best_identity"], errors="coerce").dropna().to_numpy(dtype="float64")
    positive = scores[scores > 0]
    if len(positive) and len(positive) == len(scores) and positive.max() / positive.min() > 100:
        score_ax.hist(scores, bins=np.geomspace(positive.min(), positive.max(), 30), color="#4c72b0")
        score_ax.set_xscale("log")
    else:
        score_ax.hist(scores, bins=30, color="#4c72b0")
    score_ax.set_xlabel("best-hit score")
    score_ax.set_ylabel("searches")
    score_ax.set_title(f"best-hit score ({len(scores):,} of {len(frame):,} searches)", fontsize=10)
    ident_ax.hist(identity * 100, bins=np.linspace(0, 100, 21), color="#55a868")
    ident_ax.set_xlabel("best-hit identity (%)")
    ident_ax.set_ylabel("searches")
    ident_ax.set_title(f"best-hit identity ({len(identity):,} searches)", fontsize=10)
    for ax in (score_ax, ident_ax):
        ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


ANALYSIS = Analysis(
    name="best_hits",
    description="for each search, its best hit and the distribution of its hits' scores",
    source=HITS,
    columns=COLUMNS,
    partition_key="search_id",
    group_key="search_id",
    partition=best_hits,
    output="query_best_hits",
    output_id="search_id",
    outputs=OUTPUTS,
    file_prefix=search_id_prefix,  # a search's groups come from one file: updated incrementally
    questions=("the best hit of query X (in every library searched)",
               "searches whose best hit has an E-value below E, best first",
               "which searches found library sequence Y as their best hit"),
    indexes=((("query_id", 1),), (("best_evalue", 1),), (("best_hit_id", 1),)),
    plot=plot_best_hits,
)
