"""Format registry: one format, one parser module, registered by name.

A format is registered with a *sniffer* (cheap: looks at the file name and the
first bytes) and the dotted path of its parser function, imported only when the
format is used, so ``sci-ingest parse`` never pays for modules it does not need.
A format whose first bytes prove it whatever the file is called also has ``claims``
(bytes -> bool), asked before the suffixes: FASTA's tabular output (``-m 8C``:
comment lines of its own; ``-m 8``: a row of 12 to 15 tab-separated fields) is read
as such in a file named ``.m10`` too (``-m 8CB -m 10`` prints the table first), and
a ``-m 9c`` report without ``-m 10`` by its command line.

Parser contracts (pure: no I/O beyond reading the handle they are given):

* ``kind == "search"``  -> ``parse_dicts(handle: BufferedIOBase, source: str, *, sequences=True,
  warn=None) -> Iterator[dict]``: one JSON-ready dict per query, equal to
  ``ingest.model.Query.to_dict()`` (the parser module also has ``parse``, which yields
  the :class:`ingest.model.Query` objects), but for the hits of a block too large to hold,
  which come as an iterable with ``len()`` in their place (memory bounded whatever one
  block holds; :mod:`ingest.parsers.pasta.spool`); raises :class:`ingest.errors.ParseError`.
* ``kind == "records"`` -> ``read_records(handle: BufferedIOBase, source: str) ->
  Iterator[ingest.parsers.materials.Record | ingest.errors.ParseError]``; a bad record
  is *yielded* as a ParseError (file, record number, reason) so the caller can
  set the whole file aside.

Parsers yield neutral objects, never the stored form: the documents MongoDB gets are
made from them by :mod:`ingest.documents` (one module per format).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ingest.errors import UnknownFormat
from ingest.fileio import open_binary


@dataclass(frozen=True)
class Format:
    name: str
    kind: str  # "search" | "records"
    entry_point: str  # "module:function"
    sniff: Callable[[str, bytes], bool]
    description: str = ""
    suffixes: tuple[str, ...] = ()  # file names a directory scan picks up (each also as .gz)
    claims: Callable[[bytes], bool] | None = None  # first bytes that prove the format, whatever the name

    def load(self) -> Callable:
        module, _, func = self.entry_point.partition(":")
        return getattr(importlib.import_module(module), func)


_REGISTRY: dict[str, Format] = {}


def register(fmt: Format) -> Format:
    if fmt.name in _REGISTRY:
        raise ValueError(f"format {fmt.name!r} is already registered")
    _REGISTRY[fmt.name] = fmt
    return fmt


def get(name: str) -> Format:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownFormat(f"unknown format {name!r}; known: {', '.join(sorted(_REGISTRY))}") from None


def names() -> list[str]:
    return sorted(_REGISTRY)


def data_file_suffixes() -> tuple[str, ...]:
    """Every registered format's file-name suffixes, plain and ``.gz``, for directory scans."""
    plain = tuple(sfx for fmt in _REGISTRY.values() for sfx in fmt.suffixes)
    return plain + tuple(sfx + ".gz" for sfx in plain)


def strip_compression(name: str) -> str:
    return name[:-3] if name.endswith(".gz") else name


def read_head(path: Path, size: int = 4096) -> bytes:
    """First ``size`` bytes of the (decompressed) file; empty on a broken gzip."""
    try:
        with open_binary(path) as fh:
            return fh.read(size)
    except (OSError, EOFError):
        return b""


def detect(path: Path) -> Format:
    """The format of ``path``, by its name first, then by its first bytes."""
    return detect_head(path, read_head(path))


def detect_head(path: Path, head: bytes) -> Format:
    """The format of ``path`` whose first (decompressed) bytes are ``head``: the one that
    ``claims`` the bytes (FASTA's tabular output, whatever the name); else the one its name's
    suffix registers, whatever the bytes (a ``.jsonl`` file whose first 4 KiB hold a ``-m 10``
    report is JSON, and refused as such), else the first whose sniffer knows the bytes."""
    for fmt in _REGISTRY.values():
        if fmt.claims is not None and fmt.claims(head):
            return fmt
    name = strip_compression(path.name.lower())
    for fmt in _REGISTRY.values():
        if fmt.suffixes and name.endswith(fmt.suffixes):
            return fmt
    for fmt in _REGISTRY.values():
        if fmt.sniff(name, head):
            return fmt
    raise UnknownFormat(f"{path}: not a recognised format (known: {', '.join(names())})")


_PASTA_SUFFIXES = (".m10", ".m10.txt", ".pasta", ".ssearch", ".fasta36")
_JSON_SUFFIXES = (".json", ".jsonl", ".ndjson")
_TABULAR_SUFFIXES = (".m8", ".m8c", ".m8cb")


