"""The kept command process: ``sci-ingest`` commands forked from a process that has imported their code once.

Every cold ``sci-ingest analyze`` pays the same imports before its first stage (pandas, Dask,
pymongo and the analyses: about 0.5 s on this project's 2-core machine) and more inside its
stages (pymatgen's phase diagrams, about 0.8 s of ``hull_energy``; Great Expectations, about
3 s of a validation).  A *kept process* imports all of it once; then, for each command, it
forks a child that runs the command with the caller's arguments, environment, working folder,
umask and standard streams (passed over the socket, SCM_RIGHTS).  Each command still has a
process of its own, fresh from the fork: nothing carries over from one command to the next
but the modules imported before it.  The caller waits, forwards SIGINT, SIGTERM, SIGHUP and
SIGQUIT to the child, and exits with the child's exit code.

**Which process serves a command.**  One keyed by the interpreter, the code of ``ingest`` and
``analytics`` (each file's size and modification time), the installed packages (the
site-packages folder's modification time) and the whole environment but a few variables a
shell changes on its own (:data:`VOLATILE`): any other difference (another ``SCI_INGEST_HOME``,
``DASK_*``, a code change) finds no kept process and runs cold, since modules read some of it
at import.  Its socket is ``$TMPDIR/sci-ingest-<uid>/<key>.sock``, in a folder only its user
may enter (checked before each use: another user's or a group-writable folder is not used),
and it serves only callers of its own user (SO_PEERCRED).

**Its life.**  A command of :data:`COMMANDS` that runs cold starts one for the next command as
it begins (``python -m ingest.cli.kept_process``, detached, in the background: it imports while
the command runs; :mod:`ingest.cli.kept_process`).  It exits after
``SCI_INGEST_KEEP_IDLE`` seconds (default 600) without a command, as soon as its code or
packages change, or on SIGTERM; its children finish their commands.  ``SCI_INGEST_KEEP=0``
turns it off: every command runs in its own process (the test suite does so, but for the tests
of this module).

This module is the caller's side (:func:`run_kept`, :func:`start_for_next`): it imports nothing
heavy, it runs at every ``sci-ingest`` start.  The kept process is :mod:`ingest.cli.kept_process`.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

from ingest.config import SETTINGS, setting
from ingest.errors import ConfigError, Exit
from ingest.fileio import stderr_line

__all__ = ["KEEP_ENV", "IDLE_ENV", "DEFAULT_IDLE_S", "COMMANDS", "VOLATILE", "LENGTH", "INT", "enabled", "key",
           "socket_path", "read_exact", "read_int", "run_kept", "start_for_next"]

KEEP_ENV = "SCI_INGEST_KEEP"
IDLE_ENV = "SCI_INGEST_KEEP_IDLE"
DEFAULT_IDLE_S = SETTINGS[IDLE_ENV].default
#: The commands a kept process serves: those whose start is mostly imports.
COMMANDS = frozenset({"run", "load", "analyze", "validate", "query", "export", "timings", "report"})
#: Variables a shell or make sets on its own, left out of the key (modules do not read them at
#: import): a command typed after `make run` finds the kept process `make run` started.
VOLATILE = frozenset({"PWD", "OLDPWD", "SHLVL", "_", "COLUMNS", "LINES", "MAKEFLAGS", "MFLAGS", "MAKELEVEL",
                      "MAKE_TERMOUT", "MAKE_TERMERR", KEEP_ENV, IDLE_ENV})
#: What the caller sends first: the length of the request that follows.
LENGTH = struct.Struct("!I")
INT = struct.Struct("!i")


# ------------------------------------------------------------------ the caller's side
def enabled(env=os.environ) -> bool:
    """Whether ``SCI_INGEST_KEEP`` lets commands start in a kept process (a bad value: not)."""
    try:
        return setting(KEEP_ENV, env)
    except ConfigError:  # said by the command itself (ingest.cli.main), which runs in a process of its own
        return False


def command_of(argv: list[str]) -> str | None:
    return next((a for a in argv if not a.startswith("-")), None)


def _code_fingerprint(h) -> None:
    """Each source file of ``ingest`` and ``analytics`` (path, size, mtime) and site-packages' mtime into ``h``."""
    here = Path(__file__).resolve().parents[1]  # ingest/
    for root in (here, here.parent / "analytics"):
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith(".py"):
                    st = os.stat(os.path.join(folder, name))
                    h.update(f"{folder}/{name}:{st.st_size}:{st.st_mtime_ns}\0".encode())
    for entry in sys.path:  # the installed packages: a folder's mtime changes when one is added or removed
        if entry.endswith("site-packages") and os.path.isdir(entry):
            h.update(f"{entry}:{os.stat(entry).st_mtime_ns}\0".encode())


