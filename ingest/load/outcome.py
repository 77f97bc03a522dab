"""What loading did: one :class:`FileOutcome` per file, a :class:`LoadSummary` per load.

Statuses of a file: ``loaded`` (written by this load), ``skipped`` (unchanged
since it was loaded, its content already loaded from another path, or loaded
meanwhile by another loader: ``reason`` says which), ``failed`` (bad input, or
the file could not be read: nothing of this version stays written; the records of
its last good version, if it was loaded before, stay: ``kept`` counts them).  ``documents`` counts
what the file holds; ``inserted`` / ``updated`` / ``existing`` what the write
found.  Outcomes travel between Dask workers and the driver as plain dicts.

``path`` is the real path (the ledger's key; JSON escapes what it must); a message shows
it through :func:`ingest.fileio.printable` (one line, no control character), and every
reason, error and warning of :meth:`FileOutcome.as_dict` holds no control character.
A file found in a directory but hidden (its name starts with ".") is ``skipped`` with
the reason :data:`ingest.inputs.HIDDEN_FILE` unless ``--include-hidden``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from ingest.fileio import printable

__all__ = ["FileOutcome", "LoadSummary"]


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
    worker: str | None = None  # host:pid of the process that handled it
    retries: int = 0  # transient database errors retried while loading it
    warnings_total: int = 0  # every warning, of which ``warnings`` keeps the first ones
    #: Values of curated fields set aside (``path:line: field value reason``, the first ones) and how
    #: many in all (:mod:`ingest.load.contracts`): a file loaded with some is loaded in part.
    set_aside: list[str] = field(default_factory=list)
    set_aside_total: int = 0
    #: A failed file loaded before: the records its last good version holds, which stay while it fails
    #: (docs/loading.md, "A file that fails"); 0 otherwise.
    kept: int = 0
    #: Wall clock (epoch seconds): when its reading began, its documents were all built, it was decided;
    #: None until set (never 0: a clock never set is not 1970), :meth:`decided` sets what is still None.
    started: float | None = None
    parsed: float | None = None
    ended: float | None = None
    #: The path as messages show it, when ``path`` is not the real path (a name that is not UTF-8,
    #: kept as :func:`ingest.fileio.display_path` shows it); None: ``printable(path)``.  Not in as_dict.
    shown_path: str | None = field(default=None, repr=False, compare=False)

    def decided(self, at: float) -> None:
        """Its clocks at the end: it was decided at ``at`` unless ``ended`` says when; a file refused
        before it was read (missing, not a regular file, unchanged) began and ended then."""
        self.ended = self.ended or at
        self.started = self.started or self.ended
        self.parsed = min(self.parsed or self.started, self.ended)

    def fail(self, reason: str) -> FileOutcome:
        """It failed, for ``reason``: nothing of this version counts as written or held."""
        self.status, self.reason = "failed", reason
        self.records, self.inserted, self.updated, self.existing = {}, 0, 0, 0
        return self

    def warn(self, message: str, keep: int = 50) -> None:
        """Count a warning (``path:line: what``); keep the first ``keep`` of them."""
        self.warnings_total += 1
        if len(self.warnings) < keep:
            self.warnings.append(message)

    def put_aside(self, message: str, keep: int = 50) -> None:
        """Count a value set aside (``path:line: field value reason``); keep the first ``keep`` of them."""
        self.set_aside_total += 1
        if len(self.set_aside) < keep:
            self.set_aside.append(message)

    def keep_from(self, entry: dict | None) -> None:
        """A failed file: count the records of its ledger ``entry``'s last good version, which stay
        (an entry holding a version: ``sha256`` set, not a duplicate of another path's content)."""
        if self.status != "failed" or not entry or not isinstance(entry.get("sha256"), str) \
                or entry.get("duplicate_of") or entry.get("status") not in ("loaded", "failed", "loading"):
            return
        self.kept = sum(n for n in (entry.get("records") or {}).values() if isinstance(n, int) and n > 0)

    @property
    def kept_note(self) -> str:
        """What a failed file's ``failed:`` line adds: its last good version's records, kept."""
        return f"; {self.kept:,} record(s) kept from its last good version" if self.kept else ""

    @property
    def documents(self) -> int:
        return sum(self.records.values())

    def as_dict(self) -> dict:
        """The outcome as plain data; its reason, errors and warnings hold no control character."""
        data = asdict(self)
        del data["shown_path"]
        if data["reason"]:
            data["reason"] = printable(data["reason"], backslash=False)
        for said in ("warnings", "set_aside"):
            data[said] = [printable(w, backslash=False) if isinstance(w, str) else w for w in data[said]]
        data["errors"] = [{**e, "reason": printable(e["reason"], backslash=False)}
                          if isinstance(e, dict) and isinstance(e.get("reason"), str) else e for e in data["errors"]]
        return data

    @property
    def shown(self) -> str:
        """The path as messages show it: one line, no control character."""
        return self.shown_path or printable(self.path)

    @property
    def line(self) -> str:
        """``path: reason``, or ``path:line: reason`` when the reason names its path and line (never the
        path twice); one line without a control character, the path shown escaped (``printable``)."""
        shown = self.shown
        reason = self.reason or self.status
        for named in dict.fromkeys((shown, printable(self.path, backslash=False), self.path)):
            if reason.startswith(f"{named}:"):  # a ParseError's "path:line: reason", the path shown or raw
                return shown + printable(reason[len(named):], backslash=False)
        return f"{shown}: {printable(reason, backslash=False)}"

    @classmethod
    def from_dict(cls, data: dict) -> FileOutcome:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass
class LoadSummary:
    files: list[FileOutcome] = field(default_factory=list)
    workers: int = 1
    write_concern: dict = field(default_factory=dict)
    dry_run: bool = False
    #: Paths whose half-written load was rolled back after an interruption.
    rolled_back: list[str] = field(default_factory=list)
    interrupted: bool = False
    retries: int = 0  # transient errors retried by the driver (the files count their own)
    planned: int = 0  # input files found (including those refused): what a whole run accounts for

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

    @property
    def set_aside(self) -> int:
        """Values of curated fields set aside in the files loaded (each file counts them)."""
        return sum(f.set_aside_total for f in self.files if f.status == "loaded")

    @property
    def kept(self) -> int:
        """Records kept from the last good version of the files that failed (each counts its own)."""
        return sum(f.kept for f in self.failed)

    @property
    def total_retries(self) -> int:
        return self.retries + sum(f.retries for f in self.files)

    def as_dict(self) -> dict:
        failed = [f.as_dict() for f in self.failed]
        return {
            "files_loaded": self.count("loaded"),
            "files_skipped": self.count("skipped"),
            "files_failed": self.count("failed"),
            "files_not_reached": max(0, self.planned - len(self.files)),
            "kept_from_last_good": self.kept,
            "inserted": self.inserted,
            "updated": self.updated,
            "skipped": self.skipped_documents,
            "set_aside": self.set_aside,
            "retries": self.total_retries,
            "workers": self.workers,
            "write_concern": self.write_concern,
            "dry_run": self.dry_run,
            "interrupted": self.interrupted,
            "rolled_back": self.rolled_back,
            "failed": [{"path": d["path"], "reason": d["reason"], "errors": d["errors"][:5], "kept": d["kept"]}
                       for d in failed],
            "files": [f.as_dict() for f in self.files],
        }
