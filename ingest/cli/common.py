"""What the commands share when they run: the settings from the options, the load options,
and running the pipeline's steps (``run``, ``load``; the plugins' ``analyze`` and ``validate``
too).  What the parser needs is in :mod:`ingest.cli.options`.
"""

from __future__ import annotations

from ingest.config import Settings, default_workers, parse_write_concern
from ingest.errors import ConfigError
from ingest.fileio import stderr_line
from ingest.report import dumps, render_run

__all__ = ["settings_from", "print_report", "load_options", "cmd_run"]

def settings_from(args) -> Settings:
    """The settings a command runs with: its options, then the environment."""
    return Settings.from_env(mongo_uri=args.mongo_uri, db_name=args.db,
                             dask_scheduler=getattr(args, "scheduler", None),
                             progress=not args.quiet and not getattr(args, "json", False))


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
    from ingest.load import LoadOptions  # lazy: ingest.load imports pymongo (0.3 s); `parse` must not pay it

    if args.workers is not None and args.workers < 1:
        raise ConfigError(f"--workers must be at least 1, not {args.workers}")
    return LoadOptions(
        workers=args.workers or default_workers(), force=args.force, dry_run=args.dry_run,
        write_concern=parse_write_concern(args.write_concern) if args.write_concern else None,
        retry_s=args.retry_for, keep_indexes=args.keep_indexes, progress=settings.progress,
        include_hidden=getattr(args, "include_hidden", False))


def cmd_run(args, steps=("load", "analyze", "validate"), analyses=None) -> int:
    from ingest.pipeline import run  # lazy: the pipeline imports Dask and pymongo (about a second)

    settings = settings_from(args)
    report = run(settings, getattr(args, "paths", None) or None, steps=steps, analyses=analyses,
                 load_options=load_options(args, settings), incremental=getattr(args, "changed", False),
                 log=stderr_line)
    return print_report(report, args.json)


def cmd_load(args) -> int:
    return cmd_run(args, steps=("load",))
