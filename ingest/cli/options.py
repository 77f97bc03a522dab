"""What the parser of ``sci-ingest`` needs: the exit codes, shared help texts and options.

Light on purpose (argparse alone): :mod:`ingest.cli.main` imports it at every start.
"""

from __future__ import annotations

import argparse

__all__ = ["EPILOG_MAIN", "EXIT_CODES_RUN", "add_load_options", "HIDDEN_HELP", "FORMATS"]

EPILOG_MAIN = """\
examples:
  sci-ingest run                         load the bundled samples, analyze, validate, print timings
  sci-ingest run --json                  the same, one JSON object on stdout
  sci-ingest load results/*.m10.gz materials.jsonl
  sci-ingest parse query1.m10 > query1.jsonl
  sci-ingest timings --last
  sci-ingest server start                keep an embedded server running (for Airflow)
  MONGODB_URI=mongodb://mongos:27017/ sci-ingest run     use a real MongoDB / sharded cluster

exit codes: 0 success, 2 some inputs failed but the rest went in, 1 fatal error, 130 interrupted
"""

#: The exit codes of the commands that load, analyze or validate (shown in their --help).
EXIT_CODES_RUN = """
exit codes:
  0    done
  1    fatal: the database, the configuration or a critical expectation failed (one line on stderr)
  2    some inputs failed (each named on stderr as path:line: reason); everything else was done
  130  interrupted (Ctrl-C); the same command resumes
"""


#: --include-hidden: its help (load, run, parse).
HIDDEN_HELP = ("also read hidden files and walk hidden directories (names starting with '.') found in a "
               "directory; without it each hidden data file, and each hidden directory holding data files, "
               "is named on stderr as skipped")


def add_load_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--force", action="store_true", help="reload files even if the ledger has them")
    p.add_argument("--workers", type=int, metavar="N",
                   help="worker processes loading files (default: the machine's cores; 1: in this process)")
    p.add_argument("--scheduler", help="Dask scheduler address (default: $DASK_SCHEDULER_ADDRESS or a LocalCluster)")
    p.add_argument("--write-concern", metavar="SPEC",
                   help="w=1|majority|N, j=true|false, wtimeout=MS, comma-separated (default: the URI's, "
                        "else the server's); w=0 is refused")
    p.add_argument("--retry-for", type=float, default=60.0, metavar="SECONDS",
                   help="retry each operation through network errors, restarts and elections for this "
                        "long (default 60; 0: no retries)")
    p.add_argument("--keep-indexes", action="store_true",
                   help="keep the query indexes up during a bulk load instead of building them after it")
    p.add_argument("--dry-run", action="store_true", help="read, parse and build every document, write nothing")
    p.add_argument("--include-hidden", action="store_true", help=HIDDEN_HELP)


#: What `load` reads, for messages.
FORMATS = "FASTA-suite -m 10 (.m10) and Materials-Project JSON (.json, .jsonl; .gz too)"
