"""Opening input files: plain or gzip-compressed, recognised by the gzip magic number.

Only regular files are read: a FIFO, socket or device named like a data file
would block a reader forever or never end, so :func:`open_regular` opens
without blocking, checks what it opened and refuses anything else with
:class:`NotRegularFile` (an ``OSError``: callers report it as a file they could
not read).  :func:`display_path` is a path as it can be stored (JSON, BSON): a
name that is not valid UTF-8 keeps its bytes as ``\\xff`` escapes.  :func:`printable`
is any text (a path above all) as it may appear in a message: one line, no
control character; :func:`stderr_line` prints a message so.

Kept free of heavy imports: ``sci-ingest parse`` uses it at start-up.
"""

from __future__ import annotations

import os
import re
import stat as _stat
import sys
import warnings
from io import BufferedIOBase
from pathlib import Path

GZIP_MAGIC = b"\x1f\x8b"

_KINDS = ((_stat.S_ISDIR, "a directory"), (_stat.S_ISFIFO, "a FIFO"), (_stat.S_ISSOCK, "a socket"),
          (_stat.S_ISCHR, "a character device"), (_stat.S_ISBLK, "a block device"))


class NotRegularFile(OSError):
    """A path that is not a regular file (a FIFO, socket, device or directory)."""


def kind_of(mode: int) -> str:
    """What a non-regular file is, for a reason ("a FIFO", ...)."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def open_regular(path: str | Path) -> BufferedIOBase:
    """``open(path, "rb")`` for regular files only; never blocks on a FIFO."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not _stat.S_ISREG(mode):
            raise NotRegularFile(f"not a regular file: {kind_of(mode)}")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def is_gzip(path: str | Path) -> bool:
    with open_regular(path) as fh:
        return fh.read(2) == GZIP_MAGIC


def open_binary(path: str | Path) -> BufferedIOBase:
    """The file's bytes, gunzipped when it is gzip-compressed (regular files only)."""
    handle = open_regular(path)
    try:
        gzipped = handle.read(2) == GZIP_MAGIC
        handle.seek(0)
    except BaseException:
        handle.close()
        raise
    if gzipped:
        import gzip  # noqa: PLC0415 - lazy: parse --help reads ingest.fileio; gzip costs 1 ms of its 45 ms

        reader = gzip.GzipFile(fileobj=handle, mode="rb")
        # what GzipFile closes with itself (as when it opens a name)
        reader.myfileobj = handle  # type: ignore[assignment]  # typeshed says FileIO; GzipFile only closes it
        return reader
    return handle


def display_path(path: str | bytes | os.PathLike) -> str:
    """``path`` as text that can be printed and stored: undecodable bytes become ``\\xNN``."""
    raw = os.fsencode(path)
    return raw.decode("utf-8", "backslashreplace")


def is_displayable(path: str | os.PathLike) -> bool:
    """Whether ``path`` is valid UTF-8 (a name BSON, JSON and terminals can carry as it is)."""
    try:
        os.fsencode(path).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


