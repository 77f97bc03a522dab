#!/usr/bin/env python3
"""Generate physically plausible Materials-Project-style sample data (stdlib only, deterministic).

Writes ``materials.jsonl.gz`` (summary-style material documents) and ``tasks.jsonl.gz``
(VASP task documents linked to them) next to this file, or to ``--out-dir``.  The same
``--seed`` and counts always give byte-identical files.

How the numbers are made (see README.md for the field list):

* formulas are built from real elements and common oxidation states and are charge
  balanced (binary and ternary oxides on common prototypes, phosphates / sulfates /
  silicates, nitrides, chalcogenides, halides and halide perovskites); intermetallics
  and elements are metallic and need no balance;
* ``formation_energy_per_atom`` grows more negative with the electronegativity gap
  between anion and cations (oxides and fluorides most negative), clipped to
  [-4.5, 0.5] eV/atom; intermetallics lie near 0;
* ``band_gap`` is 0 for metals and most intermetallics, rises with ionicity, up to about
  9 eV for fluorides, and transition-metal compounds are often metallic;
* ``volume`` is the sum of per-atom volumes (elemental volumes for metals, Shannon ionic
  radii for ionic compounds) with noise,
  ``density`` = mass / volume exactly, and the lattice matches the crystal system and
  has exactly that volume; space-group numbers are consistent with the crystal system;
* ``energy_above_hull`` is exactly 0 for about a third and small for most others;
* task energies scatter around the material's energy; ``material_id`` is the first of
  its ``task_ids`` (as in MP), and every task names its material.

A few per cent of the materials use legacy names (``pretty_formula``, ``e_above_hull``,
``unit_cell_formula``, nested ``band_gap.search_gap``, ``spacegroup``, ``task_id`` as the
material id, ``{"$oid"}`` / ``{"$date"}`` wrappers) so that normalisation is exercised.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import random
import string
from datetime import UTC, datetime, timedelta
from functools import reduce
from pathlib import Path

AMU_A3_TO_G_CM3 = 1.66053906660  # 1 amu / 1 A^3 in g/cm^3

# symbol: (atomic mass, Pauling electronegativity, metallic/elemental volume A^3/atom,
#          elemental reference energy eV/atom (PBE-like), cation oxidation states)
ELEMENT_DATA: dict[str, tuple[float, float, float, float, tuple[int, ...]]] = {
    "Li": (6.94, 0.98, 21.3, -1.91, (1,)),
    "Na": (22.990, 0.93, 39.3, -1.31, (1,)),
    "K": (39.098, 0.82, 75.0, -1.10, (1,)),
    "Rb": (85.468, 0.82, 92.0, -0.96, (1,)),
    "Cs": (132.905, 0.79, 115.0, -0.85, (1,)),
    "Be": (9.012, 1.57, 8.1, -3.75, (2,)),
    "Mg": (24.305, 1.31, 23.0, -1.60, (2,)),
    "Ca": (40.078, 1.00, 43.0, -2.00, (2,)),
    "Sr": (87.62, 0.95, 56.0, -1.69, (2,)),
    "Ba": (137.327, 0.89, 63.0, -1.92, (2,)),
    "Sc": (44.956, 1.36, 25.0, -6.33, (3,)),
    "Ti": (47.867, 1.54, 17.6, -7.90, (4, 3, 2)),
    "V": (50.942, 1.63, 13.8, -9.08, (5, 4, 3, 2)),
    "Cr": (51.996, 1.66, 12.0, -9.65, (3, 2, 4, 6)),
    "Mn": (54.938, 1.55, 12.2, -9.16, (2, 3, 4)),
    "Fe": (55.845, 1.83, 11.8, -8.47, (3, 2)),
    "Co": (58.933, 1.88, 11.1, -7.11, (2, 3)),
    "Ni": (58.693, 1.91, 10.9, -5.78, (2, 3)),
    "Cu": (63.546, 1.90, 11.8, -4.10, (2, 1)),
    "Zn": (65.38, 1.65, 15.2, -1.26, (2,)),
    "Y": (88.906, 1.22, 33.0, -6.47, (3,)),
    "Zr": (91.224, 1.33, 23.3, -8.55, (4,)),
    "Nb": (92.906, 1.60, 18.0, -10.10, (5, 4, 3)),
    "Mo": (95.95, 2.16, 15.6, -10.85, (6, 4, 3)),
    "Ru": (101.07, 2.20, 13.6, -9.27, (4, 3)),
    "Rh": (102.906, 2.28, 13.7, -7.34, (3,)),
    "Pd": (106.42, 2.20, 14.7, -5.18, (2, 4)),
    "Ag": (107.868, 1.93, 17.1, -2.83, (1,)),
    "Cd": (112.414, 1.69, 21.6, -0.91, (2,)),
    "Hf": (178.49, 1.30, 22.3, -9.96, (4,)),
    "Ta": (180.948, 1.50, 18.0, -11.85, (5,)),
    "W": (183.84, 2.36, 15.9, -12.96, (6, 4)),
    "Re": (186.207, 1.90, 14.7, -12.42, (4, 6, 7)),
    "Os": (190.23, 2.20, 14.0, -11.23, (4,)),
    "Ir": (192.217, 2.20, 14.2, -8.86, (3, 4)),
    "Pt": (195.084, 2.28, 15.1, -6.07, (2, 4)),
    "Au": (196.967, 2.54, 17.0, -3.27, (1, 3)),
    "Hg": (200.592, 2.00, 23.4, -0.30, (2, 1)),
    "Al": (26.982, 1.61, 16.6, -3.75, (3,)),
    "Ga": (69.723, 1.81, 19.6, -3.03, (3,)),
    "In": (114.818, 1.78, 26.2, -2.72, (3, 1)),
    "Tl": (204.38, 1.62, 28.6, -2.36, (1, 3)),
    "Sn": (118.71, 1.96, 27.1, -4.01, (4, 2)),
    "Pb": (207.2, 2.33, 30.3, -3.71, (2, 4)),
    "Bi": (208.980, 2.02, 35.4, -3.88, (3, 5)),
    "B": (10.81, 2.04, 7.3, -6.68, (3,)),
    "Si": (28.085, 1.90, 20.0, -5.42, (4,)),
    "Ge": (72.630, 2.01, 22.7, -4.62, (4, 2)),
    "As": (74.922, 2.18, 21.5, -4.66, (3, 5)),
    "Sb": (121.760, 2.05, 30.2, -4.13, (3, 5)),
    "La": (138.905, 1.10, 37.0, -4.94, (3,)),
    "Ce": (140.116, 1.12, 34.0, -5.93, (3, 4)),
    "Nd": (144.242, 1.14, 34.0, -4.76, (3,)),
    "Sm": (150.36, 1.17, 33.0, -4.72, (3,)),
    "Gd": (157.25, 1.20, 33.0, -4.66, (3,)),
    "P": (30.974, 2.19, 19.0, -5.41, (5,)),
    "S": (32.06, 2.58, 25.8, -4.13, (6,)),
    "C": (12.011, 2.55, 5.7, -9.22, (4,)),
    "Se": (78.971, 2.55, 30.0, -3.50, ()),
    "Te": (127.60, 2.10, 34.0, -3.14, ()),
    "O": (15.999, 3.44, 11.0, -4.95, ()),
    "N": (14.007, 3.04, 12.0, -8.32, ()),
    "F": (18.998, 3.98, 11.0, -1.91, ()),
    "Cl": (35.45, 3.16, 24.0, -1.85, ()),
    "Br": (79.904, 2.96, 30.0, -1.64, ()),
    "I": (126.904, 2.66, 38.0, -1.52, ()),
}

# anion: (charge, formation-energy slope and offset, band-gap slope and offset); both grow
# with the electronegativity gap between the anion and the cations
ANIONS = {
    "O": (-2, 2.6, 0.9, 2.6, 0.4),
    "N": (-3, 1.6, 0.8, 3.0, 0.5),
    "F": (-1, 1.9, 0.9, 4.0, 0.9),
    "Cl": (-1, 1.5, 0.9, 2.4, 0.3),
    "Br": (-1, 1.4, 0.9, 2.2, 0.3),
    "I": (-1, 1.3, 0.9, 2.0, 0.3),
    "S": (-2, 1.6, 0.4, 2.0, 0.2),
    "Se": (-2, 1.3, 0.4, 1.7, 0.2),
    "Te": (-2, 1.0, 0.4, 1.3, 0.2),
}

# Shannon ionic radii (A, six-fold coordination, common oxidation state); an ionic
# compound's volume is sum(4/3 pi r^3) / PACKING (MgO 20, NaCl 45, SiO2 36 A^3 per formula)
IONIC_RADIUS = {
    "Li": 0.76, "Na": 1.02, "K": 1.38, "Rb": 1.52, "Cs": 1.67, "Be": 0.45, "Mg": 0.72, "Ca": 1.00,
    "Sr": 1.18, "Ba": 1.35, "Sc": 0.745, "Ti": 0.605, "V": 0.58, "Cr": 0.615, "Mn": 0.83, "Fe": 0.645,
    "Co": 0.745, "Ni": 0.69, "Cu": 0.73, "Zn": 0.74, "Y": 0.90, "Zr": 0.72, "Nb": 0.64, "Mo": 0.59,
    "Ru": 0.62, "Rh": 0.665, "Pd": 0.86, "Ag": 1.15, "Cd": 0.95, "Hf": 0.71, "Ta": 0.64, "W": 0.60,
    "Re": 0.63, "Os": 0.63, "Ir": 0.625, "Pt": 0.80, "Au": 1.37, "Hg": 1.02, "Al": 0.535, "Ga": 0.62,
    "In": 0.80, "Tl": 1.50, "Sn": 0.69, "Pb": 1.19, "Bi": 1.03, "B": 0.27, "Si": 0.40, "Ge": 0.53,
    "As": 0.46, "Sb": 0.76, "La": 1.032, "Ce": 1.01, "Nd": 0.983, "Sm": 0.958, "Gd": 0.938, "P": 0.38,
    "S": 0.29, "C": 0.16,
    # anions
    "O-": 1.40, "N-": 1.46, "F-": 1.33, "Cl-": 1.81, "Br-": 1.96, "I-": 2.20, "S-": 1.84, "Se-": 1.98,
    "Te-": 2.21,
}
PACKING = 0.65

ALKALI = ["Li", "Na", "K", "Rb", "Cs"]
ALKALINE = ["Be", "Mg", "Ca", "Sr", "Ba"]
TM3D = ["Sc", "Ti", "V", "Cr", "Mn", "Fe", "Co", "Ni", "Cu", "Zn"]
TM4D5D = ["Y", "Zr", "Nb", "Mo", "Ru", "Rh", "Pd", "Ag", "Cd", "Hf", "Ta", "W", "Re", "Os", "Ir", "Pt", "Au", "Hg"]
POST = ["Al", "Ga", "In", "Tl", "Sn", "Pb", "Bi"]
RARE = ["La", "Ce", "Nd", "Sm", "Gd"]
METALLOID = ["B", "Si", "Ge", "As", "Sb"]
CATIONS = ALKALI + ALKALINE + TM3D + TM4D5D + POST + RARE + METALLOID
METALS = ALKALI + ALKALINE + TM3D + TM4D5D + POST + RARE
# d-band metals whose compounds are often metallic in DFT
OPEN_D = {"Ti", "V", "Cr", "Mn", "Fe", "Co", "Ni", "Cu", "Nb", "Mo", "Ru", "Rh", "Pd", "Ta", "W", "Re", "Os", "Ir", "Pt"}
HUBBARD_U = {"Co": 3.32, "Cr": 3.7, "Fe": 5.3, "Mn": 3.9, "Mo": 4.38, "Ni": 6.2, "V": 3.25, "W": 6.2}
ELEMENT_SOLIDS = {  # nonmetal / semimetal elements: (PBE gap of the ground state, volume)
    "C": (4.1, 5.7), "Si": (0.6, 20.0), "Ge": (0.0, 22.7), "B": (1.4, 7.3), "P": (1.5, 19.0),
    "S": (2.5, 25.8), "Se": (1.0, 30.0), "Te": (0.2, 34.0), "As": (0.0, 21.5), "Sb": (0.0, 30.2),
}

SPACE_GROUPS = {  # crystal system -> [(symbol, number)]
    "triclinic": [("P1", 1), ("P-1", 2)],
    "monoclinic": [("P2_1", 4), ("C2", 5), ("Cm", 8), ("P2/m", 10), ("P2_1/m", 11), ("C2/m", 12),
                   ("P2/c", 13), ("P2_1/c", 14), ("C2/c", 15)],
    "orthorhombic": [("P2_12_12_1", 19), ("Pmn2_1", 31), ("Pna2_1", 33), ("Cmc2_1", 36), ("Pbam", 55),
                     ("Pbcn", 60), ("Pbca", 61), ("Pnma", 62), ("Cmcm", 63), ("Cmce", 64), ("Immm", 71)],
    "tetragonal": [("I-4", 82), ("I-42d", 122), ("P4/mmm", 123), ("P4/nmm", 129), ("P4_2/mnm", 136),
                   ("I4/mmm", 139), ("I4/mcm", 140), ("I4_1/amd", 141)],
    "trigonal": [("P3", 143), ("R3", 146), ("P-3", 147), ("R-3", 148), ("R32", 155), ("R3m", 160),
                 ("P-31c", 163), ("P-3m1", 164), ("R-3m", 166), ("R-3c", 167)],
    "hexagonal": [("P6_3", 173), ("P6_3mc", 186), ("P-6m2", 187), ("P6/mmm", 191), ("P6_3/mmc", 194)],
    "cubic": [("P2_13", 198), ("Pa-3", 205), ("Ia-3", 206), ("P4_332", 212), ("F-43m", 216),
              ("I-43m", 217), ("Pm-3m", 221), ("Fm-3m", 225), ("Fd-3m", 227), ("Im-3m", 229)],
}
SPACE_GROUP_RANGES = {  # crystal system -> inclusive range of space-group numbers
    "triclinic": (1, 2), "monoclinic": (3, 15), "orthorhombic": (16, 74), "tetragonal": (75, 142),
    "trigonal": (143, 167), "hexagonal": (168, 194), "cubic": (195, 230),
}
SYSTEM_WEIGHTS = {"triclinic": 12, "monoclinic": 25, "orthorhombic": 20, "tetragonal": 12, "trigonal": 11,
                  "hexagonal": 8, "cubic": 12}
PROTOTYPE_GROUPS = {  # prototypes with their usual space groups
    "perovskite": [("cubic", "Pm-3m", 221), ("orthorhombic", "Pnma", 62), ("trigonal", "R-3c", 167)],
    "spinel": [("cubic", "Fd-3m", 227)],
    "olivine": [("orthorhombic", "Pnma", 62), ("tetragonal", "I4/mmm", 139)],
    "layered": [("trigonal", "R-3m", 166), ("hexagonal", "P6_3/mmc", 194)],
    "scheelite": [("tetragonal", "I4_1/amd", 141), ("monoclinic", "P2/c", 13)],
    "pyrochlore": [("cubic", "Fd-3m", 227)],
    "rocksalt": [("cubic", "Fm-3m", 225)],
    "fluorite": [("cubic", "Fm-3m", 225)],
    "rutile": [("tetragonal", "P4_2/mnm", 136)],
    "corundum": [("trigonal", "R-3c", 167)],
    "wurtzite": [("hexagonal", "P6_3mc", 186)],
    "zincblende": [("cubic", "F-43m", 216)],
}

# family: share of the materials (sums to 1)
FAMILIES = [
    ("binary_oxide", 0.13), ("ternary_oxide", 0.22), ("polyanion", 0.10), ("nitride", 0.07),
    ("chalcogenide", 0.10), ("halide", 0.10), ("halide_perovskite", 0.04), ("intermetallic", 0.14),
    ("ternary_intermetallic", 0.05), ("element", 0.05),
]


# --------------------------------------------------------------------------- formulas
def reduce_counts(counts: dict[str, int]) -> tuple[dict[str, int], int]:
    """(reduced composition, formula units)."""
    factor = reduce(math.gcd, counts.values())
    return {el: n // factor for el, n in counts.items()}, factor


def formula_of(counts: dict[str, int]) -> str:
    """Formula with elements ordered by electronegativity (then symbol), as pymatgen does."""
    parts = []
    for el in sorted(counts, key=lambda e: (ELEMENT_DATA[e][1], e)):
        n = counts[el]
        parts.append(el if n == 1 else f"{el}{n}")
    return "".join(parts)


def anonymous_formula(counts: dict[str, int]) -> str:
    amounts = sorted(counts.values())
    return "".join(letter + (str(n) if n != 1 else "") for letter, n in zip(string.ascii_uppercase, amounts))


def charge_balanced(counts: dict[str, int | float]) -> bool:
    """True if some choice of the tabulated oxidation states makes ``counts`` neutral."""
    options = []
    for el, n in counts.items():
        # S is -2 in sulfides and +6 in sulfates: an element may take any state it has
        states = ([ANIONS[el][0]] if el in ANIONS else []) + list(ELEMENT_DATA[el][4])
        if not states:
            return False
        options.append([s * n for s in states])
    totals = {0}
    for opts in options:
        totals = {t + o for t in totals for o in opts}
    return any(abs(t) < 1e-9 for t in totals)


def _balance(rng: random.Random, cations: list[tuple[str, int]], anion_charge: int,
             max_count: int = 4) -> tuple[list[int], int] | None:
    """Small cation counts and the anion count making the formula neutral."""
    for _ in range(30):
        ns = [rng.randint(1, max_count) for _ in cations]
        positive = sum(n * q for n, (_, q) in zip(ns, cations))
        if positive % -anion_charge == 0:
            return ns, positive // -anion_charge
    return None


def pick_cation(rng: random.Random, pool: list[str], exclude: set[str] = frozenset()) -> tuple[str, int]:
    choices = [el for el in pool if el not in exclude and ELEMENT_DATA[el][4]]
    el = rng.choice(choices)
    return el, rng.choice(ELEMENT_DATA[el][4])


def make_composition(rng: random.Random, family: str) -> tuple[dict[str, int], str | None, str]:
    """(reduced counts, prototype or None, anion or '' ) for one family; always charge balanced."""
    while True:
        if family == "binary_oxide":
            el, q = pick_cation(rng, CATIONS)
            n_o, n_m = q, 2
            counts = {el: n_m, "O": n_o}
            proto = {1: None, 2: "rocksalt", 3: "corundum", 4: rng.choice(["rutile", "fluorite"])}.get(q)
            red, _ = reduce_counts(counts)
            return red, proto, "O"
        if family == "ternary_oxide":
            proto, (na, nb, no) = rng.choice([("perovskite", (1, 1, 3)), ("spinel", (1, 2, 4)),
                                               ("olivine", (2, 1, 4)), ("layered", (1, 1, 2)),
                                               ("scheelite", (1, 1, 4)), ("pyrochlore", (2, 2, 7))])
            a, qa = pick_cation(rng, ALKALI + ALKALINE + RARE + ["Y", "Bi", "Pb"])
            b, qb = pick_cation(rng, TM3D + TM4D5D + POST + ["Si", "Ge", "Sb"], {a})
            if na * qa + nb * qb != 2 * no:
                continue
            red, _ = reduce_counts({a: na, b: nb, "O": no})
            return red, proto, "O"
        if family == "polyanion":
            x, q_group = rng.choice([("P", 3), ("S", 2), ("Si", 4)])
            a, qa = pick_cation(rng, ALKALI + ALKALINE)
            m, qm = pick_cation(rng, TM3D + ["Al", "Ga", "In", "Y", "Zr", "Ti"], {a})
            found = None
            for na in range(1, 4):
                for nm in range(1, 3):
                    if (na * qa + nm * qm) % q_group == 0:
                        found = (na, nm, (na * qa + nm * qm) // q_group)
                        break
                if found:
                    break
            if not found or found[2] > 3:
                continue
            na, nm, nx = found
            red, _ = reduce_counts({a: na, m: nm, x: nx, "O": 4 * nx})
            return red, None, "O"
        if family == "nitride":
            cations = [pick_cation(rng, ALKALI + ALKALINE + TM3D + ["Al", "Ga", "In", "Si", "Ge", "Zr", "Hf",
                                                                      "Nb", "Ta", "Y", "La"])]
            if rng.random() < 0.35:
                cations.append(pick_cation(rng, ALKALI + ALKALINE, {cations[0][0]}))
            bal = _balance(rng, cations, -3, 3)
            if bal is None:
                continue
            counts = {el: n for (el, _), n in zip(cations, bal[0])}
            counts["N"] = bal[1]
            red, _ = reduce_counts(counts)
            return red, ("wurtzite" if len(red) == 2 and red == {cations[0][0]: 1, "N": 1} else None), "N"
        if family == "chalcogenide":
            anion = rng.choices(["S", "Se", "Te"], weights=[5, 3, 2])[0]
            cations = [pick_cation(rng, ALKALI + ALKALINE + TM3D + TM4D5D + POST + RARE)]
            if rng.random() < 0.3:
                cations.append(pick_cation(rng, ALKALI + ALKALINE + ["Cu", "Ag"], {cations[0][0]}))
            bal = _balance(rng, cations, -2, 3)
            if bal is None:
                continue
            counts = {el: n for (el, _), n in zip(cations, bal[0])}
            counts[anion] = bal[1]
            red, _ = reduce_counts(counts)
            proto = "zincblende" if len(red) == 2 and set(red.values()) == {1} and rng.random() < 0.5 else None
            return red, proto, anion
        if family == "halide":
            anion = rng.choices(["F", "Cl", "Br", "I"], weights=[4, 3, 2, 2])[0]
            el, q = pick_cation(rng, ALKALI + ALKALINE + TM3D + POST + RARE + ["Y", "Zr", "Ag"])
            counts = {el: 1, anion: q}
            proto = "rocksalt" if q == 1 else ("fluorite" if q == 2 and anion == "F" and rng.random() < 0.5 else None)
            return counts, proto, anion
        if family == "halide_perovskite":
            anion = rng.choice(["F", "Cl", "Br", "I"])
            a = rng.choice(["K", "Rb", "Cs", "Na"])
            b = rng.choice(["Pb", "Sn", "Ge", "Mg", "Ca", "Sr", "Mn", "Fe", "Co", "Ni", "Zn", "Cd"])
            na, nx = rng.choice([(1, 3), (2, 4)])
            return {a: na, b: 1, anion: nx}, "perovskite" if na == 1 else None, anion
        if family == "intermetallic":
            a = rng.choice(METALS)
            b = rng.choice([m for m in METALS if m != a])
            na, nb = rng.choice([(1, 1), (1, 1), (1, 2), (1, 3), (2, 3), (1, 5), (3, 1), (2, 1)])
            red, _ = reduce_counts({a: na, b: nb})
            return red, None, ""
        if family == "ternary_intermetallic":
            a, b, c = rng.sample(METALS, 3)
            na, nb, nc = rng.choice([(2, 1, 1), (1, 1, 1), (1, 2, 2), (1, 1, 2)])
            red, _ = reduce_counts({a: na, b: nb, c: nc})
            return red, None, ""
        if family == "element":
            el = rng.choice(METALS + list(ELEMENT_SOLIDS))
            return {el: 1}, None, ""
        raise ValueError(family)


# --------------------------------------------------------------------------- properties
def _mean_cation_x(counts: dict[str, int], anion: str) -> float:
    """Composition-weighted electronegativity of everything but the anion."""
    cats = {el: n for el, n in counts.items() if el != anion}
    total = sum(cats.values())
    return sum(ELEMENT_DATA[el][1] * n for el, n in cats.items()) / total


def formation_energy(rng: random.Random, counts: dict[str, int], anion: str, family: str) -> float:
    if family == "element":
        return 0.0
    if not anion:
        xs = [ELEMENT_DATA[el][1] for el in counts]
        spread = max(xs) - min(xs)
        value = -(0.15 + 0.45 * spread) * rng.uniform(0.3, 1.3) + rng.gauss(0, 0.12)
        return max(-1.5, min(0.5, value))
    slope, offset = ANIONS[anion][1], ANIONS[anion][2]
    delta_x = ELEMENT_DATA[anion][1] - _mean_cation_x(counts, anion)
    value = -slope * max(delta_x - offset, 0.05) + rng.gauss(0, 0.15)
    return -_soft_limit(-value, 4.0, 4.5)


def _soft_limit(value: float, knee: float, limit: float) -> float:
    """``value`` below ``knee``; above it, bent smoothly towards ``limit`` (no pile-up at a clip)."""
    if value <= knee:
        return value
    width = limit - knee
    return knee + width * math.tanh((value - knee) / width)


def band_gap(rng: random.Random, counts: dict[str, int], anion: str, family: str) -> float:
    if family == "element":
        (el,) = counts
        gap = ELEMENT_SOLIDS.get(el, (0.0, 0.0))[0]
        return max(0.0, gap + (rng.gauss(0, 0.1) if gap else 0.0))
    if not anion:
        return 0.0 if rng.random() < 0.92 else rng.uniform(0.05, 0.8)
    slope, offset = ANIONS[anion][3], ANIONS[anion][4]
    delta_x = ELEMENT_DATA[anion][1] - _mean_cation_x(counts, anion)
    gap = slope * (delta_x - offset) + rng.gauss(0, 0.35)
    if any(el in OPEN_D for el in counts):
        if rng.random() < (0.7 if anion == "N" else 0.4):
            return 0.0
        gap *= 0.6
    return max(0.0, _soft_limit(gap, 8.5, 9.5))


def energy_above_hull(rng: random.Random) -> float:
    if rng.random() < 0.35:
        return 0.0
    return min(0.8, rng.expovariate(1 / 0.06))


def atom_volume(el: str, anion: str, family: str) -> float:
    if family == "element":
        return ELEMENT_SOLIDS.get(el, (0.0, ELEMENT_DATA[el][2]))[1]
    if not anion:
        return ELEMENT_DATA[el][2]
    radius = IONIC_RADIUS[el + "-"] if el == anion else IONIC_RADIUS[el]
    return 4 / 3 * math.pi * radius ** 3 / PACKING


# --------------------------------------------------------------------------- structure
def lattice_for(rng: random.Random, system: str, volume: float) -> dict:
    alpha = beta = gamma = 90.0
    if system == "cubic":
        ra, rb = 1.0, 1.0
    elif system == "tetragonal":
        ra, rb = 1.0, rng.uniform(0.6, 2.6)
    elif system in ("hexagonal", "trigonal"):
        ra, rb = 1.0, rng.uniform(0.8, 3.5)
        gamma = 120.0
    elif system == "orthorhombic":
        ra, rb = rng.uniform(0.7, 1.6), rng.uniform(0.7, 2.2)
    elif system == "monoclinic":
        ra, rb = rng.uniform(0.7, 1.6), rng.uniform(0.7, 2.2)
        beta = rng.uniform(92.0, 118.0)
    else:
        ra, rb = rng.uniform(0.7, 1.5), rng.uniform(0.7, 1.8)
        alpha, beta, gamma = rng.uniform(75, 105), rng.uniform(75, 105), rng.uniform(75, 105)
    ca, cb, cg = (math.cos(math.radians(x)) for x in (alpha, beta, gamma))
    sg = math.sin(math.radians(gamma))
    shape = math.sqrt(1 - ca * ca - cb * cb - cg * cg + 2 * ca * cb * cg)
    a = (volume / (ra * rb * shape)) ** (1 / 3)
    b, c = a * ra, a * rb
    cx = c * cb
    cy = c * (ca - cb * cg) / sg
    cz = math.sqrt(max(c * c - cx * cx - cy * cy, 0.0))
    matrix = [[a, 0.0, 0.0], [b * cg, b * sg, 0.0], [cx, cy, cz]]
    return {
        "matrix": [[round(x, 8) for x in row] for row in matrix],
        "pbc": [True, True, True],
        "a": round(a, 6), "b": round(b, 6), "c": round(c, 6),
        "alpha": round(alpha, 4), "beta": round(beta, 4), "gamma": round(gamma, 4),
        "volume": volume,
    }


def sites_for(rng: random.Random, cell: dict[str, int]) -> list[dict]:
    species = [el for el in sorted(cell, key=lambda e: (ELEMENT_DATA[e][1], e)) for _ in range(cell[el])]
    n = len(species)
    k = max(1, math.ceil(n ** (1 / 3)))
    cells = rng.sample(range(k ** 3), n)  # one atom per grid cell: no two atoms on top of each other
    sites = []
    for el, idx in zip(species, cells):
        i, j, l = idx // (k * k), (idx // k) % k, idx % k
        abc = [round((g + 0.5 + rng.uniform(-0.25, 0.25)) / k, 5) for g in (i, j, l)]
        sites.append({"species": [{"element": el, "occu": 1}], "abc": abc, "properties": {}, "label": el})
    return sites


# --------------------------------------------------------------------------- documents
def _iso(dt: datetime) -> str:
    return dt.isoformat(timespec="milliseconds")


def _random_time(rng: random.Random, start: datetime, end: datetime) -> datetime:
    return start + timedelta(seconds=rng.uniform(0, (end - start).total_seconds()))


def _choose_symmetry(rng: random.Random, proto: str | None, nelements: int) -> tuple[str, str, int]:
    if proto and rng.random() < 0.8:
        return rng.choice(PROTOTYPE_GROUPS[proto])
    systems = list(SYSTEM_WEIGHTS)
    system = rng.choices(systems, weights=[SYSTEM_WEIGHTS[s] for s in systems])[0]
    symbol, number = rng.choice(SPACE_GROUPS[system])
    return system, symbol, number


def _formula_units(rng: random.Random, atoms_per_fu: int) -> int:
    options = [z for z in (1, 2, 3, 4, 6, 8) if z * atoms_per_fu <= 28] or [1]
    weights = [6, 6, 1, 4, 1, 2][: len(options)]
    return rng.choices(options, weights=weights)[0]


def _run_type(counts: dict[str, int]) -> tuple[str, dict[str, float]]:
    if ("O" in counts or "F" in counts) and any(el in HUBBARD_U for el in counts):
        return "GGA+U", {el: HUBBARD_U[el] for el in counts if el in HUBBARD_U}
    return "GGA", {}


def build(seed: int = 20240611, n_materials: int = 3000) -> tuple[list[dict], list[dict]]:
    """(materials, tasks) as JSON-ready dicts; deterministic for a seed."""
    rng = random.Random(seed)
    families = [name for name, _ in FAMILIES]
    weights = [w for _, w in FAMILIES]
    n_tasks_per = [rng.choices([1, 2, 3], weights=[3, 4, 3])[0] for _ in range(n_materials)]
    ids = rng.sample(range(1000, 3_500_000), sum(n_tasks_per))
    start, end = datetime(2012, 1, 1, tzinfo=UTC), datetime(2024, 6, 1, tzinfo=UTC)
    materials, tasks = [], []
    cursor = 0
    for index in range(n_materials):
        family = rng.choices(families, weights=weights)[0]
        reduced, proto, anion = make_composition(rng, family)
        atoms_per_fu = sum(reduced.values())
        z = _formula_units(rng, atoms_per_fu)
        cell = {el: n * z for el, n in reduced.items()}
        nsites = sum(cell.values())
        elements = sorted(cell)
        mass = sum(ELEMENT_DATA[el][0] * n for el, n in cell.items())
        volume = sum(atom_volume(el, anion, family) * n for el, n in cell.items()) * rng.uniform(0.97, 1.10)
        volume = round(volume, 6)
        density = mass * AMU_A3_TO_G_CM3 / volume
        system, symbol, number = _choose_symmetry(rng, proto, len(elements))
        e_form = formation_energy(rng, reduced, anion, family)
        e_hull = energy_above_hull(rng)
        if family == "element":
            e_form = e_hull
        gap = band_gap(rng, reduced, anion, family)
        if family == "element" and e_hull > 0:
            gap = max(0.0, gap * rng.uniform(0.5, 1.0))
        reference = sum(ELEMENT_DATA[el][3] * n for el, n in cell.items()) / nsites
        energy_per_atom = reference + e_form
        run_type, hubbards = _run_type(cell)

        task_ids = [f"mp-{i}" for i in ids[cursor: cursor + n_tasks_per[index]]]
        cursor += n_tasks_per[index]
        material_id = task_ids[0]
        task_times = sorted(_random_time(rng, start, end) for _ in task_ids)
        updated = task_times[-1] + timedelta(days=rng.uniform(1, 400))
        lattice = lattice_for(rng, system, volume)
        structure = {"@module": "pymatgen.core.structure", "@class": "Structure", "charge": 0,
                     "lattice": lattice, "properties": {}, "sites": sites_for(rng, cell)}
        formula = formula_of(reduced)
        is_direct = gap > 0 and rng.random() < 0.4

        style = rng.random()
        if style < 0.03:  # a legacy `materials` collection document
            material = {
                "_id": {"$oid": f"{rng.getrandbits(96):024x}"},
                "task_id": material_id,
                "pretty_formula": formula,
                "full_formula": formula_of(cell),
                "unit_cell_formula": {el: float(n) for el, n in cell.items()},
                "reduced_cell_formula": {el: float(n) for el, n in reduced.items()},
                "anonymous_formula": {k: float(v) for k, v in zip(string.ascii_uppercase, sorted(reduced.values()))},
                "elements": elements, "nelements": len(elements), "chemsys": "-".join(elements),
                "nsites": nsites, "volume": volume, "density": density,
                "spacegroup": {"crystal_system": system, "symbol": symbol, "number": number, "source": "spglib"},
                "formation_energy_per_atom": e_form, "e_above_hull": e_hull,
                "band_gap": {"search_gap": {"band_gap": gap, "is_direct": is_direct}},
                "final_energy_per_atom": energy_per_atom, "final_energy": energy_per_atom * nsites,
                "structure": structure, "task_ids": task_ids,
                "last_updated": {"$date": int(updated.timestamp() * 1000)},
            }
        else:
            material = {
                "material_id": material_id,
                "formula_pretty": formula,
                "formula_anonymous": anonymous_formula(reduced),
                "composition": {el: float(n) for el, n in cell.items()},
                "composition_reduced": {el: float(n) for el, n in reduced.items()},
                "elements": elements, "nelements": len(elements), "chemsys": "-".join(elements),
                "nsites": nsites, "volume": volume, "density": density,
                "density_atomic": volume / nsites,
                "symmetry": {"crystal_system": system, "symbol": symbol, "number": number,
                             "source": "spglib", "symprec": 0.1},
                "structure": structure,
                "energy_per_atom": energy_per_atom,
                "formation_energy_per_atom": e_form,
                "energy_above_hull": e_hull,
                "is_stable": e_hull == 0.0,
                "band_gap": gap, "is_gap_direct": is_direct, "is_metal": gap == 0.0,
                "theoretical": rng.random() < 0.55,
                "task_ids": task_ids,
                "last_updated": _iso(updated),
                "origins": [{"name": "structure", "task_id": material_id}],
            }
            if style < 0.07:  # renamed fields of older summary documents
                material["pretty_formula"] = material.pop("formula_pretty")
                material["e_above_hull"] = material.pop("energy_above_hull")
        materials.append(material)

        for n, (task_id, completed) in enumerate(zip(task_ids, task_times)):
            if n == 0:
                task_type = "Structure Optimization"
            else:
                task_type = rng.choices(["Static", "NSCF Uniform", "NSCF Line", "Structure Optimization"],
                                        weights=[5, 2, 2, 1])[0]
            t_run = run_type if rng.random() > 0.1 else "r2SCAN"
            if t_run == "r2SCAN":
                e_task = energy_per_atom * 1.12 - 0.2 + rng.gauss(0, 0.02)  # other functional, other scale
            elif task_type == "Structure Optimization":
                e_task = energy_per_atom + rng.uniform(0.0, 0.01)
            else:
                e_task = energy_per_atom + rng.gauss(0, 0.002)
            relax = task_type == "Structure Optimization"
            params = {
                "ENCUT": 680 if t_run == "r2SCAN" else 520, "EDIFF": 1e-05 if not relax else 5e-05,
                "EDIFFG": -0.05 if relax else None, "ISMEAR": 0 if relax else -5, "SIGMA": 0.05,
                "ISPIN": 2, "IBRION": 2 if relax else -1, "NSW": 99 if relax else 0,
                "ICHARG": 11 if task_type.startswith("NSCF") else 2, "LORBIT": 11, "LREAL": "Auto",
                "PREC": "Accurate", "LASPH": True, "LDAU": t_run == "GGA+U",
            }
            if t_run == "r2SCAN":
                params["METAGGA"] = "R2scan"
                params["KSPACING"] = round(rng.uniform(0.22, 0.44), 4)
            if t_run == "GGA+U":
                params["LDAUU"] = [hubbards.get(el, 0.0) for el in elements]
            params = {k: v for k, v in params.items() if v is not None}
            failed = rng.random() < 0.01
            task = {
                "task_id": task_id,
                "material_id": material_id,
                "formula_pretty": formula,
                "elements": elements, "nelements": len(elements), "chemsys": "-".join(elements),
                "nsites": nsites,
                "composition": {el: float(n) for el, n in cell.items()},
                "task_type": task_type,
                "run_type": t_run,
                "calc_type": f"{t_run} {task_type}",
                "state": "failed" if failed else "successful",
                "input": {
                    "parameters": params,
                    "is_hubbard": t_run == "GGA+U",
                    "hubbards": hubbards if t_run == "GGA+U" else {},
                    "potcar_spec": [{"titel": f"PAW_PBE {el}"} for el in elements],
                },
                "output": {
                    "energy": e_task * nsites,
                    "energy_per_atom": e_task,
                    "bandgap": max(0.0, gap + rng.gauss(0, 0.03)) if gap > 0 else 0.0,
                    "density": density * (1 + (rng.gauss(0, 0.01) if relax else 0.0)),
                    "is_gap_direct": is_direct,
                },
                "completed_at": completed.strftime("%Y-%m-%d %H:%M:%S.%f"),
                "last_updated": _iso(completed + timedelta(hours=rng.uniform(0.5, 48))),
                "tags": [f"batch_{completed.year}"],
            }
            if rng.random() < 0.03:  # an older export: $date wrapper
                task["last_updated"] = {"$date": int((completed + timedelta(hours=1)).timestamp() * 1000)}
            tasks.append(task)
    order = list(range(len(tasks)))
    rng.shuffle(order)
    return materials, [tasks[i] for i in order]


def write_jsonl_gz(path: Path, docs: list[dict]) -> None:
    """Byte-identical for the same documents: fixed gzip header (no name, mtime 0)."""
    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0,
                                                compresslevel=9) as fh:
        for doc in docs:
            fh.write(json.dumps(doc, separators=(",", ":"), allow_nan=False).encode("utf-8"))
            fh.write(b"\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=20240611)
    parser.add_argument("--materials", type=int, default=3000, help="number of materials (tasks: about twice)")
    parser.add_argument("--out-dir", type=Path, default=Path(__file__).resolve().parent)
    args = parser.parse_args(argv)
    materials, tasks = build(args.seed, args.materials)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    write_jsonl_gz(args.out_dir / "materials.jsonl.gz", materials)
    write_jsonl_gz(args.out_dir / "tasks.jsonl.gz", tasks)
    print(f"wrote {len(materials)} materials and {len(tasks)} tasks to {args.out_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
