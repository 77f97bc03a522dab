"""hit_distributions: per program, the distributions of the hits' identity and E-value.

Input: one row per hit with ``program`` and the first HSP's ``identity`` and
``evalue``.  Output: one row per (program, measure, bin) (:data:`OUTPUTS`),
fixed bins whatever the data:

* ``identity``: :data:`IDENTITY_BINS` bins of width 0.05 over [0, 1], each
  ``[lo, hi)`` but the last, ``[0.95, 1]``;
* ``log10_evalue``: one decade per bin, ``[k, k + 1)`` for integer ``k``
  (1e-5 <= E < 1e-4 is the bin ``k = -5``); an E-value of exactly 0 (what the
  programs print below the smallest double) has no logarithm and gets a bin of
  its own, ``evalue_zero`` true and no bounds, rather than a silent -inf.

Every identity bin is stored for every program that has one (zero counts
included); decade bins only where there are hits (the decades span hundreds of
orders of magnitude), so a missing decade means 0.  ``share`` is the bin's part
of the program's hits with that measure.

Copies of one search in several files count once (:mod:`analytics.copies`:
the hits are grouped on their search's fingerprint, one copy of each kept; the copies
left out are counted, ``copies``).

Partition: counts per (program, measure, bin) of its hits; combine: their sums,
once.  New files' hits are added to the published counts (``merge``: a search loaded before
counts once) without reading the others again.  Hits left out of a measure are counted by
reason: no program, no identity / E-value, an identity outside [0, 1], a negative or
non-finite E-value.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analytics import copies
from analytics.registry import Analysis, Merge, gather_partials
from ingest.schema import OutputColumn, conform, empty, output_dtypes, require_columns
from ingest.store import curated
from ingest.store.catalog import HITS

COLUMNS = (*copies.COLUMNS, *curated.HITS.columns("program", "evalue", "identity"))
INPUT_COLUMNS = tuple(c.name for c in COLUMNS)

IDENTITY_BINS = 20
IDENTITY = "identity"
LOG10_EVALUE = "log10_evalue"

#: Partial counts: ``bin`` is the identity bin's index, the decade ``k``, or ZERO_BIN for E = 0.
PARTIAL_TYPES: dict[str, str] = {"program": "str", "measure": "str", "bin": "int64", "count": "int64"}
ZERO_BIN = -(10**6)

#: The output columns: name, dtype, meaning, unit.
_BOUND_UNIT = "identity: fraction (0-1); log10_evalue: log10(E-value)"
OUTPUTS = (
    OutputColumn("key", "str", "the row's id: `<program>|<measure>|<label>`", ""),
    OutputColumn("program", "str", "the FASTA-suite program", ""),
    OutputColumn("measure", "str", "what is binned: `identity` (first HSP) or `log10_evalue` (one decade a bin)",
                 ""),
    OutputColumn("bin_lo", "float64", "the bin's lower bound, included (missing for the E = 0 bin)", _BOUND_UNIT),
    OutputColumn("bin_hi", "float64", "the bin's upper bound, excluded but for the last identity bin's 1.0 "
                                      "(missing for the E = 0 bin)", _BOUND_UNIT),
    OutputColumn("label", "str", "the bin as text: `[0.90, 0.95)`, `1e-5 <= E < 1e-4`, `E = 0`", ""),
    OutputColumn("evalue_zero", "bool", "the bin of E-values of exactly 0 (no logarithm: no bounds)", ""),
    OutputColumn("count", "int64", "hits of the program in the bin (copies of a search in several files counted "
                                   "once)", "count"),
    OutputColumn("share", "float64", "the bin's part of the program's hits with that measure", "fraction (0-1)"),
)
OUTPUT_TYPES: dict[str, str] = output_dtypes(OUTPUTS)

EXCLUDED = ("no_program", "no_identity", "identity_out_of_range", "no_evalue", "bad_evalue", "copies")


def identity_bin(identity: np.ndarray) -> np.ndarray:
    """The identity bin (0 .. IDENTITY_BINS - 1) of each value in [0, 1]; 1.0 is in the last."""
    return np.minimum(np.floor(identity * IDENTITY_BINS).astype("int64"), IDENTITY_BINS - 1)


#: ``float("1e<k>")`` for k from DECADE_MIN: the decades' edges exactly as their labels read.
DECADE_MIN, DECADE_MAX = -325, 309
_EDGES = np.array([float(f"1e{k}") for k in range(DECADE_MIN, DECADE_MAX + 2)])


def evalue_bin(evalue: np.ndarray) -> np.ndarray:
    """The decade ``k`` with ``1e<k> <= E < 1e<k+1>`` of each positive finite E-value; ZERO_BIN for E = 0.

    ``floor(log10 E)``, corrected against the edges as parsed (``log10`` may round a value
    just below a power of ten up to it, and is off for subnormal numbers).
    """
    out = np.full(len(evalue), ZERO_BIN, dtype="int64")
    positive = evalue > 0
    values = evalue[positive]
    k = np.clip(np.floor(np.log10(values)).astype("int64"), DECADE_MIN, DECADE_MAX)
    k += values >= _EDGES[np.minimum(k + 1, DECADE_MAX + 1) - DECADE_MIN]
    k -= values < _EDGES[k - DECADE_MIN]
    out[positive] = k
    return out


def hits_partial(df: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, int]]:
    """Counts per (program, measure, bin) in one partition, and the hits left out of each measure."""
    require_columns(df, INPUT_COLUMNS, "hit_distributions")
    df, n_copies = copies.one_copy(df)
    program = df["program"].astype("object")
    has_program = program.notna().to_numpy()
    identity = pd.to_numeric(df["identity"], errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
    evalue = pd.to_numeric(df["evalue"], errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
    known_identity, known_evalue = ~np.isnan(identity), ~np.isnan(evalue)
    good_identity = known_identity & (identity >= 0) & (identity <= 1)
    good_evalue = known_evalue & np.isfinite(evalue) & (evalue >= 0)
    excluded = {
        "no_program": int((~has_program).sum()),
        "no_identity": int((has_program & ~known_identity).sum()),
        "identity_out_of_range": int((has_program & known_identity & ~good_identity).sum()),
        "no_evalue": int((has_program & ~known_evalue).sum()),
        "bad_evalue": int((has_program & known_evalue & ~good_evalue).sum()),
        "copies": n_copies,
    }
    parts = []
    for measure, keep, bins in ((IDENTITY, has_program & good_identity, lambda m: identity_bin(identity[m])),
                                (LOG10_EVALUE, has_program & good_evalue, lambda m: evalue_bin(evalue[m]))):
        if keep.any():
            frame = pd.DataFrame({"program": program.to_numpy()[keep], "bin": bins(keep)})
            counts = frame.groupby(["program", "bin"], sort=True).size().rename("count").reset_index()
            parts.append(counts.assign(measure=measure))
    if not parts:
        return empty(PARTIAL_TYPES), excluded
    return conform(pd.concat(parts, ignore_index=True), PARTIAL_TYPES), excluded


def _describe_bin(measure: str, b: int) -> tuple[float, float, str, bool]:
    """(lo, hi, label, evalue_zero) of a bin."""
    if measure == IDENTITY:
        lo, hi = b / IDENTITY_BINS, (b + 1) / IDENTITY_BINS
        return lo, hi, f"[{lo:.2f}, {hi:.2f}{']' if b == IDENTITY_BINS - 1 else ')'}", False
    if b == ZERO_BIN:
        return math.nan, math.nan, "E = 0", True
    return float(b), float(b + 1), f"1e{b} <= E < 1e{b + 1}", False


def hits_combine(partials: list[tuple[pd.DataFrame, dict[str, int]]]) -> tuple[pd.DataFrame, dict[str, int]]:
    """The partitions' counts added up; all identity bins of each program; shares."""
    frames, excluded = gather_partials(partials, EXCLUDED)
    if not frames:
        return empty(OUTPUT_TYPES), excluded
    counts = pd.concat(frames, ignore_index=True).groupby(["program", "measure", "bin"], sort=True)["count"].sum()
    measured = counts.index.to_frame(index=False)
    with_identity = sorted(measured.loc[measured["measure"] == IDENTITY, "program"].unique())
    every_bin = pd.MultiIndex.from_product([with_identity, [IDENTITY], range(IDENTITY_BINS)],
                                           names=["program", "measure", "bin"])
    counts = counts.reindex(counts.index.union(every_bin), fill_value=0).sort_index()
    totals = counts.groupby(level=["program", "measure"]).sum()
    rows = []
    for (program, measure, b), n in counts.items():
        lo, hi, label, zero = _describe_bin(measure, int(b))
        rows.append({"key": f"{program}|{measure}|{label}", "program": program, "measure": measure,
                     "bin_lo": lo, "bin_hi": hi, "label": label, "evalue_zero": zero, "count": int(n),
                     "share": int(n) / int(totals[(program, measure)])})
    out = pd.DataFrame(rows)  # by program, measure, bin: E = 0 (ZERO_BIN) before the decades
    return out.reset_index(drop=True), excluded


