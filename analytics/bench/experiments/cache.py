"""``cache``: point reads as the data outgrows the server's cache (the MEM blog: MEM-T1, MEM-ins, MEM-T2).

The blog inserted X documents ``{key: n, text: "Mary had a little lamb. " * 100}`` (about
2.4 KB each) with an index on ``key``, for X = 10k ... 10M, and after each X timed 30,000
random point reads by key: flat at about 17 s while the data fit in the 7.5 GB of RAM, 74 s
once it did not (MEM-T1).  With 99 % of the reads on the first 10 % or 1 % of the keys (1 %
uniform) the reads stayed near in-memory speed (MEM-T2).

Here the collection grows step by step to each X of ``documents`` (only the difference is
inserted at each step; ``insert_s`` is the time to reach X, as the blog's "3M documents in
178 s").  After each X the reads run uniform (``hot_fraction`` 1.0), then hot 10 % and hot
1 %, ``reads`` of them each, one at a time on one connection as the blog's single client
did; ``read_s_per_30k`` scales the measured time to 30,000 reads, and the reads' latency
percentiles come from HdrHistogram (:class:`~analytics.bench.latency.Latency`).

The memory that matters under WiredTiger is its cache, not the machine's RAM.  On the
embedded default this experiment therefore starts a private SecantusDB server in its
scratch folder with a small cache (``cache_size``: 16M tiny, 32M quick, 8G full, or the
environment variable ``SCI_INGEST_BENCH_CACHE``, e.g. ``4G``), so that the data passes the
cache at a few tens of thousands of documents, and stops it at the end; ``server_rss_mb``
is that process's resident memory (psutil).  With ``--mongo-uri`` the cache is the
server's own: ``cache_mb`` is serverStatus ``wiredTiger.cache["maximum bytes configured"]``
where the server reports it, ``server_rss_mb`` its ``mem.resident``; what the server does
not report is left empty and said in the run's notes, never guessed.

``--full`` (X up to 10,000,000, 30,000 reads per point, an 8 GB cache) takes hours and
about 25 GB of data (more on disk: SecantusDB also keeps each insert in its oplog); size it
for the machine, or point ``--mongo-uri`` at a server whose cache you set.

Insert batches are sized to a few per cent of the cache: SecantusDB stalls for good when one
``insert_many`` dirties a large share of a small cache (seen: 1,000 documents, about 5 MB
with the oplog copy, in a 16 MB cache), so the client also has a socket timeout and a stall
ends the sweep with a note instead of hanging the command.
"""

from __future__ import annotations

import random
import time

import psutil

from analytics.bench.core import Experiment, Plot, Published
from analytics.bench.latency import Latency
from ingest.config import setting
from ingest.errors import DatabaseError
from ingest.server.embedded import EmbeddedServer
from ingest.store.mongo import close_client, connect, db_errors

__all__ = ["EXPERIMENTS", "run", "document", "size_mb", "read_keys", "batch_size"]

TEXT = "Mary had a little lamb. " * 100  # the blog's document body (2,400 characters)
COLLECTION = "mem_docs"
READS_PER_FIGURE = 30_000  # the blog's reads per measurement
HOT_SHARE = 0.99  # share of the reads on the hot keys (the rest uniform over all keys)
DOC_BYTES = 2_442  # the BSON size of one document with its ObjectId (checked in the tests)
CACHE_ENV = "SCI_INGEST_BENCH_CACHE"  # the private server's cache, e.g. "4G" (the user's choice)
EMBEDDED_SOCKET_TIMEOUT_MS = 30_000  # a private server that answers nothing for this long has stalled
REMOTE_SOCKET_TIMEOUT_MS = 300_000


def document(key: int) -> dict:
    """One of the blog's documents."""
    return {"key": key, "text": TEXT}


