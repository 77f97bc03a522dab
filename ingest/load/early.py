"""Failing a file early: what its first bytes, or the bytes hashed, prove before it is parsed whole.

A loader hashes a file before it parses it (:mod:`ingest.load.files`: the sha256 decides whether it is
loaded already, and names its documents), so a file that fails would cost its whole size first: a
sparse 20 GB ``.json`` of NUL bytes was read and hashed for 180 s before "record over the 16 MiB
limit", a sparse ``.m10`` 147 s before "line longer than 1 MiB", both knowable at the first MiB.
:func:`checked_version` hashes it unless its bytes prove it bad first:

* a file larger than :data:`HEAD_CHECK_FROM` on disk is first read by its parser up to
  :data:`HEAD_BYTES` (and on to the end of the record or line under way there, up to the format's
  limit): a record file's bad records there, or a ``-m 10`` file's error, fail it without hashing;
* as any file (not gzip-compressed) is hashed, :func:`byte_watch` looks at each chunk: a NUL byte
  in JSON text (which never holds one), a ``-m 10`` line over its limit, fail it there.

The time to fail a hostile file is thus a constant plus what its bytes proved: never its size.
What is left to a parse (a bad record after the first MiB of a big file) is found by the load's
checking pass, which stops there too (a record over the limit, the bound of bad records).
"""

from __future__ import annotations

from pathlib import Path

from ingest import parsers
from ingest.errors import InputError, ParseError
from ingest.load.content import AT_THE_BOUND, MAX_BAD_RECORDS, MAX_ERRORS_KEPT, bad_records
from ingest.load.outcome import FileOutcome
from ingest.load.reading import PastHead, Version, hash_version, line_at, read_head
from ingest.parsers import materials
from ingest.parsers.pasta import reader as pasta_reader

__all__ = ["checked_version", "head_failure", "byte_watch", "HEAD_CHECK_FROM", "HEAD_BYTES"]

#: A file larger than this on disk has its first MiB (:data:`HEAD_BYTES`) read by its parser before it
#: is hashed (:func:`head_failure`): below it, hashing the file costs less than a tenth of a second.
HEAD_CHECK_FROM = 64 << 20
HEAD_BYTES = 1 << 20


def checked_version(key: str, size: int, outcome: FileOutcome, max_bad: int = MAX_BAD_RECORDS) -> Version:
    """The file's version, sha256 included (:func:`~ingest.load.reading.hash_version`), unless its bytes
    prove it bad first: then the ParseError that names them (also in ``outcome.errors``), the rest of the
    file unread.  ``size``: on disk, as found; a file larger than :data:`HEAD_CHECK_FROM` has its first
    MiB parsed before (:func:`head_failure`); every file's bytes are watched as they are hashed
    (:func:`byte_watch`).  A file of no known format is only hashed (the loader says so after)."""
    try:
        fmt = parsers.detect(Path(key))
    except InputError:
        return hash_version(key)
    outcome.format = fmt.name  # what it is read as, also when its bytes fail it (as in a batch)
    try:
        failure = head_failure(key, fmt, outcome, max_bad) if size > HEAD_CHECK_FROM else None
        if failure is not None:
            raise failure
        return hash_version(key, byte_watch(fmt, key))
    except ParseError as exc:
        if not outcome.errors:
            outcome.errors.append({"line": exc.line, "reason": exc.reason})
        raise


def head_failure(key: str, fmt, outcome: FileOutcome, max_bad: int = MAX_BAD_RECORDS) -> ParseError | None:
    """A big file's failure proved by its first MiB, before it is hashed (the parser's look at its first
    :data:`HEAD_BYTES`, and at the record or line that goes on past them up to the format's limit), or
    None when they prove nothing.  A record file's bad records found there fill ``outcome.errors``."""
    errors: list[dict] = []
    parse = fmt.load()
    cap = HEAD_BYTES + (_record_limit() if fmt.kind != "search" else _line_limit()) + (2 << 20)
    try:
        with read_head(key, cap) as head:
            if fmt.kind == "search":
                for _ in parse(head, key, warn=lambda message: None):
                    if head.tell() > HEAD_BYTES:
                        return None
                return None  # the whole file read well: the load reads it again, hashed
            for item in parse(head, key):
                if isinstance(item, ParseError):
                    errors.append({"line": item.line, "reason": item.reason})
                    if len(errors) == max_bad:
                        break
                if head.tell() > HEAD_BYTES:
                    break
    except PastHead:
        pass
    except ParseError as exc:  # a -m 10 file's first error
        return exc
    except (InputError, OSError, EOFError):  # a corrupt gzip stream, the file gone: the load says it as ever
        return None
    if not errors:
        return None
    outcome.errors[:] = errors[:MAX_ERRORS_KEPT]
    return bad_records(key, outcome.errors, len(errors), stopped=(
        AT_THE_BOUND if len(errors) == max_bad else f" in its first {HEAD_BYTES >> 20} MiB (a file this large is not "
        "read further once its start fails it)"))


def byte_watch(fmt, key: str):
    """What :func:`ingest.load.reading.hash_version` watches for in the format's bytes as it hashes a file
    (one that is not gzip-compressed): a NUL byte in JSON text, which never holds one; a line of a
    ``-m 10`` report over its limit.  Either fails the file there, with the line it is on."""
    if fmt.kind == "search":
        limit = _line_limit()
        since = [0]  # bytes since the last line end

        def lines(chunk: bytes, offset: int) -> None:
            first = chunk.find(b"\n")
            if first < 0:
                since[0] += len(chunk)
                if since[0] > limit:
                    too_long(offset + len(chunk) - since[0])
                return
            if since[0] + first > limit:
                too_long(offset - since[0])
            last = chunk.rfind(b"\n")
            if last - first > limit + 1:  # whole lines in a chunk larger than the limit
                p = first + 1
                while p <= last:
                    e = chunk.find(b"\n", p)
                    if e - p > limit:
                        too_long(offset + p)
                    p = e + 1
            since[0] = len(chunk) - last - 1

        def too_long(start: int) -> None:
            raise ParseError(f"line longer than {limit} bytes; the rest of the file is not read", source=key,
                             line=line_at(key, start))

        return lines

    def no_nul(chunk: bytes, offset: int) -> None:
        at = chunk.find(b"\0")
        if at >= 0:
            raise ParseError(f"a NUL byte (byte {offset + at + 1:,} of the file): not JSON text, which holds none; "
                             "the rest of the file is not read", source=key, line=line_at(key, offset + at))

    return no_nul


def _record_limit() -> int:
    return materials.MAX_RECORD_BYTES  # read when called: a test lowers it


def _line_limit() -> int:
    return pasta_reader.MAX_LINE
