"""A load never counts a collection to learn what it wrote or what the database holds.

SecantusDB counts by reading every document (and answers even a ``find_one`` only after reading
the whole collection), so a count of each data collection cost every load ~70 s at a million
files (issue 40).  The index plan reads a tally the loads keep instead (``ingest.load.indexes``).
Seen on the wire: pymongo's command monitoring, against the suite's real server.
"""

from __future__ import annotations

import uuid

import pymongo
from load_corpus import PASTA
from pymongo import monitoring

from ingest.store.catalog import DATA_COLLECTIONS
from ingest.store.differences import SCRATCH_PREFIX

#: Commands that count documents, and the aggregation stages that do.
COUNTING_COMMANDS = {"count", "collStats", "dataSize", "dbStats"}
COUNTING_STAGES = {"$count", "$collStats", "$group"}


class _Commands(monitoring.CommandListener):
    """The commands the clients built after registration send, while ``on``."""

    def __init__(self):
        self.on, self.seen = True, []

    def started(self, event):
        if self.on:
            self.seen.append((event.command_name, event.database_name, dict(event.command)))

    def succeeded(self, event):
        pass

    def failed(self, event):
        pass


def _counting(seen) -> list:
    """The commands of ``seen`` that count documents: a count command, or an aggregate with a counting stage
    (but the server's probe, ingest/store/differences.py, asking its questions of its own seven documents)."""
    return [(name, command.get(name)) for name, _, command in seen
            if name in COUNTING_COMMANDS
            or (name == "aggregate" and not str(command.get(name)).startswith(SCRATCH_PREFIX)
                and any(k in COUNTING_STAGES for stage in command.get("pipeline", []) for k in stage))]


def test_a_load_sends_no_count(mongo_uri, db, monkeypatch):
    """A first load (empty collections: bulk) and a load of new files into a database that holds some
    (the case that counted every collection) send no count, and the tally holds what they inserted."""
    from ingest.load import indexes
    from ingest.pipeline import task_load
    from ingest.store.retry import Retry

    listener = _Commands()
    monitoring.register(listener)  # every client built from now on, in this process
    # a URI no client of this process was built for, so that the loader's shared client is a new one
    uri = mongo_uri + ("&" if "?" in mongo_uri else "?") + f"appname=count-watch-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("SCI_INGEST_DB", db.name)
    files = sorted(str(p) for p in PASTA.glob("*.m10"))
    try:
        first = task_load("first", files[:3], mongo_uri=uri)
        second = task_load("second", files[3:6], mongo_uri=uri)
    finally:
        listener.on = False
    assert first["files_loaded"] == 3 and second["files_loaded"] == 3, (first, second)
    inserts = [c for name, d, c in listener.seen if name == "insert" and d == db.name and c["insert"] in DATA_COLLECTIONS]
    assert inserts, "the listener saw no insert: it did not watch the load"
    assert _counting(listener.seen) == []
    held = sum(db[c].count_documents({}) for c in DATA_COLLECTIONS)  # the test may count; the load does not
    assert indexes.documents_held(db, Retry(5)) == held > 0


def test_the_watch_sees_a_count(mongo_uri, db):
    """The check can fail: the counts the old index plan sent are seen."""
    listener = _Commands()
    client = pymongo.MongoClient(mongo_uri, event_listeners=[listener])
    try:
        coll = client[db.name]["hits"]
        coll.estimated_document_count()
        coll.count_documents({})
    finally:
        client.close()
    assert [name for name, _ in _counting(listener.seen)] == ["count", "aggregate"]
