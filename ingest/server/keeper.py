"""The per-home embedded server: shared by the commands of a sci-ingest home, stopped when idle.

A command that needs the embedded server (no URI) and finds none running starts a
*keeper*, ``python -m ingest.server.keeper --home HOME --idle SECONDS``: a small detached
process (a session of its own) that

* starts ``secantusd`` as its child exactly like a command's private server (own
  process group, umask 077, parent-death signal SIGKILL: the server dies with its
  keeper however the keeper dies, see :func:`ingest.server.embedded._dies_with_parent`);
* records it in ``<home>/server.json`` like ``sci-ingest server start`` does (the
  server's pid, start time and data directory), plus its own pid and start time
  and the idle timeout, so the next commands of the home find and share it, and
  ``sci-ingest server stop|status`` work on it;
* stops it and exits once ``idle`` seconds pass without a client: no command of the
  home is using it (each holds a shared lock on ``<home>/server.use.lock`` while it
  does) and ``serverStatus``, read every second, shows no connection, operation or
  command but the keeper's own.  ``sci-ingest server stop`` (SIGTERM) stops it at once.

Starting is serialised by ``<home>/server.start.lock``: commands started at once
share one server.  The starting command hands its hold on that lock to the keeper
(the locked file descriptor is inherited), and the keeper lets go of it only once
its server is recorded, or, when it fails, once that server has stopped and the
keeper exits: a command killed (SIGKILL) while its keeper starts leaves the lock
held, so the next command waits for that keeper's server and shares it instead of
starting a second keeper whose server finds the data directory in use.  The keeper
stops its server only while it holds the use lock exclusively, so no command finds
a server that is about to stop under it.
``SCI_INGEST_SERVER_IDLE`` sets the timeout (seconds, default 600); 0 gives each
command a private server of its own, stopped at its end (the old behaviour).
"""

from __future__ import annotations

import argparse
import fcntl
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, TypeGuard, cast

import psutil

from ingest.config import PROJECT_ROOT, SETTINGS, setting
from ingest.errors import SciIngestError, ServerError
from ingest.server.access import load_credentials, with_credentials
from ingest.server.embedded import EmbeddedServer, refuse_if_held, running_server, server_cache_size, server_record
from ingest.server.state import (
    USE_LOCK,
    lock_fd,
    private_file,
    recorded,
    starting,
    state_file,
    try_lock,
    using,
    write_record,
)
from ingest.store.mongo import client as mongo_client, db_errors
from ingest.store.space import refuse_if_full

#: ``using`` and ``starting`` (the home's locks, :mod:`ingest.server.state`) are named here too, for the
#: commands that use the home's server through this module.
__all__ = ["IDLE_ENV", "DEFAULT_IDLE_S", "idle_timeout", "using", "starting", "start", "main"]

IDLE_ENV = "SCI_INGEST_SERVER_IDLE"
DEFAULT_IDLE_S = SETTINGS[IDLE_ENV].default
READY = "ready"
#: How long a command waits for a new keeper to report its server ready.
START_TIMEOUT_S = 90.0
#: How long a command waits for the start lock: another command, or the keeper of a command killed
#: meanwhile, starting the server (the keeper's own start gives up after 60 s and stops its server).
LOCK_TIMEOUT_S = START_TIMEOUT_S + 60.0
#: How long a command waits for a server on the data directory with no record to go (the server of a
#: keeper that was killed: it is killed with it) before saying which process has the data directory.
HOLDER_GRACE_S = 5.0
#: The keeper's own client hardly ever sends a heartbeat: each would look like another client's command.
_HEARTBEAT_MS = 86_400_000
_keepers: list[subprocess.Popen] = []  # started by this process; never waited for (they outlive it)


def idle_timeout() -> float:
    """``SCI_INGEST_SERVER_IDLE`` in seconds (default 600); ConfigError when it is not a number >= 0."""
    return setting(IDLE_ENV)