def key(env=os.environ) -> str:
    """What a kept process must share with a command to serve it (see the module's text)."""
    h = hashlib.sha256(f"{sys.executable}\0{sys.version}\0".encode())
    _code_fingerprint(h)
    for name in sorted(env):
        if name not in VOLATILE:
            h.update(f"{name}={env[name]}\0".encode("utf-8", "surrogateescape"))
    return h.hexdigest()[:24]


def _private_folder() -> Path | None:
    """``$TMPDIR/sci-ingest-<uid>``, made 0700 if missing; None when it is not this user's alone."""
    folder = Path(tempfile.gettempdir()) / f"sci-ingest-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        st = os.lstat(folder)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None
    return folder


#: The longest socket path a Unix socket may have (108 bytes on Linux, with the final NUL).
MAX_SOCKET_PATH = 107


def socket_path(env=os.environ) -> Path | None:
    """The socket of the kept process for ``env``; None when there can be none (the folder is not
    this user's alone, or ``$TMPDIR`` is so long that the path exceeds what a Unix socket takes)."""
    folder = _private_folder()
    if folder is None:
        return None
    path = folder / f"{key(env)}.sock"
    return path if len(os.fsencode(path)) <= MAX_SOCKET_PATH else None


def read_exact(sock: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        try:
            part = sock.recv(min(n - len(data), 1 << 20))
        except InterruptedError:
            continue
        if not part:
            return None
        data += part
    return data


def read_int(sock: socket.socket) -> int | None:
    data = read_exact(sock, INT.size)
    return INT.unpack(data)[0] if data is not None else None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def run_kept(argv: list[str], started: float) -> int | None:
    """The exit code of ``argv`` run by a kept process, or None when none serves it (nothing ran)."""
    if not enabled() or command_of(argv) not in COMMANDS:
        return None
    path = socket_path()
    if path is None or not path.exists():
        return None
    try:
        for fd in (0, 1, 2):
            os.fstat(fd)
    except OSError:  # a closed standard stream cannot be handed over
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # from before the request: a Ctrl-C while the process is forked reaches it once its pid is known
    pending = _Forwarding()
    try:
        sock.connect(str(path))
        request = json.dumps({"argv": argv, "env": dict(os.environ), "cwd": os.getcwd(), "umask": _umask(),
                              "started": started}).encode("utf-8", "surrogateescape")
        socket.send_fds(sock, [LENGTH.pack(len(request))], [0, 1, 2])
        sock.sendall(request)
        pid = read_int(sock)
    except OSError:
        pid = None
    if pid is None:  # refused before any fork: nothing ran
        sock.close()
        pending.restore()  # a signal that came meanwhile acts here, as if it came now
        return None
    pending.to(pid)
    return _wait(sock, pid)


class _Forwarding:
    """Signals forwarded to the command's process; those that come before its pid is known are kept
    and sent once it is (or, when nothing was forked, raised here again)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)

    def __init__(self) -> None:
        self.pid: int | None = None
        self.kept: list[int] = []
        self.before = {signum: signal.signal(signum, self.forward) for signum in self.SIGNALS}

    def forward(self, signum, frame) -> None:  # noqa: ARG002 - a signal handler's signature
        if self.pid is None:
            self.kept.append(signum)
            return
        try:
            os.kill(self.pid, signum)
        except ProcessLookupError:
            pass

    def to(self, pid: int) -> None:
        self.pid = pid
        for signum in self.kept:
            self.forward(signum, None)

    def restore(self) -> None:
        for signum, handler in self.before.items():
            signal.signal(signum, handler)
        for kept in self.kept:
            signal.raise_signal(kept)


def _wait(sock: socket.socket, pid: int) -> int:
    code = read_int(sock)
    if code is None:
        stderr_line(f"error: the command's process (pid {pid}, forked by a kept process) ended without an exit "
                    f"code (killed?); run it again, or with {KEEP_ENV}=0 in a process of its own")
        return int(Exit.FATAL)
    return code


def start_for_next(argv: list[str], env: dict[str, str]) -> None:
    """As a cold command of :data:`COMMANDS` begins: start a kept process for the next one, in the
    background, so that it has imported by the time this command ends (``make run``'s, for the
    command typed after it), with ``env``, the environment the command starts with (a command may
    add to its own: the validation turns Great Expectations' analytics off).  One already starting
    for the same key holds its lock: the second exits at once."""
    if not enabled(env) or command_of(argv) not in COMMANDS:
        return
    path = socket_path(env)
    if path is None:
        return
    try:
        subprocess.Popen([sys.executable, "-m", "ingest.cli.kept_process", str(path)], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                         close_fds=True, env=env)
    except OSError:
        pass  # the next command runs cold: nothing is lost
