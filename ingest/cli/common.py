"""What the commands share when they run: the settings from the options, the load options,
and running the pipeline's steps (``run``, ``load``; the plugins' ``analyze`` and ``validate``
too).  What the parser needs is in :mod:`ingest.cli.options`.
"""

from __future__ import annotations

import os

from ingest.cli.options import FORMATS
from ingest.config import Settings, default_workers, most_workers, parse_write_concern
from ingest.errors import ConfigError, Exit, UsageError
from ingest.fileio import printable, stderr_line
from ingest.parsers import data_file_suffixes
from ingest.report import dumps, render_run

__all__ = ["settings_from", "print_report", "load_options", "cmd_run"]


def settings_from(args) -> Settings:
    """The settings a command runs with: its options, then the environment (a command without
    -q or --json has no progress to quiet, or prints no JSON)."""
    return Settings.from_env(mongo_uri=getattr(args, "mongo_uri", None), db_name=getattr(args, "db", None),
                             dask_scheduler=getattr(args, "scheduler", None),
                             embedded=False if getattr(args, "no_embedded", False) else None,
                             progress=not getattr(args, "quiet", False) and not getattr(args, "json", False))


def print_report(report, as_json: bool) -> int:
    """A run's report on stdout (text or one JSON object), its error on stderr; its exit code."""
    if as_json:
        print(dumps(report.as_json()))
    else:
        print(render_run(report))
    if report.error:  # one line on stderr, whatever the format of stdout
        stderr_line(f"error: {report.error}")
    return report.exit_code


def load_options(args, settings):
    """The load's options from the command line (None for commands that do not load)."""
    if not hasattr(args, "workers"):
        return None
    from ingest.load import LoadOptions  # noqa: PLC0415 - lazy: ingest.load imports pymongo (0.3 s); --help must not pay it

    if args.workers is not None and args.workers > 1 and not settings.dask_scheduler:  # a LocalCluster of them
        most, cap = most_workers()
        if args.workers > most:
            raise UsageError(f"--workers {args.workers} is more than this machine takes: at most {most} ({cap})")
    try:
        write_concern = parse_write_concern(args.write_concern) if args.write_concern else None
    except ConfigError as exc:  # a --write-concern that does not parse: the command line is wrong
        raise UsageError(f"--write-concern: {exc}") from exc
    return LoadOptions(
        workers=args.workers or default_workers(), force=args.force, dry_run=args.dry_run,
        write_concern=write_concern,
        retry_s=args.retry_for, keep_indexes=args.keep_indexes, progress=settings.progress,
        include_hidden=getattr(args, "include_hidden", False), max_bad_records=args.max_bad_records)


def follows_changes(args) -> bool:
    """``run`` follows changes unless ``--full``; ``analyze`` and ``validate`` when ``--changed``."""
    if hasattr(args, "full"):
        return not args.full
    return getattr(args, "changed", False)


def holds_data(folder: str, suffixes: tuple[str, ...]) -> bool:
    """Whether a file named like data (``suffixes``) lies anywhere below ``folder``, hidden or not
    (a hidden one is named as skipped, not ignored): the walk stops at the first."""
    return any(name.endswith(suffixes) for _, _, names in os.walk(folder) for name in names)


def nothing_to_load(paths: list[str]) -> str | None:
    """The one line saying that ``paths`` hold nothing to load (each a folder without a data file:
    exit 1, before any work), else None (a file, or a path that does not exist, is named by the load)."""
    suffixes = data_file_suffixes()
    if paths and all(os.path.isdir(p) and not holds_data(p, suffixes) for p in paths):
        return f"nothing to load: no data file in {', '.join(map(printable, paths))} (load reads {FORMATS})"
    return None


def cmd_run(args, steps=("load", "analyze", "validate"), analyses=None) -> int:
    from ingest.pipeline import run  # noqa: PLC0415 - lazy: pymongo and tqdm (ingest.pipeline: 0.1 s); --help must not pay them

    settings = settings_from(args)
    options = load_options(args, settings)  # a bad one: exit 64, before anything else is looked at
    empty = nothing_to_load(getattr(args, "paths", None) or [])
    if empty is not None:
        stderr_line(f"error: {empty}")
        return Exit.FATAL
    report = run(settings, getattr(args, "paths", None) or None, steps=steps, analyses=analyses,
                 load_options=options, incremental=follows_changes(args), log=stderr_line)
    return print_report(report, getattr(args, "json", False))


def cmd_load(args) -> int:
    return cmd_run(args, steps=("load",))