# ------------------------------------------------------------------ the command's side
def start(state_dir: Path, idle_s: float, log: Callable[[str], None]) -> dict:
    """The home's running server, else a new per-home server; returns its record.

    Call it inside :func:`using`.  Raises ServerError (one line) when it cannot start, ConfigError (one
    line) for a bad ``SCI_INGEST_SERVER_CACHE``.
    """
    state_dir = Path(state_dir).resolve()
    server_cache_size()  # a bad SCI_INGEST_SERVER_CACHE is this command's one-line error, not its keeper's
    # waits for another command's start, or for the keeper of a command killed meanwhile (it holds the lock)
    with starting(state_dir, timeout=LOCK_TIMEOUT_S) as lock:
        state = running_server(state_dir, locked=True, log=log)  # another command may have started it meanwhile
        if state is not None:
            return state
        state_file(state_dir).unlink(missing_ok=True)  # a dead server's record
        # no keeper starts now and no record names a server: a SecantusDB process on the data is a keeper's
        # that was killed (dying with it), or the private server of a command (SCI_INGEST_SERVER_IDLE=0)
        refuse_if_held(state_dir / "db", wait_s=HOLDER_GRACE_S)
        log(f"note: starting the embedded SecantusDB server (data in {state_dir / 'db'}); it stays up until "
            f"{idle_s:g} s pass without a command ({IDLE_ENV}); `sci-ingest server stop` stops it ...")
        _launch(state_dir, idle_s, lock)
        state = running_server(state_dir, locked=True, log=log)
    if state is None:
        raise ServerError(f"the embedded server started and then stopped answering; see {state_dir / 'server.log'}")
    return state


def _launch(state_dir: Path, idle_s: float, start_lock: int) -> None:
    """Start a keeper, detached, and wait until it says its server is ready (or why it is not).

    The keeper inherits ``start_lock`` (the locked start lock's descriptor) and keeps it until its
    server is recorded or stopped: should this command die meanwhile, the next one still waits."""
    log_path = state_dir / "server.log"
    private_file(log_path, None)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")]))}
    with open(log_path, "ab") as log:
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "ingest.server.keeper", "--home", str(state_dir), "--idle", repr(idle_s),
                 "--start-lock-fd", str(start_lock)],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, cwd=state_dir, env=env,
                start_new_session=True,  # no terminal's signals; it outlives this command
                pass_fds=(start_lock,),
            )
        except OSError as exc:
            raise ServerError(f"could not start the embedded server's keeper: {exc}") from exc
    _keepers.append(proc)
    stdout = cast(IO[bytes], proc.stdout)  # stdout=PIPE: Popen made the pipe
    try:
        line = _first_line(stdout.fileno(), START_TIMEOUT_S)
    finally:
        stdout.close()
    if line == READY:
        return
    refuse_if_full(state_dir / "db")  # the keeper, or its server, found no room (its record, WiredTiger's journal)
    if line and line.startswith("error: "):
        raise ServerError(line[len("error: "):])
    proc.kill()  # its server dies with it
    why = f"exited with code {proc.wait(5)}" if line is not None else f"did not start within {START_TIMEOUT_S:.0f} s"
    raise ServerError(f"the embedded server's keeper {why}; see {log_path}")


def _first_line(fd: int, timeout: float) -> str | None:
    """The first line read from ``fd`` ("" at end of file), or None if none came within ``timeout``."""
    deadline = time.monotonic() + timeout
    data = b""
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        if not select.select([fd], [], [], left)[0]:
            continue
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    return data.decode(errors="replace").split("\n", 1)[0].strip()


# ------------------------------------------------------------------ the keeper's side
class _Stop(BaseException):
    """SIGTERM: ``sci-ingest server stop``."""


def _on_sigterm(signum, frame) -> None:
    raise _Stop


def _say(message: str) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
    print(f"{stamp} sci-ingest keeper (pid {os.getpid()}): {message}", file=sys.stderr, flush=True)


class _Activity:
    """What ``serverStatus`` shows of other clients between two looks: new connections, operations,
    more than the one command of the look itself, or more open connections than the keeper's own
    (the fewest ever seen)."""

    def __init__(self, watcher) -> None:
        self.watcher = watcher
        self.last: dict | None = None
        self.own: int | None = None

    def seen(self) -> bool:
        try:
            with db_errors("watching the server"):
                status = self.watcher.admin.command("serverStatus")
        except SciIngestError:  # no answer (stopped, overloaded): not idle
            self.last = self.own = None
            return True
        conns, ops = status.get("connections") or {}, status.get("opcounters") or {}
        current = int(conns.get("current") or 0)
        self.own = current if self.own is None else min(self.own, current)
        sample = {"connections created": conns.get("totalCreated"), **ops}
        before, self.last = self.last, sample
        if before is None:
            return True
        changed = {key for key, value in sample.items() if value != before.get(key)}
        commands = (sample.get("command") or 0) - (before.get("command") or 0)
        return bool(changed - {"command"}) or commands > 1 or current > self.own


