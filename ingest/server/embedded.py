"""The embedded default database: a SecantusDB server run as a child process.

SecantusDB speaks the MongoDB wire protocol over WiredTiger.  It is started
only through its command line (``secantusd-py``); nothing in sci-ingest imports
it.  Everything else talks to it through pymongo, exactly as to a real MongoDB.

Three ways to use it:

* :class:`EmbeddedServer` as a context manager: a private server for one run
  (a command when ``SCI_INGEST_SERVER_IDLE=0``) or one test session, stopped at exit.
* the per-home server a command starts when none runs (:mod:`ingest.server.keeper`):
  kept by a small process that stops it after an idle timeout.
* ``sci-ingest server start|stop|status``: a long-lived server.

The last two are recorded in ``<state>/server.json`` (pid, start time, URI) so
other processes (Airflow tasks, the next ``sci-ingest`` call) find and share
them (the record and the home's locks: :mod:`ingest.server.state`).  WiredTiger
locks its data directory, so two servers can never open the same one.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from ingest.config import SERVER_CACHE_SIZE, SETTINGS, Size, setting
from ingest.errors import ConfigError, DiskFull, ServerError, no_space
from ingest.fileio import stderr_line
from ingest.server.access import enable_auth, load_credentials, with_credentials
from ingest.server.state import START_LOCK, private_file, recorded, starting, state_file, using, write_record
from ingest.store.space import own_disk_full, refuse_if_full, short_of_space

EXECUTABLE = "secantusd-py"
#: What the embedded server is, as messages name it.
ENGINE = "SecantusDB"

#: The WiredTiger cache of the embedded server, e.g. ``256M`` or ``1G`` (docs/embedded-server.md, "Memory").
CACHE_ENV = "SCI_INGEST_SERVER_CACHE"
DEFAULT_CACHE = SETTINGS[CACHE_ENV].default
#: The smallest cache accepted, the smallest measured (it loads ``samples/``): SecantusDB's own notes say
#: writes of large documents overflow a 100 MB cache (WT_CACHE_FULL).
MIN_CACHE_MB = SERVER_CACHE_SIZE.least_mb
#: glibc's allocator settings of the server process, unless the environment sets them itself: two malloc
#: arenas instead of 8 a core, so that what a query's result frees is used again by the next query on
#: another thread instead of being kept in an arena of its own (docs/embedded-server.md, "Memory").
SERVER_MALLOC_ENV = {"MALLOC_ARENA_MAX": "2"}


def server_cache_size(value: str | None = None) -> str:
    """The server's WiredTiger cache size (``value``, else ``SCI_INGEST_SERVER_CACHE``, else 512M) as
    SecantusDB takes it (``<N>M``, ``<N>G``); ConfigError, one line, for anything else.  The setting
    must be at least :data:`MIN_CACHE_MB` (its declared range, :data:`ingest.config.SETTINGS`); a size
    the code gives (``bench cache``'s deliberately small caches) only needs to be a size."""
    if value is None:
        return setting(CACHE_ENV)
    if not value.strip():
        return DEFAULT_CACHE
    try:
        return Size().parse(value)
    except ValueError as exc:
        raise ConfigError(f"the server's cache size must be {exc}, not {value!r}") from None


def server_environment() -> dict[str, str]:
    """The server process's environment: this process's, with :data:`SERVER_MALLOC_ENV` where it sets none."""
    return {**SERVER_MALLOC_ENV, **os.environ}


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


#: Ports a server start tries when the port it picked is taken before the server binds it.
PORT_ATTEMPTS = 3
#: What the server's log says when its port is taken (Python's ``OSError: [Errno 98]``) ...
_ADDRESS_IN_USE = "Address already in use"
#: ... and when WiredTiger finds no room for its files (when the log itself could be written).
_NO_SPACE = "No space left on device"


class _PortTaken(Exception):
    """The server exited because another process took its port first."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def uri_for(host: str, port: int) -> str:
    return f"mongodb://{host}:{port}/?directConnection=true"


class EmbeddedServer:
    """A SecantusDB server process on a loopback port with its own data directory."""

    def __init__(self, data_dir: Path, *, host: str = "127.0.0.1", port: int | None = None,
                 cache_size: str | None = None, log_path: Path | None = None, auth: bool = False):
        self.data_dir = Path(data_dir)
        self.host = host
        self.port = port
        self.cache_size = server_cache_size(cache_size)  # None: SCI_INGEST_SERVER_CACHE, else the default
        self.log_path = Path(log_path) if log_path else self.data_dir.parent / "server.log"
        self.auth = auth  # SCRAM authentication required (users: ingest.server.access)
        self.process: subprocess.Popen | None = None

    @property
    def uri(self) -> str:
        if self.port is None:
            raise ServerError("server not started")
        return uri_for(self.host, self.port)

    @property
    def child(self) -> subprocess.Popen:
        """The server's process, once :meth:`start` has started it."""
        if self.process is None:
            raise ServerError("server not started")
        return self.process

    @property
    def config_path(self) -> Path:
        return self.data_dir.parent / "secantusd.toml"

    def command(self) -> list[str]:
        return [
            find_executable(),
            # an explicit (empty) configuration: SecantusDB would otherwise read a secantusd.toml
            # from the working directory, the home folder or /etc, which can change auth or topology
            "--config", str(self.config_path),
            "--host", self.host,
            "--port", str(self.port),
            "--storage-path", str(self.data_dir),
            "--cache-size", self.cache_size,
            "--log-level", "WARNING",
        ] + (["--auth"] if self.auth else [])

    def start(self, timeout: float = 60.0, detach: bool = False) -> str:
        """Start the process and wait until it answers ``hello``; return its URI."""
        try:
            for folder in (self.data_dir.parent, self.data_dir, self.log_path.parent):
                folder.mkdir(parents=True, exist_ok=True)
            os.chmod(self.data_dir, 0o700)  # the data is its owner's only
            private_file(self.config_path, _CONFIG_TEXT)
            private_file(self.log_path, None)
        except OSError as exc:
            full = own_disk_full(exc, self.data_dir)
            raise full or ServerError(f"cannot use {self.data_dir} as the data directory: {exc}") from exc
        refuse_if_held(self.data_dir)
        refuse_if_full(self.data_dir)  # WiredTiger would panic at its first journal file
        chosen = self.port is None  # a port picked here, free when picked: another process can take it first
        attempt = 0
        while True:  # until the server answers, or PORT_ATTEMPTS ports were taken first
            attempt += 1
            if chosen:
                self.port = free_port(self.host)
            try:
                return self._launch(timeout, detach)
            except _PortTaken:
                if not chosen or attempt == PORT_ATTEMPTS:
                    raise ServerError(f"{EXECUTABLE} could not listen on {self.host}:{self.port}: the address "
                                      f"is in use ({attempt} port(s) tried); last lines of {self.log_path}:\n"
                                      f"{self.log_tail()}") from None

    def _launch(self, timeout: float, detach: bool) -> str:
        """Start the process on ``self.port`` and wait until it answers; :class:`_PortTaken` when
        it exits because that port is in use."""
        log = open(self.log_path, "ab")
        written = log.tell()
        try:
            self.process = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=server_environment(),  # MALLOC_ARENA_MAX=2 unless set (docs/embedded-server.md, "Memory")
                # its own process group: a terminal's Ctrl-C reaches the command, which stops the
                # server once, not the server too (two signals can deadlock its handler)
                start_new_session=True,
                # a private server dies with the command, however the command dies (kill -9 too)
                preexec_fn=_child_setup(dies_with_parent=not detach),
            )
        except OSError as exc:
            raise ServerError(f"could not start {EXECUTABLE}: {exc}") from exc
        finally:
            log.close()
        if not detach:
            atexit.register(self.stop)
        from ingest.store.mongo import ping  # noqa: PLC0415 - lazy: server status reads this module; pymongo costs 0.12 s

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code is not None:
                said = self._log_since(written)
                if _ADDRESS_IN_USE in said:
                    raise _PortTaken()
                if _NO_SPACE in said or short_of_space(self.data_dir):  # WiredTiger's journal found no room
                    raise DiskFull(no_space(self.data_dir))
                raise ServerError(
                    f"{EXECUTABLE} exited with code {code} before answering; "
                    f"last lines of {self.log_path}:\n{self.log_tail()}"
                )
            if ping(self.uri, timeout_ms=300) is not None:
                return self.uri
            time.sleep(0.1)
        self.stop()
        raise ServerError(f"{EXECUTABLE} did not answer hello within {timeout:.0f}s; see {self.log_path}")

    def _log_since(self, offset: int) -> str:
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(offset)
                return fh.read().decode(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, timeout: float = 10.0) -> None:
        """Stop cleanly (SIGTERM lets WiredTiger checkpoint), SIGKILL only as a last resort."""
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        terminate(proc.pid)
        try:
            self._wake_accept(proc)
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)

    def _wake_accept(self, proc: subprocess.Popen, within: float = 2.0) -> None:
        """Connect once or twice while the server stops: closing its listening socket does not wake
        the thread blocked in ``accept()`` on Linux, and SecantusDB then waits 2 s for that thread
        before it closes WiredTiger.  A connection that arrives wakes it at once."""
        deadline = time.monotonic() + within
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                with socket.create_connection((self.host, self.port), timeout=0.2):
                    pass
            except OSError:
                pass  # the socket is already closed, or the server gone
            try:
                proc.wait(0.05)
            except subprocess.TimeoutExpired:
                continue

    def __enter__(self) -> EmbeddedServer:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


