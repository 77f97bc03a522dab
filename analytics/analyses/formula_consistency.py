"""formula_consistency: does every task linked to a material have the material's reduced formula?

Input: the material documents of ``materials`` (entries, XAS and phonon
documents left out: they share their material's id) with their ``task_ids``,
joined to the ``tasks`` collection, a side input read once and handed to every
partition (:class:`analytics.registry.Side`, on ``tasks._id``, the task's
natural key: ``str(task_id)``).  Each part of ``tasks`` is reduced where it is
read to one formula per task (:func:`task_formulas`), so the partitions get a
narrow table, and each task's formula is parsed once.

**Reduced formulas** are pymatgen's (``Composition(...).reduced_formula``,
``Fe4O6`` -> ``Fe2O3``), never string handling.  A document's formula comes from,
in this order of preference:

1. ``composition`` (the unit cell's element amounts: the current MP summary and
   TaskDoc schemas; the loader adds it to legacy documents from their
   ``unit_cell_formula``), then, for tasks, ``composition_unit_cell`` (atomate
   and legacy task documents, and TaskDocs whose ``composition`` is null: every
   real task document here), each read as one numeric column per element symbol
   (``composition.Fe`` ...): the declared column kinds have no sub-document kind.
   A key that is not an element symbol (a species such as ``Fe2+``) is not seen
   that way, so a composition is used only when its elements are the
   document's ``elements`` list (where the document has one);
2. ``formula_pretty`` (materials and every task schema; the loader copies a
   legacy ``pretty_formula`` there), parsed by pymatgen;
3. for tasks, ``formula_reduced_abc`` (atomate tasks: ``"Cr3 Li2 O8 Sn1"``).

A task's ``output.structure`` (a list of sites) cannot be read through declared
columns either; a task with none of the three (one of the real task documents:
only a structure) counts as ``task_no_formula``.  Two formulas agree when their
compositions have the same elements in the same atomic fractions (to 1e-6), so
``Fe0.4O0.6`` agrees with ``Fe2O3`` although pymatgen does not reduce the former.

Output: one row per material with a formula (see :data:`OUTPUTS`);
``n_tasks`` distinct linked task ids, ``n_found`` of them in ``tasks``,
``n_compared`` of those with a formula, ``n_mismatched`` of those with another
reduced formula, listed in ``mismatched_task_ids`` with their formulas in
``mismatched_formulas`` (same order).  The ids are an **array**, not a joined
string: ``{mismatched_task_ids: "mp-123"}`` finds the material that task
contradicts through a multikey index, and the Parquet column is a list of
strings (declared ``list<string>``: so typed even when every list is empty).
``consistent`` is ``n_mismatched == 0`` (also true when nothing could be
compared: ``n_compared`` says how much was).  Left out, counted by reason
(:data:`EXCLUDED`): materials without a formula or with one pymatgen cannot
parse; linked tasks without a usable formula are counted per link.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from functools import lru_cache
from typing import NamedTuple

import numpy as np
import pandas as pd

from analytics.registry import Analysis, Side, gather_partials
from ingest.documents.materials import ELEMENTS
from ingest.errors import AnalysisError
from ingest.schema import Column, OutputColumn, conform, empty, output_dtypes, require_columns
from ingest.store import curated
from ingest.store.catalog import MATERIALS, TASKS

#: Every element symbol, in a fixed order: one numeric column per element reads a composition.
ELEMENT_SYMBOLS: tuple[str, ...] = tuple(sorted(ELEMENTS))

#: Material documents only (see oxide_formation_energy): entries, spectra and phonon documents
#: share their material's id.
MATERIALS_ONLY = {"_ingest.type": {"$nin": ["entry", "xas", "phonon"]}}


def amount_columns(path: str) -> tuple[Column, ...]:
    """One float column per element symbol, ``<path>.<El>``: a composition sub-document, read exactly."""
    return tuple(Column(f"{path}.{el}", f"{path}.{el}", "float64") for el in ELEMENT_SYMBOLS)


COLUMNS = (
    curated.MATERIALS.column("id", rename="material_id"),
    *curated.MATERIALS.columns("formula_pretty", "elements", "task_ids"),
) + amount_columns("composition")

TASK_COLUMNS = (
    Column("task_id", "_id", "string"),  # a task's _id is its id; the curated tasks name the task_id field
    curated.TASKS.column("formula_pretty"),
    Column("formula_reduced_abc", "formula_reduced_abc", "string"),
    curated.TASKS.column("elements"),
) + amount_columns("composition") + amount_columns("composition_unit_cell")

#: The output columns: name, dtype, meaning, unit.
OUTPUTS = (
    OutputColumn("material_id", "str", "the material (`materials._id`)", ""),
    OutputColumn("reduced_formula", "str", "the material's reduced formula (pymatgen's)", ""),
    OutputColumn("formula_source", "str", "where the formula was read: `composition` or `formula_pretty`", ""),
    OutputColumn("n_tasks", "int64", "distinct task ids the material links (`task_ids`)", "count"),
    OutputColumn("n_found", "int64", "of those, tasks present in `tasks`", "count"),
    OutputColumn("n_compared", "int64", "of those, tasks with a usable formula", "count"),
    OutputColumn("n_mismatched", "int64", "of those, tasks with another reduced formula", "count"),
    OutputColumn("mismatched_task_ids", "list<string>", "the ids of those tasks (empty when every compared task "
                                                        "agrees; `mismatched_task_ids has \"<task_id>\"`)", ""),
    OutputColumn("mismatched_formulas", "list<string>", "their reduced formulas, in the same order", ""),
    OutputColumn("consistent", "bool", "no compared task has another formula (`n_mismatched == 0`; also true "
                                       "when none was compared)", ""),
)
OUTPUT_TYPES: dict[str, str] = output_dtypes(OUTPUTS)

#: Counts of what was left out, by reason.
EXCLUDED = ("material_no_formula", "material_unparseable_formula", "task_no_formula", "task_unparseable_formula")

#: Atomic fractions closer than this are the same composition.
FRACTION_TOLERANCE = 1e-6


# ------------------------------------------------------------------ formulas (pymatgen)
class Formula(NamedTuple):
    """A document's reduced formula and its atomic fractions (what two documents are compared by)."""

    reduced: str
    fractions: tuple[tuple[str, float], ...]  # ((element, atomic fraction), ...), by element

    def same_as(self, other: Formula) -> bool:
        a, b = self.fractions, other.fractions
        return len(a) == len(b) and all(ea == eb and abs(fa - fb) <= FRACTION_TOLERANCE
                                        for (ea, fa), (eb, fb) in zip(a, b))


