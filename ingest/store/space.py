"""A full disk: how sci-ingest tells it, for the embedded server's data and for its own writes.

SecantusDB (WiredTiger) does not say "no space" to its clients.  When a write of its journal
fails with ENOSPC, WiredTiger panics ("fatal log failure: No space left on device ... the process
must exit and restart: WT_PANIC"), and from then on the server answers every command that touches
its storage with ``internal server error`` (code 1, InternalError), also once the space is back,
while ``hello`` and ``ping`` still answer.  Its log says so only when the log itself can be written,
and the log is in the home, on the full disk.  So the cause is read from the disk: an internal error
of a server on this machine whose data directory's file system has less than :data:`LOW_SPACE_BYTES`
free is a full disk (:func:`server_disk_full`), named with :func:`ingest.errors.no_space`.  How the
home's server is brought back: :func:`ingest.server.embedded.running_server`.

A write of sci-ingest's own (an output's Parquet file, a report, a record in the home) fails with
``OSError`` ENOSPC (or EDQUOT, a quota), often wrapped in an error of its own: :func:`own_disk_full`
finds it in the chain and names the folder.

It imports no module of :mod:`ingest.server` (which imports it): only :mod:`ingest.errors`.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import psutil

from ingest.errors import DiskFull, no_space

__all__ = ["LOW_SPACE_BYTES", "free_bytes", "short_of_space", "refuse_if_full", "storage_of", "server_disk_full",
           "own_disk_full"]

#: Less free space than this on the file system of a server's data directory, with the server failing,
#: is a full disk: WiredTiger writes its journal in files of 10 MB (SecantusDB's ``file_max``), and a
#: new one is what fails first; 16 MiB leaves room for what another process freed meanwhile.
LOW_SPACE_BYTES = 16 * 1024 * 1024
#: The errors of a write that found no room: no space, or the user's quota spent.
_NO_ROOM = (errno.ENOSPC, errno.EDQUOT)
_NO_ROOM_TEXT = ("No space left on device", "Disk quota exceeded")
#: The server's options naming its data directory: SecantusDB's and mongod's.
_STORAGE_OPTIONS = ("--storage-path", "--dbpath")


def free_bytes(path: str | os.PathLike) -> int | None:
    """The bytes an unprivileged user may still write on the file system of ``path`` (its nearest
    folder that exists), or None when that cannot be read."""
    folder = Path(path)
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        found = os.statvfs(folder)
    except OSError:
        return None
    return found.f_bavail * found.f_frsize


def short_of_space(path: str | os.PathLike) -> bool:
    """Whether the file system of ``path`` has less than :data:`LOW_SPACE_BYTES` free."""
    free = free_bytes(path)
    return free is not None and free < LOW_SPACE_BYTES


def refuse_if_full(path: str | os.PathLike) -> None:
    """:class:`DiskFull` naming ``path`` when its file system is short of space (before starting a
    server there, which would only fail, or panic at its first journal file)."""
    if short_of_space(path):
        raise DiskFull(no_space(path))


def storage_of(port: int) -> Path | None:
    """The data directory of the server on this machine listening on ``port``, when it names it on
    its command line (SecantusDB's ``--storage-path``, mongod's ``--dbpath``), else None."""
    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info.get("cmdline") or []
        if _option(cmd, "--port") != str(port):
            continue
        for name in _STORAGE_OPTIONS:
            found = _option(cmd, name)
            if found:
                return Path(found)
    return None


def server_disk_full(code: int | None, message: str, data_dir: Path | None, server: str) -> DiskFull | None:
    """The :class:`DiskFull` a server's error means, or None.

    ``code``/``message``: the server's error; ``data_dir``: the server's data directory when it runs on
    this machine (:func:`storage_of`), else None; ``server``: how to name it otherwise (its hosts).
    MongoDB's OutOfDiskSpace (14031), or an error that says "No space left on device", is a full disk
    wherever the server is.  An internal error (1) is one when the server runs here and its data
    directory's file system is short of space (:data:`LOW_SPACE_BYTES`).
    """
    said = code == _OUT_OF_DISK_SPACE or any(text in (message or "") for text in _NO_ROOM_TEXT)
    if data_dir is not None and (said or (code == _INTERNAL_ERROR and short_of_space(data_dir))):
        return DiskFull(no_space(data_dir))
    if said:
        return DiskFull(no_space(f"the data directory of the server at {server}"))
    return None


def own_disk_full(exc: BaseException, *folders: str | os.PathLike) -> DiskFull | None:
    """The :class:`DiskFull` that ``exc`` is, or comes from (an ``OSError`` ENOSPC or EDQUOT in its chain
    of causes), named by the file's folder when the error names a file, else by the first of ``folders``
    whose file system is short of space (else the first of them); None when no write lacked room."""
    seen = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        if isinstance(link, DiskFull):
            return link
        if isinstance(link, OSError) and (link.errno in _NO_ROOM or any(t in str(link) for t in _NO_ROOM_TEXT)):
            if link.filename:
                return DiskFull(no_space(Path(os.fsdecode(link.filename)).parent))
            named = [Path(f) for f in folders if f]
            short = [f for f in named if short_of_space(f)]
            return DiskFull(no_space((short or named)[0] if named else "the folder being written"))
        link = link.__cause__ or link.__context__
    return None


_INTERNAL_ERROR = 1
_OUT_OF_DISK_SPACE = 14031


def _option(cmd: list[str], name: str) -> str | None:
    """The value of option ``name`` on the command line ``cmd`` (``--name value`` or ``--name=value``)."""
    for at, part in enumerate(cmd):
        if part == name and at + 1 < len(cmd):
            return cmd[at + 1]
        if part.startswith(name + "="):
            return part[len(name) + 1:]
    return None