def as_partial(output: pd.DataFrame) -> pd.DataFrame:
    """A published table as one partial of :func:`hits_combine`: its counts per (program, measure, bin)."""
    if not len(output):
        return empty(PARTIAL_TYPES)
    identity = (output["measure"] == IDENTITY).to_numpy()
    lo = pd.to_numeric(output["bin_lo"], errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
    zero = output["evalue_zero"].astype(bool).to_numpy()
    bins = np.where(identity, np.round(np.nan_to_num(lo) * IDENTITY_BINS), np.where(zero, ZERO_BIN, np.nan_to_num(lo)))
    frame = pd.DataFrame({"program": output["program"].astype("object").to_numpy(),
                          "measure": output["measure"].astype("object").to_numpy(),
                          "bin": bins.astype("int64"), "count": output["count"].astype("int64").to_numpy()})
    return conform(frame[frame["count"] > 0].reset_index(drop=True), PARTIAL_TYPES)


def hits_merge(output: pd.DataFrame, excluded: dict[str, int], new: pd.DataFrame,
               before: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, int]]:
    """The published table (and its left-out counts) with the hits of new files added: what a whole
    run over all of them gives.  ``before``: the hits of files loaded earlier that share a search
    (fingerprint) with the new ones: their copies in ``new`` are counted once already."""
    new, known = copies.drop_known(new, before)
    partial, counts = hits_partial(new)
    counts["copies"] += known
    return hits_combine([(as_partial(output), excluded), (partial, counts)])


