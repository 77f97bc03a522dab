"""Great Expectations: the one module that imports it.

:class:`GreatExpectations` is an ephemeral Data Context (analytics and progress
bars off) that builds an expectation suite from a :class:`SuiteSpec`,
validates a pandas frame against it and turns each GX result into a plain
result dict (see :mod:`analytics.validation.results`).  Great Expectations is
imported when the first instance is made, that is only when a suite has data
to check: importing it takes seconds.
"""

from __future__ import annotations

import copy
import logging
import math
import os
import uuid
import warnings
from datetime import datetime
from typing import Any

from analytics.validation.frames import short_repr
from analytics.validation.results import DEFAULT_SAMPLE_SIZE
from analytics.validation.suites import SuiteSpec, referenced_columns, severity_of
from ingest.errors import AnalysisError, ConfigError


def _quiet_great_expectations() -> None:
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    for name in ("great_expectations", "posthog", "backoff"):
        logging.getLogger(name).setLevel(logging.ERROR)


def json_safe(value: Any) -> Any:
    """A JSON/BSON-safe recursive copy of a value Great Expectations reported.

    numpy scalars become Python ones, tuples and sets lists, NaN None, dict keys
    strings; datetimes stay; anything else becomes its (short) repr.
    """
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return None if math.isnan(value) else float(value)
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [json_safe(v) for v in value]
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "ndim", 0) == 0:
        try:
            return json_safe(item())
        except (TypeError, ValueError):
            pass
    if isinstance(value, datetime):
        return value
    return short_repr(value)


class GreatExpectations:
    """An ephemeral GX Data Context that validates pandas frames against suites."""

    def __init__(self) -> None:
        _quiet_great_expectations()
        with warnings.catch_warnings():
            # GX 1.24 imports the deprecated sre_constants / sre_parse modules
            warnings.simplefilter("ignore", DeprecationWarning)
            import great_expectations as gx  # noqa: PLC0415 - lazy: Great Expectations costs 2.3 s (3.1 s cold), paid only when a suite has rows to check
            from great_expectations.data_context.types.base import (  # noqa: PLC0415 - lazy: Great Expectations costs 2.3 s (3.1 s cold), paid only when a suite has rows to check
                DataContextConfig,
                InMemoryStoreBackendDefaults,
                ProgressBarsConfig,
            )

        self.gx = gx
        self.version = gx.__version__
        config = DataContextConfig(
            store_backend_defaults=InMemoryStoreBackendDefaults(),
            analytics_enabled=False,
            progress_bars=ProgressBarsConfig(globally=False, metric_calculations=False),
        )
        self.context = gx.get_context(mode="ephemeral", project_config=config)

    def build_suite(self, spec: SuiteSpec, only: set[int] | None = None):
        """The GX suite of ``spec`` (or of its expectations numbered in ``only``)."""
        from great_expectations.exceptions import GreatExpectationsError  # noqa: PLC0415 - lazy: Great Expectations costs 2.3 s (3.1 s cold), paid only when a suite has rows to check
        from great_expectations.expectations.expectation_configuration import ExpectationConfiguration  # noqa: PLC0415 - lazy: Great Expectations costs 2.3 s (3.1 s cold), paid only when a suite has rows to check

        expectations = []
        for i, exp in enumerate(spec.all_expectations()):
            if only is not None and i not in only:
                continue
            try:
                config = ExpectationConfiguration(
                    type=exp["type"], kwargs=copy.deepcopy(exp["kwargs"]),
                    meta={**copy.deepcopy(exp["meta"]), "sci_ingest_index": i})
                expectations.append(config.to_domain_obj())
            except (GreatExpectationsError, ValueError, TypeError) as exc:
                raise ConfigError(
                    f"expectation suite {spec.path or spec.name}: expectation #{i} ({exp['type']}) "
                    f"is not valid for Great Expectations {self.version}: {exc}") from exc
        return self.gx.ExpectationSuite(name=spec.name, expectations=expectations)

    def validate(self, spec: SuiteSpec, frame, sample_size: int = DEFAULT_SAMPLE_SIZE):
        """(statistics dict, per-expectation result dicts) for ``frame``.

        Two passes, so that a clean table pays for counts only: every expectation
        with GX's ``BASIC`` result format (counts and offending values), then the
        ones that found offending rows again with ``SUMMARY`` and ``_id`` as the
        index column, for the ``_id`` of each offending row (``sample_rows``).
        ``SUMMARY`` costs about twice ``BASIC`` on 25,000 rows of ``hits``.
        """
        from great_expectations.exceptions import GreatExpectationsError  # noqa: PLC0415 - lazy: Great Expectations costs 2.3 s (3.1 s cold), paid only when a suite has rows to check

        expectations = spec.all_expectations()
        results: list[dict | None] = [None] * len(expectations)
        # A data source of its own for each frame, deleted after: a data source's execution
        # engine keeps the data of every batch it was given (14 MB a chunk of hits, for good).
        source_name = f"sci_ingest_{uuid.uuid4().hex[:12]}"
        try:
            source = self.context.data_sources.add_pandas(name=source_name)
            asset = source.add_dataframe_asset(name=spec.name)
            batch = asset.add_batch_definition_whole_dataframe("whole").get_batch(
                batch_parameters={"dataframe": frame})
            basic = {"result_format": "BASIC", "partial_unexpected_count": sample_size}
            for r in batch.validate(self.build_suite(spec), result_format=basic).results:
                index = r.expectation_config.meta.get("sci_ingest_index")
                results[index] = _result_dict(expectations[index], r, sample_size)
            again = {i for i, r in enumerate(results) if r is not None and r.get("unexpected_count")}
            if again and "_id" in frame.columns:
                summary = {"result_format": "SUMMARY", "partial_unexpected_count": sample_size,
                           "unexpected_index_column_names": ["_id"]}
                for r in batch.validate(self.build_suite(spec, again), result_format=summary).results:
                    index = r.expectation_config.meta.get("sci_ingest_index")
                    results[index] = _result_dict(expectations[index], r, sample_size)
        except GreatExpectationsError as exc:
            raise AnalysisError(f"Great Expectations could not validate suite {spec.name}: {exc}") from exc
        finally:
            if source_name in self.context.data_sources.all():
                self.context.data_sources.delete(source_name)
        missing = [expectations[i]["type"] for i, r in enumerate(results) if r is None]
        if missing:
            raise AnalysisError(f"suite {spec.name}: Great Expectations returned no result for {missing}")
        done = [r for r in results if r is not None]  # every one: a None was refused just above
        successful = sum(1 for r in done if r["success"])
        return {"evaluated_expectations": len(done), "successful_expectations": successful,
                "unsuccessful_expectations": len(done) - successful}, done


