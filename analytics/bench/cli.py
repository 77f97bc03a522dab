"""``sci-ingest bench``: the source studies' experiments (:mod:`analytics.bench`).

    sci-ingest bench list                    the experiments, the study and figure each reproduces
    sci-ingest bench NAME [--quick|--full]   run one (default --quick: under two minutes on 2 cores)
    sci-ingest bench all [--quick|--full]    run every one, in order
    sci-ingest bench report [--html FILE]    every stored run on one offline HTML page

Registered by :mod:`ingest.cli.main` through :func:`register`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["register", "cmd_bench"]

EXIT_BENCH = ("\nexit codes:\n  0  done\n  1  fatal error (the database, the server, an experiment failed)\n"
              "  2  an unknown experiment name (the known ones are listed)\n")


def _log(quiet: bool):
    def log(message: str) -> None:
        if not quiet:
            print(message, file=sys.stderr, flush=True)

    return log


def _list(as_json: bool) -> int:
    from analytics.bench import all_experiments
    from ingest.report import dumps, table

    rows = [{"name": e.name, "study": e.study, "figures": e.figures, "title": e.title,
             "quick": _sizes(e.sizes.get("quick", {})), "needs": e.needs or None} for e in all_experiments().values()]
    if as_json:
        print(dumps(rows))
    else:
        print(table(rows, [("name", "experiment"), ("figures", "reproduces"), ("study", "study"),
                           ("title", "what it measures")], left=4))  # fmt: skip
    return 0


def _sizes(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def _out_dir(args, settings) -> Path:
    return Path(args.out) if args.out else Path(settings.state_dir) / "bench"


def cmd_bench(args) -> int:
    from analytics.bench import UnknownExperiment, all_experiments, get_experiment
    from ingest.cli.main import _settings

    target = args.target
    if target == "list":
        return _list(args.json)
    settings = _settings(args)
    if target == "report":
        from analytics.bench.report import write_report

        path = write_report(settings, _out_dir(args, settings), Path(args.html) if args.html else None,
                            log=_log(args.quiet))  # fmt: skip
        print(path)
        return 0
    size = "full" if args.full else args.size or "quick"
    names = list(all_experiments()) if target == "all" else [target]
    try:
        experiments = [get_experiment(n) for n in names]
    except UnknownExperiment as exc:
        print(f"error: {exc.args[0]}", file=sys.stderr)
        return 2
    from ingest.errors import SciIngestError

    failed = []
    for experiment in experiments:
        try:
            _run_one(experiment, size, settings, args)
        except SciIngestError as exc:
            if len(experiments) == 1:
                raise
            failed.append(experiment.name)  # `bench all`: the others still run
            print(f"error: {experiment.name}: {exc}", file=sys.stderr)
    if failed:
        print(f"error: {len(failed)} of {len(experiments)} experiments failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def _run_one(experiment, size: str, settings, args) -> None:
    from analytics.bench.output import comparison_table, points_table
    from analytics.bench.runner import run_experiment
    from ingest.report import dumps

    run = run_experiment(experiment, size, settings, _out_dir(args, settings), log=_log(args.quiet))
    if args.json:
        print(dumps({k: v for k, v in run.items()}))
        return
    print(f"# {experiment.name} ({size}): {experiment.title}")
    print(f"# {run['machine_label']} | {run['server_label']} | {run['seconds']:.1f} s | run {run['_id']}")
    columns = [c for c in experiment.table if any(c in p for p in run["points"])] or None
    print(points_table(run["points"], columns))
    if columns:
        print(f"(the columns above; every column is in {run['files']['csv']})")
    print(f"\n# beside the study ({experiment.study}; ours / published; hardware on both sides)")
    print(comparison_table(run["comparison"]))
    for note in run["notes"]:
        print(f"note: {note}")
    print(f"\nstored in {settings.db_name}.bench_runs; files: {run['files']['json']} (.csv, .png)")


def register(add, common: argparse.ArgumentParser) -> None:
    p = add("bench", cmd_bench, "the source studies' experiments: run one, list them, or report every stored run",
            "examples:\n  sci-ingest bench list\n  sci-ingest bench workers            --quick (the default): "
            "scaled down, under 2 minutes\n  sci-ingest bench ycsb --full --mongo-uri mongodb://db:27017\n"
            "  sci-ingest bench all --quick\n  sci-ingest bench report            an offline HTML page of every run\n"
            "\nEach run is stored in bench_runs and written as OUT/NAME/RUN_ID.{json,csv,png} (OUT: --out, default\n"
            "<home>/bench).  Each run uses a database of its own (<db>_bench_<id>), dropped at its end.\n",
            exit_codes=EXIT_BENCH)  # fmt: skip
    p.add_argument("target", metavar="NAME|list|all|report", help="an experiment (see `bench list`), or list/all/report")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", dest="size", action="store_const", const="quick",
                      help="scaled-down sizes, under 2 minutes on a 2-core machine (the default)")
    size.add_argument("--full", action="store_true", help="the study's axes (hours; sized for a real deployment)")
    size.add_argument("--size", choices=["tiny", "quick", "full"], help=argparse.SUPPRESS)  # tiny: the tests
    p.add_argument("--out", help="folder for the CSV/JSON/PNG files (default: <home>/bench)")
    p.add_argument("--html", help="report: the page to write (default: OUT/report.html)")
    p.add_argument("--scheduler", help="Dask scheduler address for the Dask experiments (default: a LocalCluster)")
