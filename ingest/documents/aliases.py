"""The current names of legacy Materials Project fields, made at load time (see ``materials.py``).

The stored document keeps every original field and adds, at the top level and only where the
original lacks the name, the canonical fields of the current MP summary schema; :func:`aliases`
says which (``_ingest.added``) and what it displaced (``_ingest.displaced``).  :data:`LEGACY_NAMES`
lists the renamings and makes the table of docs/data-model.md (:func:`legacy_names_markdown`).
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = ["ELEMENTS", "LEGACY_NAMES", "aliases", "legacy_names_markdown"]

#: Legacy (and older summary) field names and the current name each is aliased to:
#: (legacy name, current name, collection kind, how).  The table of docs/data-model.md is made from it.
LEGACY_NAMES = (
    ("task_id", "material_id", "material", "legacy_material and xas documents: the material id (as a string)"),
    ("pretty_formula", "formula_pretty", "any", "as it is"),
    ("anonymous_formula", "formula_anonymous", "material",
     'a string as it is; the legacy `{"A": 1.0, "B": 2.0}` object written as pymatgen does (`AB2`)'),
    ("unit_cell_formula", "composition", "any", "as it is"),
    ("e_above_hull", "energy_above_hull", "any", "a number, as it is"),
    ("e_form_per_atom", "formation_energy_per_atom", "any", "a number, as it is"),
    ("final_energy_per_atom", "energy_per_atom", "material", "a number, as it is"),
    ("band_gap.search_gap.band_gap", "band_gap", "material",
     "the number replaces the legacy object, which is kept in `_ingest.displaced.band_gap`"),
    ("band_gap.search_gap.is_direct", "is_gap_direct", "material", "a boolean, as it is"),
    ("spacegroup", "symmetry", "material", "its crystal_system, symbol, number, point_group"),
)

# fmt: off
ELEMENTS = frozenset("""
H He Li Be B C N O F Ne Na Mg Al Si P S Cl Ar K Ca Sc Ti V Cr Mn Fe Co Ni Cu Zn Ga Ge As Se Br Kr
Rb Sr Y Zr Nb Mo Tc Ru Rh Pd Ag Cd In Sn Sb Te I Xe Cs Ba La Ce Pr Nd Pm Sm Eu Gd Tb Dy Ho Er Tm
Yb Lu Hf Ta W Re Os Ir Pt Au Hg Tl Pb Bi Po At Rn Fr Ra Ac Th Pa U Np Pu Am Cm Bk Cf Es Fm Md No
Lr Rf Db Sg Bh Hs Mt Ds Rg Cn Nh Fl Mc Lv Ts Og
""".split())
# fmt: on

_SYMBOL_RE = re.compile(r"[A-Z][a-z]?")
_LEAD_SYMBOL_RE = re.compile(r"\s*([A-Z][a-z]?)")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _elements_from(raw: dict) -> list[str] | None:
    comp = raw.get("composition")
    if not isinstance(comp, dict):
        comp = raw.get("unit_cell_formula")
    if isinstance(comp, dict) and comp:
        found = set()
        for species, amount in comp.items():
            m = _LEAD_SYMBOL_RE.match(species)
            if not m or m.group(1) not in ELEMENTS or not _number(amount):
                return None
            if amount > 0:
                found.add(m.group(1))
        return sorted(found) or None
    for name in ("formula_pretty", "pretty_formula"):
        formula = raw.get(name)
        if isinstance(formula, str) and formula:
            symbols = _SYMBOL_RE.findall(formula)
            if symbols and all(s in ELEMENTS for s in symbols) and re.fullmatch(r"[A-Za-z0-9.()\[\]]+", formula):
                return sorted(set(symbols))
            return None
    structure = raw.get("structure")
    if isinstance(structure, dict) and isinstance(structure.get("sites"), list) and structure["sites"]:
        found = set()
        for site in structure["sites"]:
            species = site.get("species") if isinstance(site, dict) else None
            if not isinstance(species, list) or not species:
                return None
            for sp in species:
                element = sp.get("element") if isinstance(sp, dict) else None
                m = _LEAD_SYMBOL_RE.match(element) if isinstance(element, str) else None
                if not m or m.group(1) not in ELEMENTS:
                    return None
                found.add(m.group(1))
        return sorted(found)
    return None


def _legacy_band_gap(value: Any) -> tuple[float, Any] | None:
    """(gap, is_direct or None) from the legacy ``band_gap`` object."""
    if not isinstance(value, dict):
        return None
    search = value.get("search_gap")
    if isinstance(search, dict) and _number(search.get("band_gap")):
        return search["band_gap"], search.get("is_direct")
    if _number(value.get("band_gap")):
        return value["band_gap"], value.get("is_direct")
    return None


def _amount(value: float) -> str:
    """An amount in a formula as pymatgen writes it: 1 omitted, whole numbers without a point."""
    if value == 1:
        return ""
    if abs(value - round(value)) < 1e-8:
        return str(int(round(value)))
    return str(round(value, 8))


def _anonymous_formula(value: Any) -> str | None:
    """``formula_anonymous`` from a legacy ``anonymous_formula``: a string as it is, or the object
    ``{"A": 1.0, "B": 2.0}`` (letters to amounts) as pymatgen's ``anonymized_formula`` writes it
    (whole amounts divided by their gcd, ascending amounts lettered A, B, ...: ``AB2``)."""
    if isinstance(value, str):
        return value or None
    if not isinstance(value, dict) or not value or len(value) > 26:
        return None
    amounts = list(value.values())
    if not all(re.fullmatch(r"[A-Z]", k) for k in value) or not all(_number(a) and a > 0 for a in amounts):
        return None
    if all(float(a).is_integer() for a in amounts):
        divisor = math.gcd(*(int(a) for a in amounts))
        amounts = [a / divisor for a in amounts]
    return "".join(chr(65 + i) + _amount(a) for i, a in enumerate(sorted(amounts)))


def aliases(raw: dict, kind: str, doc_type: str) -> tuple[dict, dict]:
    """(added fields, displaced originals), both keyed by top-level name."""
    added: dict[str, Any] = {}
    displaced: dict[str, Any] = {}

    def add(name: str, value: Any) -> None:
        if name not in raw and name not in added:
            added[name] = value

    if kind == "material":
        mid = None
        if doc_type == "entry":
            data = raw.get("data")
            if isinstance(data, dict) and isinstance(data.get("material_id"), str):
                mid = data["material_id"]
            elif isinstance(raw.get("entry_id"), str):
                mid = re.sub(r"-(GGA\+U|GGA|r2SCAN|R2SCAN|SCAN|PBEsol)$", "", raw["entry_id"])
        elif doc_type in ("legacy_material", "xas"):
            tid = raw.get("task_id")
            mid = str(tid) if isinstance(tid, (str, int)) and not isinstance(tid, bool) else None
        if mid:
            add("material_id", mid)

    if isinstance(raw.get("pretty_formula"), str):
        add("formula_pretty", raw["pretty_formula"])
    if isinstance(raw.get("unit_cell_formula"), dict):
        add("composition", raw["unit_cell_formula"])
    if _number(raw.get("e_above_hull")):
        add("energy_above_hull", raw["e_above_hull"])
    if _number(raw.get("e_form_per_atom")):
        add("formation_energy_per_atom", raw["e_form_per_atom"])

    if kind == "material":
        if _number(raw.get("final_energy_per_atom")):
            add("energy_per_atom", raw["final_energy_per_atom"])
        anonymous = _anonymous_formula(raw.get("anonymous_formula"))
        if anonymous:
            add("formula_anonymous", anonymous)
        legacy_gap = _legacy_band_gap(raw.get("band_gap"))
        if legacy_gap is not None:
            displaced["band_gap"] = raw["band_gap"]
            added["band_gap"] = legacy_gap[0]
            if isinstance(legacy_gap[1], bool):
                add("is_gap_direct", legacy_gap[1])
        spacegroup = raw.get("spacegroup")
        if isinstance(spacegroup, dict):
            sym = {k: spacegroup[k] for k in ("crystal_system", "symbol", "number", "point_group") if k in spacegroup}
            if sym:
                add("symmetry", sym)
        if doc_type == "entry":
            structure = raw.get("structure")
            if isinstance(structure, dict):
                if isinstance(structure.get("sites"), list):
                    add("nsites", len(structure["sites"]))
                lattice = structure.get("lattice")
                if isinstance(lattice, dict) and _number(lattice.get("volume")):
                    add("volume", lattice["volume"])

    if "elements" in raw:  # the original's own list, if it is one; never second-guessed
        elements = raw["elements"]
        if not (isinstance(elements, list) and elements and all(isinstance(e, str) for e in elements)):
            elements = None
    else:
        elements = _elements_from(raw)
        if elements:
            add("elements", elements)
    if elements:
        add("nelements", len(set(elements)))
        add("chemsys", "-".join(sorted(set(elements))))
    return added, displaced


def legacy_names_markdown() -> str:
    """The table of docs/data-model.md of :data:`LEGACY_NAMES` (``tests/test_materials_parser.py`` checks both)."""
    kinds = {"any": "materials and tasks", "material": "materials"}
    lines = ["| legacy name | current name | in | how |", "|---|---|---|---|"]
    for legacy, current, kind, how in LEGACY_NAMES:
        lines.append(f"| `{legacy}` | `{current}` | {kinds[kind]} | {how.replace('|', chr(92) + '|')} |")
    return "\n".join(lines) + "\n"
