"""The curated collections: what analysts query, field by field, and the indexes their questions need.

An analyst who never runs the pipeline reads four data collections (``hits``,
``searches``, ``materials``, ``tasks``) and the outputs of the analyses.  Each is
declared here once as a :class:`Curated`:

* its **fields**: the name an analyst uses (``evalue``), the document path it reads
  (``hsps.0.evalue``: the first, best HSP; an integer component indexes a list), its
  kind (one of :data:`ingest.schema.KINDS`) and what it means;
* the **questions** it answers, each with an example in the ``--where`` language of
  ``sci-ingest query`` and the index that answers it (or none, said so);
* the **indexes** those questions need, in order.

Everything else derives from these declarations: :data:`ingest.store.catalog.QUERY_INDEXES`
(what a load builds, see :mod:`ingest.load.indexes`), the field names and kinds of
``sci-ingest query`` / ``export`` (:mod:`ingest.query`), their default columns, the
Arrow schema of an export, ``sci-ingest query COLLECTION --fields-list`` and the tables of
docs/querying.md (:func:`markdown`; ``tests/test_curated.py`` checks the page against it).

The analyses' outputs are not repeated here: :func:`get` and :func:`all_curated`
derive them from each :class:`analytics.registry.Analysis` (``output``,
``output_types``, ``questions``, ``indexes``), so an analysis added to the registry is
queryable with nothing else to write.  The registry is imported only when an output
is asked for (``ingest.store.catalog`` imports this module and must stay light).

Rules the indexes keep: none is unique (a unique index must start with the shard key
on a sharded cluster, and these collections are sharded on hashed ``_id`` /
``search_id``, see :data:`ingest.store.catalog.SHARD_KEYS`); an index is only declared for a
question whose filter it serves; ``[("query_id", 1)]`` became ``[("query_id", 1),
("hsps.0.evalue", 1)]`` and ``[("elements", 1)]`` became ``[("elements", 1),
("band_gap", 1)]``: the longer index answers every query of the shorter one (MongoDB's
prefix rule; on SecantusDB checked by ``explain`` in ``tests/test_curated.py``) and the
shorter one would only cost every insert.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from ingest.errors import UsageError
from ingest.plugins import curated_outputs
from ingest.schema import KINDS, OUTPUT_DTYPES, Column
from ingest.store import names as _names

__all__ = ["Field", "Question", "Curated", "DATA", "get", "all_curated", "names", "query_indexes", "markdown",
           "UnknownCollection", "dtype_kind"]


Index = tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Field:
    """One field of a curated collection: analyst name, document path, kind, meaning."""

    name: str
    path: str
    kind: str
    meaning: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"field {self.name}: unknown kind {self.kind!r}; expected one of {KINDS}")
        if not self.name.isidentifier():
            raise ValueError(f"field name {self.name!r} is not an identifier")


@dataclass(frozen=True)
class Question:
    """A question analysts ask of a collection, an example ``--where`` and the index that answers it."""

    text: str
    where: str | None = None
    index: Index | None = None
    sort: str | None = None  # example --sort


@dataclass(frozen=True)
class Curated:
    """A collection analysts query: its fields, questions and indexes."""

    name: str
    one_per: str
    fields: tuple[Field, ...]
    questions: tuple[Question, ...] = ()
    default_fields: tuple[str, ...] = ()
    extra_indexes: tuple[Index, ...] = ()  # indexes no single question names (analysis outputs)
    source: str = "data"  # "data" or the analysis that writes it
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        seen: dict[str, str] = {}
        for f in self.fields:
            if f.name in seen:
                raise ValueError(f"{self.name}: field {f.name} declared twice")
            seen[f.name] = f.path
        paths = [f.path for f in self.fields]
        for p in paths:  # a path may not be both a value and a container of another
            if any(q.startswith(p + ".") for q in paths):
                raise ValueError(f"{self.name}: path {p} is both a field and holds another field")
        for name in self.default_fields:
            if name not in seen:
                raise ValueError(f"{self.name}: default field {name} is not declared")
        for ix in self.indexes:
            if any(d not in (1, -1) for _, d in ix):
                raise ValueError(f"{self.name}: index {ix} has a direction other than 1 / -1")

    @property
    def by_name(self) -> dict[str, Field]:
        return {f.name: f for f in self.fields}

    @property
    def by_path(self) -> dict[str, Field]:
        return {f.path: f for f in self.fields}

    @property
    def indexes(self) -> tuple[Index, ...]:
        """The questions' indexes then the extra ones, each once, in order."""
        found: dict[Index, None] = {}
        for q in self.questions:
            if q.index:
                found.setdefault(tuple(q.index), None)
        for ix in self.extra_indexes:
            found.setdefault(tuple(ix), None)
        return tuple(found)

    @property
    def defaults(self) -> tuple[str, ...]:
        return self.default_fields or tuple(f.name for f in self.fields)

    def column(self, name: str, *, kind: str | None = None, rename: str | None = None) -> Column:
        """Field ``name`` as an analysis reads it (:class:`ingest.schema.Column`): its path and kind as
        declared here, once.  ``kind`` reads it as another kind (``float64`` for an integer score the
        analysis computes quantiles of); ``rename`` names its column in the frame otherwise."""
        field = self.field(name)
        if kind is not None and kind not in KINDS:
            raise ValueError(f"{self.name}.{name}: unknown kind {kind!r}; expected one of {KINDS}")
        return Column(rename or field.name, field.path, kind or field.kind)

    def columns(self, *names: str) -> tuple[Column, ...]:
        """Fields ``names`` as an analysis reads them, in that order (see :meth:`column`)."""
        return tuple(self.column(name) for name in names)

    def field(self, name: str) -> Field:
        try:
            return self.by_name[name]
        except KeyError:
            close = difflib.get_close_matches(name, list(self.by_name), n=3, cutoff=0.6)
            hint = f"did you mean {', '.join(close)}?" if close else f"fields: {', '.join(self.by_name)}"
            raise KeyError(f"{self.name} has no field {name!r}; {hint}") from None

    def describe(self) -> dict:
        return {"collection": self.name, "one_per": self.one_per, "source": self.source,
                "fields": [{"name": f.name, "path": f.path, "kind": f.kind, "meaning": f.meaning} for f in self.fields],
                "questions": [{"question": q.text, "where": q.where, "sort": q.sort,
                               "index": index_name(q.index) if q.index else None} for q in self.questions],
                "indexes": [index_name(ix) for ix in self.indexes], "notes": list(self.notes)}


