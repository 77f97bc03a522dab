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

from collections.abc import Iterable

import numpy as np
import pandas as pd

from analytics.registry import Analysis
from ingest.schema import OutputColumn, conform, empty, output_dtypes, require_columns
from ingest.store import curated
from ingest.store.catalog import MATERIALS

COLUMNS = (
    curated.MATERIALS.column("id", rename="material_id"),
    *curated.MATERIALS.columns("elements", "formation_energy_per_atom", "band_gap"),
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

#: The output columns: name, dtype, meaning, unit.
OUTPUTS = (
    OutputColumn("formation_energy_ceil", "int64", "the bin: oxides whose formation energy is in (c-1, c], "
                                                   "c = ceil(formation_energy_per_atom)", "eV/atom"),
    OutputColumn("count", "int64", "oxides in the bin", "count"),
    OutputColumn("mean_band_gap", "float64", "mean band gap of the bin's oxides with one (missing when none has)",
                 "eV"),
    OutputColumn("n_band_gap", "int64", "oxides of the bin with a band gap (the mean's denominator)", "count"),
    OutputColumn("min_formation_energy", "float64", "the lowest formation energy in the bin", "eV/atom"),
    OutputColumn("max_formation_energy", "float64", "the highest formation energy in the bin", "eV/atom"),
)
OUTPUT_TYPES: dict[str, str] = output_dtypes(OUTPUTS)

#: The counts of input records left out, by reason.
EXCLUDED = ("no_formation_energy", "no_elements")


def _elements_state(value) -> str:
    """'oxide', 'other' or 'unknown' (no usable elements list)."""
    if isinstance(value, (list, tuple, np.ndarray)):
        return "oxide" if any(e == "O" for e in value) else "other"
    return "unknown"


def _oxide_flags(elements: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(is an oxide, has no usable elements list) per row, as boolean arrays.

    An Arrow-backed list column (what the readers produce) is answered by Arrow
    kernels without a Python call per row; anything else row by row.
    """
    import pyarrow as pa  # noqa: PLC0415 - lazy: only publishing needs it; `query` and `analyze --list` import every analysis (0.1 s)
    import pyarrow.compute as pc  # noqa: PLC0415 - lazy: only publishing needs it; `query` and `analyze --list` import every analysis (0.1 s)

    n = len(elements)
    arrow = getattr(elements.array, "_pa_array", None)
    if isinstance(arrow, pa.ChunkedArray) and pa.types.is_list(arrow.type) and pa.types.is_string(arrow.type.value_type):
        lists = arrow.combine_chunks() if arrow.num_chunks != 1 else arrow.chunk(0)
        unknown = lists.is_null().to_numpy(zero_copy_only=False)
        is_o = pc.fill_null(pc.equal(pc.list_flatten(lists), "O"), False).to_numpy(zero_copy_only=False)
        parents = pc.list_parent_indices(lists).to_numpy()
        oxide = np.bincount(parents[is_o], minlength=n)[:n] > 0
        return oxide & ~unknown, unknown
    state = elements.map(_elements_state).to_numpy() if n else np.array([], dtype=object)
    return state == "oxide", state == "unknown"


def _finite(values: pd.Series) -> np.ndarray:
    """float64 values with anything missing, non-numeric or non-finite as NaN."""
    out = pd.to_numeric(values, errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
    return np.where(np.isfinite(out), out, np.nan)


def oxide_partial(df: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, int]]:
    """Partial aggregates of one partition per formation-energy ceiling, and its left-out counts."""
    require_columns(df, INPUT_COLUMNS, "oxide_formation_energy")
    oxide, unknown = _oxide_flags(df["elements"])
    fe, gap = _finite(df["formation_energy_per_atom"]), _finite(df["band_gap"])
    keep = oxide & ~np.isnan(fe)
    excluded = {"no_formation_energy": int((oxide & ~keep).sum()), "no_elements": int(unknown.sum())}
    if not keep.any():
        return empty(PARTIAL_TYPES), excluded
    fe, gap = fe[keep], gap[keep]
    bins, member = np.unique(np.ceil(fe).astype("int64"), return_inverse=True)
    known_gap = ~np.isnan(gap)
    order = np.argsort(member, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(member[order]) != 0])
    part = pd.DataFrame({
        "formation_energy_ceil": bins,
        "count": np.bincount(member, minlength=len(bins)),
        "band_gap_sum": np.bincount(member, weights=np.where(known_gap, gap, 0.0), minlength=len(bins)),
        "n_band_gap": np.bincount(member, weights=known_gap, minlength=len(bins)).astype("int64"),
        "min_formation_energy": np.minimum.reduceat(fe[order], starts),
        "max_formation_energy": np.maximum.reduceat(fe[order], starts),
    })
    return conform(part, PARTIAL_TYPES), excluded


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


def plot_oxides(frame: pd.DataFrame):
    """The output as a figure (``sci-ingest report``): oxides per formation-energy ceiling as
    bars, their mean band gap as points on a second axis."""
    import matplotlib  # noqa: PLC0415 - lazy: only the plot draws; `query` and `analyze --list` import every analysis, matplotlib costs 0.4 s

    matplotlib.use("Agg")
    from matplotlib.figure import Figure  # noqa: PLC0415 - lazy: only the plot draws; `query` and `analyze --list` import every analysis, matplotlib costs 0.4 s

    fig = Figure(figsize=(7.5, 4.0))
    ax = fig.add_subplot()
    data = frame.sort_values("formation_energy_ceil")
    ceil = data["formation_energy_ceil"].to_numpy(dtype="int64")
    ax.bar(ceil, data["count"].to_numpy(), width=0.8, color="#4c72b0", label="oxides (count)")
    ax.set_xlabel("formation energy ceiling (eV/atom): the bin (c-1, c]")
    ax.set_ylabel("oxides", color="#4c72b0")
    ax.set_xticks(ceil)
    gap = ax.twinx()
    known = data["n_band_gap"].to_numpy() > 0
    gap.plot(ceil[known], data["mean_band_gap"].to_numpy()[known], "o-", color="#dd8452", label="mean band gap")
    gap.set_ylabel("mean band gap (eV)", color="#dd8452")
    gap.set_ylim(bottom=0)
    ax.set_title(f"{int(data['count'].sum()):,} oxides by formation-energy ceiling, with their mean band gap",
                 fontsize=10)
    handles, labels = ax.get_legend_handles_labels()
    gap_handles, gap_labels = gap.get_legend_handles_labels()
    gap.legend(handles + gap_handles, labels + gap_labels, fontsize=8, loc="upper right")  # above both
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


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
    outputs=OUTPUTS,
    questions=("how many oxides form below E eV/atom, and their mean band gap",),
    plot=plot_oxides,
)
