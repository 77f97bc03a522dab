"""Materials-Project-style JSON records: reading and classifying.

``read_records(handle, source)`` reads a JSON array, one JSON object (possibly
pretty-printed over many lines, or several concatenated), or JSON Lines (the
caller gunzips ``.gz``) and yields one :class:`Record` per good record and one
:class:`~ingest.errors.ParseError` per bad one, then carries on, so the caller
can report the bad records (the loader stops at a bound of them).  JSON Lines and arrays are streamed: memory is
bounded by the largest single record, not by the file.

A :class:`Record` is neutral: where the record was, what it is, its natural key and
the parsed JSON object as it was read.  The form it is stored in (canonical-name
aliases, BSON types, escaped keys, ``_ingest`` metadata) is made from it by
:mod:`ingest.documents.materials`; nothing here knows that form.

Input layout (decided from the first bytes, after an optional UTF-8 BOM):

* only whitespace                -> one ``ParseError("empty file")``;
* ``[``                          -> a JSON array; ``line`` is the 1-based record
  (element) number, and the physical line is named in error reasons;
* ``{`` and one of the first five non-blank lines is a complete JSON object on its
  own -> JSON Lines; ``line`` is the 1-based physical line;
* ``{`` otherwise                -> one pretty-printed object or several
  concatenated ones; ``line`` is the record number;
* anything else                  -> JSON Lines, so every line is reported.

Classification (first rule that matches; ``key`` is always a non-empty ``str``,
an integer id is turned into its decimal string; a record without the id its
rule needs is a ParseError):

=========  ===============  ==================================================  =======================
kind       doc_type         rule                                                key
=========  ===============  ==================================================  =======================
task       vasp_task /      has ``calcs_reversed`` or ``orig_inputs``, or both  ``task_id``
           qchem_task       ``input`` and ``output`` objects (qchem when the
                            input holds ``initial_molecule`` or ``orig`` holds
                            a Q-Chem ``rem`` section)
material   entry            pymatgen ``Computed(Structure)Entry`` dict          ``"entry:" + entry_id``
                            (``@class``) or ``entry_id`` + ``energy`` +
                            ``composition``
material   xas              has ``spectrum_id`` (XAS spectrum documents)         ``"xas:" + spectrum_id``
material   phonon           has ``ph_bs`` or ``ph_dos``                          ``"phonon:" + material_id``
material   summary          has ``material_id`` (summary / API records)          plain_key(material_id)
material   legacy_material  has ``task_id`` and none of the task markers        plain_key(task_id)
                            (legacy ``materials`` collection, where the
                            material id was called task_id; emmet magnetism
                            docs)
=========  ===============  ==================================================  =======================

Entries, spectra and phonon documents get a typed key because they share their
material's mp-id with the material's own document (the real data has summary
``mp-20`` and entry ``mp-20``, and GGA / GGA+U entries of one material): keyed by
the bare mp-id one would overwrite the other in the ``materials`` collection.
Their ``material_id`` alias (added to the stored document) still names the material.

**One namespace per kind of key** (:func:`plain_key`): a typed key is ``<kind>:<id>`` and
always holds a ``:``; a plain material id (summary, legacy material) never does: its ``%``
is written ``%25`` and its ``:`` ``%3A``.  So no record's text can make a plain key equal a
typed one (``{"material_id": "entry:mp-1"}`` is keyed ``entry%3Amp-1``, beside the entry
``entry:mp-1``), and ids without ``:`` or ``%`` (every Materials Project id) are their own key.
Task ids key the ``tasks`` collection, which holds one kind: they are kept as given.

Bad records are ParseErrors naming the record: invalid JSON or UTF-8, a key twice in one
object, a record too large to decode in memory (:mod:`ingest.parsers.json_text`), a value
that is not an object, a record without the natural key its rule needs.  A record over
:data:`MAX_RECORD_BYTES` is named as soon as the limit's bytes and one more are read without
its end, and then nothing more is read: it is neither held nor skipped to its end (a line of
gigabytes would be read whole for nothing: the file fails).  Whether a good record can be
stored (nesting depth, lone surrogates) is for :mod:`ingest.documents.materials` to say.
"""