def index_name(keys) -> str:
    """MongoDB's default name of an index: ``query_id_1_hsps.0.evalue_1``."""
    return "_".join(f"{f}_{d}" for f, d in keys)


def _s(name, path, meaning):
    return Field(name, path, "string", meaning)


def _f(name, path, meaning):
    return Field(name, path, "float64", meaning)


def _i(name, path, meaning):
    return Field(name, path, "int64", meaning)


def _b(name, path, meaning):
    return Field(name, path, "bool", meaning)


def _l(name, path, meaning):
    return Field(name, path, "list<string>", meaning)


# ------------------------------------------------------------------ the data collections
HITS = Curated(
    name=_names.HITS,
    one_per="hit of a query (its first HSP is the best: `evalue`, `identity`, ... are that HSP's)",
    fields=(
        _s("id", "_id", "the hit's key: `<search_id>:<rank>`"),
        _s("search_id", "search_id", "the search (query block) it belongs to: `searches.search_id`"),
        _s("query_id", "query_id", "the query sequence's identifier"),
        _s("hit_id", "hit_id", "the library sequence found"),
        _s("hit_description", "hit_description", "the library sequence's description"),
        _s("library", "library", "the library searched, as the program named it"),
        _s("program", "program", "the FASTA-suite program (ssearch36, fasta36, ...)"),
        _i("rank", "rank", "1-based rank in its search (1 = best)"),
        _i("hit_length", "hit_length", "length of the library sequence"),
        _b("aligned", "aligned", "the file holds its alignment (false: best-scores list only)"),
        _f("evalue", "hsps.0.evalue", "E-value of the best HSP"),
        _f("bits", "hsps.0.bits", "bit score of the best HSP"),
        _i("score", "hsps.0.score", "raw score of the best HSP"),
        _i("opt_score", "hsps.0.opt_score", "optimised (opt) score of the best HSP"),
        _f("z_score", "hsps.0.z_score", "z-score of the best HSP"),
        _f("identity", "hsps.0.identity", "identity of the best HSP, a fraction (0.9 = 90 %)"),
        _f("similarity", "hsps.0.similarity", "similarity of the best HSP, a fraction"),
        _i("overlap", "hsps.0.overlap", "aligned length of the best HSP"),
        _i("query_start", "hsps.0.query_start", "first aligned query residue (1-based)"),
        _i("query_end", "hsps.0.query_end", "last aligned query residue (inclusive)"),
        _i("hit_start", "hsps.0.hit_start", "first aligned library residue (1-based)"),
        _i("hit_end", "hsps.0.hit_end", "last aligned library residue (inclusive)"),
        _s("source_path", "source.path", "the file it was loaded from"),
        _s("source_sha256", "source.sha256", "that file's content (sha256)"),
    ),
    questions=(
        Question("the hits of search S, in rank order", 'search_id == "<search_id>"',
                 (("search_id", 1), ("rank", 1)), sort="rank"),
        Question("the hits of query X with an E-value below E, best first",
                 'query_id == "sp|P62158|CALM_HUMAN" and evalue < 1e-20', (("query_id", 1), ("hsps.0.evalue", 1)),
                 sort="evalue"),
        Question("which queries found library sequence Y", 'hit_id == "TPHUCS"', (("hit_id", 1),)),
        Question("hits of any query with an E-value below E and an identity above I: no index (a collection "
                 "scan; an index on every hit's E-value would slow every load for one question)",
                 "evalue < 1e-20 and identity > 0.9"),
    ),
    default_fields=("query_id", "hit_id", "rank", "evalue", "identity", "bits", "library"),
)

