"""The exception hierarchy of sci-ingest.

Every error sci-ingest raises on purpose derives from :class:`SciIngestError`,
so callers can catch one class.  Errors from libraries (pymongo, OS, Dask,
Great Expectations) are mapped at the I/O boundary with ``raise ... from exc``.
Each class declares the code a command exits with when the error ends it (``exit_code``: 1, or 64
for :class:`UsageError` and below), and the command line and the run's report read it there
(:func:`ingest.cli.main.main`, :func:`ingest.pipeline.run`).  Every subclass in the project, as
tests/test_errors.py checks against the code (a class of another module names it)::

    SciIngestError                      exit 1
    ├── ConfigError                     bad or missing configuration (URI, paths, options)
    │   └── PluginMissing               (ingest.plugins) no installed plugin provides what was asked for
    ├── ServerError                     the embedded server could not start / stop / answer
    ├── DatabaseError                   a MongoDB operation failed (wraps pymongo errors)
    │   ├── ServerUnavailable           the server could not be reached (after the retries allowed)
    │   │   └── DiskFull                no space left on the device of the server's data or of a write of ours
    │   ├── UnsupportedFeature          the server lacks a feature (hashed index, sharding)
    │   └── TimeLimitExceeded           the server stopped an operation at the time it was given
    ├── InputError                      an input file could not be read or understood
    │   ├── UnknownFormat               no registered format recognises the file
    │   ├── ParseError                  a parser met malformed input (file, line, reason)
    │   └── Changed                     (ingest.load.reading) the file changed while it was loaded
    ├── ClaimLost                       (ingest.load.claims) another loader took over a claim this one held
    ├── ClaimTimeout                    (ingest.load.claims) a claim stayed with another live loader too long
    ├── LoadStopped                     (ingest.load.run) the load stopped before its end (Ctrl-C, the server gone)
    ├── AnalysisError                   an analysis stage failed
    ├── NoRun                           (analytics.report.html) no run is recorded in the database
    ├── ValidationFailed                a critical expectation failed
    └── UsageError                      exit 64: the command line is wrong: a bad value, or a name that does not exist
        ├── QueryError                  (ingest.query) a bad --where / --filter / --fields / --sort
        ├── UnknownCollection           (ingest.store.curated) a collection that is not curated
        ├── UnknownAnalysis             (analytics.registry) a name no declared analysis has
        ├── UnknownExperiment           (analytics.bench) a name no benchmark experiment has
        └── UnknownRun                  (analytics.report.html) --run names a run that is not recorded

It also holds the one table of exit codes (:class:`Exit`): every command of ``sci-ingest`` exits
with one of them, the pipeline's run report carries one, and every ``--help`` prints the table.
"""

from __future__ import annotations

import signal
from enum import IntEnum

from ingest.fileio import printable
from ingest.secrets import scrub


class Exit(IntEnum):
    """The exit codes of every ``sci-ingest`` command; :data:`EXIT_MEANINGS` says what each means."""

    OK = 0
    FATAL = 1
    PARTIAL = 2
    NOT_RUNNING = 3
    VALIDATION = 4
    USAGE = 64  # sysexits.h's EX_USAGE
    INTERRUPTED = 130  # 128 + SIGINT, as shells report it


#: What each exit code means, for every command (``--help`` prints them, see :mod:`ingest.cli.options`).
EXIT_MEANINGS = {
    Exit.OK: "done",
    Exit.FATAL: "fatal: the database, the server, the configuration or a critical expectation failed, "
                "or there was nothing to work on (one line on stderr)",
    Exit.PARTIAL: "some inputs (files, records, documents) failed or were set aside, each named on stderr; "
                  "the rest was done",
    Exit.NOT_RUNNING: "no server runs (`server status`)",
    Exit.VALIDATION: "validation failed: an expectation of severity `error` failed (each named in the report); "
                     "the rest of the run was done",
    Exit.USAGE: "usage: a bad option or value, or a name that does not exist (an analysis, an experiment, "
                "a collection, a field, a run); nothing was done",
    Exit.INTERRUPTED: "interrupted (Ctrl-C, SIGTERM); the same command resumes",
}


