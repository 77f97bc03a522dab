"""Reading one version of a file: what is hashed is what is parsed, or the file is named as changed.

A loader hashes a file, then parses it (a record file twice: a checking pass,
then a writing pass when its documents were too many to keep).  A file that
changes meanwhile (it grows, shrinks, is rewritten, truncated or replaced)
would otherwise be loaded as half of one version and half of another, under
the first version's sha256.  So every pass reads through :func:`read_pass`,
which hashes the raw bytes as the parser takes them, reads what the parser
left to the end, and checks the sha256, the size and the modification time
against the version (:class:`Version`) the load is for; a difference raises
:class:`Changed`, a bad file of its own: "changed while it was being loaded;
run the load again".  A small file is read once into memory
(:func:`read_small`): hashed and parsed from the same bytes, it is always one
version.

Files are opened without following a symbolic link in the last component: the
ledger's key is the resolved path, so a file replaced by a link since it was
found is not read through the link (:class:`Changed` again).

A file that fails is not read to its end: hashing a file first would cost its
whole size before a parser could say that its first MiB fails it (a sparse
20 GB file of NUL bytes took 180 s).  So a pass that fails is checked by the
file's size and modification time only, never drained; a big file's first
bytes can be looked at before it is hashed (:func:`read_head`: a parser's
look at them, up to a cap); and :func:`hash_version` hands each chunk it hashes
to a ``watch`` that may prove the file bad as it goes (a NUL byte in JSON text,
a ``-m 10`` line over its limit), ending the read there.
"""

from __future__ import annotations

import errno
import gzip
import hashlib
import io
import os
import stat as _stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from ingest.errors import InputError
from ingest.fileio import GZIP_MAGIC, NotRegularFile, kind_of
from ingest.load.records import version_order

__all__ = ["Version", "Changed", "version_of", "hash_version", "read_pass", "read_small", "memory_stream",
           "read_head", "PastHead", "line_at"]

_CHUNK = 1 << 20
_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)


class Changed(InputError):
    """The file changed while it was being loaded (its content, size or modification time)."""

    def __init__(self, key: str, what: str):
        super().__init__(f"{key}: changed while it was being loaded ({what}); run the load again")


@dataclass(frozen=True)
class Version:
    """One version of a file: what the ledger records of it, and what its records are ordered by."""

    key: str  # the resolved path (the ledger's _id)
    size: int
    mtime: float
    mtime_ns: int
    sha256: str = ""

    @property
    def order(self) -> str:
        return version_order(self.mtime_ns, self.sha256, self.key)

    def same_stat(self, st: os.stat_result) -> bool:
        return st.st_size == self.size and st.st_mtime_ns == self.mtime_ns