def _result_dict(exp: dict, r, sample_size: int) -> dict:
    kwargs = exp["kwargs"]
    columns = referenced_columns(kwargs)
    res = dict(r.result or {})
    exception = None
    for info in _exception_infos(r.exception_info):
        if info.get("raised_exception"):
            exception = info.get("exception_message") or "raised an exception"
            break
    out = {
        "expectation": exp["type"],
        "column": ", ".join(columns) if columns else None,
        "kwargs": json_safe(kwargs),
        "severity": severity_of(exp["meta"]),
        "critical": severity_of(exp["meta"]) == "critical",
        "generated": bool(exp["meta"].get("generated", False)),
        "notes": exp["meta"].get("notes"),
        "success": bool(r.success),
        "exception": exception,
    }
    for key in ("element_count", "unexpected_count", "unexpected_percent", "missing_count"):
        if key in res:
            out[key] = json_safe(res[key])
    if "observed_value" in res:
        out["observed_value"] = json_safe(res["observed_value"])
    if "partial_unexpected_list" in res:
        out["sample"] = json_safe(list(res["partial_unexpected_list"])[:sample_size])
        rows = []
        for entry in res.get("partial_unexpected_index_list") or []:
            if isinstance(entry, dict):
                values = [entry.get(c) for c in columns]
                rows.append({"_id": json_safe(entry.get("_id")),
                             "value": json_safe(values[0] if len(values) == 1 else values)})
        out["sample_rows"] = rows[:sample_size]
    return out


def _exception_infos(info: Any) -> list[dict]:
    if not isinstance(info, dict):
        return []
    if "raised_exception" in info:
        return [info]
    return [v for v in info.values() if isinstance(v, dict)]
