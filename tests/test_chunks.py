"""Chunk-aligned reads (issue 11): partitions planned from a sharded collection's chunk table,
given here as data in the shapes `config.collections` / `config.chunks` have (5.0+ by uuid,
older by ns); off a mongos (the real embedded server) the readers plan as before."""

from __future__ import annotations

import pickle
import uuid

from bson import MaxKey, MinKey

from analytics.analyses import best_hits as bh
from analytics.reading.chunks import Chunk, chunk_table, interleave, plan_chunk_partitions, table_from
from analytics.reading.planning import plan_reads
from ingest.sharding.collections import hashed_split_points


def _rows(field: str, shards: list[str], per_shard: int) -> list[dict]:
    points = [MinKey(), *hashed_split_points(len(shards) * per_shard), MaxKey()]
    return [{"min": {field: lo}, "max": {field: hi}, "shard": shards[(i // per_shard) % len(shards)]}
            for i, (lo, hi) in enumerate(zip(points, points[1:]))]


def test_a_hashed_collections_chunks_become_interleaved_partitions():
    entry = {"_id": "sci.hits", "key": {"search_id": "hashed"}, "uuid": uuid.uuid4()}
    rows = _rows("search_id", ["shardA", "shardB", "shardC"], 2)
    table = table_from(entry, list(reversed(rows)))  # the table is sorted whatever order it came in
    assert table.field == "search_id" and len(table.chunks) == 6 and table.shards == ["shardA", "shardB", "shardC"]
    specs = plan_chunk_partitions("mongodb://mongos:27017/", "sci", "hits", table, columns=bh.COLUMNS)
    assert [s.shard for s in specs] == ["shardA", "shardB", "shardC"] * 2  # round-robin over the shards
    assert sorted((s.lower if not isinstance(s.lower, MinKey) else -2**64) for s in specs) == sorted(
        [-2**64, *hashed_split_points(6)])
    first = specs[0]
    assert first.filter() == {} and isinstance(first.lower, MinKey)
    assert first.find_options() == {"hint": [("search_id", "hashed")], "min": {"search_id": first.lower},
                                    "max": {"search_id": first.upper}}
    assert first.projection == bh.ANALYSIS.schema.projection() and "chunk 0 on shardA" in first.describe()
    assert pickle.loads(pickle.dumps(specs[-1])) == specs[-1]  # travels to a Dask worker
    with_query = plan_chunk_partitions("u", "sci", "materials", table, query={"x": 1})
    assert with_query[0].filter() == {"x": 1}


def test_tables_that_are_not_one_hashed_field_covering_everything_are_refused():
    rows = _rows("_id", ["s0", "s1"], 1)
    assert table_from({"_id": "d.c", "key": {"_id": 1}, "uuid": 1}, rows) is None  # ranged key
    assert table_from({"_id": "d.c", "key": {"a": "hashed", "b": 1}}, rows) is None  # compound
    assert table_from({"_id": "d.c", "key": {"_id": "hashed"}, "dropped": True}, rows) is None
    assert table_from({"_id": "d.c", "key": {"_id": "hashed"}}, rows[:1]) is None  # a gap up to MaxKey
    assert table_from({"_id": "d.c", "key": {"_id": "hashed"}}, []) is None
    old_style = table_from({"_id": "d.c", "key": {"_id": "hashed"}, "lastmodEpoch": 1}, rows)  # pre-5.0: by ns
    assert old_style is not None and len(old_style.chunks) == 2


def test_interleave_keeps_key_order_within_a_shard():
    chunks = [Chunk(i, i + 1, s) for i, s in enumerate("AAABBC")]
    assert [(c.shard, c.lower) for c in interleave(chunks)] == [
        ("A", 0), ("B", 3), ("C", 5), ("A", 1), ("B", 4), ("A", 2)]


def test_off_a_mongos_nothing_changes(mongo_client, mongo_uri, db):
    db.hits.insert_many([{"_id": f"q:{i}", "search_id": f"q{i % 3}"} for i in range(9)])
    db.hits.create_index([("search_id", 1)])
    assert chunk_table(mongo_client, db.name, "hits") is None
    plan = plan_reads(mongo_uri, db.name, "hits", columns=bh.COLUMNS, key="search_id", group_key="search_id")
    assert plan.mode == "stream" and plan.key is None and "mongos" not in plan.reason