@lru_cache(maxsize=65536)
def _parsed(source: str | tuple) -> Formula | None:
    """The Formula of a formula string or a sorted ``((element, amount), ...)`` tuple; None if invalid."""

    from pymatgen.core.composition import Composition  # noqa: PLC0415 - lazy: pymatgen costs 0.2-1 s; `query` and `analyze --list` import every analysis

    try:
        with warnings.catch_warnings():  # e.g. "no Pauling electronegativity for He" while ordering the formula
            warnings.simplefilter("ignore", UserWarning)
            comp = Composition(source if isinstance(source, str) else dict(source), strict=True)
            if not comp or not np.isfinite(comp.num_atoms) or comp.num_atoms <= 0:
                return None
            fractions = tuple(sorted((el.symbol, float(comp.get_atomic_fraction(el))) for el in comp.elements))
            return Formula(comp.reduced_formula, fractions)
    except (ValueError, TypeError, KeyError, ZeroDivisionError, OverflowError, RecursionError):
        return None


def parse_formula(formula: str) -> Formula | None:
    """The reduced formula of a formula string (``"Fe4O6"`` -> ``Fe2O3``), None if pymatgen cannot parse it."""
    if not isinstance(formula, str) or not formula.strip():
        return None
    return _parsed(formula.strip())


def composition_formula(amounts: dict[str, float]) -> Formula | None:
    """The reduced formula of ``{element: amount}``; None when an amount is negative or not finite, or all are 0."""
    positive = usable_amounts(amounts, None)
    return _parsed(positive) if positive else None


def compositions(frame: pd.DataFrame, path: str = "composition") -> list[dict[str, float] | None]:
    """Per row, ``{element: amount}`` from the ``<path>.<El>`` columns (None where none is present)."""
    names = [f"{path}.{el}" for el in ELEMENT_SYMBOLS]
    values = frame[names].to_numpy(dtype="float64", na_value=np.nan) if len(frame) else np.empty((0, len(names)))
    present = ~np.isnan(values)
    out: list[dict[str, float] | None] = [None] * len(frame)
    for i in np.flatnonzero(present.any(axis=1)):
        columns = np.flatnonzero(present[i])
        out[i] = {ELEMENT_SYMBOLS[j]: float(values[i, j]) for j in columns}
    return out


def _listed(value) -> list | None:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    if isinstance(value, (list, tuple, np.ndarray)):
        return [v for v in value if isinstance(v, str)]
    return None


