"""The kept command process (:mod:`ingest.cli.kept` says what it is for and who starts it).

``python -m ingest.cli.kept_process SOCKET``: take the socket's lock (one process per key), check
that the code is still the one the key names, import what the served commands use
(:func:`_preload`: about 4 s of CPU, once), then listen.  For each caller of its own user: read
the request (arguments, environment, working folder, umask, the caller's start) and its three
standard streams, and fork a child (:func:`_child`) that takes them over, tells the caller its
pid, runs :func:`ingest.cli.main.main` and sends back the exit code.  The kept process forks
only while it has no Python thread of its own (checked once the imports are done).  It reaps
its children, and ends as :mod:`ingest.cli.kept` says.  Each child watches its caller: a caller
that goes away interrupts the command as Ctrl-C would.
"""

from __future__ import annotations

import fcntl
import gc
import importlib
import json
import os
import select
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from pathlib import Path

from ingest import plugins
from ingest.cli.kept import IDLE_ENV, INT, LENGTH, key, read_exact
from ingest.cli.main import main as command_main
from ingest.config import setting
from ingest.dates import command_began

__all__ = ["main"]

#: The longest request read (arguments and environment): a longer length is refused unread.
MAX_REQUEST = 16 * 2**20


def _preload() -> None:
    """Import what the served commands use (this process's purpose), without starting a thread."""
    import dask.dataframe  # noqa: PLC0415,F401 - lazy: a preload: importing once is this process's purpose
    import dask.distributed  # noqa: PLC0415,F401 - lazy: a preload: importing once is this process's purpose

    import ingest.cli.common  # noqa: PLC0415,F401 - lazy: a preload: importing once is this process's purpose
    import ingest.cli.querying  # noqa: PLC0415,F401 - lazy: a preload: importing once is this process's purpose
    import ingest.load.run  # noqa: PLC0415,F401 - lazy: a preload: importing once is this process's purpose
    import ingest.parsers.materials  # noqa: PLC0415,F401 - lazy: a preload: importing once is this process's purpose
    import ingest.parsers.pasta  # noqa: PLC0415,F401 - lazy: a preload: importing once is this process's purpose
    import ingest.pipeline  # noqa: PLC0415,F401 - lazy: a preload: importing once is this process's purpose

    for step in ("analyze", "validate"):
        plugins.step(step)
    found = plugins.warm_up("analyze")
    if found is not None:
        found[0]()  # the analyses, pandas and pyarrow, each analysis's code walked once
    for name in plugins.preloads():  # hull_energy's phase diagrams, the validation's Great Expectations
        try:
            importlib.import_module(name)
        except ImportError:
            pass  # a command that needs it says so itself
    gc.freeze()  # imported for good: the children's collections skip it (and leave its pages shared)


def _serve_one(listener: socket.socket, lock_fd: int) -> int | None:
    """Accept one command and fork its child; the child's pid, or None."""
    conn, _ = listener.accept()
    with conn:
        conn.settimeout(5)
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        if struct.unpack("3i", creds)[1] != os.getuid():
            return None  # another user's: closed unanswered
        fds: list[int] = []
        try:
            head, fds, _, _ = socket.recv_fds(conn, LENGTH.size, 3)
            length = LENGTH.unpack(head)[0] if len(head) == LENGTH.size else 0
            body = read_exact(conn, length) if 0 < length <= MAX_REQUEST else None
            request = json.loads(body.decode("utf-8", "surrogateescape")) if body else None
        except (OSError, ValueError, struct.error):
            request = None
        if not isinstance(request, dict) or len(fds) != 3:  # a request cut short or malformed: nothing runs
            for fd in fds:
                os.close(fd)
            return None
        pid = os.fork()
        if pid == 0:
            listener.close()
            os.close(lock_fd)
            _child(conn, fds, request)  # never returns
        for fd in fds:
            os.close(fd)
        return pid