_CONFIG_TEXT = ("# Written by sci-ingest and passed with --config, so that no other secantusd.toml\n"
                "# (working directory, home folder, /etc) is read.  Settings are on the command line.\n")


def _child_setup(dies_with_parent: bool):
    """The server's ``preexec_fn``: files it creates are its owner's only (umask 077), and a
    private server dies with the command that started it."""
    death = _dies_with_parent() if dies_with_parent else None

    def setup() -> None:
        os.umask(0o077)
        if death is not None:
            death()

    return setup


def terminate(pid: int) -> None:
    """SIGTERM to the main thread of process ``pid`` (to the process where that is not possible).

    SecantusDB's main thread waits (``Event.wait``) for its SIGTERM handler, which Python runs in
    the main thread only.  A SIGTERM the kernel hands to another of its threads only marks the
    handler pending and does not wake the main thread, so the server went on serving until the
    SIGKILL 12 s later (seen: 1 stop in 6).  The main thread's id is the process id (``tgkill``).
    """
    try:
        import ctypes  # noqa: PLC0415 - lazy: server status reads this module; ctypes costs 2 ms

        if ctypes.CDLL(None, use_errno=True).tgkill(pid, pid, signal.SIGTERM) == 0:
            return
    except (OSError, AttributeError):
        pass
    os.kill(pid, signal.SIGTERM)


