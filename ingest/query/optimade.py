"""A curated material document as an OPTIMADE ``structures`` resource, and what could not be mapped.

OPTIMADE (the API standard of materials databases; specification v1.2.0, section "Structures
Entries", as optimade-python-tools 1.5.0 embeds it) names and writes a structure otherwise than
the Materials Project does.  :func:`to_structure` maps what a document holds, field by field,
and names every field it cannot fill (``(field, reason)``: nothing is invented):

========================================  ====================================================
OPTIMADE                                  from the document
========================================  ====================================================
``id``                                    the document's ``_id`` (``mp-149``, ``entry:mp-1-GGA``)
``immutable_id``                          ``<sha256 of the file it was loaded from>:<line>``
                                          (``_source``): that version of the record
``last_modified``                         ``last_updated``, else an entry's ``data.last_updated``,
                                          RFC 3339 in UTC (``2019-02-13T04:54:02.697Z``); else null
``elements`` / ``nelements`` /            the composition: the sites of ``structure`` (each one
``elements_ratios``                       element, occupancy 1), else ``composition``, else
                                          ``formula_pretty``; elements alphabetical
``chemical_formula_reduced``              that composition reduced to the smallest integers,
                                          elements alphabetical, no 1s (``Fe2O3``, ``ClNa``)
``chemical_formula_anonymous``            the same counts largest first as A, B, C ... (MP's
                                          ``AB2C2D8`` is ``A8B2C2D`` here)
``chemical_formula_descriptive``          ``formula_pretty`` as MP writes it, where it agrees with
                                          the composition; else the cell's formula, in the order of
                                          the sites
``nsites`` / ``lattice_vectors`` /        ``structure``: ``lattice.matrix`` (Å), the sites' ``xyz``
``cartesian_site_positions`` /            (Å; from ``abc`` and the lattice where absent),
``species_at_sites`` / ``species``        one species per element (concentration 1); without a
                                          structure, ``nsites`` from the document
``dimension_types`` /                     ``structure.lattice.pbc``; a pymatgen ``Structure``
``nperiodic_dimensions``                  without ``pbc`` is periodic in three directions
                                          (pymatgen's default)
``space_group_it_number``                 ``symmetry.number``
``space_group_symbol_hermann_mauguin``    ``symmetry.symbol`` in OPTIMADE's spacing: ``P6_3/mmc``
                                          -> ``P 63/m m c``, ``Fm-3m`` -> ``F m -3 m``
``space_group_symbol_hall``               ``symmetry.hall`` / the legacy ``spacegroup.hall``
                                          (spglib's, spaced as Hall writes it); else null
``structure_features``                    ``[]`` (no disorder, no implicit atoms, no assemblies)
========================================  ====================================================

A document that is not a structure (an XAS spectrum, a phonon document: ``doc_type`` xas or
phonon) or that holds no chemistry at all is set aside with its reason.  A site with several
species or a partial occupancy is not mapped (the structure's fields are left out and named).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ingest.query import QueryError

__all__ = ["check_request", "FORMATS", "SUFFIX", "PROJECTION", "ELEMENTS", "Mapped", "to_structure", "hermann_mauguin",
           "reduced_formula", "anonymous_formula", "parse_formula"]

#: ``--format`` values: OPTIMADE resources as JSON Lines, or flattened into Parquet columns.
FORMATS = ("optimade", "optimade-parquet")
#: export's default file, ``materials.<suffix>``.
SUFFIX = {"optimade": "optimade.jsonl", "optimade-parquet": "optimade.parquet"}

#: What the mapping reads of a document (the rest of a large legacy document stays on the server).
PROJECTION = {name: 1 for name in (
    "_ingest.type", "_source.sha256", "_source.line", "_source.path", "material_id", "formula_pretty",
    "composition", "nsites", "structure.lattice.matrix", "structure.lattice.pbc", "structure.sites.species",
    "structure.sites.abc", "structure.sites.xyz", "symmetry.symbol", "symmetry.number", "symmetry.hall",
    "spacegroup.hall", "last_updated", "data.last_updated")}

#: The chemical elements (OPTIMADE's valid symbols, without its "X" and "vacancy").
ELEMENTS = frozenset("""H He Li Be B C N O F Ne Na Mg Al Si P S Cl Ar K Ca Sc Ti V Cr Mn Fe Co Ni Cu Zn Ga Ge As
Se Br Kr Rb Sr Y Zr Nb Mo Tc Ru Rh Pd Ag Cd In Sn Sb Te I Xe Cs Ba La Ce Pr Nd Pm Sm Eu Gd Tb Dy Ho Er Tm Yb Lu
Hf Ta W Re Os Ir Pt Au Hg Tl Pb Bi Po At Rn Fr Ra Ac Th Pa U Np Pu Am Cm Bk Cf Es Fm Md No Lr Rf Db Sg Bh Hs Mt
Ds Rg Cn Nh Fl Mc Lv Ts Og""".split())

#: Documents about a material that are not a structure of it.
NOT_STRUCTURES = {"xas": "an XAS spectrum document, not a structure", "phonon": "a phonon document, not a structure"}

# One generator of a short H-M symbol as MP (spglib) writes it: an axis with its screw (6_3 -> 63) and a
# plane after a slash (4_2/m), a rotoinversion (-3), or a mirror / glide plane (m, a, b, c, n, d, e).
_HM_LATTICE = "PIFABCR"
_HM_PART = re.compile(r"-?[1-6](?:_[1-5])?(?:/[mabcnde])?|[mabcnde]")
_FORMULA_PART = re.compile(r"([A-Z][a-z]?)(\d*\.?\d*)")
_GROUP_END = re.compile(r"(\))(\d*\.?\d*)")
_EPS = 1e-6  # counts further than this from an integer are not integral


@dataclass
class Mapped:
    """One document's resource (None when set aside), the fields it could not fill, and why it was set aside."""

    id: str
    resource: dict | None
    unmapped: list[tuple[str, str]] = field(default_factory=list)
    set_aside: str | None = None


