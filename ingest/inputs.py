"""Finding input files: directories walked, every path that cannot be read named with a reason,
every hidden one that holds data named as skipped (unless asked for).

Light on purpose (no database, no Dask): ``sci-ingest parse`` uses it at start-up, and
the loader's plan (:mod:`ingest.load.plan`) builds on it.
"""

from __future__ import annotations

import errno
import os
import stat
from collections import namedtuple
from collections.abc import Iterable
from pathlib import Path

from ingest.fileio import display_path, is_displayable, kind_of, printable

__all__ = ["Named", "Inputs", "file_key", "find_inputs", "is_hidden_reason", "HIDDEN_FILE", "HIDDEN_DIR_SEARCH",
           "LOADED_BY_ANOTHER"]

#: Why a hidden file named like a data file, found in a directory, is not loaded.
HIDDEN_FILE = "a hidden file (its name starts with '.'); --include-hidden loads it"
#: Why a file is skipped that another loader took over (its claim) and loaded (:mod:`ingest.load.files`).
LOADED_BY_ANOTHER = "loaded by another loader"
#: At most this many entries of a hidden directory are looked at to tell whether it holds data files.
HIDDEN_DIR_SEARCH = 20_000


def is_hidden_reason(reason: str | None) -> bool:
    """Whether an outcome's reason is that of a hidden file or directory passed over."""
    return reason is not None and reason.startswith(("a hidden file ", "a hidden directory "))


#: A path named with a reason instead of being read: ``path`` as it is stored (JSON, the ledger:
#: the real path, or :func:`display_path`'s when it is not UTF-8), ``reason``, and ``shown``, the
#: path as messages show it (:func:`printable` of the real path).
Named = namedtuple("Named", "path reason shown")
#: What :func:`find_inputs` found: ``files`` to read, ``refused`` paths (cannot be read: a
#: failure) and ``skipped`` ones (hidden: passed over unless asked for), each a :class:`Named`.
Inputs = namedtuple("Inputs", "files refused skipped")


def file_key(path: Path) -> str:
    """The ledger's key of a file: its absolute path with symbolic links resolved."""
    return os.path.realpath(path)  # unlike Path.resolve, never raises on a symbolic link loop


def find_inputs(paths: Iterable[str | Path], suffixes: tuple[str, ...], *, include_hidden: bool = False,
                resolved: bool = False, given: dict | None = None) -> Inputs:
    """The files named by ``paths``: files as given, and under directories (sorted) every file
    whose name ends in one of ``suffixes``, each path once (``resolved``: as their keys,
    :func:`file_key`, which a walk derives from its directory's without resolving each file).

    Returns (files, refused, skipped).  ``refused`` names, with its reason, a path that is
    missing, a broken or looping symbolic link, not a regular file (FIFO, socket, device),
    named in bytes that are not UTF-8, or a directory that cannot be read: never an
    exception.  Symbolic links to directories inside a directory are not followed (a link
    back up would loop); a path given on the command line is.

    Hidden entries (a name starting with ".") found inside a directory are passed over unless
    ``include_hidden``, but never silently when they hold data: ``skipped`` names

    * every hidden file whose name ends in one of ``suffixes`` (``.a.m10``, ``.m10``);
    * once, every hidden directory (``.snapshot``, ``.backup``) under which a file so named
      is found, not walked; a hidden directory holding no such file (``.git``, ``.cache``,
      ``.ipynb_checkpoints``: skipping it skips no data) is passed over without a word.  The
      search looks at no more than :data:`HIDDEN_DIR_SEARCH` entries and follows no link; a
      bigger hidden directory is named as not searched.

    A path given itself (``sci-ingest load .hidden.m10 .snapshot/``) is never hidden: it is
    read (walked) as asked.

    ``given``: filled with the path as the user gave it (absolute, links not resolved, as stored), by
    key, for each file whose key is another path (a symbolic link: ``st.json`` -> ``/proc/self/status``
    has the key ``/proc/<this process>/status``): what messages name.
    """
    found: dict[str, Path] = {}
    refused: list[Named] = []
    skipped: list[Named] = []

    def named(path: Path, reason: str) -> Named:
        return Named(display_path(path), reason, printable(path))

    def refuse(path: Path, reason: str) -> None:
        refused.append(named(path, reason))

    def add(path: Path, st: os.stat_result, key: str | None = None) -> None:
        if not is_displayable(path):
            refuse(path, "the file name is not valid UTF-8 (shown escaped); rename the file to load it")
        elif not stat.S_ISREG(st.st_mode):
            refuse(path, f"not a regular file: {kind_of(st.st_mode)}")
        else:
            if key is None:
                key = file_key(path)
                if given is not None and os.path.abspath(path) != key:  # a link: named as the user gave it
                    given.setdefault(key, display_path(os.path.abspath(path)))
            found.setdefault(key, Path(key) if resolved else path)

    def walk(directory: Path, real: str) -> None:
        """``real``: the directory's key (its path resolved): an entry that is not a link has
        ``real/name`` for its own, without a resolution of its own (realpath was most of the
        time of discovering 10,000 files)."""
        try:
            with os.scandir(directory) as listing:
                entries = sorted(listing, key=lambda e: os.fsencode(e.name))
        except OSError as exc:
            refuse(directory, f"cannot read the directory: {exc.strerror or exc}")
            return
        for entry in entries:
            path = Path(entry.path)
            hidden = entry.name.startswith(".") and not include_hidden
            if _is_real_dir(entry):
                if not hidden:
                    walk(path, os.path.join(real, entry.name))
                else:
                    why = _hidden_directory(path, suffixes)
                    if why:
                        skipped.append(named(path, why))
            elif entry.name.lower().endswith(suffixes):
                if hidden:
                    skipped.append(named(path, HIDDEN_FILE))
                    continue
                try:
                    add(path, entry.stat(), None if entry.is_symlink() else os.path.join(real, entry.name))
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
            walk(path, file_key(path))
        else:
            add(path, st)
    return Inputs(list(found.values()), refused, skipped)


def _hidden_directory(directory: Path, suffixes: tuple[str, ...]) -> str | None:
    """Why the hidden ``directory`` is named as skipped: it holds a data file (the first found,
    depth first in sorted order), or it is too big to tell; None when it holds none."""
    budget = HIDDEN_DIR_SEARCH
    stack = [directory]
    while stack:
        current = stack.pop()
        try:
            with os.scandir(current) as listing:
                entries = sorted(listing, key=lambda e: os.fsencode(e.name), reverse=True)
        except OSError:
            continue  # unreadable below a directory not walked: nothing to name
        budget -= len(entries)
        for entry in reversed(entries):
            if not _is_real_dir(entry) and entry.name.lower().endswith(suffixes):
                inside = printable(os.path.relpath(entry.path, directory))
                return (f"a hidden directory (its name starts with '.') holding data files, such as {inside}; "
                        "not walked; --include-hidden walks it")
        if budget < 0:
            return (f"a hidden directory (its name starts with '.'), not walked, too big to tell whether it holds "
                    f"data files (more than {HIDDEN_DIR_SEARCH:,} entries); --include-hidden walks it")
        stack.extend(Path(e.path) for e in entries if _is_real_dir(e))
    return None


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
