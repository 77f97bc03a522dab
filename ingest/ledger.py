"""The ingestion ledger: one ``ingest_files`` document per input file.

Fields: ``_id`` (the resolved path), path, sha256, size, mtime, format, status
(``loading`` while being written, then ``loaded`` | ``failed``; a run that finds
a file unchanged reports it ``skipped`` without touching the entry), records
(counts by kind), inserted, existing, updated, error, errors (a sample of
every bad record: line and reason), seconds (parse / load / total), run_id,
finished (UTC).

A file whose size and mtime match a ``loaded`` entry is skipped without being
read; otherwise its sha256 decides.  A ``loading`` entry left by a crashed run
means that file's documents may be partial: the next load cleans them up first.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from ingest.catalog import LEDGER
from ingest.mongo import db_errors


def file_key(path: Path) -> str:
    return str(Path(path).resolve())


def sha256_of(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


class Ledger:
    def __init__(self, db):
        self.coll = db[LEDGER]

    def get(self, path: Path) -> dict | None:
        with db_errors("reading the ledger"):
            return self.coll.find_one({"_id": file_key(path)})

    def loaded_with_sha(self, sha256: str, exclude: str | None = None) -> dict | None:
        """Another file already loaded with this content, if any."""
        query = {"sha256": sha256, "status": "loaded"}
        if exclude:
            query["_id"] = {"$ne": exclude}
        with db_errors("reading the ledger"):
            return self.coll.find_one(query, {"_id": 1})

    def put(self, path: Path, **fields) -> None:
        key = file_key(path)
        with db_errors(f"writing the ledger entry of {path}"):
            self.coll.update_one({"_id": key}, {"$set": {"path": key, **fields}}, upsert=True)
