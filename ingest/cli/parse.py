"""``sci-ingest parse``: FASTA-suite ``-m 10`` files (and its tabular output, ``-m 8C`` ...) to JSON
Lines on stdout, no database.  Each file's format is chosen by its first bytes, then its name
(:func:`ingest.parsers.detect`).

Its start-up is the parser's alone (no pymongo, no Dask): measured by ``benchmarks/bench_pasta.py``
against Biopython as whole commands.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import orjson  # ~10x faster than json.dumps here: the encoding was a third of the command's time

from ingest import parsers
from ingest.cli.options import FORMATS
from ingest.errors import Exit, InputError, ParseError
from ingest.fileio import open_binary, printable, stderr_line
from ingest.inputs import find_inputs

__all__ = ["cmd_parse"]


def _ejson_nonfinite(obj):
    """``obj`` with every non-finite float as MongoDB Extended JSON (``{"$numberDouble":
    "Infinity"}``, ``"-Infinity"``, ``"NaN"``: JSON has no such numbers); ``obj`` itself when
    it holds none."""
    if isinstance(obj, float):
        if obj != obj:
            return {"$numberDouble": "NaN"}
        if obj in (math.inf, -math.inf):
            return {"$numberDouble": "Infinity" if obj > 0 else "-Infinity"}
        return obj
    if isinstance(obj, dict):
        out = {k: _ejson_nonfinite(v) for k, v in obj.items()}
        return obj if all(out[k] is v for k, v in obj.items()) else out
    if isinstance(obj, list):
        items = [_ejson_nonfinite(v) for v in obj]
        return obj if all(a is b for a, b in zip(items, obj)) else items
    return obj


def _dumps(obj, option: int = orjson.OPT_APPEND_NEWLINE) -> bytes:
    """``obj`` as JSON (one line with the default ``option``)."""
    try:
        data = orjson.dumps(obj, option=option)
    except TypeError:  # e.g. an integer beyond 64 bits: the standard encoder takes anything JSON can hold
        obj = _ejson_nonfinite(obj)
        end = b"\n" if option & orjson.OPT_APPEND_NEWLINE else b""
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode() + end
    if b"null" in data:  # orjson writes inf and nan as null (a wrong value): walk the rare line with a null
        fixed = _ejson_nonfinite(obj)
        if fixed is not obj:
            data = orjson.dumps(fixed, option=option)
    return data


def _write_query(out, query: dict) -> None:
    """One JSON line of ``query``; its hits, when they come as a spool (a large block:
    ingest/parsers/pasta/spool.py), written one by one as they are read back."""
    hits = query["hits"]
    if isinstance(hits, list):
        out.write(_dumps(query))
        return
    keys = list(query)
    at = keys.index("hits")
    head = _dumps({k: query[k] for k in keys[:at]}, 0)  # "{...}": the keys before "hits"
    out.write(head[:-1] + (b',"hits":[' if len(head) > 2 else b'"hits":['))
    comma = b""
    for chunk in hits.chunks():  # "[hit,hit,...]" a chunk: one call, not one per hit
        data = _dumps(chunk, 0)
        if len(data) > 2:
            out.write(comma + data[1:-1])
            comma = b","
    tail = _dumps({k: query[k] for k in keys[at + 1 :]}, 0)  # "{...}": the keys after
    out.write(b"]" + (b"," + tail[1:] if len(tail) > 2 else b"}") + b"\n")


def _parser(name: str):
    """The parser of the search format of the file ``name`` (by its first bytes, then its name); the
    ``-m 10`` parser for any other file, which then says on which line it is not a report."""
    try:
        fmt = parsers.detect(Path(name))
    except InputError:
        fmt = None
    return (fmt if fmt is not None and fmt.kind == "search" else parsers.get("pasta")).load()


def cmd_parse(args) -> int:
    failed = 0
    out = sys.stdout.buffer

    def warn(message: str) -> None:
        stderr_line(f"warning: {message}")

    names, refused, skipped = _parse_inputs(args.files, args.include_hidden)
    if not (names or refused or skipped):  # folders without a -m 10 file: nothing to work on
        suffixes = ", ".join(_search_suffixes())
        stderr_line(f"error: nothing to parse: no -m 10 or tabular file ({suffixes}; .gz too) in "
                    f"{', '.join(map(printable, args.files))}")
        return Exit.FATAL
    for named in refused:
        failed += 1
        stderr_line(f"error: {named.shown}: {named.reason}")
    for named in skipped:  # hidden: named, not parsed (not a failure)
        stderr_line(f"skipped: {named.shown}: {named.reason}")
    for name in names:
        try:
            parse = _parser(name)
            with open_binary(name) as handle:
                for query in parse(handle, name, sequences=not args.no_sequences, warn=warn):
                    _write_query(out, query)  # already a dict: Query.to_dict()
        except BrokenPipeError:
            raise  # the reader went away (`| head`): stop quietly, see main()
        except ParseError as exc:
            failed += 1
            hint = "" if exc.line != 1 else (f" (`parse` reads FASTA's -m 10 and tabular output only; "
                                             f"`sci-ingest load` reads {FORMATS})")
            stderr_line(f"error: {exc}{hint}")
        except OSError as exc:
            failed += 1
            stderr_line(f"error: {printable(name)}: {exc.strerror or exc}")
    out.flush()
    return Exit.PARTIAL if failed else Exit.OK


def _search_suffixes() -> tuple[str, ...]:
    return tuple(sfx for name in parsers.names() if parsers.get(name).kind == "search"
                 for sfx in parsers.get(name).suffixes)


def _parse_inputs(paths: list[str], include_hidden: bool = False):
    """The files to parse: files as given, and the .m10[.gz], .m8[.gz] (...) files under directories;
    (names, refused, skipped), see :func:`ingest.inputs.find_inputs`."""
    plain = _search_suffixes()
    files, refused, skipped = find_inputs(paths, plain + tuple(sfx + ".gz" for sfx in plain),
                                          include_hidden=include_hidden)
    return [str(f) for f in files], refused, skipped