def _open(key: str) -> int:
    """A descriptor of the regular file ``key`` (never through a symbolic link, never blocking)."""
    try:
        fd = os.open(key, _FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a link where the file was
            raise Changed(key, "it was replaced by a symbolic link") from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not _stat.S_ISREG(mode):
            raise NotRegularFile(f"not a regular file: {kind_of(mode)}")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def version_of(key: str) -> Version:
    """The file's version now: its size and mtime (the sha256 is the caller's to add)."""
    fd = _open(key)
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    return Version(key=key, size=st.st_size, mtime=st.st_mtime, mtime_ns=st.st_mtime_ns)


class _Hashing(io.RawIOBase):
    """The raw bytes of a file, hashed as they are read."""

    def __init__(self, fd: int):
        self._file = os.fdopen(fd, "rb", buffering=0)
        self.digest = hashlib.sha256()
        self.size = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self._file.readinto(buffer)
        if n:
            self.digest.update(memoryview(buffer)[:n])
            self.size += n
        return n

    def drain(self, watch: Callable[[bytes, int], None] | None = None) -> None:
        while chunk := self._file.read(_CHUNK):
            if watch is not None:
                if self.size == 0 and chunk[:2] == GZIP_MAGIC:
                    watch = None  # what it watches for is in the gunzipped bytes: the parser sees them
                else:
                    watch(chunk, self.size)
            self.digest.update(chunk)
            self.size += len(chunk)

    def fileno(self) -> int:
        return self._file.fileno()

    def tell(self) -> int:  # bytes read so far (BufferedReader.tell subtracts what it holds)
        return self.size

    def close(self) -> None:
        self._file.close()
        super().close()


def hash_version(key: str, watch: Callable[[bytes, int], None] | None = None) -> Version:
    """The file's version now, sha256 included (one read; :class:`Changed` if it moved meanwhile).

    ``watch(chunk, offset)`` sees each chunk of a file that is not gzip-compressed as it is hashed
    (``offset``: of its first byte in the file) and may raise to end the read there."""
    raw = _Hashing(_open(key))
    try:
        st = os.fstat(raw.fileno())
        if watch is None:
            raw.drain()
        else:
            raw.drain(watch)
        version = Version(key=key, size=st.st_size, mtime=st.st_mtime, mtime_ns=st.st_mtime_ns,
                          sha256=raw.digest.hexdigest())
        if raw.size != st.st_size or not version.same_stat(os.fstat(raw.fileno())):
            raise Changed(key, "its size or modification time changed while it was hashed")
        return version
    finally:
        raw.close()


@contextmanager
def read_pass(version: Version) -> Iterator[io.BufferedIOBase]:
    """The file's (gunzipped) bytes for one pass of a parser; the pass is checked to have read
    exactly ``version``: :class:`Changed` otherwise, also in place of the error of a parser that
    met the other version's bytes."""
    raw = _Hashing(_open(version.key))
    try:
        if not version.same_stat(os.fstat(raw.fileno())):
            raise Changed(version.key, "its size or modification time differs from when it was hashed")
        buffered = io.BufferedReader(raw, _CHUNK)
        gzipped = buffered.peek(2)[:2] == GZIP_MAGIC
        handle = gzip.GzipFile(fileobj=buffered, mode="rb") if gzipped else buffered
        try:
            yield handle
        except (InputError, OSError, EOFError) as exc:
            _check_failed(raw, version, exc)
            raise
        _check(raw, version)
    finally:
        raw.close()


def _check_failed(raw: _Hashing, version: Version, cause: BaseException) -> None:
    """Raise :class:`Changed` in place of ``cause`` (a pass's failure) if the file's size or
    modification time changed.  Its content is not read to the end to be compared: the failure
    would cost the file's size whatever the bytes that proved it."""
    try:
        now = os.fstat(raw.fileno())
    except OSError:
        return
    if not version.same_stat(now):
        raise Changed(version.key, "its size or modification time changed while it was read") from cause


def _check(raw: _Hashing, version: Version) -> None:
    """Raise :class:`Changed` unless ``raw`` read, to its end, the bytes of ``version``."""
    raw.drain()
    now = os.fstat(raw.fileno())
    if raw.digest.hexdigest() != version.sha256 or raw.size != version.size:
        raise Changed(version.key, f"{raw.size:,} bytes read, not the {version.size:,} bytes hashed first"
                      if raw.size != version.size else "its content is not the content hashed first")
    if not version.same_stat(now):
        raise Changed(version.key, "its size or modification time changed while it was read")


def read_small(key: str, limit: int) -> tuple[Version, bytes] | None:
    """The whole file in memory with its version (sha256 of those very bytes), or None when it
    is larger than ``limit`` bytes on disk."""
    fd = _open(key)
    try:
        st = os.fstat(fd)
        if st.st_size > limit:
            return None
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(limit + 1)
        after = os.fstat(fd)
    finally:
        os.close(fd)
    version = Version(key=key, size=st.st_size, mtime=st.st_mtime, mtime_ns=st.st_mtime_ns,
                      sha256=hashlib.sha256(data).hexdigest())
    if len(data) != st.st_size or not version.same_stat(after):
        raise Changed(key, "its size or modification time changed while it was read")
    return version, data


def memory_stream(data: bytes) -> io.BufferedIOBase:
    """A parser's handle on bytes read by :func:`read_small` (gunzipped as it is read)."""
    handle = io.BytesIO(data)
    return gzip.GzipFile(fileobj=handle, mode="rb") if data[:2] == GZIP_MAGIC else handle


class PastHead(BaseException):
    """A look at a file's first bytes (:func:`read_head`) went past its cap: it proved nothing.
    A BaseException, so that no parser's handling of its own errors takes it for one."""


class _Capped(io.RawIOBase):
    """The first ``cap`` bytes of ``handle``; a read past them raises :class:`PastHead`."""

    def __init__(self, handle: io.BufferedIOBase, cap: int):
        self._handle = handle
        self._left = cap
        self.given = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        want = len(buffer)
        if want > self._left:
            if self._left == 0:
                raise PastHead
            want = self._left
        data = self._handle.read(want)
        n = len(data)
        buffer[:n] = data
        self._left -= n
        self.given += n
        return n

    def tell(self) -> int:
        return self.given


@contextmanager
def read_head(key: str, cap: int) -> Iterator[io.RawIOBase]:
    """The file's first ``cap`` (gunzipped) bytes, for a parser's look before the file is hashed;
    a read past them raises :class:`PastHead`.  ``tell()`` says how many bytes were given."""
    fd = _open(key)
    with os.fdopen(fd, "rb", buffering=0) as raw:
        buffered = io.BufferedReader(raw, _CHUNK)
        gzipped = buffered.peek(2)[:2] == GZIP_MAGIC
        handle = gzip.GzipFile(fileobj=buffered, mode="rb") if gzipped else buffered
        yield _Capped(handle, cap)


def line_at(key: str, offset: int) -> int:
    """The line (1-based) of the byte at ``offset`` of the file ``key`` (a proof's place: as much is
    read as the proof took)."""
    lines, left = 1, offset
    with os.fdopen(_open(key), "rb", buffering=0) as fh:
        while left > 0 and (chunk := fh.read(min(_CHUNK, left))):
            lines += chunk.count(b"\n")
            left -= len(chunk)
    return lines
