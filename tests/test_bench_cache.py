"""``sci-ingest bench cache`` (the MEM blog: MEM-T1, MEM-ins, MEM-T2), run as a user runs it.

At ``--size tiny`` without ``--mongo-uri`` the experiment starts its own SecantusDB server
with a 16 MB WiredTiger cache, grows the blog's collection past it (500, then 9,000
documents of 2.4 KB) and times point reads uniform and on a hot 10 % / 1 %; with
``--mongo-uri`` it measures the session's server, whose cache is its own.  A real server
over a socket each time, never a mock.
"""

from __future__ import annotations

import csv
import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import bson
import psutil

from analytics.bench.experiments.cache import DOC_BYTES, batch_size, document, read_keys, size_mb

REPO = Path(__file__).resolve().parent.parent
COLUMNS = {"documents", "hot_fraction", "beyond_cache", "mark", "data_mb", "cache_mb", "reads", "found",
           "read_s_per_30k", "read_p50_ms", "read_p99_ms", "insert_s", "inserts_per_s", "step_inserts_per_s",
           "server_rss_mb"}  # fmt: skip


def _bench(tmp_path: Path, *extra: str) -> dict:
    env = {**os.environ, "SCI_INGEST_HOME": str(tmp_path / "home"), "SCI_INGEST_SERVER_IDLE": "0"}
    for name in ("MONGODB_URI", "SCI_INGEST_BENCH_CACHE", "DASK_SCHEDULER_ADDRESS"):
        env.pop(name, None)
    proc = subprocess.run([sys.executable, "-m", "ingest.cli.main", "bench", "cache", "--size", "tiny",
                           "--out", str(tmp_path / "out"), "--json", "-q", *extra],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def _by_x(points: list[dict]) -> dict[int, dict[float, dict]]:
    out: dict[int, dict[float, dict]] = {}
    for p in points:
        out.setdefault(p["documents"], {})[p["hot_fraction"]] = p
    return out


def _check_points(run: dict) -> dict[int, dict[float, dict]]:
    """What holds on any server, busy or not: the sweep's shape, the reads counted, the data's size."""
    points = run["points"]
    assert points and COLUMNS <= set(points[0]), set(points[0])
    grid = _by_x(points)
    xs = sorted(grid)
    assert xs == run["params"]["documents"] == [500, 9_000]
    for x in xs:
        assert set(grid[x]) == {1.0, 0.1, 0.01}
        for p in grid[x].values():
            assert p["reads"] == p["found"] == run["params"]["reads"] == 300  # every key read was found
            assert p["read_s_per_30k"] > 0 and 0 < p["read_p50_ms"] <= p["read_p99_ms"]
            assert p["inserts_per_s"] > 0 and p["insert_s"] > 0
        # how hot reads compare with uniform ones is the benchmark's figure, printed, not a test's
    small, large = grid[xs[0]][1.0], grid[xs[1]][1.0]
    assert large["data_mb"] > small["data_mb"]
    assert abs(large["data_mb"] - 9_000 * DOC_BYTES / 2**20) < 2  # the blog's 2.4 KB documents
    return grid


def _check_files(run: dict) -> None:
    files = run["files"]
    assert json.loads(Path(files["json"]).read_text())["_id"] == run["_id"]
    with open(files["csv"], newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(run["points"]) and COLUMNS <= set(rows[0])
    assert Path(files["png"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_documents_and_the_hot_reads_follow_the_blog():
    doc = {"_id": bson.ObjectId(), **document(123_456)}
    assert len(bson.encode(doc)) == DOC_BYTES and doc["text"].startswith("Mary had a little lamb. ")
    keys = read_keys(random.Random(1), 10_000, 0.01, 20_000)
    hot = sum(k < 100 for k in keys) / len(keys)
    assert 0.985 < hot < 0.995 and max(keys) >= 5_000  # 99 % on the first 1 %, 1 % uniform over all
    uniform = Counter(k // 1_000 for k in read_keys(random.Random(1), 10_000, 1.0, 20_000))
    assert len(uniform) == 10 and min(uniform.values()) > 1_600
    assert size_mb("16M") == 16 and size_mb("1G") == 1024 and size_mb("512K") == 0.5
    # an insert_many stays a few per cent of the cache (a large share stalls SecantusDB for good)
    assert batch_size(16, 0.03) * 2 * DOC_BYTES <= 0.03 * 16 * 2**20 and batch_size(None, 0.03) == 1000


def test_tiny_on_a_private_small_cache_server_passes_the_cache(tmp_path):
    started = time.time()
    run = _bench(tmp_path)
    assert run["experiment"] == "cache" and run["size"] == "tiny" and run["embedded"] is True
    grid = _check_points(run)
    small, large = grid[500], grid[9_000]
    for p in list(small.values()) + list(large.values()):
        assert p["cache_mb"] == 16  # the private server's cache, not the home server's
        assert p["server_rss_mb"] > 10  # psutil on the private server's process
    assert all(p["beyond_cache"] is False and p["mark"] == "last in cache" for p in small.values())
    assert all(p["beyond_cache"] is True and p["mark"] == "largest beyond" for p in large.values())
    ten_m = next(r for r in run["comparison"] if r["figure"] == "MEM-T1" and r["published"] == 74.1)
    assert ten_m["ours"] == large[1.0]["read_s_per_30k"] and ten_m["ours_at"]["documents"] == 9_000
    assert len(run["comparison"]) == 8 and all(r["published_hardware"].startswith("EC2 large") for r in run["comparison"])
    assert any("read_s_per_30k is scaled to 30,000" in n for n in run["notes"])
    _check_files(run)
    # the private server was stopped: no SecantusDB started during the run on a cache-server folder still runs
    for proc in psutil.process_iter(["cmdline", "create_time", "status"]):
        cmd = " ".join(proc.info.get("cmdline") or [])
        if "secantusd" in cmd and "cache-server" in cmd and (proc.info.get("create_time") or 0) >= started - 1:
            assert proc.info.get("status") == psutil.STATUS_ZOMBIE, cmd


def test_tiny_against_a_given_server_uses_its_cache_and_stores_the_run(mongo_uri, mongo_client, tmp_path):
    db = f"bench_cache_{os.getpid()}"
    try:
        run = _bench(tmp_path, "--mongo-uri", mongo_uri, "--db", db)
        assert run["embedded"] is False
        grid = _check_points(run)
        points = [p for by_hot in grid.values() for p in by_hot.values()]
        caches = {p["cache_mb"] for p in points}
        assert len(caches) == 1
        if caches == {None}:  # SecantusDB's serverStatus has no wiredTiger.cache: said, not guessed
            assert all(p["beyond_cache"] is None for p in points)
            assert any("no wiredTiger.cache" in n for n in run["notes"])
        else:
            assert any("the cache is the server's own" in n for n in run["notes"])
        assert all(isinstance(p["server_rss_mb"], (int, float)) for p in points)  # serverStatus mem.resident
        stored = mongo_client[db]["bench_runs"].find_one({"_id": run["_id"]})
        assert stored is not None and len(stored["points"]) == len(points) == 6
        assert not [n for n in mongo_client.list_database_names() if n.startswith(f"{db}_bench")]  # the experiment's data is dropped
        _check_files(run)
    finally:
        mongo_client.drop_database(db)
