"""``sci-ingest report``: a run on one self-contained HTML page (:mod:`analytics.report.html`).

    sci-ingest report                     the most recent run that did work, in <home>/out/report/index.html
    sci-ingest report --run ID --out DIR  that run, in DIR/index.html
    sci-ingest report --runs 30           the throughput plot across the last 30 runs

Registered by :mod:`analytics.commands`.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ingest.cli.common import settings_from
from ingest.report import dumps
from analytics.report.html import UnknownRun, write_report

__all__ = ["cmd_report"]

def cmd_report(args) -> int:
    if args.runs < 1:
        print(f"error: --runs must be at least 1, not {args.runs}", file=sys.stderr)
        return 2
    settings = settings_from(args)
    try:
        path, run_id = write_report(settings, args.run, Path(args.out) if args.out else None, args.runs)
    except UnknownRun as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(dumps({"run_id": run_id, "path": str(path)}) if args.json else path)
    return 0