from __future__ import annotations

import io
import json
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from ingest.config import setting
from ingest.errors import InputError, ParseError
from ingest.parsers.json_text import decode, non_finite, outside_strings, over_budget

__all__ = ["Record", "classify", "read_records", "non_finite", "plain_key", "TYPED_KINDS", "PLAIN_TYPES"]

CHUNK = 1 << 16
CHECK_EVERY = 1 << 20  # a record under way in an array or object stream: its cost estimated at each MiB
SNIFF_LINES = 5
#: The largest record (its JSON text) read; a bigger one is refused before it is parsed or kept in
#: memory.  MongoDB stores documents of at most 16 MiB of BSON.  ``SCI_INGEST_MAX_RECORD_BYTES``.
MAX_RECORD_BYTES = setting("SCI_INGEST_MAX_RECORD_BYTES")

#: A line of a FASTA ``-m 10`` report: its command line (``# ssearch36 -m 10 ...``), a query line
#: (``  1>>>ID ...``) or an end of query or run.  Met where a JSON Lines record was expected, it starts
#: another format: the file is refused whole, there (docs/loading.md, "A file holds one format").
_REPORT_LINE = re.compile(rb"#\s*\S*?(?:fast[afmsxy]|tfast[fmsxy]|ssearch|ggsearch|glsearch|lalign)3\d(?:_t)?\s"
                          rb"|\d+>>>|>>>(?:///|<<<)")
_OTHER_FORMAT = ("a FASTA -m 10 report starts here, in a file read as JSON records: a file holds one format, "
                 "and one holding more is refused whole")
_ENTRY_CLASSES = {"ComputedStructureEntry", "ComputedEntry", "GibbsComputedStructureEntry"}


@dataclass(frozen=True)
class Record:
    """One good record: where it was, what it is, its natural key and the parsed original."""

    line: int  # 1-based line (JSON Lines) or record number (array / object stream)
    kind: str  # "material" | "task"
    doc_type: str  # summary | legacy_material | entry | xas | phonon | vasp_task | qchem_task
    key: str  # natural key, unique within ``kind`` (see the module docstring)
    raw: dict  # the JSON object as read, untouched
    start_line: int | None = None  # physical line it starts on, where ``line`` is a record number
    #: What was read but not as written: a number that is not finite (``NaN``, ``Infinity``) or that
    #: overflows a double (``1e400``), by field path; stored as the double it became (see
    #: :func:`non_finite`).
    warnings: tuple[str, ...] = ()

    def error(self, reason: str, source: str) -> ParseError:
        """A ParseError about this record, named like the parser names its own bad records."""
        return _error(reason, source, self.line, self.start_line)


def _error(reason: str, source: str, number: int, start_line: int | None = None) -> ParseError:
    where = "" if start_line is None else f" (line {start_line})"
    return ParseError(reason + where, source=source, line=number)


# --------------------------------------------------------------------------- classification
#: The kinds whose key is ``<kind>:<id>`` in the ``materials`` collection (see the module docstring).
TYPED_KINDS = ("entry", "xas", "phonon")
#: The material documents keyed by their plain id, through :func:`plain_key`.
PLAIN_TYPES = ("summary", "legacy_material")


def plain_key(material_id: str) -> str:
    """The key of a plain material id: ``%`` as ``%25`` and ``:`` as ``%3A``, so that it never holds
    the ``:`` every typed key (``entry:...``) holds.  ``mp-149`` is ``mp-149``."""
    if "%" not in material_id and ":" not in material_id:
        return material_id
    return material_id.replace("%", "%25").replace(":", "%3A")


class _Unclassifiable(Exception):
    pass


def _key_value(raw: dict, field: str, what: str) -> str:
    if field not in raw:
        raise _Unclassifiable(f"{what} without {field}")
    value = raw[field]
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise _Unclassifiable(f"{what} whose {field} is {_type_name(value)}, not a string")
    key = str(value)
    if not key.strip():
        raise _Unclassifiable(f"{what} with an empty {field}")
    return key


