"""hull_energy: energy above the convex hull recomputed from the formation energies, against the stored one.

Input: the documents of ``materials`` that describe a material's energy: material
documents (summary, legacy) and pymatgen entries (``_ingest.type: entry``); XAS
and phonon documents are left out.  Per document: its composition (read as in
:mod:`analytics.analyses.formula_consistency`: the ``composition`` amounts, else
the parsed ``formula_pretty``), ``formation_energy_per_atom`` and the stored
``energy_above_hull`` (the loader copies ``e_form_per_atom`` / ``e_above_hull``
of entries and legacy documents there).

**Populations.** Entries and material documents are two populations with their
own hulls: an entry and the summary document of the same material are the same
structure computed (or corrected) differently, and putting both in one hull
would make one of them compete with itself.

**Hulls.** A material's hull is made of every document of its population whose
chemical system is a subset of its own.  The systems present are grouped into the
*maximal* ones (no other system present contains them), and one pymatgen
``PhaseDiagram`` is built per maximal system from ``PDEntry(composition,
formation_energy_per_atom * atoms)`` for every document in it, plus one
``PDEntry(element, 0)`` per element: the elemental references, at 0 by the
definition of a formation energy.  Its energies above hull are exactly those
of the total energies' hull: a formation energy per atom is the energy per
atom minus a function linear in the atomic fractions (the references'
energies), which shifts a point and the hull at its composition by the same
amount.  (An element's lowest document below 0 would simply be lower than
the reference and take its place.)  A material whose system lies in several
maximal systems gets the same value from each (the hull restricted to a face
of the composition simplex is the hull of the points on that face), and is
reported once, from the first by name.  The maximal systems are found in
:func:`hull_regroup` (in the driver, from every partition's rows) and each is a
unit of work of its own (:func:`hull_per_group`, one Dask task; many small ones
are packed together, at most :data:`MAX_UNITS` units).

Output: one row per document (:data:`OUTPUTS`): ``recomputed`` is
pymatgen's ``get_e_above_hull`` (eV/atom), ``difference`` ``recomputed -
stored`` (missing without a stored value).  :func:`hull_summary` gives the
distribution of the differences (the run's ``summary`` and the Parquet
metadata); the plot shows it.  Left out, by reason (:data:`EXCLUDED`): no
finite formation energy, no composition or formula, an unparseable one, and a
diagram pymatgen could not build (its documents).
"""

from __future__ import annotations

import math
import warnings
from itertools import combinations
from typing import cast

import numpy as np
import pandas as pd

from analytics.analyses.formula_consistency import amount_columns, compositions, document_formula, usable_amounts
from analytics.registry import Analysis, gather_partials
from ingest.errors import AnalysisError
from ingest.schema import OutputColumn, conform, empty, output_dtypes, require_columns
from ingest.store import curated
from ingest.store.catalog import MATERIALS

COLUMNS = (
    curated.MATERIALS.column("id", rename="doc_id"),
    *curated.MATERIALS.columns("material_id", "doc_type", "formula_pretty", "elements", "formation_energy_per_atom",
                               "energy_above_hull"),
) + amount_columns("composition")

#: Documents about a material's energy: material documents and entries, not spectra or phonons.
ENERGY_DOCUMENTS = {"_ingest.type": {"$nin": ["xas", "phonon"]}}

#: One stage-1 row per usable document; ``amounts`` holds ``((element, amount), ...)``.
PARTIAL_TYPES: dict[str, str] = {
    "doc_id": "str", "material_id": "str", "population": "str", "chemsys": "str",
    "amounts": "object", "formula": "object", "formation_energy_per_atom": "float64", "stored": "float64",
}

