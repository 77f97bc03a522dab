"""The embedded default database: a SecantusDB server run as a child process.

SecantusDB speaks the MongoDB wire protocol over WiredTiger.  It is started
only through its command line (``secantusd-py``); nothing in sci-ingest imports
it.  Everything else talks to it through pymongo, exactly as to a real MongoDB.

Two ways to use it:

* :class:`EmbeddedServer` as a context manager: a private server for one run
  (``sci-ingest run`` without a URI) or one test session, stopped at exit.
* ``sci-ingest server start|stop|status``: a long-lived server whose pid and
  URI are kept in ``<state>/server.json`` so other processes (Airflow tasks,
  a second ``sci-ingest`` call) find and share it.  WiredTiger locks its data
  directory, so two servers can never open the same one.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from ingest.errors import ServerError
from ingest.mongo import ping

EXECUTABLE = "secantusd-py"


def find_executable() -> str:
    """The SecantusDB launcher: next to this interpreter first (the venv), then PATH."""
    candidate = Path(sys.executable).parent / EXECUTABLE
    if candidate.exists():
        return str(candidate)
    found = shutil.which(EXECUTABLE)
    if not found:
        raise ServerError(
            f"{EXECUTABLE} not found: install the project's dependencies (make install) "
            "or set MONGODB_URI to use an existing MongoDB"
        )
    return found


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def uri_for(host: str, port: int) -> str:
    return f"mongodb://{host}:{port}/?directConnection=true"


class EmbeddedServer:
    """A SecantusDB server process on a loopback port with its own data directory."""

    def __init__(
        self,
        data_dir: Path,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        cache_size: str = "512M",
        log_path: Path | None = None,
    ):
        self.data_dir = Path(data_dir)
        self.host = host
        self.port = port
        self.cache_size = cache_size
        self.log_path = Path(log_path) if log_path else self.data_dir.parent / "server.log"
        self.process: subprocess.Popen | None = None

    @property
    def uri(self) -> str:
        if self.port is None:
            raise ServerError("server not started")
        return uri_for(self.host, self.port)

    def command(self) -> list[str]:
        return [
            find_executable(),
            "--host", self.host,
            "--port", str(self.port),
            "--storage-path", str(self.data_dir),
            "--cache-size", self.cache_size,
            "--log-level", "WARNING",
        ]

    def start(self, timeout: float = 60.0, detach: bool = False) -> str:
        """Start the process and wait until it answers ``hello``; return its URI."""
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ServerError(f"cannot use {self.data_dir} as the data directory: {exc}") from exc
        if self.port is None:
            self.port = free_port(self.host)
        log = open(self.log_path, "ab")
        try:
            self.process = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=detach,
            )
        except OSError as exc:
            raise ServerError(f"could not start {EXECUTABLE}: {exc}") from exc
        finally:
            log.close()
        if not detach:
            atexit.register(self.stop)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code is not None:
                raise ServerError(
                    f"{EXECUTABLE} exited with code {code} before answering; "
                    f"last lines of {self.log_path}:\n{self.log_tail()}"
                )
            if ping(self.uri, timeout_ms=300) is not None:
                return self.uri
            time.sleep(0.1)
        self.stop()
        raise ServerError(f"{EXECUTABLE} did not answer hello within {timeout:.0f}s; see {self.log_path}")

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, timeout: float = 20.0) -> None:
        """Stop cleanly (SIGTERM lets WiredTiger checkpoint), SIGKILL only as a last resort."""
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)

    def __enter__(self) -> "EmbeddedServer":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


# ---------------------------------------------------------------- long-lived server
def _state_file(state_dir: Path) -> Path:
    return Path(state_dir) / "server.json"


def running_server(state_dir: Path) -> dict | None:
    """The long-lived server recorded under ``state_dir`` if it still answers."""
    path = _state_file(state_dir)
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if ping(state.get("uri", ""), timeout_ms=1000) is None:
        return None
    return state


def start_background(state_dir: Path, port: int | None = None) -> dict:
    """Start a detached server for long-lived use (Airflow); idempotent."""
    state = running_server(state_dir)
    if state:
        return {**state, "already_running": True}
    server = EmbeddedServer(Path(state_dir) / "db", port=port)
    server.start(detach=True)
    state = {"pid": server.process.pid, "uri": server.uri, "data_dir": str(server.data_dir),
             "log": str(server.log_path)}
    _state_file(state_dir).write_text(json.dumps(state, indent=2))
    return {**state, "already_running": False}


def _reap(pid: int) -> None:
    """Collect the exit status if ``pid`` is our own child (so it does not linger as a zombie)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def stop_background(state_dir: Path, timeout: float = 20.0) -> bool:
    """Stop the long-lived server; False if none was running."""
    path = _state_file(state_dir)
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    pid = int(state.get("pid", 0))
    stopped = False
    if pid:
        try:
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                _reap(pid)
                os.kill(pid, 0)
                time.sleep(0.1)
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        stopped = True
    path.unlink(missing_ok=True)
    return stopped
