"""Loading files into MongoDB: detect the format, parse, write in batches, keep the ledger.

Each file is a transaction as far as MongoDB allows without multi-document
transactions (which standalone servers lack):

* search files (``-m 10``) stream: documents are written in unordered batches
  with ``_id``s derived from the file's sha256, and if the parser fails part way
  every document of that sha256 is deleted again before the file is marked
  ``failed``;
* record files (materials / tasks) are read twice: a first pass checks every
  record and builds its document (one at a time, then dropped), so a record the
  stored form cannot hold is found there too, and only a file without a bad
  record is written (so no upsert ever has to be undone).

A bad file never stops the run: it is named with the line (or record) and
reason, marked ``failed`` in the ledger, and the other files go on.
"""

from __future__ import annotations

import gzip
import os
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

from ingest import parsers
from ingest.catalog import HITS, MATERIALS, SEARCHES, TASKS
from ingest.documents import record_document, search_documents
from ingest.errors import InputError, ParseError, SciIngestError
from ingest.fileio import open_binary
from ingest.ledger import Ledger, file_key, sha256_of
from ingest.mongo import db_errors, insert_new, replace_documents
from ingest.timing import Timings

MAX_ERRORS_KEPT = 50
RECORD_COLLECTIONS = {"material": MATERIALS, "task": TASKS}


@dataclass
class FileOutcome:
    path: str
    status: str  # loaded | skipped | failed
    format: str | None = None
    sha256: str | None = None
    size: int = 0
    records: dict = field(default_factory=dict)
    inserted: int = 0
    updated: int = 0
    existing: int = 0
    reason: str | None = None
    errors: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    parse_seconds: float = 0.0
    load_seconds: float = 0.0

    @property
    def documents(self) -> int:
        return sum(self.records.values())

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class LoadSummary:
    files: list[FileOutcome] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for f in self.files if f.status == status)

    @property
    def inserted(self) -> int:
        return sum(f.inserted for f in self.files)

    @property
    def updated(self) -> int:
        return sum(f.updated for f in self.files)

    @property
    def skipped_documents(self) -> int:
        """Documents not written again: those of skipped files plus already-present ones."""
        return sum(f.documents if f.status == "skipped" else f.existing for f in self.files)

    @property
    def failed(self) -> list[FileOutcome]:
        return [f for f in self.files if f.status == "failed"]

    def as_dict(self) -> dict:
        return {
            "files_loaded": self.count("loaded"),
            "files_skipped": self.count("skipped"),
            "files_failed": self.count("failed"),
            "inserted": self.inserted,
            "updated": self.updated,
            "skipped": self.skipped_documents,
            "failed": [{"path": f.path, "reason": f.reason, "errors": f.errors[:5]} for f in self.failed],
            "files": [f.as_dict() for f in self.files],
        }


def discover(paths: Iterable[str | Path]) -> tuple[list[Path], list[FileOutcome]]:
    """Expand directories into the data files under them (sorted); name paths that do not exist."""
    suffixes = parsers.data_file_suffixes()
    found: list[Path] = []
    missing: list[FileOutcome] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for name in sorted(files):
                    if name.startswith("."):
                        continue
                    if name.lower().endswith(suffixes):
                        found.append(Path(root) / name)
        elif path.is_file():
            found.append(path)
        else:
            missing.append(FileOutcome(path=str(path), status="failed", reason="no such file or directory"))
    return found, missing