#: The output columns: name, dtype, meaning, unit.
OUTPUTS = (
    OutputColumn("doc_id", "str", "the document (`materials._id`): a material document or an entry", ""),
    OutputColumn("material_id", "str", "its Materials Project id (mp-...)", ""),
    OutputColumn("population", "str", "`material` or `entry`: the population whose hull it is measured against",
                 ""),
    OutputColumn("chemsys", "str", "its chemical system, elements joined by - (Fe-O)", ""),
    OutputColumn("hull_system", "str", "the maximal chemical system whose phase diagram gave `recomputed`", ""),
    OutputColumn("formula", "str", "its reduced formula", ""),
    OutputColumn("formation_energy_per_atom", "float64", "its formation energy, as stored", "eV/atom"),
    OutputColumn("stored", "float64", "energy above the convex hull as stored (`energy_above_hull`; missing when "
                                      "the document has none)", "eV/atom"),
    OutputColumn("recomputed", "float64", "energy above the convex hull recomputed from the formation energies "
                                          "(pymatgen `PhaseDiagram.get_e_above_hull`)", "eV/atom"),
    OutputColumn("difference", "float64", "`recomputed - stored` (missing without a stored value)", "eV/atom"),
    OutputColumn("abs_difference", "float64", "`|recomputed - stored|`", "eV/atom"),
    OutputColumn("on_hull", "bool", "on the recomputed hull (`recomputed` at most 1e-8 eV/atom)", ""),
    OutputColumn("n_hull_entries", "int64", "documents in its phase diagram (elemental references not counted)",
                 "count"),
)
OUTPUT_TYPES: dict[str, str] = output_dtypes(OUTPUTS)

EXCLUDED = ("no_formation_energy", "no_composition", "unparseable_formula", "hull_failed")

#: At most this many units of work: beyond it, small systems are packed together (largest first).
MAX_UNITS = 64
#: A recomputed energy above hull at most this (eV/atom) is on the hull.
ON_HULL = 1e-8