def _child(conn: socket.socket, fds: list[int], request: dict) -> None:
    code = 70  # EX_SOFTWARE: this module failed before the command ran
    began = False
    early: list[int] = []  # a Ctrl-C before the caller's streams are this process's: acted on once they are
    try:
        conn.settimeout(None)
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGCHLD):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, lambda *_: early.append(1))
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        encoding = sys.stdout.encoding
        sys.stdin = open(0, encoding=encoding, closefd=False)  # noqa: SIM115 - the standard streams
        sys.stdout = open(1, "w", encoding=encoding, closefd=False, buffering=1 if os.isatty(1) else -1)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding=encoding, errors="backslashreplace", closefd=False, buffering=1)  # noqa: SIM115
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        os.umask(int(request["umask"]))
        argv = [str(a) for a in request["argv"]]
        sys.argv = ["sci-ingest", *argv]
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if early:
            raise KeyboardInterrupt
        command_began(float(request["started"]), kept=True)
        conn.sendall(INT.pack(os.getpid()))
        _watch_caller(conn)
        began = True
        code = command_main(argv)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
    except KeyboardInterrupt:  # Ctrl-C before the command began, or after it ended
        code = 130
        try:
            when = "as the command ended" if began else "before the command began: nothing was done"
            print(f"error: interrupted (Ctrl-C) {when}",
                  file=sys.stderr, flush=True)
        except BaseException:  # noqa: BLE001 - the child must reach os._exit, whatever happened
            pass
    except BaseException:  # noqa: BLE001 - the child must reach os._exit, whatever happened
        try:
            traceback.print_exc()
        except BaseException:  # noqa: BLE001 - nothing more can be said
            pass
    try:
        _FINISHING.append(True)
        conn.sendall(INT.pack(int(code)))
    finally:
        os._exit(int(code))


_FINISHING: list = []


def _watch_caller(conn: socket.socket) -> None:
    """A caller that goes away (killed, its terminal closed) interrupts its command, as Ctrl-C would."""
    def watch():
        try:
            while conn.recv(1):
                pass
        except OSError:
            pass
        if not _FINISHING:
            os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=watch, name="sci-ingest-caller", daemon=True).start()


def _same_file(path: Path, inode: tuple) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == inode


def _said(path: Path, why: str) -> int:
    """Why this kept process does not serve, in ``<socket>.log`` (the commands run cold; nobody
    else would see it): one line with the time."""
    with open(f"{path}.log", "a", encoding="utf-8") as log:
        log.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} pid {os.getpid()}: {why}\n")
    return 1


def main(argv: list[str] | None = None) -> int:
    """``python -m ingest.cli.kept_process SOCKET``: import, listen on SOCKET, serve until idle."""
    path = Path((argv if argv is not None else sys.argv[1:])[0])
    lock_fd = os.open(f"{path}.lock", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # another one starts or serves this key
    my_key = path.stem
    if key() != my_key:
        return _said(path, "not started: the code, the packages or the environment differ from the command's")
    try:
        _preload()
    except Exception as exc:  # noqa: BLE001 - said in the log; the commands run cold meanwhile
        return _said(path, f"not started: importing failed: {type(exc).__name__}: {exc}")
    if threading.active_count() != 1:  # forking a process with threads is unsafe: serve nothing
        return _said(path, f"not started: the imports started {threading.active_count() - 1} Python thread(s)")
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(str(path))
        os.chmod(path, 0o600)
        listener.listen(16)
    except OSError as exc:
        return _said(path, f"not started: cannot listen on {path}: {exc}")
    st = os.stat(path)
    inode = (st.st_dev, st.st_ino)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    idle_s = setting(IDLE_ENV)
    children: set[int] = set()
    last, checked = time.monotonic(), time.monotonic()
    while not stop:
        try:
            ready, _, _ = select.select([listener], [], [], 1.0)
        except InterruptedError:
            continue
        if ready:
            pid = _serve_one(listener, lock_fd)
            if pid:
                children.add(pid)
        for pid in list(children):
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    children.discard(pid)
            except ChildProcessError:
                children.discard(pid)
        now = time.monotonic()
        if children or ready:
            last = now
        if now - last > idle_s or not _same_file(path, inode):
            break
        if now - checked > 5:  # the code or the packages changed: a new command needs a new process
            checked = now
            if key() != my_key:
                break
    if _same_file(path, inode):
        path.unlink()
    listener.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