#: The status a run is recorded with, for the code its command exits with: the same word in the
#: ``--json`` report, on the run's ``close`` row in ``stage_timings``, in ``timings --list`` and the report.
RUN_STATUS = {
    Exit.OK: "ok",
    Exit.FATAL: "failed",
    Exit.PARTIAL: "partial",
    Exit.USAGE: "refused",
    Exit.INTERRUPTED: "interrupted",
}


class Interrupted(KeyboardInterrupt):
    """A command stopped by a signal other than Ctrl-C's SIGINT (SIGTERM: ``timeout``, Airflow,
    systemd): handled as Ctrl-C is (what was finished kept, what was in flight rolled back, exit
    130), and named as itself."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum

    def __str__(self) -> str:
        return signal.Signals(self.signum).name


def stopped_by(exc: BaseException | None) -> str:
    """What stopped a command, as its messages name it: ``SIGTERM`` (:class:`Interrupted`), else ``Ctrl-C``."""
    return str(exc) if isinstance(exc, Interrupted) else "Ctrl-C"


class SciIngestError(Exception):
    """Base class of every error sci-ingest raises on purpose.

    Its message never holds a secret: the passwords and secret options of every
    MongoDB URI the process was given are masked (:func:`ingest.secrets.scrub`).
    """

    #: The code a command exits with when this error ends it (the command line, the run's report).
    exit_code: Exit = Exit.FATAL

    def __init__(self, *args):
        if args and isinstance(args[0], str):
            args = (scrub(args[0]), *args[1:])
        super().__init__(*args)


class ConfigError(SciIngestError):
    """Bad or missing configuration."""


class ServerError(SciIngestError):
    """The embedded database server could not be started, stopped or reached."""


class DatabaseError(SciIngestError):
    """A MongoDB operation failed."""


class ServerUnavailable(DatabaseError):
    """The server could not be reached (within the retry budget, where there is one)."""


class DiskFull(ServerUnavailable):
    """No space left on a device: the server's data directory's, or that of a file sci-ingest writes
    (:mod:`ingest.store.space` tells it).  Nothing more can be written, so it stops the work as a
    server out of reach does; the message is :func:`no_space`'s, one line."""


def no_space(path) -> str:
    """The one line that names a full disk: where (``path``, escaped), and what to do."""
    return f"no space left on device in {printable(str(path))}; free space and run again"


class UnsupportedFeature(DatabaseError):
    """The connected server does not support a feature (e.g. hashed indexes)."""


class TimeLimitExceeded(DatabaseError):
    """The server stopped an operation at the time it was given (``maxTimeMS``)."""


class InputError(SciIngestError):
    """An input file could not be read or understood.

    Its message is one line without control characters (:func:`ingest.fileio.printable`): the
    path of a file named with a newline or an ESC cannot forge a line or reach a terminal.
    """

    def __init__(self, *args):
        if args and isinstance(args[0], str):
            args = (printable(args[0], backslash=False), *args[1:])
        super().__init__(*args)


class UnknownFormat(InputError):
    """No registered format recognises the file."""


class ParseError(InputError):
    """Malformed input.  Names the file, the 1-based line (or record) number and the reason.

    ``source`` stays the file's real path; the message shows it escaped (``printable``), and
    ``reason`` holds no control character (it is stored and printed).
    """

    def __init__(self, reason: str, *, source: str = "<stream>", line: int | None = None):
        self.reason = printable(reason, backslash=False)
        self.source = source
        self.line = line
        shown = printable(source)
        where = f"{shown}:{line}" if line is not None else shown
        super().__init__(f"{where}: {self.reason}")


class AnalysisError(SciIngestError):
    """An analysis stage failed."""


class ValidationFailed(SciIngestError):
    """A critical expectation failed.  ``failures`` lists what failed and sample values."""

    def __init__(self, message: str, failures: list[dict] | None = None):
        self.failures = failures or []
        super().__init__(message)


class UsageError(SciIngestError):
    """The command line is wrong: a bad option value, or a name that does not exist (``sci-ingest``
    exits :attr:`Exit.USAGE`, 64; found once a run began, the run is recorded ``refused``)."""

    exit_code = Exit.USAGE