def hit_distributions(df: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, int]]:
    """The whole analysis on one in-memory frame: (table, left-out counts)."""
    return hits_combine([hits_partial(df)])


def plot_hit_distributions(frame: pd.DataFrame):
    """Two heat maps, one row per program: the share of its hits in each identity bin, and in each
    E-value decade (E = 0 in a column of its own, left of the decades)."""
    import matplotlib  # noqa: PLC0415 - lazy: only the plot draws; `query` and `analyze --list` import every analysis, matplotlib costs 0.4 s

    matplotlib.use("Agg")
    from matplotlib.colors import LogNorm  # noqa: PLC0415 - lazy: only the plot draws; `query` and `analyze --list` import every analysis, matplotlib costs 0.4 s
    from matplotlib.figure import Figure  # noqa: PLC0415 - lazy: only the plot draws; `query` and `analyze --list` import every analysis, matplotlib costs 0.4 s

    data = frame.assign(count=pd.to_numeric(frame["count"], errors="coerce").fillna(0),
                        bin_lo=pd.to_numeric(frame["bin_lo"], errors="coerce"),
                        zero=frame["evalue_zero"].astype(bool))
    evalues = data[data["measure"] == LOG10_EVALUE]
    identities = data[data["measure"] == IDENTITY]
    hits = data.groupby(["program", "measure"])["count"].sum()
    programs = sorted(set(data["program"]), key=lambda p: (-max(hits.get((p, IDENTITY), 0),
                                                              hits.get((p, LOG10_EVALUE), 0)), p))
    row = {p: i for i, p in enumerate(programs)}
    decades = evalues.loc[~evalues["zero"], "bin_lo"].dropna()
    lo, hi = (int(decades.min()), int(decades.max()) + 1) if len(decades) else (-1, 1)
    ident = np.zeros((len(programs), IDENTITY_BINS))
    evals = np.zeros((len(programs), hi - lo + 2))  # column 0: E = 0; 1: a gap; then the decades lo .. hi-1
    for p, b, n in zip(identities["program"], identities["bin_lo"], identities["count"]):
        ident[row[p], min(int(round(b * IDENTITY_BINS)), IDENTITY_BINS - 1)] += n
    for p, b, z, n in zip(evalues["program"], evalues["bin_lo"], evalues["zero"], evalues["count"]):
        evals[row[p], 0 if z else int(b) - lo + 2] += n
    with np.errstate(invalid="ignore", divide="ignore"):
        ident = ident / ident.sum(axis=1, keepdims=True)
        evals = evals / evals.sum(axis=1, keepdims=True)
    ident[ident == 0] = np.nan
    evals[evals == 0] = np.nan
    fig = Figure(figsize=(11.0, max(3.2, 0.3 * len(programs) + 1.8)))
    ident_ax, eval_ax = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1, 1.6]})
    norm = LogNorm(vmin=1e-3, vmax=1)
    ident_ax.pcolormesh(np.linspace(0, 100, IDENTITY_BINS + 1), np.arange(len(programs) + 1), ident,
                        cmap="viridis", norm=norm)
    width = max(1.0, (hi - lo) / 20)  # E = 0 drawn as a column of its own, then a gap, then the decades
    columns = np.r_[lo - 1.5 * width, lo - 0.5 * width, np.arange(lo, hi + 1)].astype(float)
    mesh = eval_ax.pcolormesh(columns, np.arange(len(programs) + 1), evals, cmap="viridis", norm=norm)
    eval_ax.axvline(lo - 0.5 * width, color="grey", linewidth=0.6)
    ticks = [t for t in eval_ax.get_xticks() if lo <= t <= hi]
    eval_ax.set_xticks([lo - width] + ticks, ["E=0"] + [f"{int(t)}" for t in ticks])
    eval_ax.set_xlim(lo - 1.5 * width, hi)
    labels = [f"{p} ({int(max(hits.get((p, IDENTITY), 0), hits.get((p, LOG10_EVALUE), 0))):,})" for p in programs]
    for ax in (ident_ax, eval_ax):
        ax.set_yticks(np.arange(len(programs)) + 0.5, labels if ax is ident_ax else [], fontsize=8)
        ax.invert_yaxis()
    ident_ax.set_xlabel("identity of the first HSP (%), 5 % bins")
    ident_ax.set_ylabel("program (hits)")
    eval_ax.set_ylabel("program (as on the left)")
    ident_ax.set_title("identity per program (hits)", fontsize=10)
    eval_ax.set_xlabel("log10 E-value, one decade per column (E = 0 apart)")
    eval_ax.set_title("E-value per program", fontsize=10)
    fig.colorbar(mesh, ax=eval_ax, label="share of the program's hits")
    fig.tight_layout()
    return fig


ANALYSIS = Analysis(
    name="hit_distributions",
    description="per program, the distributions of hit identity (5 % bins) and E-value (by decade)",
    source=HITS,
    columns=COLUMNS,
    partition=hits_partial,
    combine=hits_combine,
    group_key=copies.GROUP_KEY,
    output="hit_distributions",
    output_id="key",
    outputs=OUTPUTS,
    questions=("how identity is distributed among the hits of program P",
               "how many hits of program P have an E-value below 1e-k, or exactly 0"),
    indexes=((("program", 1), ("measure", 1)),),
    plot=plot_hit_distributions,
    merge=Merge(function=hits_merge, before_by=(copies.GROUP_KEY,)),  # counts: new files add theirs
)