def _ours(record: dict | None) -> TypeGuard[dict]:
    keeper = (record or {}).get("keeper")
    return isinstance(keeper, dict) and keeper.get("pid") == os.getpid()


def _forget(home: Path) -> None:
    """Remove the home's record if it is this keeper's."""
    if _ours(recorded(home)):
        state_file(home).unlink(missing_ok=True)


def _try_exclusive(fd: int) -> bool:
    return try_lock(fd, fcntl.LOCK_EX)


def _serve(home: Path, server: EmbeddedServer, creds: dict | None, idle_s: float) -> _Activity:
    """Start the server and record it with this keeper; returns the watch on its clients, which has
    counted the keeper's own connections before any command knew of the server."""
    server.start()  # dies with this process (parent-death signal)
    watcher = mongo_client(with_credentials(server.uri, creds), max_pool_size=1, socket_timeout_ms=5000,
                     serverMonitoringMode="poll",
                     heartbeatFrequencyMS=_HEARTBEAT_MS, appname="sci-ingest-keeper")
    activity = _Activity(watcher)
    activity.seen()
    keeper = {"pid": os.getpid(), "started": psutil.Process().create_time()}
    write_record(home, server_record(server, kind="per-home", idle_s=idle_s, keeper=keeper))
    return activity


def _watch(home: Path, server: EmbeddedServer, activity: _Activity) -> int:
    """Every second: stop when the record says so and no client was seen for its idle timeout."""
    use = lock_fd(home, USE_LOCK)
    last = time.monotonic()
    while True:
        code = server.child.poll()
        if code is not None:
            _say(f"the server exited with code {code}")
            return 1
        record = recorded(home)
        if not _ours(record):
            _say("its record is gone or names another server: stopping the server")
            return 0
        idle_s = record.get("idle_s")  # None once `sci-ingest server start` adopted the server
        now = time.monotonic()
        locked = False
        idle = not activity.seen() and (locked := _try_exclusive(use))
        if idle and idle_s and now - last >= idle_s:
            idle = not activity.seen()  # a client that came before the lock was taken
            if idle:
                _say(f"stopping the server: no client for {idle_s:g} s")
                _forget(home)
                return 0  # the use lock stays held until the server has stopped and this process ends
        if locked:
            fcntl.flock(use, fcntl.LOCK_UN)
        if not idle:
            last = now
        time.sleep(min(1.0, idle_s / 4) if idle_s else 1.0)


def _tell(ready, line: str) -> None:
    """Say ``line`` to the starting command (gone, if it was killed meanwhile: then nobody listens)."""
    try:
        with ready:
            print(line, file=ready, flush=True)
    except OSError:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ingest.server.keeper",
                                     description="Run the per-home embedded server of a sci-ingest home "
                                                 "until it is idle (started by sci-ingest itself).")
    parser.add_argument("--home", required=True, type=Path, help="the sci-ingest home (SCI_INGEST_HOME)")
    parser.add_argument("--idle", required=True, type=float, help="seconds without a client before stopping")
    parser.add_argument("--start-lock-fd", type=int, default=None,
                        help="the home's start lock, locked by the starting command: kept until the server "
                             "is recorded (on failure: until this process ends, its server stopped)")
    args = parser.parse_args(argv)
    for signum in (signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _on_sigterm)
    ready = os.fdopen(os.dup(1), "w")  # the starting command reads one line from it
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    server = None
    try:
        try:
            creds = load_credentials(args.home)
            server = EmbeddedServer(args.home / "db", auth=creds is not None)
            activity = _serve(args.home, server, creds, args.idle)
        except SciIngestError as exc:
            _tell(ready, f"error: {exc}")
            return 1  # the start lock is let go at exit, once `finally` has stopped the server
        if args.start_lock_fd is not None:
            try:
                os.close(args.start_lock_fd)  # recorded: the next commands find it and share it
            except OSError:
                pass
        _tell(ready, READY)
        return _watch(args.home, server, activity)
    except _Stop:
        _say("stopping the server: asked to (SIGTERM, `sci-ingest server stop`)")
        return 0
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        _forget(args.home)
        if server is not None and server.process is not None:
            began = time.monotonic()
            server.stop()
            _say(f"the server stopped ({time.monotonic() - began:.1f} s)")


if __name__ == "__main__":
    sys.exit(main())
