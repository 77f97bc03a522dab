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
from ingest.schema import OutputColumn, conform, empty, output_dtypes, require_columns
from ingest.store import curated
from ingest.store.catalog import HITS
from ingest.documents import search_id_prefix
from ingest.errors import AnalysisError

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


def best_hits(df: pd.DataFrame) -> pd.DataFrame:
    """Best hit and score distribution per search; one row per ``search_id``, sorted."""
    require_columns(df, INPUT_COLUMNS, "best_hits")
    if df["search_id"].isna().any():
        raise AnalysisError("best_hits: some hits have no search_id")
    if df.empty:
        return empty(OUTPUT_TYPES)
    data = df.loc[:, list(INPUT_COLUMNS)].copy()
    for col in ("score", "evalue", "bits", "identity"):
        data[col] = pd.to_numeric(data[col], errors="coerce").astype("float64")
    data["rank"] = data["rank"].astype("Int64")

    groups = data.groupby("search_id", sort=True)
    score = groups["score"]
    stats = pd.DataFrame({
        "n_hits": groups.size(),
        "n_scored": score.count(),
        "score_min": score.min(),
        "score_p25": score.quantile(0.25),
        "score_median": score.quantile(0.5),
        "score_p75": score.quantile(0.75),
        "score_max": score.max(),
        "score_mean": score.mean(),
        # first non-missing value of the search's metadata
        "query_id": groups["query_id"].first(),
        "library": groups["library"].first(),
        "program": groups["program"].first(),
    })

    ordered = data.sort_values(
        ["search_id", "score", "evalue", "rank", "hit_id"],
        ascending=[True, False, True, True, True],
        na_position="last",
        kind="mergesort",
    )
    best = ordered.drop_duplicates("search_id", keep="first").set_index("search_id")
    best = best.rename(columns={
        "hit_id": "best_hit_id", "rank": "best_rank", "score": "best_score",
        "evalue": "best_evalue", "bits": "best_bits", "identity": "best_identity",
    })[["best_hit_id", "best_rank", "best_score", "best_evalue", "best_bits", "best_identity"]]

    out = stats.join(best, how="left").rename_axis("search_id").reset_index()
    return conform(out, OUTPUT_TYPES)


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