def _dies_with_parent():
    """A ``preexec_fn`` that has the child killed when this process dies (Linux), or None.

    ``atexit`` alone misses SIGKILL, the OOM killer and a ``timeout``; an orphaned
    server would keep the data directory locked for every later command.  The
    signal is SIGKILL, not SIGTERM: SecantusDB's SIGTERM handler can deadlock when
    a second signal arrives while it stops (seen: an orphan stuck in three nested
    handlers), and a command that died without cleaning up is a crash anyway, which
    WiredTiger's journal recovers from and the loader's ledger makes exact.  A
    command that ends normally stops its server first, with SIGTERM.  The kernel
    signals the child when the *thread* that started it ends, so this is used from
    the main thread only.
    """
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    try:
        import ctypes  # noqa: PLC0415 - lazy: server status reads this module; ctypes costs 2 ms

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before the signal was armed
            os._exit(1)

    return preexec


_PR_SET_PDEATHSIG = 1


def holder(data_dir: Path) -> dict | None:
    """The live SecantusDB process that has ``data_dir`` open (found by its command line), or None."""
    wanted = os.path.realpath(data_dir)
    for proc in psutil.process_iter(["pid", "cmdline", "status", "create_time"]):
        cmd = proc.info.get("cmdline") or []
        if not any(EXECUTABLE in part for part in cmd[:2]) or "--storage-path" not in cmd:
            continue
        at = cmd.index("--storage-path") + 1
        if at < len(cmd) and os.path.realpath(cmd[at]) == wanted and proc.info["status"] != psutil.STATUS_ZOMBIE:
            port = cmd[cmd.index("--port") + 1] if "--port" in cmd[:-1] else None
            return {"pid": proc.info["pid"], "status": proc.info["status"], "port": port,
                    "started": proc.info["create_time"], "cmdline": cmd,
                    "stopped": proc.info["status"] in (psutil.STATUS_STOPPED, "tracing-stop")}
    return None


def refuse_if_held(data_dir: Path, wait_s: float = 0.0) -> None:
    """ServerError saying what to do when another server process has ``data_dir`` open (``wait_s``:
    after waiting that long for it to go, e.g. a server killed with its keeper, which takes a moment)."""
    found = holder(data_dir)
    deadline = time.monotonic() + wait_s
    while found is not None and time.monotonic() < deadline:
        time.sleep(0.1)
        found = holder(data_dir)
    if found is None:
        return
    pid = found["pid"]
    if found["stopped"]:
        raise ServerError(f"the data directory {data_dir} belongs to SecantusDB pid {pid}, which is stopped "
                          f"(SIGSTOP) and does not answer: resume it with `kill -CONT {pid}` or end it with "
                          f"`kill {pid}`")
    raise ServerError(f"the data directory {data_dir} is in use by SecantusDB pid {pid} (port {found['port']}), "
                      "the private server of another command: wait for that command to end, or run "
                      "`sci-ingest server start` once so that commands share one server")


