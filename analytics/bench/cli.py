"""``sci-ingest bench``: the source studies' experiments (:mod:`analytics.bench`).

    sci-ingest bench list                    the experiments, the study and figure each reproduces
    sci-ingest bench NAME [--quick|--full]   run one (default --quick: under two minutes on 2 cores)
    sci-ingest bench all [--quick|--full]    run every one, in order
    sci-ingest bench report [--html FILE]    every stored run on one offline HTML page

Registered by :mod:`analytics.commands`.
"""

from __future__ import annotations

import sys
from pathlib import Path

from analytics.bench import all_experiments, get_experiment
from analytics.bench.output import comparison_table, points_table
from analytics.bench.report import write_report
from analytics.bench.runner import BENCH_DB_SUFFIX, run_experiment
from ingest.cli.common import settings_from
from ingest.config import DB_NAME_MAX_BYTES
from ingest.errors import Exit, SciIngestError, UsageError
from ingest.report import dumps, table

__all__ = ["cmd_bench"]


def _log(quiet: bool):
    def log(message: str) -> None:
        if not quiet:
            print(message, file=sys.stderr, flush=True)

    return log


def _list(as_json: bool) -> int:
    rows = [{"name": e.name, "study": e.study, "figures": e.figures, "title": e.title,
             "quick": _sizes(e.sizes.get("quick", {})), "needs": e.needs or None} for e in all_experiments().values()]
    if as_json:
        print(dumps({"experiments": rows}))
    else:
        print(table(rows, [("name", "experiment"), ("figures", "reproduces"), ("study", "study"),
                           ("title", "what it measures")], left=4))  # fmt: skip
    return Exit.OK


def _sizes(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def _out_dir(args, settings) -> Path:
    return Path(args.out) if args.out else Path(settings.state_dir) / "bench"


def cmd_bench(args) -> int:
    target = args.target
    if target == "list":
        return _list(args.json)
    settings = settings_from(args)
    if target == "report":
        path = write_report(settings, _out_dir(args, settings), Path(args.html) if args.html else None,
                            log=_log(args.quiet))  # fmt: skip
        print(dumps({"path": str(path)}) if args.json else path)
        return Exit.OK
    size = "full" if args.full else args.size or "quick"
    names = list(all_experiments()) if target == "all" else [target]
    experiments = [get_experiment(n) for n in names]  # UnknownExperiment: 64
    room = DB_NAME_MAX_BYTES - len(BENCH_DB_SUFFIX)
    if len(settings.db_name.encode("utf-8", "surrogateescape")) > room:  # before any server starts
        raise UsageError(f"--db {settings.db_name!r} is too long for bench: each run uses a database "
                         f"<db>{BENCH_DB_SUFFIX} of at most {DB_NAME_MAX_BYTES} bytes, so <db> at most {room}")

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
        return Exit.FATAL
    return Exit.OK


def _run_one(experiment, size: str, settings, args) -> None:
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
