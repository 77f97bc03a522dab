"""``sci-ingest report``: a run on one self-contained HTML page (:mod:`analytics.report.html`).

    sci-ingest report                     the most recent run that did work, in <home>/out/report/index.html
    sci-ingest report --run ID --out DIR  that run, in DIR/index.html
    sci-ingest report --runs 30           the throughput plot across the last 30 runs

Registered by :mod:`analytics.commands`.
"""

from __future__ import annotations

from pathlib import Path

from analytics.report.html import NoRun, UnknownRun, write_report
from ingest.cli.common import settings_from
from ingest.cli.timings import NO_RUNS, unknown_run
from ingest.errors import Exit, UsageError
from ingest.fileio import stderr_line
from ingest.report import dumps

__all__ = ["cmd_report"]


def cmd_report(args) -> int:
    """0 written; 1 no run recorded (said as ``timings`` says it); 64 an unknown --run (a bad --runs: its parser)."""
    settings = settings_from(args)
    try:
        path, run_id = write_report(settings, args.run, Path(args.out) if args.out else None, args.runs)
    except UnknownRun as exc:
        raise UsageError(unknown_run(args.run)) from exc
    except NoRun:
        stderr_line(f"error: {NO_RUNS}")
        return Exit.FATAL
    print(dumps({"run_id": run_id, "path": str(path)}) if args.json else path)
    return Exit.OK
