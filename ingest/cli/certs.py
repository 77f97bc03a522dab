"""``sci-ingest certs DIR``: a private certificate authority and the certificates of a Dask
cluster on TLS (:mod:`ingest.tls`), and the commands that use them."""

from __future__ import annotations

import argparse

from ingest.cli.options import typed
from ingest.config import Number
from ingest.errors import ConfigError, Exit, UsageError
from ingest.report import dumps
from ingest.tls import files_of, make_certificates

__all__ = ["register"]

#: How long the certificates are valid: 100 years at most (X.509 dates end in 9999; Python's in 9999 too).
DAYS = Number("days", least=1, most=36_500)


def register(add, common: argparse.ArgumentParser) -> None:
    """Add ``certs`` with the main parser's ``add`` helper."""
    p = add("certs", cmd_certs, "make a private CA and TLS certificates for a Dask cluster (scheduler, workers, "
            "sci-ingest)",
            "examples:\n  sci-ingest certs ~/dask-tls --host sched.example.org --host 10.0.0.5\n"
            "  SCI_INGEST_DASK_TLS=~/dask-tls sci-ingest load --scheduler tls://sched.example.org:8786 data/\n"
            "\nWrites ca.pem and ca-key.pem (keep the CA key off the cluster), then scheduler, worker and\n"
            "client certificates with their keys (readable by you only), each naming the --host values\n"
            "and localhost.  Prints the `dask scheduler` and `dask worker` options that use them; sci-ingest\n"
            "shows the client certificate of $SCI_INGEST_DASK_TLS to a tls:// scheduler (docs/cluster.md).\n",
            db=False, here={Exit.USAGE: f"DIR holds a CA already, or --days is not {DAYS.range()}"})
    p.add_argument("folder", metavar="DIR", help="folder for the files (created; must not hold a ca.pem)")
    p.add_argument("--host", action="append", default=[], metavar="NAME",
                   help="a host name or address the scheduler or a worker is reached by (repeatable)")
    p.add_argument("--days", type=typed(DAYS), default=365, help=f"validity in days, {DAYS.range()} (default 365)")


def cmd_certs(args) -> int:
    try:
        written = make_certificates(args.folder, args.host, args.days)
    except ConfigError as exc:
        raise UsageError(str(exc)) from exc
    folder = written["ca"].parent
    usage = {
        "scheduler": "dask scheduler --protocol tls " + _options(folder, "scheduler"),
        "worker": "dask worker tls://SCHEDULER:8786 " + _options(folder, "worker"),
        "sci-ingest": f"SCI_INGEST_DASK_TLS={folder} sci-ingest load --scheduler tls://SCHEDULER:8786 ...",
    }
    if args.json:
        print(dumps({"folder": str(folder), "files": {k: str(v) for k, v in written.items()}, "usage": usage}))
        return Exit.OK
    print(f"certificates for {', '.join(args.host + ['localhost'])} in {folder} (CA: ca.pem; its key ca-key.pem "
          "stays off the cluster)")
    for role, line in usage.items():
        print(f"  {role:10s} {line}")
    return Exit.OK


def _options(folder, role: str) -> str:
    cert, key = files_of(folder, role)
    return f"--tls-ca-file {folder / 'ca.pem'} --tls-cert {cert} --tls-key {key}"
