"""`sci-ingest shard-plan` (issue 11): hashed placement with MongoDB's initial split against a
ranged key (quantiles at rest; MongoDB's split and balancer rules while loading), on keys
given as data and on documents loaded into the real embedded server, run as a subprocess."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from ingest.sharding.collections import hashed_split_points
from ingest.sharding.hashkey import hash64
from ingest.sharding.plan import (
    KeySample,
    generated_keys,
    hashed_placement,
    plan_collection,
    ranged_placement,
    read_keys,
    sort_key,
)

BIN = Path(sys.executable).parent / "sci-ingest"


def _random_ids(n: int, seed: int = 7) -> KeySample:
    """Seeded: the placements and shares the tests bound are the same on every run (no chance involved)."""
    rng = random.Random(seed)
    keys = [f"mp-{rng.randrange(10**7)}" for _ in range(n)]
    return KeySample("materials", "_id", keys, [rng.randrange(500, 5000) for _ in keys], "test")


def test_hashed_placement_follows_the_real_hash_and_split():
    sample = _random_ids(3000)
    placed = hashed_placement(sample, 4, (8, 0))
    assert sum(placed.docs) == 3000 and sum(placed.bytes) == sum(sample.sizes) and placed.chunks == 4
    points = hashed_split_points(4)
    expected = [0] * 4
    for key in sample.keys:
        expected[sum(hash64(key) >= p for p in points)] += 1
    assert placed.docs == expected
    assert placed.max_over_mean <= 1.1 and placed.last_share < 0.4
    older = hashed_placement(sample, 4, (7, 0))  # two chunks per shard before 7.2, in contiguous blocks
    assert older.chunks == 8 and sum(older.docs) == 3000


def test_ranged_at_rest_is_even_but_a_small_load_goes_to_one_shard():
    sample = _random_ids(3000)
    placed = ranged_placement(sample, 4)
    assert sum(placed.docs) == 3000 and placed.max_over_mean <= 1.01  # quantile ranges
    # a few MB never fill a 128 MB chunk: every insert went to the primary shard
    assert placed.last_share == 1.0 and placed.detail["chunks_while_loading"] == 1


def test_ranged_growing_keys_keep_hitting_one_shard_while_random_keys_spread():
    growing = generated_keys("hits", "search_id", 20_000, size=1000)
    ranged = ranged_placement(growing, 4, chunk_bytes=200_000)  # small chunks: splits and migrations happen
    assert ranged.detail["chunks_while_loading"] > 20
    assert ranged.last_share == 1.0  # the top chunk takes every new key
    spread = ranged_placement(_random_ids(20_000), 4, chunk_bytes=200_000)
    assert spread.last_share < 0.6
    hashed = hashed_placement(growing, 4)
    assert hashed.last_share < 0.35 and hashed.max_over_mean < 1.05


def test_sort_key_orders_like_mongodb():
    from bson import ObjectId

    values = ["b", None, 3, 2.5, ObjectId("000000000000000000000001"), "a", True]
    assert sorted(values, key=sort_key) == [None, 2.5, 3, "a", "b", ObjectId("000000000000000000000001"), True]


def test_plan_needs_a_shard():
    with pytest.raises(ValueError):
        plan_collection(_random_ids(10), 0)


def test_keys_read_back_from_the_server_in_arrival_order(db):
    db.materials.insert_many([{"_id": f"mp-{i}", "x": "y" * i} for i in (5, 1, 3)])
    sample = read_keys(db, "materials", "_id")
    assert sample.keys == ["mp-5", "mp-1", "mp-3"] and sample.sizes[0] > sample.sizes[1]
    db.hits.insert_many([{"_id": "a:1", "search_id": "a"}, {"_id": "x"}])
    assert read_keys(db, "hits", "search_id").keys == ["a", None]  # a missing key is null, as MongoDB places it


def test_cli_prints_the_table_writes_the_png_and_json(mongo_uri, db, tmp_path):
    rng = random.Random(3)
    db.materials.insert_many([{"_id": f"mp-{rng.randrange(10**7)}-{i}", "v": i} for i in range(3000)])
    png = tmp_path / "plan.png"
    args = [str(BIN), "shard-plan", "--shards", "4", "--mongo-uri", mongo_uri, "--db", db.name, "--png", str(png)]
    out = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "_id (hashed)" in out.stdout and "_id (ranged)" in out.stdout and str(png) in out.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    assert "hits holds no documents" in out.stderr  # the empty collections are named, not planned
    report = json.loads(subprocess.run(args + ["--json", "--collection", "materials"], capture_output=True,
                                       text=True, timeout=300).stdout)
    (materials,) = report["collections"]
    assert materials["documents"] == 3000 and materials["hashed"]["max_over_mean"] <= 1.1
    assert materials["ranged"]["last_10pct_on_busiest_shard"] == 1.0
    empty = subprocess.run([*args[:-2], "--db", db.name + "_none", "--png", str(png)], capture_output=True,
                           text=True, timeout=300)
    assert empty.returncode == 1 and "nothing to plan" in empty.stderr