def usable_amounts(read: dict[str, float] | None, elements) -> tuple[tuple[str, float], ...] | None:
    """A composition read from its columns as ``((element, amount > 0), ...)``, or None when there is
    none, an amount is negative or not finite, none is positive, or its elements are not the
    document's ``elements`` list (where it has one: a key the columns cannot see, such as ``Fe2+``)."""
    if not read or any(not np.isfinite(a) or a < 0 for a in read.values()):
        return None
    positive = tuple(sorted((el, float(a)) for el, a in read.items() if a > 0))
    listed = _listed(elements)
    if not positive or (listed is not None and set(listed) != {el for el, _ in positive}):
        return None
    return positive


def document_formula(amounts: Iterable[tuple[str, dict | None]], elements, strings: Iterable[tuple[str, object]]
                     ) -> tuple[Formula | None, str | None, str | None]:
    """(formula, where it came from, why there is none) for one document, by the order of preference.

    ``amounts`` are ``(field, composition read from its columns or None)`` in
    order, ``elements`` the document's element list (or None), ``strings``
    ``(field, value)`` formula strings in order.  The reason is ``no_formula``
    when there was nothing to read, ``unparseable_formula`` when something was
    there but not usable.
    """
    tried = False
    for field, read in amounts:
        if read is None:
            continue
        tried = True
        positive = usable_amounts(read, elements)
        found = _parsed(positive) if positive else None
        if found is not None:
            return found, field, None
    for field, value in strings:
        if isinstance(value, str) and value.strip():
            tried = True
            found = parse_formula(value)
            if found is not None:
                return found, field, None
    return None, None, ("unparseable_formula" if tried else "no_formula")


# ------------------------------------------------------------------ the analysis
#: The side input as the partitions get it: one row per task, its formula (or why there is none).
TASK_FORMULA_TYPES: dict[str, str] = {"task_id": "str", "formula": "object", "fractions": "object",
                                      "reason": "object"}


def task_formulas(tasks: pd.DataFrame) -> pd.DataFrame:
    """The side's preparation, where each part of ``tasks`` is read: its ~240 raw columns become
    ``task_id, formula`` (reduced), ``fractions`` and ``reason`` (why there is no formula)."""
    require_columns(tasks, [c.name for c in TASK_COLUMNS], "formula_consistency (tasks)")
    known = tasks[tasks["task_id"].notna()].drop_duplicates("task_id", keep="first").reset_index(drop=True)
    cell, unit_cell = compositions(known, "composition"), compositions(known, "composition_unit_cell")
    columns: dict[str, list] = {name: [] for name in TASK_FORMULA_TYPES}
    for i, (task_id, pretty, abc, elements) in enumerate(
            zip(known["task_id"], known["formula_pretty"], known["formula_reduced_abc"], known["elements"])):
        formula, _, reason = document_formula((("composition", cell[i]), ("composition_unit_cell", unit_cell[i])),
                                              elements, (("formula_pretty", pretty), ("formula_reduced_abc", abc)))
        for name, value in zip(TASK_FORMULA_TYPES, (task_id, formula and formula.reduced,
                                                    formula and formula.fractions, reason)):
            columns[name].append(value)
    return pd.DataFrame({name: pd.Series(values, dtype=TASK_FORMULA_TYPES[name])  # None stays None
                         for name, values in columns.items()})


def formula_partial(materials: pd.DataFrame, tasks: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, int]]:
    """One partition of materials against every task's formula (:func:`task_formulas`):
    (rows, counts left out by reason)."""
    require_columns(materials, [c.name for c in COLUMNS], "formula_consistency")
    require_columns(tasks, list(TASK_FORMULA_TYPES), "formula_consistency (task formulas)")
    excluded = dict.fromkeys(EXCLUDED, 0)
    amounts = compositions(materials)
    rows, links = [], set()
    for i, (material_id, pretty, elements, task_ids) in enumerate(
            zip(materials["material_id"], materials["formula_pretty"], materials["elements"], materials["task_ids"])):
        formula, source, reason = document_formula((("composition", amounts[i]),), elements,
                                                   (("formula_pretty", pretty),))
        if formula is None:
            excluded[f"material_{reason}"] += 1
            continue
        linked = list(dict.fromkeys(_listed(task_ids) or []))  # distinct, in the document's order
        rows.append((material_id, formula, source, linked))
        links.update(linked)
    if not rows:
        return empty(OUTPUT_TYPES), excluded
    wanted = tasks[tasks["task_id"].isin(links)]
    found = {task_id: (Formula(reduced, fractions) if isinstance(reduced, str) else None, reason)
             for task_id, reduced, fractions, reason in zip(wanted["task_id"], wanted["formula"],
                                                            wanted["fractions"], wanted["reason"])}
    out = []
    for material_id, formula, source, linked in rows:
        n_found = n_compared = 0
        ids, formulas = [], []
        for task_id in linked:
            if task_id not in found:
                continue
            n_found += 1
            task_formula, reason = found[task_id]
            if task_formula is None:
                excluded[f"task_{reason}"] += 1
                continue
            n_compared += 1
            if not task_formula.same_as(formula):
                ids.append(task_id)
                formulas.append(task_formula.reduced)
        out.append({"material_id": material_id, "reduced_formula": formula.reduced, "formula_source": source,
                    "n_tasks": len(linked), "n_found": n_found, "n_compared": n_compared,
                    "n_mismatched": len(ids), "mismatched_task_ids": ids, "mismatched_formulas": formulas,
                    "consistent": not ids})
    return conform(pd.DataFrame(out, columns=list(OUTPUT_TYPES)), OUTPUT_TYPES), excluded