def _type_name(value: Any) -> str:
    """The JSON type of ``value`` with its article, for messages."""
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def _is_task(raw: dict) -> bool:
    return (
        "calcs_reversed" in raw
        or "orig_inputs" in raw
        or (isinstance(raw.get("input"), dict) and isinstance(raw.get("output"), dict))
    )


def _task_code(raw: dict) -> str:
    inp, orig = raw.get("input"), raw.get("orig")
    if (isinstance(inp, dict) and "initial_molecule" in inp) or (isinstance(orig, dict) and "rem" in orig):
        return "qchem_task"
    return "vasp_task"


def _is_entry(raw: dict) -> bool:
    cls = raw.get("@class")
    return (isinstance(cls, str) and cls in _ENTRY_CLASSES) or (
        "entry_id" in raw and "energy" in raw and "composition" in raw
    )


def _classify(raw: dict) -> tuple[str, str, str]:
    """(kind, doc_type, key) or raise _Unclassifiable with the reason."""
    if _is_task(raw):
        return "task", _task_code(raw), _key_value(raw, "task_id", "a task document (calcs_reversed/input+output)")
    if _is_entry(raw):
        return "material", "entry", "entry:" + _key_value(raw, "entry_id", "a ComputedStructureEntry")
    if "spectrum_id" in raw:
        return "material", "xas", "xas:" + _key_value(raw, "spectrum_id", "a spectrum document")
    if "ph_bs" in raw or "ph_dos" in raw:
        return "material", "phonon", "phonon:" + _key_value(raw, "material_id", "a phonon document")
    if "material_id" in raw:
        return "material", "summary", plain_key(_key_value(raw, "material_id", "a material document"))
    if "task_id" in raw:
        return "material", "legacy_material", plain_key(_key_value(raw, "task_id", "a legacy material document"))
    raise _Unclassifiable(
        "cannot classify: no task fields (calcs_reversed, orig_inputs, input+output) and no "
        "natural key (material_id, task_id, entry_id, spectrum_id); keys: " + _key_list(raw)
    )


def _key_list(raw: dict, limit: int = 8) -> str:
    names = list(raw)
    shown = ", ".join(repr(k)[:40] for k in names[:limit])
    return (shown + f", ... ({len(names)} keys)") if len(names) > limit else (shown or "(none)")


def classify(raw: dict) -> tuple[str, str, str]:
    """``(kind, doc_type, key)`` of a raw record; raises :class:`ParseError` if it has no natural key."""
    if not isinstance(raw, dict):
        raise ParseError(f"a record must be a JSON object, not {_type_name(raw)}")
    try:
        return _classify(raw)
    except _Unclassifiable as exc:
        raise ParseError(str(exc)) from None


# --------------------------------------------------------------------------- reading
def _record(raw: Any, number: int, source: str, start_line: int | None = None, text: str = "") -> Record | ParseError:
    try:
        kind, doc_type, key = classify(raw)
    except ParseError as exc:
        return _error(exc.reason, source, number, start_line)
    return Record(line=number, kind=kind, doc_type=doc_type, key=key, raw=raw, start_line=start_line,
                  warnings=non_finite(text, raw))


def _too_big(size: int | None) -> str:
    """A record over the limit: of ``size`` bytes, or (None) of more, its end not met within them."""
    what = f"record of {size:,} bytes" if size is not None else f"record of more than {MAX_RECORD_BYTES:,} bytes"
    return (f"{what} is over the {MAX_RECORD_BYTES:,}-byte limit (MongoDB stores documents of at most 16 MiB; "
            "SCI_INGEST_MAX_RECORD_BYTES)" + ("" if size is not None else "; the rest of the file is not read"))


def _bounded_lines(stream: io.BufferedReader[Any]) -> Iterator[tuple[bytes | None, int, str]]:
    """(line, physical lines it stands for, why not) per line; a run of blank lines is one empty line
    standing for them all (:func:`_blank_run`).  Then ``(None, 1, reason)`` and nothing more: where a
    line is over the record limit (known once the limit's bytes and one more are read without a line end:
    the line is neither held nor skipped to its end), or a run of blanks is longer than it (as before the
    first record); the file fails, the rest unread."""
    while True:
        line = stream.readline(MAX_RECORD_BYTES + 1)
        if not line:
            return
        if len(line) > MAX_RECORD_BYTES and not line.endswith(b"\n"):
            yield None, 1, _too_big(None)
            return
        if not line.isspace():
            yield line, 1, ""
            continue
        run, over = _blank_run(stream, line)
        if over:
            yield None, 1, (f"more than {MAX_RECORD_BYTES:,} bytes of nothing but whitespace (the limit of a record; "
                            "SCI_INGEST_MAX_RECORD_BYTES): the rest of the file is not read")
            return
        yield b"", sum(chunk.count(b"\n") for chunk in run), ""