# ---------------------------------------------------------------- long-lived server
def _verified(pid, started, accept):
    """The psutil.Process ``pid`` if that very process still runs: not a zombie, started at
    ``started`` (a reused pid is another process) and ``accept(cmdline)`` true; else None."""
    try:
        proc = psutil.Process(int(pid or 0))
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        if started is not None and abs(proc.create_time() - float(started)) > 1.0:
            return None
        cmd = proc.cmdline()
    except (psutil.Error, ValueError, TypeError):
        return None
    return proc if accept(cmd) else None


def _same_process(state: dict):
    """The psutil.Process of the recorded server if that very process still runs (same pid, start
    time and data directory), else None."""
    return _verified(state.get("pid"), state.get("started"),
                     lambda cmd: any(EXECUTABLE in part for part in cmd[:2]) and str(state.get("data_dir")) in cmd)


def _same_keeper(state: dict):
    """The psutil.Process of the recorded server's keeper (:mod:`ingest.server.keeper`) if it still runs."""
    keeper = state.get("keeper")
    if not isinstance(keeper, dict):
        return None
    home = str(Path(str(state.get("data_dir"))).parent)
    return _verified(keeper.get("pid"), keeper.get("started"), lambda cmd: "ingest.server.keeper" in cmd and home in cmd)


def server_record(server: EmbeddedServer, **extra) -> dict:
    """What ``<state>/server.json`` says of a running server (``extra``: the keeper, its idle timeout)."""
    return {"pid": server.child.pid, "uri": server.uri, "data_dir": str(server.data_dir),
            "log": str(server.log_path), "started": psutil.Process(server.child.pid).create_time(),
            "auth": server.auth, **extra}


def server_state(state_dir: Path) -> tuple[str, dict | None]:
    """("running" | "broken" | "unresponsive" | "dead" | "absent", the record): what the recorded server is doing.

    ``broken``: it answers ``hello`` but an internal error to a read of its storage, twice (WiredTiger
    panicked, as it does when its journal finds the disk full; the record's ``fault`` says the answer);
    ``unresponsive``: its process runs (e.g. stopped by SIGSTOP, or overloaded) but it did
    not answer within a few seconds; ``dead``: the record names a process that is gone.
    """
    state = recorded(state_dir)
    if state is None:
        return "absent", None
    if _same_process(state) is None:
        return "dead", state
    from ingest.store.mongo import health  # noqa: PLC0415 - lazy: server status reads this module; pymongo costs 0.12 s

    hello, fault = health(with_credentials(state.get("uri", ""), load_credentials(state_dir)), timeout_ms=3000)
    if hello is None:
        # a server that died while it was asked (e.g. killed with its keeper) is dead, not unresponsive
        return ("unresponsive" if _same_process(state) is not None else "dead"), state
    if fault is not None:  # it answers hello, but no read of its storage: WiredTiger panicked (a full disk)
        return "broken", {**state, "fault": fault}
    return "running", state


def running_server(state_dir: Path, *, locked: bool = False, log=None) -> dict | None:
    """The long-lived server recorded under ``state_dir`` if it still answers.

    Raises ServerError when its process runs but does not answer: starting a
    second server on the same data would only fail on WiredTiger's lock.  A broken
    one (:func:`server_state`) is restarted (:func:`_restart`; ``locked``: the caller holds
    the home's start lock; ``log``: where the line saying so goes, else stderr).
    """
    status, state = server_state(state_dir)
    if state is None:  # absent
        return None
    if status == "unresponsive":
        raise ServerError(_unresponsive(state))
    if status == "broken":
        return _restart(state_dir, state, locked, log or stderr_line)
    return state if status == "running" else None


def _restart(state_dir: Path, state: dict, locked: bool, log) -> dict | None:
    """Stop the broken server of the home (its storage fails: WiredTiger panicked) and start it again,
    so that no person has to (`server stop`); WiredTiger's journal brings back what it acknowledged.
    DiskFull while its disk has no room (a new server would panic again).  A per-home server is started
    again by the caller (None: none runs), a long-lived one (`server start`) here, as such."""
    data_dir = Path(state["data_dir"])
    refuse_if_full(data_dir)
    log_path = Path(state.get("log") or data_dir.parent / "server.log")
    said = _log_tail(log_path)
    why = ("WiredTiger panicked: its disk was full" if _NO_SPACE in said else
           f"WiredTiger panicked, {log_path} says" if "WT_PANIC" in said else f"see {log_path}")
    log(f"warning: the embedded server (pid {state['pid']}) answers {state['fault']!r} to every read of its "
        f"storage ({why}); restarting it ...")
    if locked:
        _stop_recorded(state_dir)
        return None
    with starting(state_dir):
        status, now = server_state(state_dir)
        if status == "running":
            return now  # another command restarted it meanwhile
        _stop_recorded(state_dir)
    return None if state.get("idle_s") else start_background(state_dir)


