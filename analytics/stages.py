"""Pure analysis stages: pandas in, pandas out, no database, no Dask.

The runner (``analytics.runner``) reads the inputs, applies these functions per
Dask partition and writes the outputs; here is only the arithmetic, so it can be
tested on hand-built frames.

best_hits
    Input: one row per hit with ``search_id, query_id, library, program, rank,
    hit_id`` and the first (best) HSP's ``score, evalue, bits, identity``.
    Output: one row per search (see :data:`BEST_HITS_DTYPES`).  The best hit
    has the highest score; ties go to the lower E-value, then the lower rank,
    then the smaller hit_id.  Missing values sort last and are never invented:
    a best hit without identity has ``best_identity`` NaN.  Score statistics
    ignore missing scores (``n_scored`` counts the rest); quantiles use linear
    interpolation (numpy's default).  Every row of one search must be in the
    same frame: a caller with partitioned data must group by ``search_id``
    first (the runner partitions on ``search_id`` or shuffles).

oxide_formation_energy
    Input: one row per material with ``material_id, elements,
    formation_energy_per_atom, band_gap``.  Oxides are materials whose
    ``elements`` list contains ``"O"``.  Oxides are grouped by
    ``ceil(formation_energy_per_atom)`` (an int, eV/atom): ``count``,
    ``mean_band_gap`` over the known band gaps (NaN if none), ``n_band_gap``,
    ``min_/max_formation_energy``.  Oxides without a finite formation energy are
    excluded and counted; materials without an ``elements`` list are counted
    too.  The counts are in ``result.attrs`` (see :func:`oxide_combine`).
    Split for partitioned data: :func:`oxide_partial` per partition (with
    :func:`oxide_tally`), then :func:`oxide_combine` once.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd

from ingest.errors import AnalysisError

HIT_INPUT_COLUMNS = ("search_id", "query_id", "library", "program", "rank", "hit_id",
                     "score", "evalue", "bits", "identity")

BEST_HITS_DTYPES: dict[str, str] = {
    "search_id": "str",
    "query_id": "str",
    "library": "str",
    "program": "str",
    "n_hits": "int64",
    "n_scored": "int64",
    "score_min": "float64",
    "score_p25": "float64",
    "score_median": "float64",
    "score_p75": "float64",
    "score_max": "float64",
    "score_mean": "float64",
    "best_hit_id": "str",
    "best_rank": "Int64",
    "best_score": "float64",
    "best_evalue": "float64",
    "best_bits": "float64",
    "best_identity": "float64",
}

MATERIAL_INPUT_COLUMNS = ("material_id", "elements", "formation_energy_per_atom", "band_gap")

OXIDE_PARTIAL_DTYPES: dict[str, str] = {
    "formation_energy_ceil": "int64",
    "count": "int64",
    "band_gap_sum": "float64",
    "n_band_gap": "int64",
    "min_formation_energy": "float64",
    "max_formation_energy": "float64",
}

OXIDE_TALLY_DTYPES: dict[str, str] = {
    "records_in": "int64",
    "oxides": "int64",
    "no_elements": "int64",
    "no_formation_energy": "int64",
}

OXIDE_DTYPES: dict[str, str] = {
    "formation_energy_ceil": "int64",
    "count": "int64",
    "mean_band_gap": "float64",
    "n_band_gap": "int64",
    "min_formation_energy": "float64",
    "max_formation_energy": "float64",
}


def _require(df: pd.DataFrame, columns: Iterable[str], stage: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise AnalysisError(f"{stage}: input lacks column(s) {', '.join(missing)}")


def _conform(df: pd.DataFrame, dtypes: dict[str, str]) -> pd.DataFrame:
    """Exactly the declared columns, in order, with the declared dtypes."""
    out = pd.DataFrame(index=range(len(df)))
    for name, dtype in dtypes.items():
        values = df[name].to_numpy() if name in df.columns else np.full(len(df), np.nan)
        out[name] = pd.Series(values, index=out.index).astype(dtype)
    return out


def empty(dtypes: dict[str, str]) -> pd.DataFrame:
    """An empty frame with ``dtypes`` (Dask ``meta`` for a stage's output)."""
    return _conform(pd.DataFrame(), dtypes)


# ---------------------------------------------------------------- best hits
def best_hits(df: pd.DataFrame) -> pd.DataFrame:
    """Best hit and score distribution per search; one row per ``search_id``, sorted."""
    _require(df, HIT_INPUT_COLUMNS, "best_hits")
    if df["search_id"].isna().any():
        raise AnalysisError("best_hits: some hits have no search_id")
    if df.empty:
        return empty(BEST_HITS_DTYPES)
    data = df.loc[:, list(HIT_INPUT_COLUMNS)].copy()
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
    return _conform(out, BEST_HITS_DTYPES)


# ---------------------------------------------------------------- oxides
def _elements_state(value) -> str:
    """'oxide', 'other' or 'unknown' (no usable elements list)."""
    if isinstance(value, (list, tuple, np.ndarray)):
        return "oxide" if any(e == "O" for e in value) else "other"
    return "unknown"


def _classify(df: pd.DataFrame) -> tuple[pd.Series, pd.Series, pd.Series]:
    """(state per row, formation energy with non-finite as NaN, band gap)."""
    state = df["elements"].map(_elements_state) if len(df) else pd.Series([], dtype="object")
    fe = pd.to_numeric(df["formation_energy_per_atom"], errors="coerce").astype("float64")
    fe = fe.where(np.isfinite(fe))
    gap = pd.to_numeric(df["band_gap"], errors="coerce").astype("float64")
    gap = gap.where(np.isfinite(gap))
    return state, fe, gap


def oxide_tally(df: pd.DataFrame) -> pd.DataFrame:
    """One row of counts: materials read, oxides, no elements list, oxides lacking energy."""
    _require(df, MATERIAL_INPUT_COLUMNS, "oxide_formation_energy")
    state, fe, _ = _classify(df)
    oxide = (state == "oxide").to_numpy(dtype=bool)
    row = {
        "records_in": len(df),
        "oxides": int(oxide.sum()),
        "no_elements": int((state == "unknown").sum()),
        "no_formation_energy": int((oxide & fe.isna().to_numpy()).sum()),
    }
    return _conform(pd.DataFrame([row]), OXIDE_TALLY_DTYPES)


def oxide_partial(df: pd.DataFrame) -> pd.DataFrame:
    """Partial aggregates of one partition, per formation-energy ceiling."""
    _require(df, MATERIAL_INPUT_COLUMNS, "oxide_formation_energy")
    state, fe, gap = _classify(df)
    keep = ((state == "oxide") & fe.notna()).to_numpy(dtype=bool)
    if not keep.any():
        return empty(OXIDE_PARTIAL_DTYPES)
    part = pd.DataFrame({
        "formation_energy_ceil": np.ceil(fe[keep].to_numpy()).astype("int64"),
        "fe": fe[keep].to_numpy(),
        "gap": gap[keep].to_numpy(),
    })
    groups = part.groupby("formation_energy_ceil", sort=True)
    out = pd.DataFrame({
        "count": groups.size(),
        "band_gap_sum": groups["gap"].sum(min_count=1).fillna(0.0),
        "n_band_gap": groups["gap"].count(),
        "min_formation_energy": groups["fe"].min(),
        "max_formation_energy": groups["fe"].max(),
    }).reset_index()
    return _conform(out, OXIDE_PARTIAL_DTYPES)


def oxide_combine(partials: pd.DataFrame | Iterable[pd.DataFrame],
                  tallies: pd.DataFrame | Iterable[pd.DataFrame] | None = None) -> pd.DataFrame:
    """Merge partial aggregates into the final table.

    ``result.attrs`` holds the summed tallies: ``records_in``, ``oxides``,
    ``no_elements`` (materials without an elements list) and
    ``excluded_no_formation_energy`` (oxides left out for lack of a finite
    formation energy).
    """
    if not isinstance(partials, pd.DataFrame):
        frames = [p for p in partials if len(p)]
        partials = pd.concat(frames, ignore_index=True) if frames else empty(OXIDE_PARTIAL_DTYPES)
    if len(partials):
        groups = partials.groupby("formation_energy_ceil", sort=True)
        summed = pd.DataFrame({
            "count": groups["count"].sum(),
            "band_gap_sum": groups["band_gap_sum"].sum(),
            "n_band_gap": groups["n_band_gap"].sum(),
            "min_formation_energy": groups["min_formation_energy"].min(),
            "max_formation_energy": groups["max_formation_energy"].max(),
        }).reset_index()
        n = summed["n_band_gap"].to_numpy()
        with np.errstate(invalid="ignore", divide="ignore"):
            summed["mean_band_gap"] = np.where(n > 0, summed["band_gap_sum"].to_numpy() / np.maximum(n, 1), np.nan)
        result = _conform(summed, OXIDE_DTYPES)
    else:
        result = empty(OXIDE_DTYPES)

    totals = {name: 0 for name in OXIDE_TALLY_DTYPES}
    if tallies is not None:
        if isinstance(tallies, pd.DataFrame):
            tallies = [tallies]
        for frame in tallies:
            for name in totals:
                if name in frame.columns:
                    totals[name] += int(frame[name].sum())
    result.attrs = {
        "records_in": totals["records_in"],
        "oxides": totals["oxides"],
        "no_elements": totals["no_elements"],
        "excluded_no_formation_energy": totals["no_formation_energy"],
    }
    return result


def oxide_formation_energy(df: pd.DataFrame) -> pd.DataFrame:
    """The whole stage on one in-memory frame (see the module docstring)."""
    return oxide_combine([oxide_partial(df)], [oxide_tally(df)])

