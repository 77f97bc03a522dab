"""What ``analytics`` plugs into ``ingest`` (entry point ``sci_ingest.plugins``: see :mod:`ingest.plugins`).

* ``STEPS``: the pipeline's ``analyze`` and ``validate`` steps (:mod:`analytics.steps`), named
  as ``module:function`` so that loading the plugin imports none of their weight;
* ``WARM_UPS``: what prepares a Dask worker for them;
* :func:`register_commands`: ``sci-ingest analyze``, ``validate``, ``report`` and ``bench``;
* :func:`curated_outputs`: every analysis output as a curated collection that ``sci-ingest
  query`` and ``export`` read.
"""

from __future__ import annotations

from analytics import commands
from analytics.registry import RUN_ID, all_analyses
from ingest.store.curated import Curated, OutputCollection, OutputField, Question

#: name -> "module:function", imported when the step runs (its modules import Dask, pandas and
#: Great Expectations: seconds that `sci-ingest --help` and `query` must not pay).
STEPS = {"analyze": "analytics.steps:analyze_step", "validate": "analytics.steps:validate_step"}

#: Modules the steps import only when they run, slow to import (a kept command process imports
#: them once: ingest/cli/kept_process.py): pymatgen's phase diagrams (hull_energy, 0.8 s) and
#: Great Expectations (the validation, 3 s).
PRELOADS = ("pymatgen.analysis.phase_diagram", "great_expectations")

#: purpose -> ("module:function" every worker runs once, whether the calling process runs it too)
WARM_UPS = {"analyze": ("analytics.steps:prepare_for_analyses", True),
            "validate": ("analytics.steps:prepare_for_validation", False)}

#: What its steps do on the server, for `sci-ingest check` (:mod:`ingest.store.capabilities`): every
#: step records its timings and makes its indexes; analyze publishes its outputs (written aside, renamed
#: into place, the old dropped; changed rows replaced in a transaction on a replica set or mongos:
#: analytics.increment), validate records its verdicts.
NEEDS = {"analyze": ("find", "insert", "update", "remove", "createIndex", "renameCollectionSameDB", "dropCollection",
                     "transactions"),
         "validate": ("find", "insert", "update", "createIndex")}

#: The deployment checks of its readers, "module:function" called as function(uri, db, scratch) -> rows.
CHECKS = ("analytics.reading.checks:reader_rows",)


register_commands = commands.register


def curated_outputs() -> list[Curated]:
    return [_from_analysis(a) for a in all_analyses()]


def _from_analysis(analysis) -> Curated:
    fields, notes = [], []
    for column in [*analysis.outputs, RUN_ID]:  # each declared (name, dtype, meaning, unit), checked
        if not str(column.name).isidentifier():
            notes.append(f"column {column.name!r}: its name is not an identifier; not queryable by name "
                         "(a raw `path` is)")
            continue
        key = "; the document's `_id` too" if column.name == analysis.output_id else ""
        fields.append(OutputField(column.name, column.name, column.kind, column.meaning + key, column.unit))
    return OutputCollection(
        name=analysis.output,
        one_per=f"row of the `{analysis.name}` analysis: {analysis.description}",
        fields=tuple(fields),
        questions=tuple(Question(q) for q in analysis.questions),
        extra_indexes=tuple(tuple((f, int(d)) for f, d in ix) for ix in analysis.indexes),
        source=analysis.name,
        notes=tuple(notes),
    )
