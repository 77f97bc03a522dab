"""Rendering run reports and timing rows for people (tables) and programs (JSON).

What people read holds no control character: every cell and line goes through
:func:`ingest.fileio.printable` (paths with their backslashes made unambiguous), so a
file named with a newline or an ESC cannot forge a line or reach the terminal.
JSON keeps the real values (its escaping handles control characters).
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Iterable

from ingest.fileio import printable
from ingest.inputs import LOADED_BY_ANOTHER, is_hidden_reason


def cell(value) -> str:
    """A cell: thousands separated; a float with as many decimals as its size deserves
    (18,298 records/s, 74.2 MB, 1.35 s, 0.003 s); text without control characters."""
    if value is None:
        return "-"
    if isinstance(value, float):
        size = abs(value)
        digits = 0 if size >= 100 else 1 if size >= 10 else 2 if size >= 1 else 3
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return printable(str(value), backslash=False)


def table(rows: Iterable[dict], columns: list[tuple[str, str]], left: int = 1) -> str:
    """A plain-text table; ``columns`` are (key, header) pairs; the first ``left`` columns align left."""
    rows = list(rows)
    cells = [[h for _, h in columns]] + [[cell(r.get(k)) for k, _ in columns] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    lines = []
    for n, row in enumerate(cells):
        lines.append("  ".join(c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


TIMING_COLUMNS = [
    ("stage", "stage"),
    ("records_in", "records in"),
    ("records_out", "records out"),
    ("seconds", "seconds"),
    ("busy_seconds", "busy s"),
    ("records_per_s", "records/s"),
    ("mb_per_s", "MB/s"),
    ("workers", "workers"),
    ("peak_rss_mb", "peak RSS MB"),
    ("status", "status"),
]

WORKER_COLUMNS = [
    ("worker", "worker"),
    ("files", "files"),
    ("records_in", "documents"),
    ("records_out", "written"),
    ("busy_seconds", "busy s"),
    ("seconds", "seconds"),
    ("records_per_s", "written/s"),
    ("mb_per_s", "MB/s"),
]


def timing_table(rows: Iterable[dict], with_file: bool = False) -> str:
    columns = list(TIMING_COLUMNS)
    if with_file:
        columns.insert(1, ("file", "file"))
        rows = [{**r, "file": printable(r["file"])} if isinstance(r.get("file"), str) else r for r in rows]
    return table(rows, columns)


def worker_table(rows: Iterable[dict]) -> str:
    return table(rows, WORKER_COLUMNS)


def render_run(report) -> str:
    data = report.as_json()
    server = data["server"]
    out: list[str] = []

    def add(line: str) -> None:  # a line of text: one line, no control character (tables are escaped per cell)
        out.append(printable(line, backslash=False))

    add(f"run {data['run_id']}")
    add(f"server: {report.server.label()} at {server['uri']}")
    for note in data["notes"]:
        add(f"note: {note}")
    out.append("")
    out.append(timing_table(data["stages"]))
    out.append("")
    if report.load is not None:  # the load step ran
        files = data["files"]
        add(
            f"files: {files['files_loaded']} loaded, {_skipped_files(report.load, files['files_skipped'])}, "
            f"{files['files_failed']} failed" + (" (each named on stderr" + _kept(files) + ")" if files["files_failed"] else "")
            + (f", {files['files_not_reached']} not reached (the run stopped)" if files.get("files_not_reached")
               else "")
        )
        add(
            f"documents: {data['inserted']:,} inserted, {data['updated']:,} updated, "
            f"{data['skipped']:,} skipped (already loaded)"
        )
        aside = data.get("set_aside") or []
        if aside:
            add(f"set aside: {sum(a['total'] for a in aside):,} value(s) of another type than declared, in "
                f"{len(aside)} file(s) (named on stderr; all in --json and the ledger)")
        warned = data.get("warnings") or []
        if warned:
            add(f"warnings: {sum(w['total'] for w in warned):,} in {len(warned)} file(s) (the first of each named on "
                "stderr; all in --json and the ledger)")
        load = data["load"]
        concern = ", ".join(f"{k}={v}" for k, v in (load.get("write_concern") or {}).items()) or "server default"
        retried = f"{load.get('retries', 0)} retried operation(s)"
        if files.get("files_not_reached") and load.get("workers", 1) > 1:  # stopped: tasks in flight never said
            retried = f"at least {retried} (the tasks stopped with the load did not report theirs)"
        add(f"load: {load.get('workers', 1)} worker(s), write concern {concern}, {retried}"
            + (" (dry run: nothing written)" if load.get("dry_run") else ""))
        for path in load.get("rolled_back") or []:
            add(f"  rolled back {printable(path)}")
    for result in data["analysis"]:
        parquet = result.get("parquet_path")
        add(
            f"analysis {result['name']}: {result['records_in']:,} in -> {result['records_out']:,} out "
            f"({result.get('collection')}, {printable(parquet) if parquet is not None else None})"
            + _scope_note(result.get("scope") or {})
        )
    val = data["validation"]
    if val:
        passed = sum(1 for s in val["suites"] if s["success"])
        kept = sum(1 for s in val["suites"] if s.get("verdict_of"))
        nothing = [s for s in val["suites"] if str(s.get("status", "")).startswith("checked nothing")]
        failed = sum(1 for s in val["suites"] if s.get("failed"))
        add(f"validation: {passed}/{len(val['suites'])} suites passed"
            + (f", {failed} failed" if failed else "") + (f", {len(nothing)} checked nothing" if nothing else "")
            + f", {val['rows_checked']:,} rows checked"
            + (f" ({kept} verdict(s) kept: nothing those suites read changed)" if kept else ""))
        for suite in nothing:
            add(f"  {suite['suite']} [{suite['collection']}]: {suite['status']}")
        for suite in val["suites"]:
            for failure in suite["failures"]:
                level = failure.get("severity") or ("critical" if failure.get("critical") else "error")
                add(f"  {level.upper()} {suite['suite']}: {failure.get('expectation')} "
                    f"{failure.get('column') or ''} sample={failure.get('sample')}"
                    + (f" observed={failure['observed_value']!r}" if "observed_value" in failure else ""))
    idle = [r for r in data["analysis"] if (r.get("scope") or {}).get("mode") == "none"]
    unchanged = ((report.load is None or data["files"]["files_loaded"] + data["files"]["files_failed"] == 0)
                 and (data["analysis"] or val) and len(idle) == len(data["analysis"])
                 and (not val or all(s.get("verdict_of") for s in val["suites"])))
    if unchanged:
        add("nothing changed: every analysis output is current and every verdict stands (--full does it all again)")
    stopped = data.get("stopped")
    if stopped:  # Ctrl-C or SIGTERM after the load (a load's own stop lists the files it rolled back)
        add(f"interrupted ({stopped['by']}) " + (f"in {stopped['stage']}" if stopped["stage"] else "between stages")
            + f": the stages above finished; {stopped['undone']}")
    elif data.get("error"):
        add("stopped by an error (on stderr)")
    if data.get("resume"):
        add(f"resume with: {data['resume']}")
    add(f"status: {data['status']} (exit {data['exit_code']})")
    return "\n".join(out)


def _kept(files: dict) -> str:
    """What the failed files left standing: their last good versions (docs/loading.md, "A file that fails")."""
    kept = files.get("kept_from_last_good") or 0
    return f"; {kept:,} record(s) kept from the last good version of failed files" if kept else ""


def _skipped_files(summary, skipped: int) -> str:
    """"N skipped (unchanged)", saying how many of them are hidden files (each named on stderr) and how
    many another loader took over and loaded."""
    reasons = [f.reason or "" for f in getattr(summary, "files", ()) if f.status == "skipped"]
    hidden = sum(1 for r in reasons if is_hidden_reason(r))
    others = sum(1 for r in reasons if r.startswith(LOADED_BY_ANOTHER))
    if not hidden and not others:
        return f"{skipped} skipped (unchanged)"
    parts = [f"{skipped - hidden - others} unchanged"] + ([f"{hidden} hidden: each named on stderr"] if hidden else [])
    return f"{skipped} skipped ({', '.join(parts + ([f'{others} {LOADED_BY_ANOTHER}'] if others else []))})"


def iso_utc(moment: datetime.datetime) -> str:
    """ISO 8601 in UTC with its ``Z``, to the millisecond (as BSON keeps dates): the one timestamp
    format sci-ingest prints.  A naive datetime (as BSON dates are read back) is UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.astimezone(datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _json_default(value):
    if isinstance(value, datetime.datetime):
        return iso_utc(value)
    return str(value)


#: What JSON leaves raw in a string but a terminal would act on: DEL, the C1 controls, the
#: bidirectional controls, U+2028 / U+2029 (JSON escapes C0 itself).
_JSON_RAW_CONTROLS = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def dumps(obj) -> str:
    """``obj`` as JSON for people and programs: values as they are (a path is the real path),
    but no control character raw in the text: JSON escapes C0, and DEL, C1, the bidirectional
    controls and U+2028 / U+2029 (which only strings can hold) are written as ``\\uNNNN`` too."""
    return json_text(json.dumps(obj, indent=2, default=_json_default, ensure_ascii=False))


def json_text(text: str) -> str:
    """JSON text (``json.dumps(..., ensure_ascii=False)``) with DEL, the C1 and bidirectional controls
    and U+2028 / U+2029 written as ``\\uNNNN``: the same values when read back, none raw on a terminal."""
    return _JSON_RAW_CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _scope_note(scope: dict) -> str:
    """What an incremental run read, when it was not the whole source."""
    if scope.get("mode") == "changed":
        return f"; read only the groups of {scope['files']} changed file(s)"
    if scope.get("mode") == "merged":
        return f"; merged the rows of {scope['files']} new file(s) into its table"
    if scope.get("mode") == "none":
        return "; skipped: nothing changed since it last ran"
    return ""