SEARCHES = Curated(
    name=_names.SEARCHES,
    one_per="query block of a `-m 10` file",
    fields=(
        _s("search_id", "_id", "the search's key: `<sha256 of the file, 20 hex>:<query_index>`"),
        _s("query_id", "query_id", "the query sequence's identifier"),
        _s("query_description", "query_description", "the query's description"),
        _i("query_length", "query_length", "the query's length"),
        _s("query_type", "query_type", "protein or DNA"),
        _i("query_index", "query_index", "1-based position of the block in its file"),
        _s("program", "program", "the FASTA-suite program"),
        _s("version", "version", "the program's version"),
        _s("library", "library", "the library searched"),
        _s("library_type", "library_type", "protein or DNA"),
        _i("library_sequences", "library_sequences", "sequences in the library"),
        _i("library_residues", "library_residues", "residues in the library"),
        _i("n_hits", "n_hits", "hits the search reported (documents in `hits`)"),
        _s("command", "command", "the command line the program recorded"),
        _s("source_path", "source.path", "the file it was loaded from"),
        _s("source_sha256", "source.sha256", "that file's content (sha256)"),
    ),
    questions=(
        Question("the searches of query X (every library and program that searched it)",
                 'query_id == "sp|P62158|CALM_HUMAN"', (("query_id", 1),)),
        Question("the searches loaded from file F", 'source_path == "/data/run1.m10"', (("source.path", 1),)),
        Question("the searches of one file's content", 'source_sha256 == "<sha256>"', (("source.sha256", 1),)),
    ),
    default_fields=("search_id", "query_id", "program", "library", "n_hits"),
)

