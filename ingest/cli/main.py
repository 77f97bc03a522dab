"""The ``sci-ingest`` command line: the parser, the dispatch, the exit.

``ingest``'s own commands live beside this module (:mod:`.common` holds what they share;
:mod:`.timings`, :mod:`.server`, :mod:`.parse`, :mod:`.query`, :mod:`.shard`); the floor above
adds its commands (``analyze``, ``validate``, ``report``, ``bench``) as a plugin
(:mod:`ingest.plugins`), loaded only when the command line names none of ours.

Start-up stays light: heavy packages (Dask, pandas, Great Expectations, Airflow) are imported
only by the commands that need them, so ``sci-ingest parse`` costs no more than the parser.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading

from ingest import plugins
from ingest.cli import query, shard
from ingest.cli.options import EPILOG_MAIN, EXIT_CODES_RUN, HIDDEN_HELP, add_load_options
from ingest.cli.parse import cmd_parse
from ingest.errors import SciIngestError
from ingest.fileio import stderr_line

__all__ = ["build_parser", "main", "run"]

#: The commands of ``ingest`` itself (any other loads the plugins).
OWN_COMMANDS = frozenset({"run", "load", "timings", "server", "parse", "airflow", "hash", "shard", "shard-plan",
                          "query", "export", "indexes"})


# The commands that talk to a server import pymongo (0.9 s of a cold start) when they run, never
# when the parser is built: `sci-ingest parse` and every --help stay at the parser's cost.
def cmd_run(args) -> int:
    from ingest.cli.common import cmd_run  # lazy: the settings and the report, see above

    return cmd_run(args)


def cmd_load(args) -> int:
    from ingest.cli.common import cmd_run  # lazy: see above

    return cmd_run(args, steps=("load",))


def cmd_timings(args) -> int:
    from ingest.cli.timings import cmd_timings  # lazy: pymongo, see above

    return cmd_timings(args)


def cmd_server(args) -> int:
    from ingest.cli.server import cmd_server  # lazy: SecantusDB's process handling and pymongo, see above

    return cmd_server(args)


def build_parser(with_plugins: bool = True) -> argparse.ArgumentParser:
    """The whole command line; ``with_plugins=False``: ``ingest``'s own commands only (no plugin loaded)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--mongo-uri", help="MongoDB URI (default: $MONGODB_URI, else the embedded SecantusDB)")
    common.add_argument("--db", help="database name (default: $SCI_INGEST_DB or sci_ingest)")
    common.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    common.add_argument("-q", "--quiet", action="store_true", help="no progress bars")

    parser = argparse.ArgumentParser(
        prog="sci-ingest",
        description="Ingest FASTA-suite -m 10 searches and Materials-Project records into MongoDB, "
                    "analyze them with Dask, validate them with Great Expectations, and time every stage.",
        epilog=EPILOG_MAIN, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name, func, help_, epilog, parents=(common,), exit_codes=EXIT_CODES_RUN):
        p = sub.add_parser(name, help=help_, description=help_, epilog=epilog + exit_codes, parents=list(parents),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        p.set_defaults(func=func)
        return p

    p = add("run", cmd_run, "the main job: load, analyze, validate, report timings",
            "examples:\n  sci-ingest run\n  sci-ingest run data/searches/ data/materials.jsonl.gz --json\n"
            "  sci-ingest run --workers 8 --write-concern w=majority,j=true /data/ssearch/\n")
    p.add_argument("paths", nargs="*", help="files or directories (default: the bundled samples)")
    add_load_options(p)

    p = add("load", cmd_load, "load files into MongoDB (formats detected per file), in parallel",
            "examples:\n  sci-ingest load results/           every .m10[.gz] / .json[l][.gz] below\n"
            "  sci-ingest load a.m10 b.m10.gz materials.jsonl --force\n"
            "  sci-ingest load --workers 16 --scheduler tcp://sched:8786 /data/ssearch/   a backfill on a cluster\n"
            "  sci-ingest load --dry-run --workers 2 results/    everything but the writes\n"
            "\nInterrupted (Ctrl-C, a crash, a server restart)? Run the same command again: finished files\n"
            "are skipped, half-written ones are rolled back and loaded again, nothing is doubled.\n"
            "\nHidden files and directories (names starting with '.') found in a directory are not loaded:\n"
            "each one holding data is named on stderr as `skipped: PATH: reason`; --include-hidden loads them.\n")
    p.add_argument("paths", nargs="+", help="files or directories")
    add_load_options(p)

    if with_plugins:  # analyze, validate, report, bench: the analytics floor's commands
        plugins.register_commands(add, common)

    p = add("timings", cmd_timings, "show the stage timings of a run (default: the last run that did work)",
            "examples:\n  sci-ingest timings\n  sci-ingest timings --list\n"
            "  sci-ingest timings --run run-20261121T200000Z-1a2b3c --files\n",
            exit_codes="\nexit codes:\n  0  shown\n  1  no run recorded, an unknown run id, or the database failed\n")
    p.add_argument("--run", help="run id (default: the most recent run that loaded, analyzed or validated)")
    p.add_argument("--last", action="store_true", help="the most recent run, even one that did nothing")
    p.add_argument("--list", action="store_true", help="list the recorded runs, newest first")
    p.add_argument("--files", action="store_true", help="one row per file and stage")
    p.add_argument("--workers", action="store_true", help="the load's files, documents and time per worker")

    p = add("server", cmd_server, "start, stop or report the embedded SecantusDB server",
            "examples:\n  sci-ingest server start\n  sci-ingest server start --auth\n"
            "  sci-ingest server add-user alice --read-only\n  sci-ingest server status\n  sci-ingest server stop\n"
            "\na command without a URI starts the home's server if none runs and leaves it running for the\n"
            "next commands until $SCI_INGEST_SERVER_IDLE seconds (default 600) pass without a client\n"
            "(0: a private server per command); `server start` keeps it running until `server stop`,\n"
            "which stops either\n",
            parents=(), exit_codes="\nexit codes:\n  0  done (status: the shared server runs and answers)\n"
            "  1  error (status: a server process holds the data but does not answer, or is another\n"
            "     command's private server)\n  3  status: no server runs\n")
    p.add_argument("action", choices=["start", "stop", "status", "add-user"])
    p.add_argument("name", nargs="?", help="add-user: the new user's name")
    p.add_argument("--port", type=int, help="port for start (default: a free one)")
    p.add_argument("--auth", action="store_true",
                   help="start: require SCRAM authentication from now on (creates an administrator whose "
                        "password is kept in <home>/credentials.json, 0600)")
    p.add_argument("--read-only", action="store_true", help="add-user: the user may read, not write")
    p.add_argument("--db", help="add-user: the database the user gets (default: $SCI_INGEST_DB or sci_ingest)")

    p = add("parse", cmd_parse, "parse FASTA-suite -m 10 files to JSON Lines on stdout (no database)",
            "examples:\n  sci-ingest parse run1.m10 run2.m10.gz > queries.jsonl\n"
            "  sci-ingest parse --no-sequences big.m10 | head -1\n  sci-ingest parse results/ > all.jsonl\n",
            parents=(), exit_codes="\nexit codes:\n  0  every file parsed\n"
            "  2  some files failed (each named on stderr as path:line: reason); the others were parsed\n"
            "  1  fatal error\n")
    p.add_argument("files", nargs="+", help="-m 10 files (.gz too) or directories holding them")
    p.add_argument("--no-sequences", action="store_true", help="leave out aligned sequences (faster)")
    p.add_argument("--include-hidden", action="store_true", help=HIDDEN_HELP)

    p = add("airflow", cmd_airflow, "run Airflow 3 locally on the project's DAGs (UI on 127.0.0.1), until Ctrl-C",
            "examples:\n  sci-ingest airflow                 UI at http://127.0.0.1:8080/ (user admin)\n"
            "  sci-ingest airflow --port 8795 --mongo-uri mongodb://db:27017/\n"
            "\nAIRFLOW_HOME is <home>/airflow; without a URI the embedded server is started once and given to\n"
            "the tasks as the mongo_default connection.\n")
    p.add_argument("--port", type=int, default=8080, help="the UI's and API's port on 127.0.0.1 (default 8080)")

    shard.register(add, common)
    query.register(add, common)
    return parser




def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sci-ingest")
    except PackageNotFoundError:
        return "unknown (not installed)"


class _VersionAction(argparse.Action):
    """``--version``: the installed version, looked up only when asked (importlib.metadata
    costs ~50 ms of start-up, a tenth of `sci-ingest parse` on a 40 MB file)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0,
                         help=help or "show the version and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"{parser.prog} {_version()}")
        parser.exit()




def cmd_airflow(args) -> int:
    from ingest.airflow.local import run_local  # lazy: Airflow's own modules start slowly

    from ingest.cli.common import settings_from  # lazy: see above

    return run_local(settings_from(args), port=args.port, log=lambda m: print(m, file=sys.stderr, flush=True))


def _needs_plugins(argv: list[str]) -> bool:
    """Whether the command line asks for more than ``ingest``'s own commands (finding the plugins
    costs 40-140 ms of start-up, which ``sci-ingest parse`` must not pay)."""
    command = next((a for a in argv if not a.startswith("-")), None)
    return command not in OWN_COMMANDS


def _stop_like_ctrl_c(signum, frame) -> None:
    raise KeyboardInterrupt  # SIGTERM (Airflow, timeout, systemd): roll back, stop the server, say how to resume


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(with_plugins=_needs_plugins(argv)).parse_args(argv)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _stop_like_ctrl_c)
    try:
        return args.func(args)
    except SciIngestError as exc:
        stderr_line(f"error: {exc}")
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


def run() -> None:
    """The ``sci-ingest`` console script: :func:`main`, then leave without the interpreter's teardown.

    By then the command has closed all it opened (its private server stopped, its Dask
    cluster closed, its outputs written and closed); the teardown would only add
    pymongo's exit hook, which waits up to half a second for each client's monitor
    threads to finish a sleep.  Output is flushed first.
    """
    code = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said
            pass
    os._exit(code)


if __name__ == "__main__":
    run()
