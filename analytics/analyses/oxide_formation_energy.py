"""oxide_formation_energy: oxygen-containing materials binned by formation energy.

Input: one row per material with ``material_id, elements,
formation_energy_per_atom, band_gap``.  Oxides are materials whose ``elements``
list contains ``"O"``.  Oxides are grouped by ``ceil(formation_energy_per_atom)``
(an int, eV/atom): ``count``, ``mean_band_gap`` over the known band gaps (NaN if
none), ``n_band_gap``, ``min_/max_formation_energy``.  Oxides without a finite
formation energy are left out and counted (``no_formation_energy``), and so are
materials without an ``elements`` list (``no_elements``).

Split for partitioned data: :func:`oxide_partial` per partition (partial sums
per bin, and the counts), then :func:`oxide_combine` once.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd

from analytics.registry import Analysis
from analytics.schema import Column, conform, empty, require_columns
from ingest.catalog import MATERIALS

COLUMNS = (
    Column("material_id", "_id", "string"),
    Column("elements", "elements", "list<string>"),
    Column("formation_energy_per_atom", "formation_energy_per_atom", "float64"),
    Column("band_gap", "band_gap", "float64"),
)
INPUT_COLUMNS = tuple(c.name for c in COLUMNS)

#: The ``materials`` collection also keeps documents *about* materials (pymatgen
#: entries, XAS spectra, phonon documents; see ingest.parsers.materials): they
#: share their material's ``material_id`` and would count it twice.
MATERIALS_ONLY = {"_ingest.type": {"$nin": ["entry", "xas", "phonon"]}}

PARTIAL_TYPES: dict[str, str] = {
    "formation_energy_ceil": "int64",
    "count": "int64",
    "band_gap_sum": "float64",
    "n_band_gap": "int64",
    "min_formation_energy": "float64",
    "max_formation_energy": "float64",
}

OUTPUT_TYPES: dict[str, str] = {
    "formation_energy_ceil": "int64",
    "count": "int64",
    "mean_band_gap": "float64",
    "n_band_gap": "int64",
    "min_formation_energy": "float64",
    "max_formation_energy": "float64",
}

#: The counts of input records left out, by reason.
EXCLUDED = ("no_formation_energy", "no_elements")


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


def oxide_partial(df: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, int]]:
    """Partial aggregates of one partition per formation-energy ceiling, and its left-out counts."""
    require_columns(df, INPUT_COLUMNS, "oxide_formation_energy")
    state, fe, gap = _classify(df)
    oxide = (state == "oxide").to_numpy(dtype=bool)
    keep = oxide & fe.notna().to_numpy(dtype=bool)
    excluded = {
        "no_formation_energy": int((oxide & ~keep).sum()),
        "no_elements": int((state == "unknown").sum()),
    }
    if not keep.any():
        return empty(PARTIAL_TYPES), excluded
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
    return conform(out, PARTIAL_TYPES), excluded


def oxide_combine(partials: Iterable[tuple[pd.DataFrame, dict[str, int]]]) -> tuple[pd.DataFrame, dict[str, int]]:
    """Merge the partitions' partial aggregates into the final table, and sum their counts."""
    frames, excluded = [], dict.fromkeys(EXCLUDED, 0)
    for frame, counts in partials:
        if len(frame):
            frames.append(frame)
        for reason in EXCLUDED:
            excluded[reason] += int(counts.get(reason, 0))
    if not frames:
        return empty(OUTPUT_TYPES), excluded
    groups = pd.concat(frames, ignore_index=True).groupby("formation_energy_ceil", sort=True)
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
    return conform(summed, OUTPUT_TYPES), excluded


def oxide_formation_energy(df: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, int]]:
    """The whole analysis on one in-memory frame: (table, left-out counts)."""
    return oxide_combine([oxide_partial(df)])


ANALYSIS = Analysis(
    name="oxide_formation_energy",
    description="oxygen-containing materials by formation-energy bin: count and mean band gap",
    source=MATERIALS,
    filter=MATERIALS_ONLY,
    columns=COLUMNS,
    partition=oxide_partial,
    combine=oxide_combine,
    output="oxide_formation_energy",
    output_id="formation_energy_ceil",
    output_types=OUTPUT_TYPES,
)
