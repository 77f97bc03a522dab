"""What type checkers read for ``analytics``'s lazy names (see ``analytics/__init__.py``)."""

from analytics.reading.partitions import (
    PartitionSpec as PartitionSpec,
    plan_partitions as plan_partitions,
    read_collection as read_collection,
    read_partition as read_partition,
)
from analytics.registry import (
    Analysis as Analysis,
    UnknownAnalysis as UnknownAnalysis,
    all_analyses as all_analyses,
    analysis_names as analysis_names,
    get_analysis as get_analysis,
    select_analyses as select_analyses,
)
from analytics.runner import AnalysisResult as AnalysisResult, analyze as analyze, run_analysis as run_analysis
from analytics.validation import ValidationReport as ValidationReport, load_suites as load_suites, validate as validate
from ingest.cluster import dask_client as dask_client
from ingest.schema import Column as Column, OutputColumn as OutputColumn, Schema as Schema

__all__ = [
    "all_analyses",
    "Analysis",
    "analysis_names",
    "AnalysisResult",
    "analyze",
    "Column",
    "dask_client",
    "get_analysis",
    "load_suites",
    "OutputColumn",
    "PartitionSpec",
    "plan_partitions",
    "read_collection",
    "read_partition",
    "run_analysis",
    "Schema",
    "select_analyses",
    "UnknownAnalysis",
    "validate",
    "ValidationReport",
]
