"""What the parser of ``sci-ingest`` needs: the table of exit codes as ``--help`` prints it, shared
help texts and options, and the declared type and range of each numeric option (:func:`typed`).

Light on purpose (argparse, the exit codes of :mod:`ingest.errors`, the declared types of
:mod:`ingest.config`): :mod:`ingest.cli.main` imports it at every start.
"""

from __future__ import annotations

import argparse
import textwrap

from ingest.config import MOST_WORKERS_PER_CORE, DbName, Number
from ingest.errors import EXIT_MEANINGS, Exit

__all__ = ["EPILOG_MAIN", "EXIT_TABLE", "exit_codes", "JSON_HELP", "add_load_options", "HIDDEN_HELP", "FORMATS",
           "typed", "DB_NAME", "PORT", "WORKERS", "RETRY_FOR", "MAX_BAD_RECORDS"]


def typed(kind: Number | DbName):
    """An argparse ``type=`` reading an option's value as ``kind`` (a :class:`~ingest.config.Number`'s
    range, a database name): anything else is the option's usage error, exit 64, naming what it must be."""

    def read(text: str):
        try:
            return kind.parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"must be {exc}, not {text!r}") from None

    read.__name__ = type(kind).__name__.lower()
    return read


#: The declared type and range of the options that several commands share.
DB_NAME = typed(DbName())
PORT = typed(Number(noun="a TCP port", least=1, most=65535))
WORKERS = typed(Number("worker processes", least=1))
RETRY_FOR = typed(Number("seconds", integer=False))
MAX_BAD_RECORDS = typed(Number("bad records"))


def _exit_table() -> str:
    lines = ["exit codes (the same for every command):"]
    for code in Exit:
        lines += textwrap.wrap(EXIT_MEANINGS[code], width=96, initial_indent=f"  {code.value:<5}",
                               subsequent_indent=" " * 7)
    return "\n".join(lines) + "\n"


#: The one table of exit codes (:class:`ingest.errors.Exit`), at the end of every ``--help``.
EXIT_TABLE = _exit_table()


def exit_codes(here: dict[Exit, str] | None = None) -> str:
    """The end of a command's ``--help``: :data:`EXIT_TABLE`, then what some of its codes mean for
    this command (``here``: one line each, codes of the table only)."""
    text = "\n" + EXIT_TABLE
    if here:
        text += "for this command:\n"
        for code, meaning in here.items():
            text += "\n".join(textwrap.wrap(meaning, width=96, initial_indent=f"  {Exit(code).value:<5}",
                                             subsequent_indent=" " * 7)) + "\n"
    return text


#: --json: its help, for the commands that print one JSON object.
JSON_HELP = "print one JSON object on stdout instead of text"

EPILOG_MAIN = """\
examples:
  sci-ingest run                         load the bundled samples, analyze, validate, print timings
  sci-ingest run --json                  the same, one JSON object on stdout
  sci-ingest load results/*.m10.gz materials.jsonl
  sci-ingest parse query1.m10 > query1.jsonl
  sci-ingest timings --last
  sci-ingest server start                keep an embedded server running (for Airflow)
  MONGODB_URI=mongodb://mongos:27017/ sci-ingest run     use a real MongoDB / sharded cluster

`sci-ingest COMMAND --help` shows a command's options; `--json`, where a command has it, prints JSON
on stdout; `-q`, where a command has it, quiets its progress bars or messages.
""" + exit_codes()


#: --include-hidden: its help (load, run, parse).
HIDDEN_HELP = ("also read hidden files and walk hidden directories (names starting with '.') found in a "
               "directory; without it each hidden data file, and each hidden directory holding data files, "
               "is named on stderr as skipped")


def add_load_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--force", action="store_true", help="reload files even if the ledger has them")
    p.add_argument("--workers", type=WORKERS, metavar="N",
                   help=f"worker processes loading files, at least 1, at most {MOST_WORKERS_PER_CORE} per core and "
                        "what the open-files limit allows (default: the machine's cores; 1: in this process; "
                        "with --scheduler: the cluster's workers)")
    p.add_argument("--scheduler", help="Dask scheduler address (default: $DASK_SCHEDULER_ADDRESS or a LocalCluster)")
    p.add_argument("--write-concern", metavar="SPEC",
                   help="w=1|majority|N, j=true|false, wtimeout=MS, comma-separated (default: the URI's, "
                        "else the server's); w=0 is refused")
    p.add_argument("--retry-for", type=RETRY_FOR, default=60.0, metavar="SECONDS",
                   help="retry each operation through network errors, restarts and elections for this "
                        "long: a finite number, 0 or more (default 60; 0: no retries); Ctrl-C or SIGTERM ends "
                        "a wait at once")
    p.add_argument("--keep-indexes", action="store_true",
                   help="keep the query indexes up during a bulk load instead of building them after it")
    p.add_argument("--dry-run", action="store_true", help="read, parse and build every document, write nothing")
    p.add_argument("--include-hidden", action="store_true", help=HIDDEN_HELP)
    p.add_argument("--max-bad-records", type=MAX_BAD_RECORDS, default=100, metavar="N",
                   help="a JSON record file fails at its N-th bad record, the rest of it unread: a whole number, "
                        "0 or more (default 100; 0: no bound, every record read)")


#: What `load` reads, for messages.
FORMATS = ("FASTA-suite -m 10 (.m10), its tabular -m 8 (.m8, .m8c, .m8cb) and -m 9 (.m9) output and "
           "Materials-Project JSON (.json, .jsonl; .gz too)")