def _log_tail(path: Path, size: int = 1 << 18) -> str:
    """The last ``size`` bytes of the server's log ("" when it cannot be read)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, fh.seek(0, os.SEEK_END) - size))
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


def _unresponsive(state: dict) -> str:
    pid = state.get("pid")
    return (f"the shared SecantusDB server (pid {pid}, {state.get('uri')}) runs but does not answer "
            f"(stopped with SIGSTOP? resume it with `kill -CONT {pid}`); `sci-ingest server stop` ends it")


def start_background(state_dir: Path, port: int | None = None, auth: bool = False) -> dict:
    """Start a detached server for long-lived use (Airflow); idempotent.

    ``auth``: turn SCRAM authentication on for this home (for good, see
    :mod:`ingest.server.access`); a home whose credentials exist always runs with it.
    The per-home server of a command (:mod:`ingest.server.keeper`), if one runs, is kept
    from then on: its idle timeout is dropped ("was_idle_s" says it had one).
    """
    with using(state_dir), starting(state_dir):
        state = running_server(state_dir, locked=True)
        if state:
            if auth and not state.get("auth"):
                raise ServerError("the shared server runs without authentication: `sci-ingest server stop`, "
                                  "then `sci-ingest server start --auth`")
            idle_s = state.get("idle_s")
            if idle_s:  # its keeper reads the record every second
                state = {**state, "idle_s": None}
                write_record(state_dir, state)
            return {**state, "already_running": True, "was_idle_s": idle_s}
        state_file(state_dir).unlink(missing_ok=True)  # a dead server's record
        data_dir = Path(state_dir) / "db"
        if auth:
            enable_auth(state_dir, EmbeddedServer(data_dir))
        server = EmbeddedServer(data_dir, port=port, auth=load_credentials(state_dir) is not None)
        server.start(detach=True)
        state = server_record(server)
        write_record(state_dir, state)
    return {**state, "already_running": False}


def _reap(pid: int) -> None:
    """Collect the exit status if ``pid`` is our own child (so it does not linger as a zombie)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _resume(proc) -> None:
    """SIGCONT ``proc`` (a psutil.Process) if it is stopped (SIGSTOP): it cannot act on SIGTERM before."""
    try:
        if proc.status() in (psutil.STATUS_STOPPED, "tracing-stop"):
            proc.resume()
    except psutil.Error:
        pass


def _end(proc, timeout: float) -> None:
    """SIGTERM ``proc`` (a psutil.Process), SIGKILL after ``timeout`` s."""
    try:
        if proc.is_running():  # the very process (psutil checks its start time)
            terminate(proc.pid)
        try:
            proc.wait(timeout)
        except psutil.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    except (psutil.NoSuchProcess, ProcessLookupError):
        pass
    _reap(proc.pid)


def stop_background(state_dir: Path, timeout: float = 20.0) -> str:
    """Stop the home's server, long-lived or per-home: "stopped", "dead" (its record named a process
    that is gone; the record is removed) or "absent".  Only the very processes that were started
    are signalled: a per-home server's keeper, which stops its server (WiredTiger checkpoints and
    closes), and the server itself."""
    if recorded(state_dir) is None and not (Path(state_dir) / START_LOCK).exists():
        return "absent"  # no server was ever started here (and no home is created for the lock)
    # no command starts a new server meanwhile; and a keeper still starting (its command may have been
    # killed) holds the lock until its server is recorded, so that server is stopped too, not left running
    with starting(state_dir):
        return _stop_recorded(state_dir, timeout)


def _stop_recorded(state_dir: Path, timeout: float = 20.0) -> str:
    """:func:`stop_background`'s work, the home's start lock held by the caller."""
    state = recorded(state_dir)
    if state is None:
        return "absent"
    keeper, server = _same_keeper(state), _same_process(state)
    if keeper is None and server is None:
        state_file(state_dir).unlink(missing_ok=True)
        return "dead"
    live = [proc for proc in (keeper, server) if proc is not None]
    for proc in live:
        _resume(proc)
    for proc in live:  # the keeper first: it stops its server itself
        _end(proc, timeout)
    state_file(state_dir).unlink(missing_ok=True)
    return "stopped"