MATERIALS = Curated(
    name=_names.MATERIALS,
    one_per="material (and the entries, spectra, phonon documents about one: `doc_type`)",
    fields=(
        _s("id", "_id", "the document's key: the material id (% and : as %25, %3A), or entry:/xas:/phonon: + an id"),
        _s("material_id", "material_id", "the Materials Project id (mp-...)"),
        _s("doc_type", "_ingest.type", "summary, legacy_material, entry, xas or phonon"),
        _s("formula_pretty", "formula_pretty", "reduced formula (Fe2O3)"),
        _s("formula_anonymous", "formula_anonymous", "anonymised formula (A2B3)"),
        _l("elements", "elements", "the elements, sorted (a list: `elements has \"O\"`)"),
        _i("nelements", "nelements", "how many elements"),
        _s("chemsys", "chemsys", "chemical system, elements joined by - (Fe-O)"),
        _i("nsites", "nsites", "sites in the unit cell"),
        _f("volume", "volume", "unit-cell volume (Å³)"),
        _f("density", "density", "density (g/cm³)"),
        _f("formation_energy_per_atom", "formation_energy_per_atom", "formation energy (eV/atom)"),
        _f("energy_above_hull", "energy_above_hull", "energy above the convex hull (eV/atom; 0 = stable)"),
        _f("energy_per_atom", "energy_per_atom", "total energy (eV/atom)"),
        _f("band_gap", "band_gap", "band gap (eV)"),
        _b("is_gap_direct", "is_gap_direct", "the band gap is direct"),
        _b("is_stable", "is_stable", "on the convex hull"),
        _b("is_metal", "is_metal", "metallic"),
        _b("theoretical", "theoretical", "no experimental (ICSD) match"),
        _s("crystal_system", "symmetry.crystal_system", "crystal system (cubic, monoclinic, ...)"),
        _s("spacegroup", "symmetry.symbol", "space-group symbol"),
        _i("spacegroup_number", "symmetry.number", "space-group number"),
        _l("task_ids", "task_ids", "the calculations behind it (`tasks.task_id`)"),
        Field("last_updated", "last_updated", "date", "when the Materials Project last updated it (UTC)"),
        _s("source_path", "_source.path", "the file it was loaded from"),
    ),
    questions=(
        Question("materials containing element E (oxides: `elements has \"O\"`), within a band-gap range",
                 'elements has "O" and band_gap between 1 and 3', (("elements", 1), ("band_gap", 1))),
        Question("the materials of chemical system C", 'chemsys == "Fe-O"', (("chemsys", 1),)),
        Question("the materials with formula F", 'formula_pretty == "Fe2O3"', (("formula_pretty", 1),)),
        Question("materials with a band gap between A and B eV", "1 <= band_gap <= 3", (("band_gap", 1),)),
        Question("(nearly) stable materials: energy above hull below X eV/atom", "energy_above_hull < 0.05",
                 (("energy_above_hull", 1),), sort="energy_above_hull"),
        Question("documents of one kind", 'doc_type == "summary"', (("_ingest.type", 1),)),
        Question("materials updated since date D: no index (a collection scan)",
                 'last_updated >= "2024-01-01"'),
    ),
    default_fields=("material_id", "formula_pretty", "chemsys", "band_gap", "energy_above_hull", "is_stable"),
)

TASKS = Curated(
    name=_names.TASKS,
    one_per="calculation task",
    fields=(
        _s("task_id", "task_id", "the task's id"),
        _s("material_id", "material_id", "the material it computes (`materials.material_id`)"),
        _s("doc_type", "_ingest.type", "vasp_task or qchem_task"),
        _s("formula_pretty", "formula_pretty", "reduced formula"),
        _l("elements", "elements", "the elements, sorted"),
        _i("nelements", "nelements", "how many elements"),
        _s("chemsys", "chemsys", "chemical system (Fe-O)"),
        _i("nsites", "nsites", "sites in the cell"),
        _s("task_type", "task_type", "Static, Structure Optimization, NSCF Line, ..."),
        _s("run_type", "run_type", "GGA, GGA+U, r2SCAN, ..."),
        _s("calc_type", "calc_type", "run type and task type together"),
        _s("state", "state", "successful or failed"),
        _f("energy_per_atom", "output.energy_per_atom", "final energy (eV/atom)"),
        _f("band_gap", "output.bandgap", "band gap of the calculation (eV)"),
        _f("density", "output.density", "density (g/cm³)"),
        _l("tags", "tags", "the task's tags"),
        Field("completed_at", "completed_at", "date", "when the calculation finished (UTC)"),
        Field("last_updated", "last_updated", "date", "when the task document was last updated (UTC)"),
    ),
    questions=(
        Question("the calculations of material M", 'material_id == "mp-149"', (("material_id", 1),)),
        Question("the calculations of chemical system C of one task type",
                 'chemsys == "Fe-O" and task_type == "Static"', (("chemsys", 1), ("task_type", 1))),
        Question("the calculations completed in a period: no index (a collection scan)",
                 'completed_at between "2024-01-01" and "2024-06-30T23:59:59.999Z"'),
    ),
    default_fields=("task_id", "material_id", "formula_pretty", "task_type", "run_type", "state"),
)

