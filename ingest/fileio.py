"""Opening input files: plain or gzip-compressed, recognised by the gzip magic number.

Only regular files are read: a FIFO, socket or device named like a data file
would block a reader forever or never end, so :func:`open_regular` opens
without blocking, checks what it opened and refuses anything else with
:class:`NotRegularFile` (an ``OSError``: callers report it as a file they could
not read).  :func:`display_path` is a path as it can be printed and stored: a
name that is not valid UTF-8 keeps its bytes as ``\\xff`` escapes.

Kept free of heavy imports: ``sci-ingest parse`` uses it at start-up.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)

if TYPE_CHECKING:  # annotations only: pathlib and typing cost start-up time
    from pathlib import Path
    from typing import BinaryIO

import os
import stat as _stat

GZIP_MAGIC = b"\x1f\x8b"

_KINDS = ((_stat.S_ISDIR, "a directory"), (_stat.S_ISFIFO, "a FIFO"), (_stat.S_ISSOCK, "a socket"),
          (_stat.S_ISCHR, "a character device"), (_stat.S_ISBLK, "a block device"))


class NotRegularFile(OSError):
    """A path that is not a regular file (a FIFO, socket, device or directory)."""


def kind_of(mode: int) -> str:
    """What a non-regular file is, for a reason ("a FIFO", ...)."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def open_regular(path: str | Path) -> BinaryIO:
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


def open_binary(path: str | Path) -> BinaryIO:
    """The file's bytes, gunzipped when it is gzip-compressed (regular files only)."""
    handle = open_regular(path)
    try:
        gzipped = handle.read(2) == GZIP_MAGIC
        handle.seek(0)
    except BaseException:
        handle.close()
        raise
    if gzipped:
        import gzip

        reader = gzip.GzipFile(fileobj=handle, mode="rb")
        reader.myfileobj = handle  # what GzipFile closes with itself (as when it opens a name)
        return reader  # type: ignore[return-value]
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