def formula_combine(partials: list[tuple[pd.DataFrame, dict[str, int]]]) -> tuple[pd.DataFrame, dict[str, int]]:
    """The partitions' rows, sorted by material id, and their counts added up."""
    frames, excluded = gather_partials(partials, EXCLUDED)
    if not frames:
        return empty(OUTPUT_TYPES), excluded
    frame = pd.concat(frames, ignore_index=True).sort_values("material_id", kind="mergesort")
    if frame["material_id"].duplicated().any():
        raise AnalysisError("formula_consistency: a material appeared in more than one partition")
    return frame.reset_index(drop=True), excluded


def formula_consistency(materials: pd.DataFrame, tasks: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, int]]:
    """The whole analysis on in-memory frames (``tasks`` as read): (table, left-out counts)."""
    return formula_combine([formula_partial(materials, task_formulas(tasks))])


def plot_formula_consistency(frame: pd.DataFrame):
    """Materials by whether their linked tasks agree, and the linked tasks by outcome."""
    import matplotlib  # noqa: PLC0415 - lazy: only the plot draws; `query` and `analyze --list` import every analysis, matplotlib costs 0.4 s

    matplotlib.use("Agg")
    from matplotlib.figure import Figure  # noqa: PLC0415 - lazy: only the plot draws; `query` and `analyze --list` import every analysis, matplotlib costs 0.4 s

    def total(column: str) -> int:
        return int(pd.to_numeric(frame[column], errors="coerce").fillna(0).sum())

    mismatched = pd.to_numeric(frame["n_mismatched"], errors="coerce").fillna(0) > 0
    compared = pd.to_numeric(frame["n_compared"], errors="coerce").fillna(0) > 0
    materials = {"all compared tasks agree": int((compared & ~mismatched).sum()),
                 "some task differs": int(mismatched.sum()),
                 "no task to compare": int((~compared).sum())}
    links = {"same formula": total("n_compared") - total("n_mismatched"),
             "other formula": total("n_mismatched"),
             "task not loaded": total("n_tasks") - total("n_found"),
             "task without formula": total("n_found") - total("n_compared")}
    fig = Figure(figsize=(9.5, 3.6))
    left, right = fig.subplots(1, 2)
    colors = ["#55a868", "#c44e52", "#8c8c8c", "#dd8452"]
    fig.suptitle("reduced formula of each linked task against the material's", fontsize=11)
    for ax, counts, what, title in ((left, materials, "materials", f"{len(frame):,} materials"),
                                    (right, links, "linked tasks", f"{total('n_tasks'):,} links to tasks")):
        names = list(counts)
        bars = ax.barh(names, [counts[n] for n in names], color=colors[:len(names)])
        ax.bar_label(bars, labels=[f"{counts[n]:,}" for n in names], padding=3, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel(f"{what} (count)")
        ax.set_ylabel(f"{what}: outcome")
        ax.set_title(title, fontsize=10)
        ax.margins(x=0.15)
        ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


ANALYSIS = Analysis(
    name="formula_consistency",
    description="for every material, whether the reduced formula of each linked task equals the material's",
    source=MATERIALS,
    filter=MATERIALS_ONLY,
    columns=COLUMNS,
    join=Side(TASKS, TASK_COLUMNS, key="task_id", prepare=task_formulas),
    partition=formula_partial,
    combine=formula_combine,
    output="formula_consistency",
    output_id="material_id",
    outputs=OUTPUTS,
    questions=("which materials have a linked task whose reduced formula differs from theirs",
               "which material does task T contradict",
               "are the tasks of the materials with reduced formula F consistent"),
    indexes=((("consistent", 1),), (("mismatched_task_ids", 1),), (("reduced_formula", 1),)),
    plot=plot_formula_consistency,
)
