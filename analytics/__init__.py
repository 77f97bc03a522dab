"""sci-ingest's analyses: declared once, run by one runner on Dask, validated by suites.

The public API, imported lazily (``import analytics`` imports neither Dask,
pandas nor pymongo)::

    import analytics
    for a in analytics.all_analyses():
        print(a.name, a.source, "->", a.output)
    results = analytics.analyze(uri, "sci_ingest", run_id="r1", out_dir="out/")

To add an analysis, add one module to ``analytics/analyses/`` (see
:mod:`analytics.registry`) and one expectation suite to ``schemas/expectations/``.
"""

from __future__ import annotations

from ingest._lazy import lazy_exports as _lazy_exports

# name -> "module:attribute"
_EXPORTS = {
    # declaring analyses
    "Analysis": "analytics.registry:Analysis",
    "Column": "ingest.schema:Column",
    "OutputColumn": "ingest.schema:OutputColumn",
    "Schema": "ingest.schema:Schema",
    "all_analyses": "analytics.registry:all_analyses",
    "analysis_names": "analytics.registry:analysis_names",
    "get_analysis": "analytics.registry:get_analysis",
    "select_analyses": "analytics.registry:select_analyses",
    "UnknownAnalysis": "analytics.registry:UnknownAnalysis",
    # running them
    "analyze": "analytics.runner:analyze",
    "run_analysis": "analytics.runner:run_analysis",
    "AnalysisResult": "analytics.runner:AnalysisResult",
    "dask_client": "ingest.cluster:dask_client",
    # reading MongoDB in partitions
    "PartitionSpec": "analytics.reading.partitions:PartitionSpec",
    "plan_partitions": "analytics.reading.partitions:plan_partitions",
    "read_partition": "analytics.reading.partitions:read_partition",
    "read_collection": "analytics.reading.partitions:read_collection",
    # validating with expectation suites
    "validate": "analytics.validation:validate",
    "load_suites": "analytics.validation:load_suites",
    "ValidationReport": "analytics.validation:ValidationReport",
}

__all__ = sorted(_EXPORTS, key=str.casefold)

# the names' types, for type checkers and IDEs: __init__.pyi beside this file
__getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS, globals())