def _blank_run(stream: io.BufferedReader[Any], line: bytes) -> tuple[list[bytes], bool]:
    """The blank ``line`` and the blank lines after it, read a buffer at a time (a gzip of a GB of newlines
    took 0.27 us a line, read one by one: minutes), and whether they pass the record limit (then the
    reading stops there).  The blanks before the next line's text are left to that line."""
    run, size = [line], len(line)
    while size <= MAX_RECORD_BYTES and (ahead := stream.peek(CHUNK)[:CHUNK]):
        rest = ahead.lstrip()
        end = len(ahead) if not rest else ahead.rfind(b"\n", 0, len(ahead) - len(rest)) + 1
        if end <= 0:
            break
        run.append(stream.read(end))
        size += end
        if rest:
            break
    return run, size > MAX_RECORD_BYTES


class _Prefixed(io.RawIOBase):
    """Bytes already read from ``handle``, then the rest of ``handle``."""

    def __init__(self, prefix: bytes, handle: BinaryIO):
        self._prefix = prefix
        self._handle = handle

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self._prefix:
            n = min(len(buffer), len(self._prefix))
            buffer[:n] = self._prefix[:n]
            self._prefix = self._prefix[n:]
            return n
        data = self._handle.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        return n


def _read_lines(stream: io.BufferedReader[Any], source: str, first_line: int = 1) -> Iterator[Record | ParseError]:
    number = first_line - 1
    for raw_line, lines, refused in _bounded_lines(stream):
        number += lines
        if raw_line is None:
            yield ParseError(refused, source=source, line=number)
            return
        text = raw_line.strip()
        if not text:
            continue
        try:
            line_text = text.decode("utf-8")
            value = decode(line_text)
        except UnicodeDecodeError as exc:
            yield ParseError(f"not valid UTF-8 (byte {exc.start + 1})", source=source, line=number)
            continue
        except ParseError as exc:
            if _REPORT_LINE.match(raw_line.lstrip()):  # the rest is another format: one error says so
                yield ParseError(_OTHER_FORMAT, source=source, line=number)
                return
            yield ParseError(exc.reason, source=source, line=number)
            continue
        yield _record(value, number, source, text=line_text)


