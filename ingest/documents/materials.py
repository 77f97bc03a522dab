"""The stored form of Materials-Project-style records (``materials`` and ``tasks``).

The parser (``ingest.parsers.materials``) yields each record with its stored document;
:func:`record_document` keys it by the record's natural key and names its source.
"""

from __future__ import annotations


def record_document(record, *, sha256: str, path: str) -> dict:
    """The stored form of a materials/tasks record: its document keyed by the natural key."""
    doc = dict(record.doc)
    doc["_id"] = record.key
    doc["_source"] = {"path": path, "sha256": sha256, "line": record.line}
    return doc