class Loader:
    def __init__(
        self,
        db,
        run_id: str,
        timings: Timings,
        *,
        batch_size: int = 1000,
        force: bool = False,
        progress: bool = True,
        log: Callable[[str], None] | None = None,
    ):
        self.db = db
        self.run_id = run_id
        self.timings = timings
        self.batch_size = batch_size
        self.force = force
        self.progress = progress
        self.ledger = Ledger(db)
        self.log = log or (lambda msg: None)

    # ------------------------------------------------------------------ public
    def load(self, paths: Iterable[str | Path]) -> LoadSummary:
        files, missing = discover(paths)
        summary = LoadSummary(files=list(missing))
        for outcome in missing:
            self.log(f"FAILED {outcome.path}: {outcome.reason}")
        bar = _progress(files, self.progress)
        for path in bar:
            outcome = self.load_file(path)
            summary.files.append(outcome)
            if outcome.status == "failed":
                self.log(f"FAILED {outcome.path}: {outcome.reason}")
        return summary

    def load_file(self, path: Path) -> FileOutcome:
        path = Path(path)
        key = file_key(path)
        try:
            stat = path.stat()
        except OSError as exc:
            return FileOutcome(path=key, status="failed", reason=f"cannot read: {exc.strerror}")
        outcome = FileOutcome(path=key, status="loading", size=stat.st_size)
        entry = self.ledger.get(path)
        if (not self.force and entry and entry.get("status") == "loaded"
                and entry.get("size") == stat.st_size and entry.get("mtime") == stat.st_mtime):
            return self._skipped(outcome, entry, "unchanged since it was loaded")
        try:
            outcome.sha256 = sha256_of(path)
        except OSError as exc:
            return self._fail(outcome, f"cannot read: {exc}", record=False)
        if not self.force and entry and entry.get("status") == "loaded" and entry.get("sha256") == outcome.sha256:
            self.ledger.put(path, mtime=stat.st_mtime)
            return self._skipped(outcome, entry, "same sha256 as when it was loaded")
        twin = None if self.force else self.ledger.loaded_with_sha(outcome.sha256, exclude=key)
        if twin:
            outcome.status = "skipped"
            outcome.reason = f"same content already loaded from {twin['_id']}"
            return outcome
        try:
            fmt = parsers.detect(path)
        except InputError as exc:
            return self._fail(outcome, str(exc))
        outcome.format = fmt.name
        if entry and entry.get("status") == "loading" and entry.get("sha256"):
            self._delete_by_sha(entry["sha256"], fmt.kind)  # left half-written by a crashed run
        self.ledger.put(path, status="loading", sha256=outcome.sha256, size=stat.st_size, format=fmt.name,
                        run_id=self.run_id)
        try:
            if fmt.kind == "search":
                self._load_search_file(path, fmt, outcome)
            else:
                self._load_record_file(path, fmt, outcome)
        except ParseError as exc:
            outcome.errors.append({"line": exc.line, "reason": exc.reason})
            return self._fail(outcome, str(exc))
        except SciIngestError as exc:
            return self._fail(outcome, str(exc))
        if entry and entry.get("sha256") and entry["sha256"] != outcome.sha256:
            self._delete_by_sha(entry["sha256"], fmt.kind)  # the file changed: drop its old version
        outcome.status = "loaded"
        self._record(path, outcome, stat.st_mtime)
        return outcome

    # ---------------------------------------------------------------- formats
    def _load_search_file(self, path: Path, fmt, outcome: FileOutcome) -> None:
        parse = fmt.load()
        source = str(path)
        searches: list[dict] = []
        hits: list[dict] = []
        n_queries = n_hits = 0
        parse_s = load_s = 0.0

        def warn(message: str) -> None:
            if len(outcome.warnings) < MAX_ERRORS_KEPT:
                outcome.warnings.append(message)

        def flush() -> None:
            nonlocal load_s
            t0 = time.perf_counter()
            for coll, docs in ((SEARCHES, searches), (HITS, hits)):
                if docs:
                    new, existing = self._insert(coll, docs)
                    outcome.inserted += new
                    outcome.existing += existing
                    docs.clear()
            load_s += time.perf_counter() - t0

        try:
            with open_binary(path) as handle:
                stream: Iterator = parse(handle, source, warn=warn)
                while True:
                    t0 = time.perf_counter()
                    try:
                        query = next(stream)
                    except StopIteration:
                        parse_s += time.perf_counter() - t0
                        break
                    except (OSError, EOFError, gzip.BadGzipFile) as exc:
                        raise ParseError(f"cannot read: {exc}", source=source) from exc
                    parse_s += time.perf_counter() - t0
                    n_queries += 1
                    doc, hit_docs = search_documents(query, sha256=outcome.sha256, path=outcome.path,
                                                     query_index=n_queries, fmt=fmt.name)
                    searches.append(doc)
                    hits.extend(hit_docs)
                    n_hits += len(hit_docs)
                    if len(searches) + len(hits) >= self.batch_size:
                        flush()
            if n_queries == 0:
                raise ParseError("no query block (>>>) found", source=source)
            flush()
        except SciIngestError:
            self._delete_by_sha(outcome.sha256, "search")
            outcome.inserted = outcome.existing = 0
            raise
        outcome.records = {"searches": n_queries, "hits": n_hits}
        outcome.parse_seconds, outcome.load_seconds = parse_s, load_s

    def _load_record_file(self, path: Path, fmt, outcome: FileOutcome) -> None:
        read_records = fmt.load()
        source = str(path)
        counts: dict[str, int] = {}
        t0 = time.perf_counter()
        try:
            with open_binary(path) as handle:  # pass 1: every record must be good, and storable
                for item in read_records(handle, source):
                    if not isinstance(item, ParseError):
                        try:  # build its document (and drop it): pass 2 must not meet a bad one
                            record_document(item, sha256=outcome.sha256, path=outcome.path)
                        except ParseError as exc:
                            item = exc
                    if isinstance(item, ParseError):
                        if len(outcome.errors) < MAX_ERRORS_KEPT:
                            outcome.errors.append({"line": item.line, "reason": item.reason})
                        counts["bad"] = counts.get("bad", 0) + 1
                    else:
                        coll = RECORD_COLLECTIONS[item.kind]
                        counts[coll] = counts.get(coll, 0) + 1
        except (OSError, EOFError) as exc:
            raise ParseError(f"cannot read: {exc}", source=source) from exc
        outcome.parse_seconds = time.perf_counter() - t0
        if counts.get("bad"):
            first = outcome.errors[0]
            raise ParseError(
                f"{counts['bad']} bad record(s); first: {first['reason']}"
                + ("" if counts["bad"] == 1 else " (all are listed in the ledger)"),
                source=source, line=first["line"])
        if not counts:
            raise ParseError("no records", source=source)
        outcome.records = counts
        t0 = time.perf_counter()
        batches: dict[str, list[dict]] = {MATERIALS: [], TASKS: []}
        with open_binary(path) as handle:  # pass 2: write
            for item in read_records(handle, source):
                coll = RECORD_COLLECTIONS[item.kind]
                batches[coll].append(record_document(item, sha256=outcome.sha256, path=outcome.path))
                if len(batches[coll]) >= self.batch_size:
                    self._upsert(coll, batches[coll], outcome)
                    batches[coll] = []
        for coll, docs in batches.items():
            if docs:
                self._upsert(coll, docs, outcome)
        outcome.load_seconds = time.perf_counter() - t0

    # ------------------------------------------------------------------ writes
    def _insert(self, coll: str, docs: list[dict]) -> tuple[int, int]:
        """Unordered insert; documents whose ``_id`` is already there count as existing."""
        inserted, duplicates = insert_new(self.db[coll], docs)
        return inserted, len(duplicates)

    def _upsert(self, coll: str, docs: list[dict], outcome: FileOutcome) -> None:
        """Insert new records; replace the ones whose natural key is already there."""
        inserted, duplicates = insert_new(self.db[coll], docs)
        outcome.inserted += inserted
        if not duplicates:
            return
        inserted, modified, unchanged = replace_documents(self.db[coll], [docs[i] for i in duplicates])
        outcome.inserted += inserted
        outcome.updated += modified
        outcome.existing += unchanged

    def _delete_by_sha(self, sha256: str, kind: str) -> None:
        colls = (SEARCHES, HITS) if kind == "search" else ()
        with db_errors(f"removing documents of {sha256[:12]}"):
            for coll in colls:
                self.db[coll].delete_many({"source.sha256": sha256})

    # ----------------------------------------------------------------- ledger
    def _record(self, path: Path, outcome: FileOutcome, mtime: float | None) -> None:
        total = outcome.parse_seconds + outcome.load_seconds
        written = outcome.inserted + outcome.updated
        for stage, seconds, n_in, n_out in (
            ("parse", outcome.parse_seconds, outcome.documents, outcome.documents),
            ("load", outcome.load_seconds, outcome.documents, written),
        ):
            rec = self.timings.new(stage, file=outcome.path)
            rec.records_in, rec.records_out, rec.bytes = n_in, n_out, outcome.size
            rec.status = "ok" if outcome.status == "loaded" else outcome.status
            rec.error = outcome.reason if outcome.status == "failed" else None
            rec.finish(seconds)
            self.timings.add(rec)
        self.ledger.put(
            path,
            status=outcome.status,
            sha256=outcome.sha256,
            size=outcome.size,
            mtime=mtime,
            format=outcome.format,
            records=outcome.records,
            inserted=outcome.inserted,
            updated=outcome.updated,
            existing=outcome.existing,
            error=outcome.reason if outcome.status == "failed" else None,
            errors=outcome.errors,
            warnings=outcome.warnings,
            seconds={"parse": round(outcome.parse_seconds, 6), "load": round(outcome.load_seconds, 6),
                     "total": round(total, 6)},
            run_id=self.run_id,
        )

    def _skipped(self, outcome: FileOutcome, entry: dict, why: str) -> FileOutcome:
        outcome.status = "skipped"
        outcome.reason = why
        outcome.format = entry.get("format")
        outcome.sha256 = entry.get("sha256")
        outcome.records = dict(entry.get("records") or {})
        return outcome

    def _fail(self, outcome: FileOutcome, reason: str, record: bool = True) -> FileOutcome:
        outcome.status = "failed"
        outcome.reason = reason
        outcome.records = {}
        if record:
            try:
                mtime = Path(outcome.path).stat().st_mtime
            except OSError:
                mtime = None
            self._record(Path(outcome.path), outcome, mtime)
        return outcome


def _progress(items: list, enabled: bool):
    if not enabled:
        return items
    from tqdm import tqdm

    return tqdm(items, desc="load", unit="file", disable=None, leave=False)
