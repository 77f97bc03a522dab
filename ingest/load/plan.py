"""Before loading: find the files, skip the known ones in bulk, group the rest into tasks.

* :func:`discover` walks the inputs (directories: every file whose name ends in a
  registered format's suffix), each path once.
* :func:`plan` stats every file and reads the ledger entries of all of them in a
  few queries (not one round trip per file): a file whose entry says ``loaded``
  with the same size and mtime is skipped here, without being read or hashed.
  Everything else goes to the workers, which hash it (only they read file
  contents) and let the sha256 decide.
* :func:`group` packs the files to load into tasks of similar size, so that many
  tiny files cost few scheduler round trips and a huge file is a task of its own.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ingest import parsers
from ingest.fileio import printable
from ingest.inputs import find_inputs
from ingest.load.outcome import FileOutcome
from ingest.store.ledger import Ledger

__all__ = ["FileTask", "discover", "plan", "group"]

#: Bounds of a task's size: at least this many bytes when there is enough work ...
MIN_TASK_BYTES = 1 << 20
#: ... at most this many (a bigger file is a task alone), and at most MAX_TASK_FILES files.
MAX_TASK_BYTES = 64 << 20
MAX_TASK_FILES = 500
#: Tasks per worker to aim for, so that one slow task does not leave the others idle.
TASKS_PER_WORKER = 8


@dataclass(frozen=True)
class FileTask:
    key: str  # the resolved path: the ledger's _id
    size: int
    format: str | None = None  # by name, for the index plan's estimate
    known: bool = False  # the ledger had an entry for it (else a new file: it may go in a batch)


def discover(paths: Iterable[str | Path], *, include_hidden: bool = False,
             given: dict | None = None) -> tuple[list[Path], list[FileOutcome]]:
    """Expand directories into the data files under them (sorted), each path once.

    Returns (files, named): the outcomes of the paths named instead of loaded, each to be
    reported (``failed: PATH: reason`` / ``skipped: PATH: reason``), never an exception:

    * ``failed``: what cannot be loaded (see :func:`ingest.inputs.find_inputs`);
    * ``skipped``: a hidden file named like a data file, or a hidden directory holding such
      files, found in a directory (unless ``include_hidden``): the reason says which and that
      ``--include-hidden`` loads it.

    Every outcome's ``path`` is the stored path; ``line`` shows it escaped.  ``files`` are the
    files' keys (:func:`ingest.inputs.file_key`: resolved paths), as :func:`plan` takes them;
    ``given`` gets the path the user gave of each key that is another (a link), for messages.
    """
    found = find_inputs(paths, parsers.data_file_suffixes(), include_hidden=include_hidden, resolved=True,
                        given=given)

    def outcome(named, status: str) -> FileOutcome:
        return FileOutcome(path=named.path, status=status, reason=named.reason,
                           shown_path=named.shown if named.shown != printable(named.path) else None)

    return found.files, [outcome(n, "failed") for n in found.refused] + [outcome(n, "skipped") for n in found.skipped]


def plan(ledger: Ledger | None, files: list[Path], force: bool = False) -> tuple[list[FileTask], list[FileOutcome]]:
    """(files to load, outcomes decided here: unchanged files skipped, unreadable ones failed)."""
    stats: list[tuple[str, os.stat_result]] = []
    decided: list[FileOutcome] = []
    for path in files:  # keys, from discover()
        key = str(path)
        try:
            stats.append((key, path.stat()))
        except OSError as exc:
            decided.append(FileOutcome(path=key, status="failed", reason=f"cannot read: {exc.strerror or exc}"))
    entries = ledger.lookup([k for k, _ in stats]) if ledger is not None else {}
    todo: list[FileTask] = []
    for key, stat in stats:
        entry = entries.get(key)
        if entry and not force and entry.get("status") == "loaded" and entry.get("size") == stat.st_size \
                and entry.get("mtime") == stat.st_mtime:
            decided.append(FileOutcome(path=key, status="skipped", reason="unchanged since it was loaded",
                                       format=entry.get("format"), sha256=entry.get("sha256"),
                                       size=stat.st_size, records=dict(entry.get("records") or {})))
        else:
            todo.append(FileTask(key=key, size=stat.st_size, format=_format_by_name(key), known=entry is not None))
    return todo, decided


def _format_by_name(key: str) -> str | None:
    name = parsers.strip_compression(key.lower())
    for fmt_name in parsers.names():
        if name.endswith(parsers.get(fmt_name).suffixes):
            return fmt_name
    return None


def group(tasks: list[FileTask], workers: int) -> list[list[str]]:
    """Pack the files into tasks (lists of paths) of about equal bytes, in their order."""
    if not tasks:
        return []
    total = sum(t.size for t in tasks)
    target = min(MAX_TASK_BYTES, max(MIN_TASK_BYTES, math.ceil(total / (max(1, workers) * TASKS_PER_WORKER))))
    groups: list[list[str]] = []
    current: list[str] = []
    size = 0
    for task in tasks:
        if current and (size + task.size > target or len(current) >= MAX_TASK_FILES):
            groups.append(current)
            current, size = [], 0
        current.append(task.key)
        size += task.size
    groups.append(current)
    return groups