def _scan_values(text: io.TextIOBase, source: str, array: bool) -> Iterator[tuple[int, int, str] | ParseError]:
    """Split a JSON array (``array``) or a stream of top-level objects into element texts.

    Yields ``(record_number, physical_line, text)`` per element, or a ParseError for what
    cannot be split (end of file inside a record, data after the array).  Brackets are
    counted outside strings only; only the current element is kept in memory.
    """
    sig = re.compile(r'[\[\]{},"]')
    in_string = re.compile(r'["\\]')
    buf = ""
    lines_before = 0  # newlines in text already dropped from buf
    counted = [0, 0]  # buf[:counted[0]] holds counted[1] newlines: each is counted once, not once a record
    eof = False

    def refill(keep_from: int) -> int:
        """Drop buf[:keep_from], append a chunk; returns how much was dropped (0 at the end)."""
        nonlocal buf, lines_before, eof
        chunk = text.read(CHUNK)
        if not chunk:
            eof = True
            return 0
        line_of(keep_from)  # counts the newlines of what is dropped
        lines_before += counted[1]
        counted[0] = counted[1] = 0
        buf = buf[keep_from:] + chunk
        return keep_from

    def line_of(index: int) -> int:
        at, lines = counted if index >= counted[0] else (0, 0)
        counted[0], counted[1] = index, lines + buf.count("\n", at, index)
        return lines_before + counted[1] + 1

    def first_line_of(begin: int, end: int) -> int:
        piece = buf[begin:end]
        return line_of(begin + len(piece) - len(piece.lstrip()))

    pos = 0
    if array:  # just after the opening bracket (only whitespace precedes it)
        while "[" not in buf and not eof:
            refill(len(buf))
        pos = buf.index("[") + 1
    start, depth, quoted, number, closed = pos, (1 if array else 0), False, 0, False
    dropped_before = 0  # characters dropped from buf's start so far: start + it is a record's place in the text
    checked = (-1, 0)  # (place, characters) of the record whose memory cost was last estimated
    while not closed:
        if quoted:
            m = in_string.search(buf, pos)
            if m is not None and m.group() == '"':
                quoted, pos = False, m.end()
                continue
            if m is not None and m.end() < len(buf):  # a backslash and the character it escapes
                pos = m.end() + 1
                continue
            pos = m.start() if m is not None else len(buf)
        else:
            m = sig.search(buf, pos)
            if m is not None:
                ch, at = m.group(), m.start()
                pos = m.end()
                if ch == '"':
                    quoted = True
                elif ch in "[{":
                    depth += 1
                elif array and depth == 1:
                    if ch in ",]":
                        if at - start > MAX_RECORD_BYTES:
                            number += 1
                            yield _oversize(first_line_of(start, at), at - start, source, number)
                        elif buf[start:at].strip():
                            number += 1
                            yield number, first_line_of(start, at), buf[start:at]
                        elif ch == "," or number > 0:
                            number += 1
                            what = "empty array element" if ch == "," else "trailing comma before ']'"
                            yield ParseError(f"{what} (line {line_of(at)})", source=source, line=number)
                        start = pos
                        closed = ch == "]"
                    # a stray '}' at array level stays in its element, for json.loads to report
                elif ch != ",":
                    depth = max(depth - 1, 0)
                    if not array and depth == 0:
                        number += 1
                        if pos - start > MAX_RECORD_BYTES:
                            yield _oversize(first_line_of(start, pos), pos - start, source, number)
                        else:
                            yield number, first_line_of(start, pos), buf[start:pos]
                        start = pos
                continue
            pos = len(buf)
        if eof:
            break
        if len(buf) - start > MAX_RECORD_BYTES:  # no end within the limit: the file fails, read no further
            yield _oversize(first_line_of(start, len(buf)), None, source, number + 1)
            return
        if len(buf) - start > (checked[1] if checked[0] == start + dropped_before else 0) + CHECK_EVERY:
            checked = (start + dropped_before, len(buf) - start)  # a record's cost, known before its end
            refused = over_budget(buf[start:], begun=True)
            if refused:
                yield ParseError(f"{refused}; the rest of the file is not read (starting line "
                                 f"{first_line_of(start, len(buf))})", source=source, line=number + 1)
                return
        dropped = refill(start)
        pos, start, dropped_before = pos - dropped, start - dropped, dropped_before + dropped
    if closed:  # only whitespace may follow the array: as much as a record may hold, dropped as it is read
        trailing = 0
        while not eof and not buf[pos:].strip():
            trailing += len(buf) - pos
            if trailing > MAX_RECORD_BYTES:
                yield ParseError(f"more than {MAX_RECORD_BYTES:,} bytes of nothing but whitespace after the closing "
                                 "']' (the limit of a record): the rest of the file is not read", source=source,
                                 line=number + 1)
                return
            if refill(len(buf)):
                pos = 0
        if buf[pos:].strip():
            yield ParseError(f"data after the closing ']' (line {first_line_of(pos, len(buf))})",
                             source=source, line=number + 1)
        return
    if array:
        yield ParseError(f"unexpected end of file inside the array, in record {number + 1} "
                         f"(starting line {first_line_of(start, len(buf))})", source=source, line=number + 1)
    elif buf[start:].strip():
        reason = "unexpected end of file inside a record" if (depth or quoted) else "data that is not a JSON object"
        yield ParseError(f"{reason} (line {first_line_of(start, len(buf))})", source=source, line=number + 1)


def _oversize(line: int, size: int | None, source: str, number: int) -> ParseError:
    return ParseError(f"{_too_big(size)} (starting line {line})", source=source, line=number)


