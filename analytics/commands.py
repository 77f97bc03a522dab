"""The commands of the analytics floor: ``analyze``, ``validate``, ``report`` and ``bench``.

Registered into ``ingest``'s command line by :mod:`analytics.plugin`.  ``analyze`` and
``validate`` run through :func:`ingest.cli.common.cmd_run`, as ``run`` and ``load`` do.  The
plugin is loaded by ``sci-ingest --help`` and ``query`` too, so ``report`` and ``bench`` import
their implementation (:mod:`analytics.report.cli`, :mod:`analytics.bench.cli`: pymongo,
matplotlib, Dask) only when they run.
"""

from __future__ import annotations

import argparse

from analytics.registry import select_analyses
from ingest.cli.common import cmd_run
from ingest.cli.options import typed
from ingest.config import Number
from ingest.errors import Exit
from ingest.report import dumps, table

__all__ = ["register", "cmd_analyze", "cmd_validate", "cmd_report", "cmd_bench"]


def cmd_analyze(args) -> int:
    chosen = select_analyses(args.names)  # before any server or cluster starts (and --list); UnknownAnalysis: 64
    if args.list:
        return _list_analyses(chosen, args.json)
    return cmd_run(args, steps=("analyze",), analyses=args.names or None)


def _list_analyses(analyses, as_json: bool) -> int:
    rows = [a.describe() for a in analyses]
    if as_json:
        print(dumps({"analyses": rows}))
    else:
        print(table(rows, [("name", "analysis"), ("source", "source"), ("output", "output collection"),
                           ("parquet", "parquet file"), ("description", "what it computes")], left=5))
    return Exit.OK


def cmd_validate(args) -> int:
    return cmd_run(args, steps=("validate",))


def cmd_report(args) -> int:
    from analytics.report.cli import cmd_report  # noqa: PLC0415 - lazy: pymongo, pandas and pyarrow (analytics.report.cli: 0.3 s); --help and query must not pay them

    return cmd_report(args)


def cmd_bench(args) -> int:
    from analytics.bench.cli import cmd_bench  # noqa: PLC0415 - lazy: pymongo (analytics.bench.cli: 78 ms); --help and query must not pay it

    return cmd_bench(args)


def register(add, common) -> None:
    p = add("analyze", cmd_analyze, "run the analyses on what is loaded (Dask, reading MongoDB in partitions)",
            "examples:\n  sci-ingest analyze                     every analysis\n"
            "  sci-ingest analyze best_hits\n  sci-ingest analyze --list\n"
            "  sci-ingest analyze --changed         only what the files loaded since the last analysis changed\n"
            "  DASK_SCHEDULER_ADDRESS=tcp://sched:8786 sci-ingest analyze --json\n"
            "\nan unknown analysis name exits 64 and lists the known ones\n",
            here={Exit.USAGE: "an unknown analysis name, with --list too (the known ones are listed)"})
    p.add_argument("names", nargs="*", metavar="NAME", help="analyses to run (default: all; see --list)")
    p.add_argument("--list", action="store_true",
                   help="list the analyses (those named, else all) with their source and output, run nothing")
    p.add_argument("--changed", action="store_true",
                   help="only the groups of the files loaded since each analysis last ran, where the analysis "
                        "allows it (else its whole source); each says which")
    p.add_argument("--scheduler", help="Dask scheduler address (default: $DASK_SCHEDULER_ADDRESS or a LocalCluster)")

    p = add("validate", cmd_validate, "run the Great Expectations suites in schemas/expectations",
            "examples:\n  sci-ingest validate\n  sci-ingest validate --json\n"
            "  sci-ingest validate --changed       only the suites whose documents changed since their verdict\n",
            here={Exit.FATAL: "a critical expectation failed (named on stderr, a verdict kept too), or the "
                              "database failed"})
    p.add_argument("--changed", action="store_true",
                   help="check only the suites whose documents changed since their last verdict; the others' "
                        "verdicts stand (each result names the run that gave it)")

    p = add("report", cmd_report, "a run on one self-contained HTML page: stages, throughput, collections, "
            "validation, a plot per analysis",
            "examples:\n  sci-ingest report                       the most recent run that did work\n"
            "  sci-ingest report --run run-20261121T200000Z-1a2b3c --out /tmp/report\n"
            "  MONGODB_URI=mongodb://db:27017/ sci-ingest report --runs 30\n"
            "\nThe page (OUT/index.html, OUT: --out, default <home>/out/report) needs nothing but itself:\n"
            "no script, no font, no CDN; the plots are PNG images inside it.\n",
            json="print {run_id, path} as one JSON object on stdout instead of the page's path",
            here={Exit.FATAL: "no run is recorded yet (`sci-ingest run` makes one), or the database or the output "
                              "folder failed",
                  Exit.USAGE: "--run names a run that is not recorded, or --runs is below 1"})  # fmt: skip
    p.add_argument("--run", help="run id (default: the most recent run that loaded, analyzed or validated)")
    p.add_argument("--out", metavar="DIR", help="folder for index.html (default: <home>/out/report)")
    p.add_argument("--runs", type=typed(Number("runs", least=1)), default=10, metavar="N",
                   help="how many runs, up to this one, the throughput plot spans: at least 1 (default 10)")

    p = add("bench", cmd_bench, "the source studies' experiments: run one, list them, or report every stored run",
            "examples:\n  sci-ingest bench list\n  sci-ingest bench workers            --quick (the default): "
            "scaled down, under 2 minutes\n  sci-ingest bench ycsb --full --mongo-uri mongodb://db:27017\n"
            "  sci-ingest bench all --quick\n  sci-ingest bench report            an offline HTML page of every run\n"
            "\nEach run is stored in bench_runs and written as OUT/NAME/RUN_ID.{json,csv,png} (OUT: --out, default\n"
            "<home>/bench).  Each run uses a database of its own (<db>_bench_<id>), dropped at its end.\n"
            "\n--json: `bench list` prints {experiments: [...]}, `bench report` {path}, a run its stored document;\n"
            "`bench all` one such document a line (JSON Lines).\n",
            json="print JSON on stdout instead of tables (see below)",
            quiet="no progress messages on stderr",
            here={Exit.FATAL: "the database or the server failed, or an experiment failed (`bench all`: the others "
                              "still ran)",
                  Exit.USAGE: "an unknown experiment name (the known ones are listed)"})  # fmt: skip
    p.add_argument("target", metavar="NAME|list|all|report", help="an experiment (see `bench list`), or list/all/report")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", dest="size", action="store_const", const="quick",
                      help="scaled-down sizes, under 2 minutes on a 2-core machine (the default)")
    size.add_argument("--full", action="store_true", help="the study's axes (hours; sized for a real deployment)")
    size.add_argument("--size", choices=["tiny", "quick", "full"], help=argparse.SUPPRESS)  # tiny: the tests
    p.add_argument("--out", help="folder for the CSV/JSON/PNG files (default: <home>/bench)")
    p.add_argument("--html", help="report: the page to write (default: OUT/report.html)")
    p.add_argument("--scheduler", help="Dask scheduler address for the Dask experiments (default: a LocalCluster)")
