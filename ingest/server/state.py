"""What a sci-ingest home keeps of its embedded server on disk: the server's record, the home's locks.

The bottom of :mod:`ingest.server`: it imports no other module of it.

* ``<home>/server.json`` records the home's server, long-lived or per-home (pid, start time,
  URI, data directory; what a record holds: :func:`ingest.server.embedded.server_record`), so
  that other processes find and share it: :func:`state_file`, :func:`recorded`,
  :func:`write_record`.
* ``<home>/server.start.lock`` is held while a server of the home is started or stopped
  (:func:`starting`), ``<home>/server.use.lock`` while a command uses the home's server
  (:func:`using`); how the keeper of a per-home server uses both: :mod:`ingest.server.keeper`.
* :func:`private_file`: a file its owner alone may read (the record, the server's log and
  configuration, the credentials of :mod:`ingest.server.access`).
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ingest.errors import ServerError

__all__ = ["START_LOCK", "USE_LOCK", "private_file", "state_file", "recorded", "write_record", "lock_fd",
           "try_lock", "using", "starting"]

START_LOCK = "server.start.lock"
USE_LOCK = "server.use.lock"


def private_file(path: Path, text: str | None) -> None:
    """Create ``path`` readable by its owner only (``text``: its content, rewritten; None: kept)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if text is not None else 0), 0o600)
    try:
        os.fchmod(fd, 0o600)
        if text is not None:
            os.write(fd, text.encode())
    finally:
        os.close(fd)


# ---------------------------------------------------------------- the server's record
def state_file(state_dir: Path) -> Path:
    return Path(state_dir) / "server.json"


def recorded(state_dir: Path) -> dict | None:
    """The record of the home's server, or None (none, not readable, or another home's).

    A record counts only when its server's data directory is this home's own (``<home>/db``): a
    home copied (``cp -a``) or moved while its server ran carries the other home's record, whose
    server this home must neither use nor stop; it starts its own (issue 42)."""
    try:
        state = json.loads(state_file(state_dir).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(state, dict) or not own_data_dir(state_dir, state.get("data_dir")):
        return None
    return state


def own_data_dir(state_dir: Path, data_dir) -> bool:
    """Whether ``data_dir`` (a record's) is the home's own data directory, ``<home>/db``."""
    if not isinstance(data_dir, str) or not data_dir:
        return False
    return os.path.realpath(data_dir) == os.path.realpath(Path(state_dir) / "db")


def write_record(state_dir: Path, state: dict) -> None:
    """Write the server's record at once (readers never see half of it), readable by its owner only."""
    path = state_file(state_dir)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    private_file(partial, json.dumps(state, indent=2))
    os.replace(partial, path)


# ---------------------------------------------------------------- the home's locks
def lock_fd(state_dir: Path, name: str) -> int:
    """A descriptor of the home's lock file ``name`` (created, with the home, if need be), not locked."""
    try:
        Path(state_dir).mkdir(mode=0o700, parents=True, exist_ok=True)
        return os.open(Path(state_dir) / name, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise ServerError(f"cannot use {state_dir} as the sci-ingest home: {exc}") from exc


@contextmanager
def _locked(state_dir: Path, name: str, mode: int, timeout: float | None = None) -> Iterator[int]:
    """Hold ``name`` locked (``mode``); yields the locked descriptor.  ``timeout``: ServerError when the
    lock is not had within that many seconds (None: wait for it)."""
    fd = lock_fd(state_dir, name)
    try:
        if timeout is None:
            fcntl.flock(fd, mode)
        else:
            deadline = time.monotonic() + timeout
            while not try_lock(fd, mode):
                if time.monotonic() >= deadline:
                    raise ServerError(f"the embedded server of {state_dir} has been starting for more than "
                                      f"{timeout:.0f} s in another command or its keeper ({Path(state_dir) / name} "
                                      f"is locked); see {Path(state_dir) / 'server.log'}")
                time.sleep(0.1)
        yield fd
    finally:
        os.close(fd)  # releases the lock (unless a keeper inherited it: then once the keeper lets go too)


def try_lock(fd: int, mode: int) -> bool:
    """Lock ``fd`` (``mode``) if that can be done at once; whether it was."""
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def using(state_dir: Path):
    """Held (shared) while a command uses the home's server: a per-home server does not stop meanwhile."""
    return _locked(state_dir, USE_LOCK, fcntl.LOCK_SH)


def starting(state_dir: Path, timeout: float | None = None):
    """Held (exclusive) while a server of the home is started or stopped; a keeper being started holds
    it until its server is recorded (or has stopped).  Yields the locked descriptor."""
    return _locked(state_dir, START_LOCK, fcntl.LOCK_EX, timeout)
