"""``sci-ingest report``: a run on one self-contained HTML page (:mod:`analytics.report.html`).

    sci-ingest report                     the most recent run that did work, in <home>/out/report/index.html
    sci-ingest report --run ID --out DIR  that run, in DIR/index.html
    sci-ingest report --runs 30           the throughput plot across the last 30 runs

Registered by :mod:`ingest.cli.main` through :func:`register`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["register", "cmd_report"]

EXIT_REPORT = ("\nexit codes:\n  0  written (its path on stdout)\n"
               "  1  no run recorded, or the database or the output folder failed (one line on stderr)\n"
               "  2  an unknown --run id, or a bad --runs\n")


def cmd_report(args) -> int:
    from ingest.cli.main import _settings
    from analytics.report.html import UnknownRun, write_report
    from ingest.report import dumps

    if args.runs < 1:
        print(f"error: --runs must be at least 1, not {args.runs}", file=sys.stderr)
        return 2
    settings = _settings(args)
    try:
        path, run_id = write_report(settings, args.run, Path(args.out) if args.out else None, args.runs)
    except UnknownRun as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(dumps({"run_id": run_id, "path": str(path)}) if args.json else path)
    return 0


def register(add, common: argparse.ArgumentParser) -> None:
    p = add("report", cmd_report, "a run on one self-contained HTML page: stages, throughput, collections, "
            "validation, a plot per analysis",
            "examples:\n  sci-ingest report                       the most recent run that did work\n"
            "  sci-ingest report --run run-20261121T200000Z-1a2b3c --out /tmp/report\n"
            "  MONGODB_URI=mongodb://db:27017/ sci-ingest report --runs 30\n"
            "\nThe page (OUT/index.html, OUT: --out, default <home>/out/report) needs nothing but itself:\n"
            "no script, no font, no CDN; the plots are PNG images inside it.\n",
            exit_codes=EXIT_REPORT)  # fmt: skip
    p.add_argument("--run", help="run id (default: the most recent run that loaded, analyzed or validated)")
    p.add_argument("--out", metavar="DIR", help="folder for index.html (default: <home>/out/report)")
    p.add_argument("--runs", type=int, default=10, metavar="N",
                   help="how many runs, up to this one, the throughput plot spans (default 10)")