def hermann_mauguin(symbol: str) -> str | None:
    """MP's short H-M symbol in OPTIMADE's spacing (``P6_3/mmc`` -> ``P 63/m m c``), None if it is not one."""
    text = symbol.strip()
    if len(text) < 2 or text[0] not in _HM_LATTICE:
        return None
    parts, at = [], 1
    while at < len(text):
        found = _HM_PART.match(text, at)
        if not found:
            return None
        parts.append(found.group(0).replace("_", ""))
        at = found.end()
    return " ".join([text[0], *parts]) if 1 <= len(parts) <= 4 else None


def parse_formula(text: Any) -> dict[str, float] | None:
    """``"Fe2O3"`` -> ``{"Fe": 2, "O": 3}``, ``"Sc2(CN2)3"`` -> ``{"Sc": 2, "C": 3, "N": 6}`` (element symbols,
    counts, round brackets with a count after them); None if ``text`` is not such a formula."""
    if not isinstance(text, str) or not text:
        return None
    stack: list[dict[str, float]] = [{}]
    at = 0
    while at < len(text):
        if text[at] == "(":
            stack.append({})
            at += 1
            continue
        found = (_GROUP_END if text[at] == ")" else _FORMULA_PART).match(text, at)
        if not found or (text[at] != ")" and found.group(1) not in ELEMENTS) or found.group(2) == ".":
            return None
        count = float(found.group(2)) if found.group(2) else 1.0
        if text[at] == ")":
            if len(stack) < 2:
                return None
            group = stack.pop()
            for name, n in group.items():
                stack[-1][name] = stack[-1].get(name, 0.0) + n * count
        else:
            stack[-1][found.group(1)] = stack[-1].get(found.group(1), 0.0) + count
        at = found.end()
    return dict(stack[0]) if len(stack) == 1 and stack[0] else None


def _integers(counts: dict[str, float]) -> dict[str, int] | None:
    """The counts as integers divided by their greatest common divisor; None when one is not integral."""
    if any(not (v > 0 and math.isfinite(v) and abs(v - round(v)) <= _EPS) for v in counts.values()):
        return None
    ints = {k: int(round(v)) for k, v in counts.items()}
    divisor = math.gcd(*ints.values())
    return {k: v // divisor for k, v in ints.items()}


def _write(pairs) -> str:
    return "".join(f"{name}{count if count != 1 else ''}" for name, count in pairs)


def reduced_formula(counts: dict[str, float]) -> str | None:
    """OPTIMADE's ``chemical_formula_reduced``: elements alphabetical, smallest integers, no 1s."""
    reduced = _integers(counts)
    return None if reduced is None else _write(sorted(reduced.items()))


def anonymous_formula(counts: dict[str, float]) -> str | None:
    """OPTIMADE's ``chemical_formula_anonymous``: the reduced counts largest first, named A, B, ..., Z, Aa, Ba ..."""
    reduced = _integers(counts)
    if reduced is None:
        return None
    ordered = sorted(reduced.values(), reverse=True)
    return _write((_anonymous(i), n) for i, n in enumerate(ordered))


def _anonymous(index: int) -> str:
    letter, round_ = chr(ord("A") + index % 26), index // 26
    return letter if not round_ else letter + chr(ord("a") + round_ - 1)


def _timestamp(value: Any) -> str | None:
    if not isinstance(value, datetime):
        return None
    value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    return value.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _vector(value: Any) -> list[float] | None:
    if isinstance(value, list) and len(value) == 3 and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in value):
        return [float(x) for x in value]
    return None


