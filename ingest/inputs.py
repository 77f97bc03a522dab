"""Finding input files: directories walked, every path that cannot be read named with a reason.

Light on purpose (no database, no Dask): ``sci-ingest parse`` uses it at start-up, and
the loader's plan (:mod:`ingest.load.plan`) builds on it.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time of `parse`)
if TYPE_CHECKING:
    from typing import Iterable

from ingest.fileio import display_path, is_displayable, kind_of

__all__ = ["file_key", "find_inputs"]


def file_key(path: Path) -> str:
    """The ledger's key of a file: its absolute path with symbolic links resolved."""
    return os.path.realpath(path)  # unlike Path.resolve, never raises on a symbolic link loop


def find_inputs(paths: Iterable[str | Path], suffixes: tuple[str, ...]) -> tuple[list[Path], list[tuple[str, str]]]:
    """The files named by ``paths``: files as given, and under directories (sorted) every file
    whose name ends in one of ``suffixes``, each path once.

    Returns (files, refused) where refused holds (printable path, reason) for a path
    that is missing, a broken or looping symbolic link, not a regular file (FIFO,
    socket, device), named in bytes that are not UTF-8, or a directory that cannot
    be read: never an exception.  Symbolic links to directories inside a directory
    are not followed (a link back up would loop); a path given on the command line is.
    """
    found: dict[str, Path] = {}
    refused: list[tuple[str, str]] = []

    def refuse(path: Path, reason: str) -> None:
        refused.append((display_path(path), reason))

    def add(path: Path, st: os.stat_result) -> None:
        if not is_displayable(path):
            refuse(path, "the file name is not valid UTF-8 (shown escaped); rename the file to load it")
        elif not stat.S_ISREG(st.st_mode):
            refuse(path, f"not a regular file: {kind_of(st.st_mode)}")
        else:
            found.setdefault(file_key(path), path)

    def walk(directory: Path) -> None:
        try:
            with os.scandir(directory) as listing:
                entries = sorted(listing, key=lambda e: os.fsencode(e.name))
        except OSError as exc:
            refuse(directory, f"cannot read the directory: {exc.strerror or exc}")
            return
        for entry in entries:
            if entry.name.startswith("."):
                continue
            path = Path(entry.path)
            if _is_real_dir(entry):
                walk(path)
            elif entry.name.lower().endswith(suffixes):
                try:
                    add(path, entry.stat())
                except OSError as exc:
                    refuse(path, _unreadable(path, exc))

    for raw in paths:
        path = Path(raw)
        try:
            st = path.stat()
        except OSError as exc:
            refuse(path, _unreadable(path, exc))
            continue
        if stat.S_ISDIR(st.st_mode):
            walk(path)
        else:
            add(path, st)
    return list(found.values()), refused


def _is_real_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def _unreadable(path: Path, exc: OSError) -> str:
    """Why ``path`` cannot be stat'ed, in words."""
    if exc.errno == errno.ELOOP:
        return "a loop of symbolic links"
    if exc.errno == errno.ENOENT:
        return "a broken symbolic link (its target does not exist)" if path.is_symlink() \
            else "no such file or directory"
    return f"cannot read: {exc.strerror or exc}"