def _sniff_pasta(name: str, head: bytes) -> bool:
    if name.endswith(_PASTA_SUFFIXES):
        return True
    # A -m 10 file starts with the command line ("# ssearch36 ...") or the program banner,
    # and announces queries with ">>>".
    return b">>>" in head and (b"; pg_name" in head or b"version 36" in head or b"\n>>>" in head)


# FASTA's -m 8C comments: the command line, then "# SSEARCH 36.3.8i Nov, 2022" (or that line first)
_TABULAR_VERSION = re.compile(rb"# [A-Z][A-Z0-9_]* \d+\.\d")
# a -m 8 row: query id, subject id, % identity, alignment length, mismatches, gap opens, 4 coordinates,
# E-value, bits (the lengths after the ids with L; an encoded alignment last with B or C)
_TABULAR_ROW = re.compile(rb"[^\t\s]*\t(?:\d+\t)?[^\t\s]*\t(?:\d+\t)?\d+(?:\.\d+)?(?:\t\d+){7}\t[-+.\deEinf]+"
                          rb"\t[-+.\deEinf]+(?:\t[!-~]+)?\r?")


def _claims_tabular(head: bytes) -> bool:
    """FASTA's tabular output: its comment lines, or a first line that is a -m 8 row (never the start
    of a -m 10 report, whose second line is the program's banner, nor of JSON text)."""
    lines = head.split(b"\n", 2)
    if lines[0].startswith(b"# "):
        return _TABULAR_VERSION.match(lines[0]) is not None or (
            len(lines) > 1 and _TABULAR_VERSION.match(lines[1]) is not None)
    return _TABULAR_ROW.fullmatch(lines[0]) is not None


def _sniff_tabular(name: str, head: bytes) -> bool:
    return name.endswith(_TABULAR_SUFFIXES) or _claims_tabular(head)


_M_OPTION = re.compile(r"""(?:^|\s)-m\s*(?:"([^"]*)"|'([^']*)'|(\S+))""")


def _claims_m9(head: bytes) -> bool:
    """A ``-m 9``-family report without ``-m 10``, by the command line FASTA prints first (``# ssearch36
    ... -m 9c ...``; then its banner, not a tabular comment): FASTA reads the first word of an ``-m``
    argument (``-m "10 9c"`` is ``-m 10``) and each of a comma list (``-m 10,9c`` is both).  An ``F``
    argument names a file and its modes (``-m "F10,9c out.m10"``) and decides nothing here: beside
    ``-m 9c`` FASTA writes the ``-m 9c`` layout to an ``F10`` file too (36.3.8i)."""
    first, _, rest = head.partition(b"\n")
    if not first.startswith(b"# ") or rest.startswith(b"#"):
        return False
    modes = []
    for m in _M_OPTION.finditer(first.decode("latin-1")):
        arg = next(g for g in m.groups() if g is not None)
        if not arg.lstrip().startswith("F"):
            modes += [piece.split()[0] for piece in arg.split(",") if piece.split()]
    return any(mode.startswith("9") for mode in modes) and not any(mode == "10" or mode[:1] == "8" for mode in modes)


def _sniff_json(name: str, head: bytes) -> bool:
    if name.endswith(_JSON_SUFFIXES):
        return True
    return head.lstrip()[:1] in (b"{", b"[")


register(
    Format(
        name="pasta",
        kind="search",
        entry_point="ingest.parsers.pasta:parse_dicts",
        sniff=_sniff_pasta,
        suffixes=_PASTA_SUFFIXES,
        description="FASTA-suite -m 10 output (ssearch36, fasta36, ggsearch36, ...)",
    )
)
register(
    Format(
        name="pasta-m8",
        kind="search",
        entry_point="ingest.parsers.tabular:parse_dicts",
        sniff=_sniff_tabular,
        suffixes=_TABULAR_SUFFIXES,
        claims=_claims_tabular,
        description="FASTA-suite BLAST-tabular output (-m 8, 8C, 8CB, ...; alone or with -m 10)",
    )
)
register(
    Format(
        name="pasta-m9",
        kind="search",
        entry_point="ingest.parsers.tabular.m9:parse_dicts",
        sniff=lambda name, head: name.endswith(".m9") or _claims_m9(head),
        suffixes=(".m9",),
        claims=_claims_m9,
        description="FASTA-suite -m 9, 9c, 9C, 9B, 9i without -m 10 (the best-scores tables)",
    )
)
register(
    Format(
        name="materials",
        kind="records",
        entry_point="ingest.parsers.materials:read_records",
        sniff=_sniff_json,
        suffixes=_JSON_SUFFIXES,
        description="Materials-Project-style JSON / JSON Lines documents (materials and tasks)",
    )
)