def _structure(structure: Any, unmapped: list) -> dict | None:
    """The lattice, sites and species of a pymatgen Structure dict, or None with the reason in ``unmapped``."""
    what = "cartesian_site_positions, species_at_sites, species, lattice_vectors"
    if not isinstance(structure, dict):
        unmapped.append((what, "the document holds no structure"))
        return None
    lattice = _dict(structure.get("lattice"))
    matrix = lattice.get("matrix")
    vectors = [_vector(r) for r in matrix] if isinstance(matrix, list) and len(matrix) == 3 else []
    rows = [r for r in vectors if r is not None]
    sites = structure.get("sites")
    if len(rows) != 3 or not isinstance(sites, list) or not sites:
        unmapped.append((what, "the structure has no 3x3 lattice matrix or no sites"))
        return None
    positions, names = [], []
    for number, site in enumerate(sites, 1):
        species = site.get("species") if isinstance(site, dict) else None
        if not (isinstance(species, list) and len(species) == 1 and isinstance(species[0], dict)
                and species[0].get("occu", 1) == 1 and species[0].get("element") in ELEMENTS):
            unmapped.append((what, f"site {number} is not one element of occupancy 1 (disorder is not mapped)"))
            return None
        xyz, abc = _vector(site.get("xyz")), _vector(site.get("abc"))
        if xyz is None and abc is not None:  # fractional -> Cartesian: abc . matrix (rows a, b, c)
            xyz = [sum(abc[i] * rows[i][k] for i in range(3)) for k in range(3)]
        if xyz is None:
            unmapped.append((what, f"site {number} has neither xyz nor abc coordinates"))
            return None
        positions.append(xyz)
        names.append(species[0]["element"])
    pbc = lattice.get("pbc", [True, True, True])
    if not (isinstance(pbc, list) and len(pbc) == 3 and all(isinstance(p, bool) for p in pbc)):
        unmapped.append(("dimension_types", f"lattice.pbc is {pbc!r}, not three booleans"))
        pbc = None
    return {"lattice_vectors": rows, "cartesian_site_positions": positions, "species_at_sites": names,
            "species": [{"name": n, "chemical_symbols": [n], "concentration": [1.0]} for n in sorted(set(names))],
            "nsites": len(names), "pbc": pbc}


def _composition(doc: dict, sites: dict | None, unmapped: list) -> dict[str, float] | None:
    if sites is not None:
        return dict(Counter(sites["species_at_sites"]))
    composition = doc.get("composition")
    if isinstance(composition, dict) and composition and all(
            k in ELEMENTS and isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
            for k, v in composition.items()):
        return {k: float(v) for k, v in composition.items()}
    parsed = parse_formula(doc.get("formula_pretty"))
    if parsed is None:
        unmapped.append(("elements, chemical_formula_reduced, chemical_formula_anonymous",
                         "no structure, composition or formula_pretty to read the elements from"))
    return parsed


