"""The count that decides small work (analytics.steps.small_work) against a real server.

SecantusDB counts a collection by scanning it, so the count is time-boxed
(``COUNT_BUDGET_MS``): past the budget the work is taken as not small.  The
stand-ins below are plain values for the settings and the cluster; the database
is the suite's real server.
"""

from __future__ import annotations

from types import SimpleNamespace

from analytics import steps
from ingest.store.servers import describe

DOCS = 20_000


def _decide(db, uri, threshold):
    conn = SimpleNamespace(db=db, uri=uri, info=describe(db.client))  # as a Connection has it
    settings = SimpleNamespace(small_work=threshold, dask_scheduler=None)
    return steps.small_work(conn, settings, SimpleNamespace(started=False), {"big", "small"})


def test_small_work_is_the_count_within_the_threshold_and_none_past_it(db, mongo_uri):
    db.big.insert_many([{"_id": i} for i in range(DOCS)])
    db.small.insert_many([{"_id": i} for i in range(10)])
    assert _decide(db, mongo_uri, DOCS + 10) == DOCS + 10
    assert _decide(db, mongo_uri, DOCS + 9) is None
    started = SimpleNamespace(db=db, uri=mongo_uri)  # a cluster already started: never small, nothing counted
    assert steps.small_work(started, SimpleNamespace(small_work=DOCS * 2, dask_scheduler=None),
                            SimpleNamespace(started=True), {"big"}) is None


def test_a_count_past_its_budget_is_not_small_work(db, mongo_uri, monkeypatch):
    db.big.insert_many([{"_id": i} for i in range(DOCS)])
    kind = describe(db.client).kind
    monkeypatch.setattr(steps, "COUNT_BUDGET_MS", 1)
    decided = _decide(db, mongo_uri, DOCS * 2)
    if kind == "SecantusDB":  # it scans: 20,000 documents take tens of milliseconds
        assert decided is None
    else:  # MongoDB answers from metadata, within the millisecond or past it
        assert decided in (None, DOCS)