def _balanced(line: bytes) -> bool:
    """True if ``line`` closes every bracket it opens (strings skipped)."""
    counts, string_open = outside_strings(line.decode("utf-8", "surrogateescape"), "[{]}")
    if string_open:
        return False
    return counts["["] + counts["{"] <= counts["]"] + counts["}"]


def _is_object_line(text: bytes) -> bool:
    if not (text.startswith(b"{") and text.endswith(b"}")):
        return False
    if over_budget(text.decode("utf-8", "surrogateescape")):
        return False  # not decoded to sniff: read as a record, it is refused with the reason
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return False
    return isinstance(value, dict) and bool(value)


def read_records(handle: BinaryIO, source: str) -> Iterator[Record | ParseError]:
    """Every record of ``handle`` as a :class:`Record`, every bad one as a ParseError (yielded, not raised).

    Errors of the handle itself propagate (``OSError``, ``EOFError``), except ``zlib.error``
    from a corrupt gzip stream, which becomes an :class:`~ingest.errors.InputError`.
    """
    try:
        yield from _read_records(handle, source)
    except zlib.error as exc:
        raise InputError(f"{source}: cannot read: corrupt compressed data ({exc})") from exc


def _read_records(handle: BinaryIO, source: str) -> Iterator[Record | ParseError]:
    parts: list[bytes] = []
    size = 0
    while True:  # read until the first significant byte (or the end), each chunk looked at once
        chunk = handle.read(CHUNK)
        if not parts and chunk.startswith(b"\xef\xbb\xbf"):
            significant = chunk[3:].lstrip()
        else:
            significant = chunk.lstrip()
        parts.append(chunk)
        size += len(chunk)
        if significant or not chunk:
            break
        if size > MAX_RECORD_BYTES:  # a whitespace bomb (a gzip of GBs of blanks): never held whole
            yield ParseError(f"nothing but whitespace in the first {MAX_RECORD_BYTES:,} bytes", source=source, line=1)
            return
    if not significant:
        yield ParseError("empty file", source=source)
        return
    head = b"".join(parts)
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    stream = io.BufferedReader(_Prefixed(head, handle), buffer_size=CHUNK)
    first = significant[:1]

    if first == b"{":
        # JSON Lines if the first line is one complete object, or if it is at least
        # bracket-balanced (a bad record) and one of the next lines is a complete object.
        # The first line of a pretty-printed object always leaves a bracket open.
        peeked: list[bytes] = []
        jsonl = False
        first_balanced = None
        size = lines = 0  # counted as they come: each blank line once (a count of the list each time was quadratic)
        while lines < SNIFF_LINES:
            line = stream.readline(MAX_RECORD_BYTES + 1)
            if not line:
                break
            run = _blank_run(stream, line)[0] if line.isspace() else [line]
            peeked += run
            size += sum(map(len, run))
            if len(line) > MAX_RECORD_BYTES or size > MAX_RECORD_BYTES:
                break  # too long for a line of JSON Lines: objects on one line, or an oversize one
            text = line.strip()
            if not text:
                continue
            lines += 1
            if _is_object_line(text):
                jsonl = True
                break
            if first_balanced is None:
                first_balanced = _balanced(text)
                if not first_balanced:
                    break
        replay = io.BufferedReader(_Prefixed(b"".join(peeked), stream), buffer_size=CHUNK)
        if jsonl:
            yield from _read_lines(replay, source)
        else:
            yield from _read_scanned(replay, source, array=False)
    elif first == b"[":
        yield from _read_scanned(stream, source, array=True)
    else:
        yield from _read_lines(stream, source)


def _read_scanned(stream: BinaryIO, source: str, *, array: bool) -> Iterator[Record | ParseError]:
    text = io.TextIOWrapper(stream, encoding="utf-8", errors="surrogateescape", newline="")
    for item in _scan_values(text, source, array):
        if isinstance(item, ParseError):
            yield item
            continue
        number, line, element = item
        try:
            value = decode(element)
        except ParseError as exc:
            yield _error(exc.reason, source, number, line)
            continue
        yield _record(value, number, source, line, text=element)