def to_structure(doc: dict) -> Mapped:
    """The OPTIMADE structures resource of ``doc`` (a materials document read with :data:`PROJECTION`)."""
    ident = str(doc.get("_id"))
    kind = _dict(doc.get("_ingest")).get("type")
    if kind in NOT_STRUCTURES:
        return Mapped(ident, None, set_aside=f"{NOT_STRUCTURES[kind]} (doc_type {kind})")
    unmapped: list[tuple[str, str]] = []
    attrs: dict[str, Any] = {}
    source = _dict(doc.get("_source"))
    if isinstance(source.get("sha256"), str) and isinstance(source.get("line"), int):
        attrs["immutable_id"] = f"{source['sha256']}:{source['line']}"
    else:
        unmapped.append(("immutable_id", "the document names no source file and line (_source)"))
    updated = doc.get("last_updated", _dict(doc.get("data")).get("last_updated"))
    attrs["last_modified"] = _timestamp(updated)  # REQUIRED in the response, null allowed
    if attrs["last_modified"] is None:
        unmapped.append(("last_modified", "no last_updated date in the document" if updated is None else
                         f"last_updated is {type(updated).__name__}, not a date"))
    sites = _structure(doc.get("structure"), unmapped)
    counts = _composition(doc, sites, unmapped)
    if counts is None and sites is None:
        return Mapped(ident, None, unmapped, "no structure and no chemistry: nothing a structures entry describes")
    if counts is not None:
        total = sum(counts.values())
        elements = sorted(counts)
        attrs.update(elements=elements, nelements=len(elements),
                     elements_ratios=[counts[e] / total for e in elements])
        reduced, anonymous = reduced_formula(counts), anonymous_formula(counts)
        if reduced is None:
            unmapped.append(("chemical_formula_reduced", "the composition's counts are not integers"))
        else:
            attrs.update(chemical_formula_reduced=reduced, chemical_formula_anonymous=anonymous)
        attrs.update(_descriptive(doc.get("formula_pretty"), counts, sites, reduced, unmapped))
    if sites is not None:
        pbc = sites.pop("pbc")
        attrs.update(sites)
        if pbc is not None:
            attrs["dimension_types"] = [int(p) for p in pbc]
            attrs["nperiodic_dimensions"] = sum(attrs["dimension_types"])
    elif isinstance(doc.get("nsites"), int) and not isinstance(doc.get("nsites"), bool) and doc["nsites"] > 0:
        attrs["nsites"] = doc["nsites"]
    attrs.update(_symmetry(doc, attrs.get("nperiodic_dimensions"), unmapped))
    attrs["structure_features"] = []
    return Mapped(ident, {"id": ident, "type": "structures", "attributes": attrs}, unmapped)


def _descriptive(pretty: Any, counts: dict, sites: dict | None, reduced: str | None, unmapped: list) -> dict:
    if isinstance(pretty, str) and pretty:
        parsed = parse_formula(pretty)
        if parsed is not None and reduced is not None and reduced_formula(parsed) == reduced:
            return {"chemical_formula_descriptive": pretty}
        unmapped.append(("chemical_formula_descriptive", f"formula_pretty {pretty!r} does not agree with the "
                                                         f"composition ({reduced}): the cell's formula instead"))
    if sites is not None:  # the cell's formula, elements in the order the sites give them
        order = list(dict.fromkeys(sites["species_at_sites"]))
        return {"chemical_formula_descriptive": _write((e, int(counts[e])) for e in order)}
    if reduced is None:
        return {}
    ints = _integers(counts) or {}
    return {"chemical_formula_descriptive": _write((e, ints[e]) for e in counts)}


def _symmetry(doc: dict, periodic: int | None, unmapped: list) -> dict:
    out: dict[str, Any] = {}
    symmetry = _dict(doc.get("symmetry"))
    if periodic not in (None, 3):  # OPTIMADE: MUST be null unless nperiodic_dimensions is 3
        unmapped.append(("space_group_it_number", f"the structure is periodic in {periodic} directions, not 3"))
        return out
    number = symmetry.get("number")
    if isinstance(number, int) and not isinstance(number, bool) and 1 <= number <= 230:
        out["space_group_it_number"] = number
    else:
        unmapped.append(("space_group_it_number", "no space-group number from 1 to 230 (symmetry.number)"))
    symbol = symmetry.get("symbol")
    spaced = hermann_mauguin(symbol) if isinstance(symbol, str) else None
    if spaced:
        out["space_group_symbol_hermann_mauguin"] = spaced
    else:
        unmapped.append(("space_group_symbol_hermann_mauguin", "no space-group symbol (symmetry.symbol)"
                         if symbol is None else f"symmetry.symbol {symbol!r} is not a short H-M symbol read here"))
    legacy = _dict(doc.get("spacegroup"))
    hall = symmetry.get("hall", legacy.get("hall"))
    if isinstance(hall, str) and hall.strip():
        out["space_group_symbol_hall"] = " ".join(hall.split())
    else:
        unmapped.append(("space_group_symbol_hall", "no Hall symbol in the document"))
    return out


def check_request(collection: str, fields: str | None, fmt: str) -> None:
    """``--format optimade`` writes materials, in OPTIMADE's fields: another collection or ``--fields`` is a
    usage error (exit 64), before any work."""
    if collection != "materials":
        raise QueryError("--format", f"{fmt} writes materials as OPTIMADE structures: {collection} holds none; "
                                     "use parquet, arrow or csv")
    if fields:
        raise QueryError("--fields", f"--format {fmt} has OPTIMADE's fields (docs/querying.md, \"OPTIMADE "
                                     "structures\"): leave --fields out")
