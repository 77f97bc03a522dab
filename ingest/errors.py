"""The exception hierarchy of sci-ingest.

Every error sci-ingest raises on purpose derives from :class:`SciIngestError`,
so callers can catch one class.  Errors from libraries (pymongo, OS, Dask,
Great Expectations) are mapped at the I/O boundary with ``raise ... from exc``::

    SciIngestError
    ├── ConfigError            bad or missing configuration (URI, paths, options)
    ├── ServerError            the embedded server could not start / stop / answer
    ├── DatabaseError          a MongoDB operation failed (wraps pymongo errors)
    │   ├── ServerUnavailable  the server could not be reached (after the retries allowed)
    │   └── UnsupportedFeature the server lacks a feature (hashed index, sharding)
    ├── InputError             an input file could not be read or understood
    │   ├── UnknownFormat      no registered format recognises the file
    │   └── ParseError         a parser met malformed input (file, line, reason)
    ├── AnalysisError          an analysis stage failed
    └── ValidationFailed       a critical expectation failed
"""

from __future__ import annotations

from ingest.fileio import printable


class SciIngestError(Exception):
    """Base class of every error sci-ingest raises on purpose.

    Its message never holds a secret: the passwords and secret options of every
    MongoDB URI the process was given are masked (:func:`ingest.server.secrets.scrub`).
    """

    def __init__(self, *args):
        if args and isinstance(args[0], str):
            from ingest.server.secrets import scrub

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


class UnsupportedFeature(DatabaseError):
    """The connected server does not support a feature (e.g. hashed indexes)."""


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