def size_mb(spec: str) -> float:
    """MiB in a WiredTiger size string ("16M", "1G", "512K", "1048576")."""
    text = str(spec).strip().upper().removesuffix("B")
    scale = {"K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0**2}
    if text and text[-1] in scale:
        return float(text[:-1]) * scale[text[-1]]
    return float(text) / 2**20


def batch_size(cache_mb: float | None, fraction: float, cap: int = 1000) -> int:
    """Documents per ``insert_many``: their bytes (twice: the data and the oplog's copy) at most
    ``fraction`` of the cache (``cache_mb`` None: the cache is unknown, ``cap``)."""
    if not cache_mb:
        return cap
    return max(10, min(cap, int(cache_mb * 2**20 * fraction / (2 * DOC_BYTES))))


def read_keys(rng: random.Random, documents: int, hot_fraction: float, count: int) -> list[int]:
    """The keys of ``count`` reads: with ``hot_fraction`` < 1, 99 % uniform on the first
    ``hot_fraction`` of the keys (the oldest inserts) and 1 % uniform on all, as MEM-T2."""
    hot = max(1, int(documents * hot_fraction))
    if hot >= documents:
        return [rng.randrange(documents) for _ in range(count)]
    return [rng.randrange(hot) if rng.random() < HOT_SHARE else rng.randrange(documents) for _ in range(count)]


class _Server:
    """Where the experiment measures: a private small-cache SecantusDB, or ``ctx.uri``."""

    def __init__(self, ctx, params: dict):
        self.ctx, self.params = ctx, params
        self.embedded = ctx.embedded
        self.server: EmbeddedServer | None = None
        self.uri = ctx.uri
        self.cache_mb: float | None = None
        self.noted: set[str] = set()

    def start(self) -> None:
        if not self.embedded:
            return

        cache = setting(CACHE_ENV) or self.params["cache_size"]
        if cache != self.params["cache_size"]:
            self.ctx.log(f"  cache size {cache} from {CACHE_ENV} (the size's own: {self.params['cache_size']})")
            self.params["cache_size"] = cache  # the run document records the cache in force
        folder = self.ctx.scratch / "cache-server"
        self.server = EmbeddedServer(folder / "db", cache_size=cache, log_path=folder / "server.log")
        self.uri = self.server.start()
        self.cache_mb = size_mb(cache)
        self.ctx.log(f"  a private SecantusDB server with a {cache} WiredTiger cache at {self.uri}")

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

    def note_once(self, key: str, text: str) -> None:
        if key not in self.noted:
            self.noted.add(key)
            self.ctx.note(text)

    def status(self, client) -> dict:
        """serverStatus, or {} when the server refuses it."""
        try:
            with db_errors("serverStatus", uri=self.uri):
                return client.admin.command("serverStatus")
        except DatabaseError as exc:
            self.note_once("status", f"serverStatus failed, no memory or cache figures from the server: {exc}")
            return {}

    def remote_cache(self, status: dict) -> None:
        configured = ((status.get("wiredTiger") or {}).get("cache") or {}).get("maximum bytes configured")
        if isinstance(configured, (int, float)) and configured > 0:
            self.cache_mb = configured / 2**20
            self.ctx.note(f"the cache is the server's own: {self.cache_mb:,.0f} MB (serverStatus wiredTiger.cache "
                          "'maximum bytes configured'); the sizes' documents may not all pass it")
        else:
            self.ctx.note("the cache is the server's own and its serverStatus gives no wiredTiger.cache "
                          "'maximum bytes configured': cache_mb and beyond_cache are left empty")

    def memory(self, status: dict) -> dict:
        """server_rss_mb (psutil on the private server; else serverStatus mem.resident) and the
        WiredTiger cache's use where serverStatus reports it."""
        out: dict = {}
        if self.server is not None and self.server.process is not None:
            try:
                out["server_rss_mb"] = round(psutil.Process(self.server.process.pid).memory_info().rss / 2**20, 1)
            except psutil.Error:
                out["server_rss_mb"] = None
        else:
            resident = (status.get("mem") or {}).get("resident")
            out["server_rss_mb"] = resident if isinstance(resident, (int, float)) else None
            if out["server_rss_mb"] is None:
                self.note_once("rss", "the server reports no serverStatus mem.resident: server_rss_mb not measured")
        cache = (status.get("wiredTiger") or {}).get("cache") or {}
        used, dirty = cache.get("bytes currently in the cache"), cache.get("tracked dirty bytes in the cache")
        if isinstance(used, (int, float)):
            out["cache_used_mb"] = round(used / 2**20, 1)
            out["cache_dirty_mb"] = round(dirty / 2**20, 1) if isinstance(dirty, (int, float)) else None
        else:
            self.note_once("wt", "the server's serverStatus has no wiredTiger.cache section: cache_used_mb "
                                 "and cache_dirty_mb not measured")
        return out


def _data_mb(db, documents: int, server: _Server) -> float:
    """The collection's data size (uncompressed BSON) from collStats, else documents x DOC_BYTES."""
    try:
        with db_errors("collStats", uri=server.uri):
            size = db.command("collStats", COLLECTION).get("size")
        if isinstance(size, (int, float)) and size > 0:
            return round(size / 2**20, 2)
    except DatabaseError:
        pass
    server.note_once("size", f"collStats gave no data size: data_mb is documents x {DOC_BYTES} bytes")
    return round(documents * DOC_BYTES / 2**20, 2)


def _insert(coll, start: int, stop: int, batch: int, ctx, server: _Server) -> tuple[float, int]:
    """Insert keys ``start`` .. ``stop``-1 (fewer if the deadline passes): (seconds, keys now held)."""
    t, have = time.perf_counter(), start
    for lo in range(start, stop, batch):
        if ctx.remaining() < 0:
            break
        docs = [document(k) for k in range(lo, min(stop, lo + batch))]
        with db_errors(f"inserting keys {lo}..{lo + len(docs) - 1}", uri=server.uri):
            coll.insert_many(docs, ordered=False)
        have = lo + len(docs)
    return time.perf_counter() - t, have


def _reads(coll, keys: list[int], ctx, server: _Server):
    """Read each key (one point read each); (seconds, reads done, found, Latency).  Stops at the deadline."""
    latency, found, done = Latency(), 0, 0
    t = time.perf_counter()
    with db_errors("point reads by key", uri=server.uri):
        for key in keys:
            if done % 50 == 0 and done and ctx.remaining() < 0:
                break
            t1 = time.perf_counter()
            doc = coll.find_one({"key": key})
            latency.record_s(time.perf_counter() - t1)
            done += 1
            found += doc is not None
    return time.perf_counter() - t, done, found, latency


def _mark(points: list[dict]) -> None:
    """``mark``: "smallest" X, the "last in cache" X, the "largest beyond" (the cache) X, for the comparison."""
    xs = sorted({p["documents"] for p in points})
    inside = [x for x in xs if any(p["documents"] == x and p["beyond_cache"] is False for p in points)]
    marks = {xs[0]: "smallest"} if xs else {}
    if inside:
        marks[inside[-1]] = "last in cache"
    if xs and any(p["documents"] == xs[-1] and p["beyond_cache"] for p in points):
        marks[xs[-1]] = "largest beyond"
    for p in points:
        p["mark"] = marks.get(p["documents"], "")


def run(ctx, params: dict) -> list[dict]:
    server = _Server(ctx, params)
    rng = random.Random(params.get("seed", 2011))
    points: list[dict] = []
    server.start()
    try:
        timeout = EMBEDDED_SOCKET_TIMEOUT_MS if server.embedded else REMOTE_SOCKET_TIMEOUT_MS
        client = connect(server.uri, socket_timeout_ms=timeout)
        try:
            if not server.embedded:
                server.remote_cache(server.status(client))
            db = client[ctx.db_name]
            coll = db[COLLECTION]
            with db_errors("preparing the collection", uri=server.uri):
                coll.drop()
                coll.create_index("key")
            batch = batch_size(server.cache_mb, params.get("batch_fraction", 0.03))
            have, insert_total, rates = 0, 0.0, {"insert": None, "read": None}
            for x in sorted(params["documents"]):
                need = (x - have) / rates["insert"] if rates["insert"] else 0.0
                need += len(params["hot_fractions"]) * params["reads"] / rates["read"] if rates["read"] else 0.0
                if ctx.remaining() < need or ctx.remaining() <= 0:
                    ctx.note(f"stopped before {x:,} documents: about {need:.0f} s more needed, "
                             f"{max(0.0, ctx.remaining()):.0f} s of this size's time budget left")
                    break
                try:
                    step_s, held = _insert(coll, have, x, batch, ctx, server)
                except DatabaseError as exc:
                    ctx.note(f"stopped while inserting up to {x:,} documents (batches of {batch}): {exc}")
                    break
                if held < x:
                    ctx.note(f"stopped at {held:,} of {x:,} documents (not measured): the time budget ran out")
                    break
                step_rate = (x - have) / step_s if step_s > 0 else None
                rates["insert"] = step_rate
                insert_total += step_s
                have = x
                data_mb = _data_mb(db, x, server)
                beyond = None if server.cache_mb is None else data_mb > server.cache_mb
                ctx.log(f"  {x:,} documents: {data_mb:,.1f} MB of data"
                        + (f" ({'beyond' if beyond else 'within'} a {server.cache_mb:,.0f} MB cache)"
                           if beyond is not None else "") + f", inserted at {step_rate or 0:,.0f}/s")
                for hot in params["hot_fractions"]:
                    keys = read_keys(rng, x, hot, params["reads"])
                    seconds, done, found, latency = _reads(coll, keys, ctx, server)
                    if done < len(keys):
                        ctx.note(f"{x:,} documents, hot {hot:g}: {done:,} of {len(keys):,} reads before the "
                                 "deadline (read_s_per_30k scaled from those)")
                    if found < done:
                        ctx.note(f"{x:,} documents, hot {hot:g}: {done - found} of {done} reads found nothing")
                    if done:
                        rates["read"] = done / seconds if seconds > 0 else None
                    point = {
                        "documents": x, "hot_fraction": hot, "beyond_cache": beyond, "mark": "",
                        "data_mb": data_mb, "cache_mb": None if server.cache_mb is None else round(server.cache_mb, 1),
                        "reads": done, "found": found,
                        "read_s_per_30k": round(seconds * READS_PER_FIGURE / done, 2) if done else None,
                        "read_p50_ms": latency.summary()["p50_ms"], "read_p99_ms": latency.summary()["p99_ms"],
                        "insert_s": round(insert_total, 2),
                        "inserts_per_s": round(x / insert_total) if insert_total > 0 else None,
                        "step_inserts_per_s": round(step_rate) if step_rate else None,
                    }  # fmt: skip
                    point.update(server.memory(server.status(client)))
                    points.append(point)
                    ctx.log(f"    hot {hot:g}: {point['read_s_per_30k']} s per 30,000 reads "
                            f"(p50 {point['read_p50_ms']} ms, p99 {point['read_p99_ms']} ms), "
                            f"server RSS {point.get('server_rss_mb')} MB")
                    if done < len(keys):
                        break
                if ctx.remaining() <= 0:
                    break
            with db_errors("dropping the collection", uri=server.uri):
                coll.drop()
        finally:
            close_client(client)
    finally:
        server.stop()
    _mark(points)
    if points and server.cache_mb is not None and not any(p["beyond_cache"] for p in points):
        ctx.note(f"no point passed the {server.cache_mb:,.0f} MB cache: the comparison beyond the cache is empty")
    if ctx.size != "full":
        ctx.note(f"{params['reads']:,} reads per point, not the blog's 30,000: read_s_per_30k is scaled to 30,000")
    return points


_HW = "EC2 large, 7.5 GB RAM, Ubuntu 10.10, mmap-era MongoDB; client EC2 small"
_HOT = (1.0, 0.1, 0.01)

EXPERIMENTS = (
    Experiment(
        name="cache",
        study="002 blog: MongoDB with more data than memory (MEM)",
        figures="MEM-T1, MEM-ins, MEM-T2",
        title="30,000 point reads by key as the data outgrows the cache, uniform and on a hot 10 % / 1 %",
        run=run,
        sizes={
            "tiny": {"documents": [500, 9_000], "reads": 300, "hot_fractions": list(_HOT), "cache_size": "16M",
                     "batch_fraction": 0.03, "seed": 2011},
            "quick": {"documents": [2_000, 10_000, 25_000, 60_000], "reads": 3_000, "hot_fractions": list(_HOT),
                      "cache_size": "32M", "batch_fraction": 0.03, "seed": 2011},
            "full": {"documents": [10_000, 100_000, 1_000_000, 3_000_000, 10_000_000], "reads": READS_PER_FIGURE,
                     "hot_fractions": list(_HOT), "cache_size": "8G", "batch_fraction": 0.03, "seed": 2011},
        },
        plot=Plot(x="documents", y=("read_s_per_30k",), series="hot_fraction", xlog=True,
                  xlabel="documents X (log)", ylabel="seconds per 30,000 point reads",
                  title="cache: 30,000 point reads against X, uniform and hot 10 % / 1 % (MEM-T1, MEM-T2)"),
        published=(
            Published("MEM-T1", "30,000 uniform reads, 10k documents (in RAM)", 16.8, "s", _HW, "read_s_per_30k",
                      {"mark": "smallest", "hot_fraction": 1.0, "documents": "max"}),
            Published("MEM-T1", "30,000 uniform reads, 3M documents (the last X in RAM)", 17.2, "s", _HW,
                      "read_s_per_30k", {"mark": "last in cache", "hot_fraction": 1.0, "documents": "max"},
                      note="1M documents: 18.0 s"),
            Published("MEM-T1", "30,000 uniform reads, 10M documents (data > 7.5 GB RAM)", 74.1, "s", _HW,
                      "read_s_per_30k", {"mark": "largest beyond", "hot_fraction": 1.0, "documents": "max"},
                      note="ours: the largest X, beyond the cache; MEM-T2's uniform runs: 73.1, 75.3, 73.9 s"),
            Published("MEM-T2", "30,000 reads, 99 % on the first 10 % of keys, 10M documents", 29.5, "s", _HW,
                      "read_s_per_30k", {"mark": "largest beyond", "hot_fraction": 0.1, "documents": "max"},
                      note="3 runs: 54.3, 37.0, 29.5 s (the cache warms); ours is one run"),
            Published("MEM-T2", "30,000 reads, 99 % on the first 1 % of keys, 10M documents", 18.2, "s", _HW,
                      "read_s_per_30k", {"mark": "largest beyond", "hot_fraction": 0.01, "documents": "max"},
                      note="3 runs: 21.1, 18.8, 18.2 s"),
            Published("MEM-ins", "inserts, 3M documents in 178 s (in RAM)", 16_854, "docs/s", _HW, "inserts_per_s",
                      {"mark": "last in cache", "hot_fraction": 1.0, "documents": "max"}),
            Published("MEM-ins", "inserts, 10M documents in 1,102 s (data > RAM)", 9_074, "docs/s", _HW,
                      "inserts_per_s", {"mark": "largest beyond", "hot_fraction": 1.0, "documents": "max"}),
            Published("MEM-T1", "mongod memory at 10M documents (resident)", 7_469, "MB", _HW, "server_rss_mb",
                      {"mark": "largest beyond", "hot_fraction": 1.0, "documents": "max"},
                      note="547 / 1,672 / 4,158 MB at 100k / 1M / 3M; mmap maps the data, WiredTiger caps its cache"),
        ),
        differences="The blog's memory was the machine's RAM (mmap-era MongoDB mapped its files); under WiredTiger "
                    "it is the cache, so on the embedded default a private SecantusDB server runs with a small "
                    "cache (16M tiny, 32M quick, 8G full; SCI_INGEST_BENCH_CACHE sets it) and the data passes it at "
                    "tens of thousands of documents, not millions.  Pages evicted from the cache are still in the "
                    "operating system's file cache, not on a 2011 EC2 disk.  The collection grows step by step "
                    "(insert_s is the time to reach X).  Reads are one at a time over loopback on the server's "
                    "machine, not from an EC2 small; quick reads 3,000 times per point, scaled to 30,000; "
                    "MEM-T2's hot runs are done at every X, once each.  SecantusDB is a Python server over "
                    "WiredTiger that keeps every insert in its oplog too, and its serverStatus has mem.resident "
                    "but no wiredTiger.cache section.",
        needs="--full: hours, about 25 GB of data and a cache you size (SCI_INGEST_BENCH_CACHE or --mongo-uri)",
    ),
)