#: What :func:`printable` shows as an escape: C0 controls (newline, carriage return, tab, ESC, ...),
#: DEL, C1 controls (U+0080-U+009F), the Unicode bidirectional controls (U+061C, U+200E, U+200F,
#: U+202A-U+202E, U+2066-U+2069), the line and paragraph separators U+2028 / U+2029, and lone
#: surrogates (U+D800-U+DFFF; U+DC80-U+DCFF are the bytes of a name that is not UTF-8, as
#: ``os.fsdecode`` keeps them).
_SHOWN_ESCAPED = "\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff"
_ESCAPE = re.compile(f"[{_SHOWN_ESCAPED}]")
#: ... and, besides those, a backslash that would otherwise read as the start of an escape.
_ESCAPE_WITH_BACKSLASH = re.compile(f"\\\\(?=[\\\\nrtxu{_SHOWN_ESCAPED}])|[{_SHOWN_ESCAPED}]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}


def _escape(match: re.Match) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    if code < 0x80:  # C0, DEL
        return f"\\x{code:02x}"
    if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte of a file name, as display_path shows it
        return f"\\x{code - 0xDC00:02x}"
    return f"\\u{code:04x}"


def printable(text: str | bytes | os.PathLike, *, backslash: bool = True) -> str:
    """``text`` as it may appear in a message: one line, no control character.

    Shown as escapes: newline ``\\n``, carriage return ``\\r``, tab ``\\t``, every other C0
    control and DEL as ``\\xNN`` (ESC: ``\\x1b``); the C1 controls, the bidirectional controls and
    U+2028 / U+2029 as ``\\uNNNN`` (``\\u0085``, ``\\u202e``); a byte of a file name that is not UTF-8
    (``bytes``, or a ``str`` from ``os.fsdecode``) as ``\\xNN``, as :func:`display_path` shows it
    (``\\x80`` and up: never a character, so no two names are shown alike).  Everything else
    (letters of any script, spaces, emoji) is left as it is.

    A backslash is doubled only where it would otherwise read as the start of an escape: when
    it is followed by another backslash, by one of ``n r t x u``, or by a character shown
    escaped.  So ``C:\\data\\a.m10`` stays as it is, while a name holding the two characters
    ``\\n`` shows as ``\\\\n`` and one holding a newline as ``\\n``: read ``\\\\`` as a backslash,
    ``\\n`` ``\\r`` ``\\t`` ``\\xNN`` ``\\uNNNN`` as escapes, and any other backslash as itself.

    ``backslash=False`` escapes the characters only, never a backslash: for a whole message
    whose paths are already shown so (it is then idempotent: applying it twice changes nothing).
    """
    if not isinstance(text, str):
        text = os.fsdecode(text)
    pattern = _ESCAPE_WITH_BACKSLASH if backslash else _ESCAPE
    return pattern.sub(_escape, text)


def stderr_line(message: str) -> None:
    """Print ``message`` on stderr as one line: every character :func:`printable` escapes is
    escaped (backslashes are left as they are: the paths in it are shown already), except a
    line break followed by two spaces (an indented continuation, as a validation failure lists
    its expectations), which cannot start a line of its own (``failed:``, ``error:``, ...)."""
    text = "\n  ".join(printable(part, backslash=False) for part in str(message).split("\n  "))
    print(text, file=sys.stderr, flush=True)



#: Whether this process is a command that says what libraries say in its own lines (:func:`one_line_messages`).
_ONE_LINE: list = []


def one_line_messages() -> None:
    """What libraries say on stderr, said as sci-ingest says it: each warning (``warnings.warn``:
    Dask's seven-line "Sending large graph ...") and each log record of level WARNING or above
    (Python printed them bare; Dask's and tornado's own handlers with a traceback) becomes one
    escaped line, ``warning:`` or ``error:`` first, naming its source.  For a command's process
    only (an Airflow task keeps Airflow's logging); called again once Dask is imported (its
    loggers are set up then), it takes those over too (their levels stay theirs: a quiet cluster
    stays quiet)."""
    import logging  # noqa: PLC0415 - lazy: 2 ms of start-up that `sci-ingest parse`, which logs nothing, must not pay

    if not _ONE_LINE:
        class OneLine(logging.Formatter):
            def format(self, record: logging.LogRecord) -> str:
                level = "error" if record.levelno >= logging.ERROR else "warning" if record.levelno >= logging.WARNING \
                    else "note"
                text = record.getMessage()
                if record.exc_info and record.exc_info[1] is not None:
                    text += f": {type(record.exc_info[1]).__name__}: {record.exc_info[1]}"
                source = "" if record.name.split(".")[0] in ("ingest", "analytics") else f"{record.name}: "
                return printable(f"{level}: {source}{' '.join(text.split())}", backslash=False)

        def show(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ARG001 - its signature
            stderr_line(f"warning: {category.__name__}: {' '.join(str(message).split())} "
                        f"({os.path.basename(filename)}:{lineno})")

        warnings.showwarning = show
        _ONE_LINE.append(OneLine())
        ours = logging.StreamHandler(_Stderr())  # the stderr of the moment (a kept process's child sets its own)
        ours.setLevel(logging.WARNING)
        logging.getLogger().addHandler(ours)
    for logger in [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]:
        for handler in getattr(logger, "handlers", ()):  # a placeholder (a logger's parent) has none
            if isinstance(handler, logging.StreamHandler) and _on_stderr(handler.stream):
                handler.setFormatter(_ONE_LINE[0])  # Dask's, tornado's, ours: one line; their levels stay


def _on_stderr(stream) -> bool:
    if isinstance(stream, _Stderr):
        return True
    try:
        return stream.fileno() == 2
    except (AttributeError, OSError, ValueError):
        return False


class _Stderr:
    """``sys.stderr`` as it is when written to."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def library_messages_again() -> None:
    """After importing a library that sets up its loggers (Dask): take them over, in a command only."""
    if _ONE_LINE:
        one_line_messages()
