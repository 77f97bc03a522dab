"""The ``sci-ingest`` command line: the parser, the dispatch, the exit.

``ingest``'s own commands live beside this module (:mod:`.common` holds what they share;
:mod:`.timings`, :mod:`.server`, :mod:`.parse`, :mod:`.query`, :mod:`.shard`); the floor above
adds its commands (``analyze``, ``validate``, ``report``, ``bench``) as a plugin
(:mod:`ingest.plugins`), loaded only when the command line names none of ours.

One contract for every command: it exits with a code of the one table (:class:`ingest.errors.Exit`,
which every ``--help`` ends with, :func:`ingest.cli.options.exit_codes`); a command line that
cannot be read, or that names what does not exist, exits 64 (:class:`Parser`,
:class:`ingest.errors.UsageError`); ``--json`` only where a command prints results, ``-q`` only
where it shows progress (``add``'s ``json`` and ``quiet``); a reader that closes the pipe early
ends it quietly with 0.

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
from ingest.cli.options import DB_NAME, EPILOG_MAIN, HIDDEN_HELP, JSON_HELP, PORT, add_load_options, exit_codes
from ingest.config import DbName, bad_settings, begin_command
from ingest.dates import command_began, process_started
from ingest.errors import Exit, Interrupted, SciIngestError, stopped_by
from ingest.fileio import one_line_messages, printable, stderr_line

__all__ = ["build_parser", "main", "run", "Parser"]

#: The commands of ``ingest`` itself (any other loads the plugins).
OWN_COMMANDS = frozenset({"run", "load", "timings", "server", "parse", "airflow", "hash", "shard", "shard-plan",
                          "query", "export", "indexes", "certs", "check"})


class Parser(argparse.ArgumentParser):
    """The parser of ``sci-ingest`` and of each of its commands: a command line it cannot read exits
    :attr:`Exit.USAGE` (64), not argparse's 2, which means "some inputs failed" here, with one line
    as every error is said (argparse's usage block is where ``--help`` points)."""

    def error(self, message: str):
        said = printable(f"error: {self.prog}: {message} (`{self.prog} --help` shows the usage)", backslash=False)
        self.exit(Exit.USAGE, said + "\n")


# The commands that talk to a server import pymongo (0.1 s; 0.2 s cold) when they run, never
# when the parser is built: `sci-ingest parse` and every --help stay at the parser's cost.
def cmd_run(args) -> int:
    from ingest.cli.common import cmd_run  # noqa: PLC0415 - lazy: ingest.cli.common, ingest.report and json: 3 ms that parse must not pay

    return cmd_run(args)


def cmd_load(args) -> int:
    from ingest.cli.common import cmd_run  # noqa: PLC0415 - lazy: as cmd_run's

    return cmd_run(args, steps=("load",))


def cmd_parse(args) -> int:
    from ingest.cli.parse import cmd_parse  # noqa: PLC0415 - lazy: the parser, orjson and dataclasses cost 14 ms of every --help

    return cmd_parse(args)


def cmd_timings(args) -> int:
    from ingest.cli.timings import cmd_timings  # noqa: PLC0415 - lazy: pymongo costs 0.1 s (0.2 s cold); --help and parse must not pay it

    return cmd_timings(args)


def cmd_server(args) -> int:
    from ingest.cli.server import cmd_server  # noqa: PLC0415 - lazy: SecantusDB's process handling (ingest.cli.server: 18 ms); --help and parse must not pay it

    return cmd_server(args)


def cmd_check(args) -> int:
    from ingest.cli.check import cmd_check  # noqa: PLC0415 - lazy: pymongo costs 0.1 s (0.2 s cold); --help and parse must not pay it

    return cmd_check(args)


def cmd_airflow(args) -> int:
    from ingest.airflow.local import run_local  # noqa: PLC0415 - lazy: the embedded server's start (ingest.airflow.local: 18 ms); --help and parse must not pay it
    from ingest.cli.common import settings_from  # noqa: PLC0415 - lazy: as cmd_run's

    return run_local(settings_from(args), port=args.port, log=lambda m: print(m, file=sys.stderr, flush=True))


def _top_parser():
    """The top level (``--version``, the COMMAND) with no command yet: (the parser, ``add``, which adds
    a command, and the parent parser of the options of the commands that use a database)."""
    database = Parser(add_help=False)  # the options of the commands that use a database
    database.add_argument("--mongo-uri", help="MongoDB URI (default: $MONGODB_URI, else the embedded SecantusDB)")
    database.add_argument("--db", type=DB_NAME, help=f"database name: {DbName().range()} (default: $SCI_INGEST_DB "
                                                     "or sci_ingest)")
    database.add_argument("--no-embedded", action="store_true",
                          help="never start or use the embedded server: without --mongo-uri or $MONGODB_URI, "
                               "fail at once (default: $SCI_INGEST_NO_EMBEDDED)")

    parser = Parser(
        prog="sci-ingest",
        description="Ingest FASTA-suite -m 10 searches and Materials-Project records into MongoDB, "
                    "analyze them with Dask, validate them with Great Expectations, and time every stage.",
        epilog=EPILOG_MAIN, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name, func, help_, epilog, *, db=True, json=JSON_HELP, quiet=None, here=None, under=None):
        """A command (``under``: a verb of a command's own subparsers): its ``--help`` ends with the
        table of exit codes, then ``here`` ({code: what it means for this command}); ``db``: it has
        --mongo-uri and --db; ``json``: the help of its --json (None: no --json, it prints no results
        or prints JSON anyway); ``quiet``: the help of its -q (None: no -q, it shows no progress)."""
        p = (under or sub).add_parser(name, help=help_, description=help_, epilog=epilog + exit_codes(here),
                                      parents=[database] if db else [],
                                      formatter_class=argparse.RawDescriptionHelpFormatter)
        if json:
            p.add_argument("--json", action="store_true", help=json)
        if quiet:
            p.add_argument("-q", "--quiet", action="store_true", help=quiet)
        if func is not None:
            p.set_defaults(func=func)
        p.set_defaults(parser=p)  # the innermost command's parser: it says what the command line lacks
        return p

    return parser, add, database


def build_parser(with_plugins: bool = True) -> Parser:
    """The whole command line; ``with_plugins=False``: ``ingest``'s own commands only (no plugin loaded)."""
    from ingest.cli import certs, query, shard  # noqa: PLC0415 - lazy: 2 ms that parse must not pay (_parse_parser)

    parser, add, database = _top_parser()
    p = add("run", cmd_run, "the main job: load, analyze, validate, report timings",
            "examples:\n  sci-ingest run\n  sci-ingest run data/searches/ data/materials.jsonl.gz --json\n"
            "  sci-ingest run --workers 8 --write-concern w=majority,j=true /data/ssearch/\n"
            "  sci-ingest run --full                  analyse and validate everything again\n"
            "\nIt follows changes: an analysis whose sources no loaded file changed is skipped, best_hits reads\n"
            "only the searches of the changed files, a suite nothing of which changed keeps its verdict; each\n"
            "says on stderr what it read and why.\n",
            quiet="no progress bars", here=_LOADING)
    p.add_argument("paths", nargs="*", help="files or directories (default: the bundled samples)")
    p.add_argument("--full", action="store_true",
                   help="analyse every source whole and check every suite, changed or not")
    add_load_options(p)

    p = add("load", cmd_load, "load files into MongoDB (formats detected per file), in parallel",
            "examples:\n  sci-ingest load results/           every .m10[.gz] / .json[l][.gz] below\n"
            "  sci-ingest load a.m10 b.m10.gz materials.jsonl --force\n"
            "  sci-ingest load --workers 16 --scheduler tls://sched:8786 /data/ssearch/   a backfill on a cluster\n"
            "  sci-ingest load --dry-run --workers 2 results/    everything but the writes\n"
            "\nInterrupted (Ctrl-C, a crash, a server restart)? Run the same command again: finished files\n"
            "are skipped, half-written ones are rolled back and loaded again, nothing is doubled.\n"
            "\nHidden files and directories (names starting with '.') found in a directory are not loaded:\n"
            "each one holding data is named on stderr as `skipped: PATH: reason`; --include-hidden loads them.\n",
            quiet="no progress bars", here=_LOADING)
    p.add_argument("paths", nargs="+", help="files or directories")
    add_load_options(p)

    if with_plugins:  # analyze, validate, report, bench: the analytics floor's commands
        plugins.register_commands(add, database)

    p = add("timings", cmd_timings, "show the stage timings of a run (default: the last run that did work)",
            "examples:\n  sci-ingest timings\n  sci-ingest timings --list\n"
            "  sci-ingest timings --run run-20261121T200000Z-1a2b3c --files\n",
            here={Exit.FATAL: "no run is recorded yet (`sci-ingest run` makes one), or the database failed",
                  Exit.USAGE: "--run names a run that is not recorded (`sci-ingest timings --list` lists them)"})
    p.add_argument("--run", help="run id (default: the most recent run that loaded, analyzed or validated)")
    p.add_argument("--last", action="store_true", help="the most recent run, even one that did nothing")
    p.add_argument("--list", action="store_true", help="list the recorded runs, newest first")
    p.add_argument("--files", action="store_true", help="one row per file and stage")
    p.add_argument("--workers", action="store_true", help="the load's files, documents and time per worker")

    _add_server(add)

    _add_parse(add)

    p = add("airflow", cmd_airflow, "run Airflow 3 locally on the project's DAGs (UI on 127.0.0.1), until Ctrl-C",
            "examples:\n  sci-ingest airflow                 UI at http://127.0.0.1:8080/ (user admin)\n"
            "  sci-ingest airflow --port 8795 --mongo-uri mongodb://db:27017/\n"
            "\nAIRFLOW_HOME is <home>/airflow; without a URI the embedded server is started once and given to\n"
            "the tasks as the mongo_default connection.\n",
            json=None, here={Exit.INTERRUPTED: "stopped by Ctrl-C or SIGTERM, its way to end: every Airflow "
                                               "component stopped"})
    p.add_argument("--port", type=PORT, default=8080, help="the UI's and API's port on 127.0.0.1, 1 to 65535 "
                                                          "(default 8080)")

    _add_check(add)
    shard.register(add, database)
    query.register(add, database)
    certs.register(add, database)
    return parser


def _add_check(add) -> None:
    p = add("check", cmd_check, "what the configured MongoDB and Dask scheduler can do, against what the pipeline "
            "needs (one table)",
            "examples:\n  sci-ingest check\n  sci-ingest check --mongo-uri mongodb://loader:PW@db:27017/ "
            "--scheduler tls://sched:8786\n  sci-ingest check --json | jq .missing\n"
            "\nEach row is asked with a real command, in a scratch collection of the database that it drops\n"
            "after (docs/cluster.md, \"Checking a deployment\"): ok; missing (a command needs it);\n"
            "warn (nothing, or only `shard`, needs it); n/a (the question does not apply here).\n",
            here={Exit.FATAL: "something a command needs is missing, or the server or the scheduler cannot be "
                              "reached: named on stderr in one line (the table says why)"})
    p.add_argument("--scheduler", help="Dask scheduler address (default: $DASK_SCHEDULER_ADDRESS; none: the "
                                       "pipeline's private local cluster, nothing to check)")


def _add_parse(add) -> None:
    p = add("parse", cmd_parse, "parse FASTA-suite -m 10 files (and its tabular -m 8, -m 9 output) to JSON Lines on stdout "
            "(no database)",
            "examples:\n  sci-ingest parse run1.m10 run2.m10.gz > queries.jsonl\n"
            "  sci-ingest parse --no-sequences big.m10 | head -1\n  sci-ingest parse results/ > all.jsonl\n"
            "\nIts output is JSON already (one query a line): it has no --json.\n",
            db=False, json=None,
            here={Exit.PARTIAL: "some files failed (each named on stderr as path:line: reason); the others "
                                "were parsed"})
    p.add_argument("files", nargs="+", help="-m 10, -m 8 or -m 9 files (.gz too; the format by content) or "
                                            "directories holding them")
    p.add_argument("--no-sequences", action="store_true", help="leave out aligned sequences (faster)")
    p.add_argument("--include-hidden", action="store_true", help=HIDDEN_HELP)


def _parse_parser() -> Parser:
    """The command line of ``sci-ingest parse`` alone: the same top level and ``parse`` as
    :func:`build_parser` gives, without building the other commands or importing their modules
    (certs, kept, query, shard, the plugins and what they import: hashlib, socket, subprocess, typing).
    Measured on ``samples/pasta/ssearch36_prot.m10`` (cachegrind, the whole command): 293 M
    instructions with every command's parser, 224 M without, about 14 ms of each ``parse``."""
    parser, add, _ = _top_parser()
    _add_parse(add)
    return parser


#: What exit 2 means for the commands that load.
_LOADING = {Exit.PARTIAL: "some files failed (each named on stderr as path:line: reason); the others were loaded "
                          "(`run`: and analyzed and validated)"}


def _add_server(add) -> None:
    """``server`` and its verbs, each with its own options and --help."""
    p = add("server", None, "start, stop or report the embedded SecantusDB server; add users",
            "examples:\n  sci-ingest server start\n  sci-ingest server start --auth\n"
            "  sci-ingest server add-user alice --read-only\n  sci-ingest server status\n  sci-ingest server stop\n"
            "\na command without a URI starts the home's server if none runs and leaves it running for the\n"
            "next commands until $SCI_INGEST_SERVER_IDLE seconds (default 600) pass without a client\n"
            "(0: a private server per command); `server start` keeps it running until `server stop`,\n"
            "which stops either.  `sci-ingest server VERB --help` shows a verb's options.\n",
            db=False, json=None)
    verbs = p.add_subparsers(dest="action", required=True, metavar="VERB")
    p = add("start", cmd_server, "start the home's server and keep it running until `server stop`",
            "examples:\n  sci-ingest server start\n  sci-ingest server start --port 27555\n"
            "  sci-ingest server start --auth\n  export MONGODB_URI=$(sci-ingest server start --json | jq -r .uri)\n"
            "\nA server already running (a command's per-home server too) is kept and reported.\n",
            db=False, under=verbs)
    p.add_argument("--port", type=PORT, help="the port, 1 to 65535 (default: a free one)")
    p.add_argument("--auth", action="store_true",
                   help="require SCRAM authentication from now on (creates an administrator whose password "
                        "is kept in <home>/credentials.json, 0600)")
    add("stop", cmd_server, "stop the home's server, whoever started it",
        "examples:\n  sci-ingest server stop\n", db=False, under=verbs)
    add("status", cmd_server, "whether the home's server runs and answers, and what kind it is",
        "examples:\n  sci-ingest server status\n  sci-ingest server status --json\n", db=False, under=verbs,
        here={Exit.FATAL: "a server process holds the data but does not answer, or is another command's "
                          "private server",
              Exit.NOT_RUNNING: "no server runs"})
    p = add("add-user", cmd_server, "add a user to a server started with --auth",
            "examples:\n  sci-ingest server add-user alice --read-only\n"
            "  sci-ingest server add-user loader --db projects\n"
            "\nThe user's password is written to <home>/users/NAME.json (0600), never printed.\n",
            db=False, under=verbs)
    p.add_argument("name", metavar="NAME", help="the new user's name")
    p.add_argument("--read-only", action="store_true", help="the user may read, not write")
    p.add_argument("--db", type=DB_NAME, help="the database the user gets (default: $SCI_INGEST_DB or sci_ingest)")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415 - lazy: 50 ms, only for --version

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


def _needs_plugins(argv: list[str]) -> bool:
    """Whether the command line asks for more than ``ingest``'s own commands (finding the plugins
    costs 40-140 ms of start-up, which ``sci-ingest parse`` must not pay)."""
    command = next((a for a in argv if not a.startswith("-")), None)
    return command not in OWN_COMMANDS


def _stop(exc: KeyboardInterrupt):
    """Raise ``exc``, a stop; a wait between retries ends at once and none begins
    (:func:`ingest.store.retry.stop_retrying`): the stop is acted on now, not when the retry window
    ends.  Nothing retries before pymongo is imported."""
    store = sys.modules.get("ingest.store.retry")
    if store is not None:
        store.stop_retrying(exc)
    raise exc


def _ctrl_c(signum, frame) -> None:
    _stop(KeyboardInterrupt())


def _stop_like_ctrl_c(signum, frame) -> None:
    _stop(Interrupted(signum))  # SIGTERM (Airflow, timeout, systemd): roll back, stop the server, say how to resume


def _end_operations() -> None:
    """The stopped command's operations still running on its servers end too
    (:func:`ingest.store.operations.end_operations`): a command that never built a client (pymongo
    not imported) has none."""
    if "ingest.store.mongo" not in sys.modules:
        return
    from ingest.store.operations import end_operations  # noqa: PLC0415 - lazy: only a stopped command that built a client pays pymongo's import (0.3 s)

    try:
        end_operations(log=lambda line: stderr_line(f"note: {line}"))
    except KeyboardInterrupt:  # a second Ctrl-C: stop now
        pass


def _disk_full(exc: BaseException):
    """The full disk behind ``exc`` (:func:`ingest.store.space.own_disk_full`: the folder of the file, else
    the home's), or None."""
    from ingest.config import Settings  # noqa: PLC0415 - lazy: only a failed command pays it (the settings, psutil: 10 ms)
    from ingest.store.space import own_disk_full  # noqa: PLC0415 - lazy: as above

    folders: tuple[os.PathLike, ...]
    try:
        settings = Settings()
        folders = (settings.out_dir, settings.state_dir)
    except SciIngestError:  # a bad setting, likely the error being said: no folder to name
        folders = ()
    return own_disk_full(exc, *folders)


def _parse(argv: list[str]) -> argparse.Namespace:
    """The command line read; what it cannot read is said by the command's own parser (its usage,
    not the top level's: ``load --nosuch``), exit 64."""
    parser = _parse_parser() if argv[:1] == ["parse"] else build_parser(with_plugins=_needs_plugins(argv))
    args, extra = parser.parse_known_args(argv)
    if extra:
        getattr(args, "parser", parser).error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = _parse(argv)
    except SystemExit as exc:  # --help, --version, or a usage error (Parser.error): argparse has said all
        return exc.code if isinstance(exc.code, int) else Exit.OK
    except BrokenPipeError:  # `sci-ingest --help | head`
        return Exit.OK
    bad = bad_settings()  # every SCI_INGEST_* setting of its declared type and range, before any work
    if bad:
        for line in bad:
            stderr_line(f"error: {line}")
        return Exit.USAGE
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _stop_like_ctrl_c)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not where SIGINT is ignored (`cmd &`)
            signal.signal(signal.SIGINT, _ctrl_c)
    begin_command()  # its clients' app name on the server: what _end_operations looks for
    if args.command != "parse":  # what libraries say: one line each (parse logs nothing: its start-up stays light)
        one_line_messages()
    try:
        code = args.func(args)
    except SciIngestError as exc:  # the one place a command's error becomes its exit code (the class says which)
        stderr_line(f"error: {_disk_full(exc) or exc}")
        return exc.exit_code
    except BrokenPipeError:  # the reader went away (`| head`): it has what it wanted (an OSError: first)
        return Exit.OK
    except OSError as exc:  # a write of ours found no room: said in one line; any other is a defect, shown
        full = _disk_full(exc)
        if full is None:
            raise
        stderr_line(f"error: {full}")
        return Exit.FATAL
    except KeyboardInterrupt as exc:
        _end_operations()
        stderr_line(f"error: interrupted ({stopped_by(exc)})")
        return Exit.INTERRUPTED
    if code == Exit.INTERRUPTED:  # stopped, and said what it finished (run's report): its operations end too
        _end_operations()
    return code


def run() -> None:
    """The ``sci-ingest`` console script: the command run by a kept process (:mod:`ingest.cli.kept`)
    when one serves it, else :func:`main` here (with a kept process started beside it for the next
    command); then leave without the interpreter's teardown.

    By then the command has closed all it opened (its private server stopped, its Dask
    cluster closed, its outputs written and closed); the teardown would only add
    pymongo's exit hook, which waits up to half a second for each client's monitor
    threads to finish a sleep, and 0.4 s of freeing modules (measured after an ``analyze``).
    Output is flushed first.
    """
    argv = sys.argv[1:]
    started = process_started()
    bad = bad_settings()  # said by main() below, in a process of its own
    keeping = not bad and argv[:1] != ["parse"]  # no kept process serves `parse` (kept.COMMANDS)
    if keeping:
        from ingest.cli import kept  # noqa: PLC0415 - lazy: subprocess, socket and hashlib (ingest.cli.kept: 9 ms) that parse must not pay
    code = kept.run_kept(argv, started) if keeping else None
    if code is None:
        if keeping:
            kept.start_for_next(argv, dict(os.environ))  # it imports while this command runs
        command_began(started)
        code = main(argv)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said
            pass
    os._exit(code)


if __name__ == "__main__":
    run()