#: The data collections, by name.
DATA: dict[str, Curated] = {c.name: c for c in (HITS, SEARCHES, MATERIALS, TASKS)}


def query_indexes() -> dict[str, list[list[tuple[str, int]]]]:
    """The data collections' indexes as :data:`ingest.store.catalog.QUERY_INDEXES` holds them."""
    return {name: [list(ix) for ix in c.indexes] for name, c in DATA.items()}


# ------------------------------------------------------------------ analysis outputs
def dtype_kind(dtype: str) -> str | None:
    """The kind of an output column's declared dtype (:data:`ingest.schema.OUTPUT_DTYPES`: every
    declarable dtype has one, a list column's ``list<string>`` included), or None for any other dtype."""
    found = OUTPUT_DTYPES.get(str(dtype))
    return found[1] if found else None


@dataclass(frozen=True)
class OutputField(Field):
    """A field of an analysis output: a :class:`Field` with the unit its analysis declares
    (``""`` for identifiers, labels, flags and other dimensionless values)."""

    unit: str = ""


@dataclass(frozen=True)
class OutputCollection(Curated):
    """An analysis output as a curated collection: its fields carry their declared units."""

    fields: tuple[OutputField, ...]

    def describe(self) -> dict:
        described = super().describe()
        described["fields"] = [{**d, "unit": f.unit} for d, f in zip(described["fields"], self.fields)]
        return described


def outputs_markdown(collections=None) -> str:
    """The tables of the analyses' outputs (docs/querying.md): per output its fields with their kinds, units
    and meanings (as the analyses declare them), then its questions and indexes."""
    out = []
    for c in (collections or _outputs().values()):
        out.append(f"**`{c.name}`** — one document per {_cell(c.one_per)}.\n")
        out.append("| field | kind | unit | meaning |")
        out.append("|---|---|---|---|")
        for f in c.fields:  # — : no unit (an identifier, a label, a flag)
            out.append(f"| `{f.name}` | {f.kind} | {_cell(getattr(f, 'unit', '') or '—')} | {_cell(f.meaning)} |")
        out.append("")
        if c.questions:
            out.append("Questions: " + "; ".join(_cell(q.text) for q in c.questions) + ".\n")
        out.append("Indexes: " + (", ".join(f"`{index_name(ix)}`" for ix in c.indexes) or "none") + ".\n")
    return "\n".join(out).rstrip() + "\n"


def _outputs() -> dict[str, Curated]:
    """The analyses' outputs, as the installed plugins declare them (:mod:`ingest.plugins`)."""
    return {c.name: c for c in curated_outputs()}


class UnknownCollection(UsageError):
    """A collection that is not curated; ``known`` lists those that are."""

    def __init__(self, name: str, known: list[str]):
        self.name, self.known = name, known
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        super().__init__(f"{name!r} is not a curated collection{hint} (curated: {', '.join(known)})")


def all_curated() -> dict[str, Curated]:
    """Every curated collection: the data collections, then the analyses' outputs."""
    return {**DATA, **_outputs()}


def names() -> list[str]:
    return list(all_curated())


def get(name: str) -> Curated:
    """The declaration of collection ``name``; raises :class:`UnknownCollection`."""
    if name in DATA:
        return DATA[name]
    outputs = _outputs()
    if name in outputs:
        return outputs[name]
    raise UnknownCollection(name, list(DATA) + list(outputs))


# ------------------------------------------------------------------ documentation
def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown(collections=None) -> str:
    """The tables of docs/querying.md: per collection its fields, then its questions and their indexes."""
    out = []
    for c in (collections or DATA.values()):
        out.append(f"**`{c.name}`** — one document per {c.one_per}.\n")
        out.append("| field | path | kind | meaning |")
        out.append("|---|---|---|---|")
        for f in c.fields:
            out.append(f"| `{f.name}` | `{f.path}` | {f.kind} | {_cell(f.meaning)} |")
        out.append("")
        out.append("| question | example `--where` | index |")
        out.append("|---|---|---|")
        for q in c.questions:
            where = f"`{_cell(q.where)}`" + (f" `--sort {q.sort}`" if q.sort else "") if q.where else ""
            index = f"`{index_name(q.index)}`" if q.index else "none (collection scan)"
            out.append(f"| {_cell(q.text)} | {where} | {index} |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"