# ------------------------------------------------------------------ stage 1: per partition
def hull_partial(df: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, int]]:
    """The usable documents of one partition, with their compositions; and what was left out."""
    require_columns(df, [c.name for c in COLUMNS], "hull_energy")
    excluded = dict.fromkeys(EXCLUDED, 0)
    fe = pd.to_numeric(df["formation_energy_per_atom"], errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
    stored = pd.to_numeric(df["energy_above_hull"], errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
    usable = np.isfinite(fe)
    excluded["no_formation_energy"] = int((~usable).sum())
    rows = []
    kept = df[usable].reset_index(drop=True)
    amounts = compositions(kept)
    fe, stored = fe[usable], stored[usable]
    for i, (doc_id, material_id, doc_type, pretty, elements) in enumerate(zip(
            kept["doc_id"], kept["material_id"], kept["doc_type"], kept["formula_pretty"], kept["elements"])):
        # the composition's amounts (checked here, made a pymatgen Composition where the diagrams are
        # built), else the parsed formula's atomic fractions: a formula gives no cell size, and the
        # per-atom energies need none
        parts, reduced = usable_amounts(amounts[i], elements), None
        if parts is None:
            formula, _, reason = document_formula((("composition", amounts[i]),), elements,
                                                  (("formula_pretty", pretty),))
            if formula is None:
                reason = cast(str, reason)  # document_formula gives a reason whenever it gives no formula
                excluded["no_composition" if reason == "no_formula" else reason] += 1
                continue
            parts, reduced = formula.fractions, formula.reduced
        rows.append({"doc_id": doc_id, "material_id": material_id,
                     "population": "entry" if doc_type == "entry" else "material",
                     "chemsys": "-".join(el for el, _ in parts), "amounts": parts, "formula": reduced,
                     "formation_energy_per_atom": float(fe[i]),
                     "stored": float(stored[i]) if np.isfinite(stored[i]) else math.nan})
    if not rows:
        return empty(PARTIAL_TYPES), excluded
    return conform(pd.DataFrame(rows), PARTIAL_TYPES), excluded


# ------------------------------------------------------------------ regroup: maximal systems
#: Systems of at most this many elements find their subsets by enumerating them, larger ones by a scan.
ENUMERATE_UP_TO = 12


def subsystems(system: frozenset, present) -> list[frozenset]:
    """The systems of ``present`` (a set) contained in ``system``, itself included if present."""
    if len(system) > ENUMERATE_UP_TO:
        return [other for other in present if other <= system]
    items = sorted(system)
    return [sub for r in range(1, len(items) + 1) for sub in map(frozenset, combinations(items, r)) if sub in present]


def maximal_systems(systems) -> list[frozenset]:
    """The systems (sets of elements) that no other one of ``systems`` contains, sorted by name."""
    present = set(systems)
    covered: set[frozenset] = set()
    for system in present:
        covered.update(sub for sub in subsystems(system, present) if sub != system)
    return sorted(present - covered, key=lambda s: "-".join(sorted(s)))


def hull_regroup(partials: list[tuple[pd.DataFrame, dict[str, int]]]) -> tuple[list, dict[str, int]]:
    """Units of work, one maximal chemical system each (small ones packed together), and the counts.

    A system's unit holds every document of its population inside it (``assigned``
    marks those it reports: the ones whose first containing maximal system it is).
    """
    frames, excluded = gather_partials(partials, EXCLUDED)
    if not frames:
        return [], excluded
    rows = pd.concat(frames, ignore_index=True)
    systems = []
    for population, members in rows.groupby("population", sort=True):
        positions = members.groupby("chemsys", sort=True).indices  # chemsys -> row positions
        arrays = {c: members[c].to_numpy(dtype="float64" if PARTIAL_TYPES[c] == "float64" else object)
                  for c in PARTIAL_TYPES}  # plain arrays: slicing them per system is cheap
        names = {frozenset(name.split("-")): name for name in positions}
        present = set(names)
        claimed: set[str] = set()
        for top in maximal_systems(present):
            top_name = names[top]
            inside = [names[sub] for sub in subsystems(top, present)]
            mine = {name for name in inside if name not in claimed}  # the first maximal system by name reports it
            claimed.update(mine)
            take = np.concatenate([positions[name] for name in inside])
            assigned = np.concatenate([np.full(len(positions[name]), name in mine) for name in inside])
            systems.append((population, top_name, {**{c: v[take] for c, v in arrays.items()}, "assigned": assigned}))
    return _pack(systems), excluded


def _pack(systems: list) -> list[list]:
    """At most MAX_UNITS lists of systems: each of the largest alone, the rest added to the lightest unit."""
    if len(systems) <= MAX_UNITS:
        return [[s] for s in systems]
    ordered = sorted(systems, key=lambda s: -len(s[2]["doc_id"]))
    units: list[list] = [[] for _ in range(MAX_UNITS)]
    loads = [0] * MAX_UNITS
    for system in ordered:
        lightest = loads.index(min(loads))
        units[lightest].append(system)
        loads[lightest] += len(system[2]["doc_id"]) + 1
    return units


# ------------------------------------------------------------------ per unit: the phase diagrams
def hull_per_group(unit: list) -> tuple[pd.DataFrame, dict[str, int]]:
    """The rows of the documents assigned to the unit's systems, one PhaseDiagram per system."""

    from pymatgen.analysis.phase_diagram import PDEntry, PhaseDiagram  # noqa: PLC0415 - lazy: pymatgen costs 0.2-1 s; `query` and `analyze --list` import every analysis
    from pymatgen.core.composition import Composition  # noqa: PLC0415 - lazy: pymatgen costs 0.2-1 s; `query` and `analyze --list` import every analysis

    columns = [c for c in PARTIAL_TYPES if c not in ("amounts", "formula")]
    out: dict[str, list] = {c: [] for c in columns + ["formula", "hull_system", "recomputed", "n_hull_entries"]}
    made: dict = {}  # the same objects in every diagram of the unit: pymatgen caches on them
    failed = unusable = 0
    for _population, name, group in unit:
        entries, keep = [], []
        for doc_id, parts, fe, assigned in zip(group["doc_id"], group["amounts"],
                                               group["formation_energy_per_atom"], group["assigned"]):
            if doc_id not in made:
                made[doc_id] = _entry(PDEntry, Composition, parts, fe)
            if made[doc_id] is None:  # pymatgen refuses the composition (amounts below its tolerance)
                unusable += int(assigned)
                continue
            entries.append(made[doc_id])
            keep.append(bool(assigned))
        for el in name.split("-"):
            if ("reference", el) not in made:
                made[("reference", el)] = PDEntry(Composition({el: 1}), 0.0)
        references = [made[("reference", el)] for el in name.split("-")]
        reported = [e for e, k in zip(entries, keep) if k]
        try:
            diagram = PhaseDiagram(entries + references)
            above = [diagram.get_e_above_hull(entry) for entry in reported]
        except Exception:  # noqa: BLE001 -- qhull or pymatgen refusing a diagram: its documents are counted
            failed += len(reported)
            continue
        assigned = np.asarray(group["assigned"], dtype=bool)
        usable = np.asarray([made[d] is not None for d in group["doc_id"]], dtype=bool)
        for c in columns:
            out[c].extend(group[c][assigned & usable])
        with warnings.catch_warnings():  # e.g. "no Pauling electronegativity for He" while ordering
            warnings.simplefilter("ignore", UserWarning)
            out["formula"].extend(parsed if isinstance(parsed, str) else entry.composition.reduced_formula
                                  for parsed, entry in zip(group["formula"][assigned & usable], reported))
        out["hull_system"].extend([name] * len(above))
        out["recomputed"].extend(above)
        out["n_hull_entries"].extend([len(entries)] * len(above))
    return pd.DataFrame(out), {"hull_failed": failed, "unparseable_formula": unusable}


def _entry(PDEntry, Composition, parts: tuple, fe: float):
    """``PDEntry(composition, formation energy per atom * atoms)``, or None if pymatgen refuses the amounts."""
    try:
        composition = Composition(dict(parts), strict=True)
        atoms = composition.num_atoms
        if not composition or not atoms > 0:
            return None
        return PDEntry(composition, fe * atoms)
    except (ValueError, TypeError, KeyError, ZeroDivisionError, OverflowError):
        return None


def hull_combine(results: list[tuple[pd.DataFrame, dict[str, int]]]) -> tuple[pd.DataFrame, dict[str, int]]:
    """Every unit's rows with the differences, sorted by document id; the counts added up."""
    excluded: dict[str, int] = {}
    frames = []
    for frame, counts in results:
        if len(frame):
            frames.append(frame)
        for reason, n in counts.items():
            excluded[reason] = excluded.get(reason, 0) + int(n)
    if not frames:
        return empty(OUTPUT_TYPES), excluded
    frame = pd.concat(frames, ignore_index=True).sort_values("doc_id", kind="mergesort").reset_index(drop=True)
    if frame["doc_id"].duplicated().any():
        raise AnalysisError("hull_energy: a document was assigned to two hulls")
    recomputed = frame["recomputed"].to_numpy(dtype="float64")
    frame["difference"] = recomputed - frame["stored"].to_numpy(dtype="float64")
    frame["abs_difference"] = np.abs(frame["difference"].to_numpy(dtype="float64"))
    frame["on_hull"] = recomputed <= ON_HULL
    return frame, excluded


def hull_energy(df: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, int]]:
    """The whole analysis on one in-memory frame: (table, left-out counts)."""
    return ANALYSIS.run_frames([df])


def hull_summary(frame: pd.DataFrame) -> dict[str, float]:
    """The distribution of ``recomputed - stored`` (eV/atom) over the documents with both: the signed
    median (``median_difference``) and, of the absolute differences, the max, mean, median and 95th
    percentile; how many agree within 1 meV and 0.1 eV."""
    diff = pd.to_numeric(frame["difference"], errors="coerce").dropna().to_numpy(dtype="float64")
    summary: dict[str, float] = {"documents": int(len(frame)), "compared": int(len(diff))}
    if len(diff):
        absolute = np.abs(diff)
        summary.update({
            "max_abs_difference": float(absolute.max()), "mean_abs_difference": float(absolute.mean()),
            "median_difference": float(np.median(diff)), "median_abs_difference": float(np.median(absolute)),
            "p95_abs_difference": float(np.quantile(absolute, 0.95)),
            "within_1_meV": int((absolute <= 1e-3).sum()), "within_0.1_eV": int((absolute <= 0.1).sum()),
        })
    return summary


def plot_hull_energy(frame: pd.DataFrame):
    """|recomputed - stored| on a log axis (exact agreement counted apart), and stored vs recomputed."""
    import matplotlib  # noqa: PLC0415 - lazy: only the plot draws; `query` and `analyze --list` import every analysis, matplotlib costs 0.4 s

    matplotlib.use("Agg")
    from matplotlib.figure import Figure  # noqa: PLC0415 - lazy: only the plot draws; `query` and `analyze --list` import every analysis, matplotlib costs 0.4 s

    stored = pd.to_numeric(frame["stored"], errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
    recomputed = pd.to_numeric(frame["recomputed"], errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
    both = np.isfinite(stored) & np.isfinite(recomputed)
    diff = np.abs(recomputed[both] - stored[both])
    summary = hull_summary(frame)
    fig = Figure(figsize=(10.0, 3.9))
    left, right = fig.subplots(1, 2)
    exact = int((diff == 0).sum())
    positive = diff[diff > 0]
    if len(positive):
        lo = math.floor(math.log10(max(positive.min(), 1e-16)))  # below 1e-16: counted in the first bin
        hi = max(math.ceil(math.log10(positive.max())), lo + 1)
        left.hist(np.clip(positive, 10.0 ** lo, None), bins=np.logspace(lo, hi, 4 * (hi - lo) + 1), color="#4c72b0")
        left.set_xscale("log")
    left.set_xlabel("|recomputed - stored| energy above hull (eV/atom)")
    left.set_ylabel("documents")
    left.set_title(f"{len(diff):,} documents compared; {exact:,} agree exactly", fontsize=10)
    if "max_abs_difference" in summary:  # what the histogram plots: |recomputed - stored|, in eV/atom
        left.text(0.98, 0.95, f"max |difference| {summary['max_abs_difference']:.3g} eV/atom\n"
                              f"median |difference| {summary['median_abs_difference']:.3g} eV/atom\n"
                              f"within 1 meV: {summary['within_1_meV']:,} of {summary['compared']:,} documents",
                  transform=left.transAxes, ha="right", va="top", fontsize=8,
                  bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.8})
    population = frame["population"].astype("object").to_numpy()[both] if "population" in frame else None
    for name, color in (("material", "#dd8452"), ("entry", "#4c72b0")):
        mask = population == name if population is not None else np.ones(both.sum(), bool)
        if mask.any():
            right.scatter(stored[both][mask], recomputed[both][mask], s=8, alpha=0.6, color=color,
                          label=f"{name} documents ({int(mask.sum()):,})")
    if both.any():
        top = float(max(stored[both].max(), recomputed[both].max(), 1e-3))
        right.plot([0, top], [0, top], color="black", linewidth=0.8, label="recomputed = stored")
        right.legend(fontsize=8, loc="upper left")
    right.set_xlabel("stored energy above hull (eV/atom)")
    right.set_ylabel("recomputed (eV/atom)")
    right.set_title("per document, one hull per maximal chemical system", fontsize=10)
    for ax in (left, right):
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return fig


ANALYSIS = Analysis(
    name="hull_energy",
    description="energy above hull recomputed per chemical system from the formation energies "
                "(pymatgen PhaseDiagram) against the stored one",
    source=MATERIALS,
    filter=ENERGY_DOCUMENTS,
    columns=COLUMNS,
    partition=hull_partial,
    regroup=hull_regroup,
    per_group=hull_per_group,
    combine=hull_combine,
    summary=hull_summary,
    output="hull_energy",
    output_id="doc_id",
    outputs=OUTPUTS,
    questions=("the documents whose recomputed energy above hull differs most from the stored one",
               "the energies above hull of material M, stored and recomputed",
               "the documents on the recomputed hull of chemical system S"),
    indexes=((("abs_difference", -1),), (("material_id", 1),), (("hull_system", 1), ("on_hull", 1))),
    plot=plot_hull_energy,
)
