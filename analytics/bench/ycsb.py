"""YCSB's core workload (Cooper et al., SoCC 2010) in Python, for the ``ycsb`` and ``write-concern`` experiments.

Both source studies drove MongoDB with YCSB (the SanDisk white paper with YCSB 0.1.4, the NVDIMM
paper with YCSB 0.5.0).  This module follows the definitions of YCSB's ``core`` package
(github.com/brianfrankcooper/YCSB, ``core/src/main/java/site/ycsb``), re-written from reading it:

* ``Utils.fnvhash64``: FNV-1a over the 8 low-to-high bytes of a ``long``, offset basis
  0xCBF29CE484222325, prime 1099511628211, then ``Math.abs`` (:func:`fnvhash64`).
* ``CoreWorkload.buildKeyName``: ``"user" + Long.toString(fnvhash64(keynum))`` with the default
  ``insertorder=hashed`` and ``zeropadding=1`` (:func:`build_key_name`).
* ``CoreWorkload`` defaults: 10 fields ``field0..field9`` of 100 bytes (``fieldlength``, constant),
  ``readallfields=true``, ``writeallfields=false`` (an update sets one random field), scan length
  uniform in ``[1, maxscanlength]``; the workload files ``workloads/workloada..f`` give the
  proportions (:data:`WORKLOADS`).
* ``CounterGenerator``/``AcknowledgedCounterGenerator``: the load's key sequence and the run's
  insert sequence, whose ``lastValue`` only advances over a contiguous run of acknowledged inserts
  (a window of 2**20 slots).
* ``UniformLongGenerator``: ``abs(nextLong()) % interval + lb``.
* ``ZipfianGenerator``: Gray et al., "Quickly generating billion-record synthetic databases"
  (SIGMOD 1994), constant 0.99, zeta computed once and extended incrementally when the item count
  grows (``eta`` keeps the constructor's item count, as YCSB's does).
* ``ScrambledZipfianGenerator``: a zipfian over items 0..10**10 with YCSB's precomputed
  ``ZETAN = 26.46902820178302``, hashed with ``fnvhash64`` modulo the item count, so the popular
  keys are spread over the key space.  As ``CoreWorkload.init`` does, its item count is
  ``recordcount + 2 * operationcount * insertproportion + 1`` and a key not inserted yet is drawn
  again (``nextKeynum``).
* ``SkewedLatestGenerator``: ``last - zipfian(last)`` over the insert counter (workload D).
* ``DiscreteGenerator``: the operation chooser (READ, UPDATE, INSERT, SCAN, READMODIFYWRITE).
* The MongoDB binding (``mongodb/.../MongoDbClient.java``): read ``find({_id})``, update
  ``updateOne({_id}, {$set})``, insert ``insertOne`` (``batchsize`` > 1: ``insertMany``), scan
  ``find({_id: {$gte}}).sort({_id: 1}).limit(n)``; values are stored as binary.

Latencies are measured around each database call as YCSB's ``DBWrapper`` does (READ, UPDATE,
INSERT, SCAN; a read-modify-write also counts its READ and UPDATE) plus READ-MODIFY-WRITE as a
whole, through :class:`~analytics.bench.latency.Latency` (HdrHistogram, as YCSB's
``measurementtype=hdrhistogram``).

Client threads are threads of one process, as YCSB's are: pymongo releases the GIL while it waits
on the socket, so on this 2-core machine T threads keep T requests in flight (the server, not the
client, is the bottleneck).  Every thread has its own seeded ``random.Random`` (YCSB uses
``ThreadLocalRandom``), so a run's choices are reproducible; the generators' shared state (counters,
zeta) is locked as YCSB synchronises it.  Only :mod:`ingest.store.mongo` reaches MongoDB.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from analytics.bench.latency import Latency
from ingest.store.mongo import close_client, connect, db_errors

__all__ = [
    "FNV_OFFSET_BASIS_64", "FNV_PRIME_64", "fnv1a_64", "fnvhash64", "build_key_name", "CounterGenerator",
    "AcknowledgedCounterGenerator", "UniformLongGenerator", "ZipfianGenerator", "ScrambledZipfianGenerator",
    "SkewedLatestGenerator", "DiscreteGenerator", "Workload", "WORKLOADS", "CoreWorkload", "PhaseResult",
    "load_phase", "run_phase", "remove_run_inserts", "drop_table", "OPS", "TABLE",
]

FNV_OFFSET_BASIS_64 = 0xCBF29CE484222325
FNV_PRIME_64 = 1099511628211
_M64 = (1 << 64) - 1
ZIPFIAN_CONSTANT = 0.99  # ZipfianGenerator.ZIPFIAN_CONSTANT
SCRAMBLED_ITEM_COUNT = 10_000_000_000  # ScrambledZipfianGenerator.ITEM_COUNT
SCRAMBLED_ZETAN = 26.46902820178302  # ScrambledZipfianGenerator.ZETAN: zeta(ITEM_COUNT, 0.99)
ACK_WINDOW = 1 << 20  # AcknowledgedCounterGenerator.WINDOW_SIZE
TABLE = "usertable"  # CoreWorkload's default table
#: operation name (YCSB's measurement name) -> the column prefix of the points
OPS = {"READ": "read_", "UPDATE": "update_", "INSERT": "insert_", "SCAN": "scan_", "READ-MODIFY-WRITE": "rmw_"}


# ------------------------------------------------------------------ hashing and keys
def fnv1a_64(data: bytes) -> int:
    """FNV-1a, 64 bits, of ``data`` (unsigned): xor each byte in, then multiply by the prime."""
    h = FNV_OFFSET_BASIS_64
    for octet in data:
        h = ((h ^ octet) * FNV_PRIME_64) & _M64
    return h


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _java_abs(v: int) -> int:
    """``Math.abs`` on a Java long: Long.MIN_VALUE stays negative."""
    return v if v == -(1 << 63) else abs(v)


def _java_mod(a: int, n: int) -> int:
    """Java's ``%`` (the sign of the dividend)."""
    return a % n if a >= 0 else -((-a) % n)


def fnvhash64(val: int) -> int:
    """YCSB's ``Utils.fnvhash64``: FNV-1a of the long's 8 bytes, lowest first, as a non-negative long."""
    return _java_abs(_signed(fnv1a_64((val & _M64).to_bytes(8, "little"))))


def build_key_name(keynum: int, ordered: bool = False, zeropadding: int = 1) -> str:
    """``CoreWorkload.buildKeyName``: ``user`` + the (hashed, unless ``ordered``) key number."""
    value = str(keynum if ordered else fnvhash64(keynum))
    return "user" + "0" * max(0, zeropadding - len(value)) + value


# ------------------------------------------------------------------ generators
class CounterGenerator:
    """``CounterGenerator``: ``next_value`` is get-and-increment; ``last_value`` the last one handed out."""

    def __init__(self, start: int):
        self._next = start
        self._lock = threading.Lock()

    def next_value(self) -> int:
        with self._lock:
            value = self._next
            self._next += 1
            return value

    def last_value(self) -> int:
        return self._next - 1

    def handed_out(self) -> int:
        """The next value ``next_value`` would return (not a YCSB method: for the bookkeeping here)."""
        return self._next


class AcknowledgedCounterGenerator(CounterGenerator):
    """``AcknowledgedCounterGenerator``: ``last_value`` is the highest value below which every value
    has been acknowledged (an insert done), so readers never pick a key still being inserted."""

    def __init__(self, start: int):
        super().__init__(start)
        self._window = bytearray(ACK_WINDOW)
        self._ack_lock = threading.Lock()
        self._limit = start - 1

    def last_value(self) -> int:
        return self._limit

    def acknowledge(self, value: int) -> None:
        slot = value & (ACK_WINDOW - 1)
        if self._window[slot]:
            raise RuntimeError("Too many unacknowledged insertion keys.")
        self._window[slot] = 1
        if self._ack_lock.acquire(blocking=False):  # tryLock: whoever holds it moves the limit
            try:
                before_first_slot = self._limit & (ACK_WINDOW - 1)
                index = self._limit + 1
                while index != before_first_slot:
                    slot = index & (ACK_WINDOW - 1)
                    if not self._window[slot]:
                        break
                    self._window[slot] = 0
                    index += 1
                self._limit = index - 1
            finally:
                self._ack_lock.release()


class UniformLongGenerator:
    """``UniformLongGenerator(lb, ub)``: ``abs(nextLong()) % (ub - lb + 1) + lb``."""

    def __init__(self, lb: int, ub: int):
        self.lb, self.ub, self.interval = lb, ub, ub - lb + 1

    def next_value(self, rng: random.Random) -> int:
        return _java_mod(_java_abs(_signed(rng.getrandbits(64))), self.interval) + self.lb


def zeta(st: int, n: int, theta: float, initial: float = 0.0) -> float:
    """``ZipfianGenerator.zetastatic``: ``initial + sum(1 / (i + 1) ** theta for i in [st, n))``
    (numpy in chunks above a few thousand terms: a full-size run's zeta has millions)."""
    if n - st < 4096:
        return initial + sum(1.0 / (i + 1) ** theta for i in range(st, n))
    total = initial
    for lo in range(st, n, 1 << 20):
        i = np.arange(lo + 1, min(n, lo + (1 << 20)) + 1, dtype=np.float64)
        total += float(np.sum(1.0 / i**theta))
    return total


class ZipfianGenerator:
    """``ZipfianGenerator(min, max[, constant[, zetan]])``: item ``min`` most popular, then ``min+1``..."""

    def __init__(self, lo: int, hi: int, constant: float = ZIPFIAN_CONSTANT, zetan: float | None = None):
        self.items = hi - lo + 1
        self.base = lo
        self.theta = constant
        self.zeta2theta = zeta(0, 2, constant)
        self.alpha = 1.0 / (1.0 - constant)
        self.zetan = zeta(0, self.items, constant) if zetan is None else zetan
        self.countforzeta = self.items
        self.eta = self._eta()
        self._lock = threading.Lock()

    @classmethod
    def of_items(cls, items: int) -> ZipfianGenerator:
        """``new ZipfianGenerator(items)``: over ``0 .. items - 1``."""
        return cls(0, items - 1)

    def _eta(self) -> float:
        # YCSB keeps the constructor's item count in eta, also after zeta grows incrementally
        return (1 - (2.0 / self.items) ** (1 - self.theta)) / (1 - self.zeta2theta / self.zetan)

    def next_long(self, itemcount: int, rng: random.Random) -> int:
        if itemcount > self.countforzeta:  # more items: extend zeta (YCSB never shrinks it)
            with self._lock:
                if itemcount > self.countforzeta:
                    self.zetan = zeta(self.countforzeta, itemcount, self.theta, self.zetan)
                    self.countforzeta = itemcount
                    self.eta = self._eta()
        u = rng.random()
        uz = u * self.zetan
        if uz < 1.0:
            return self.base
        if uz < 1.0 + 0.5**self.theta:
            return self.base + 1
        return self.base + int(itemcount * (self.eta * u - self.eta + 1) ** self.alpha)

    def next_value(self, rng: random.Random) -> int:
        return self.next_long(self.items, rng)


class ScrambledZipfianGenerator:
    """``ScrambledZipfianGenerator(min, max)``: zipfian over 0..10**10 (precomputed zeta), then
    ``min + fnvhash64(value) % itemcount``."""

    def __init__(self, lo: int, hi: int):
        self.min, self.max, self.itemcount = lo, hi, hi - lo + 1
        self.gen = ZipfianGenerator(0, SCRAMBLED_ITEM_COUNT, ZIPFIAN_CONSTANT, SCRAMBLED_ZETAN)

    def next_value(self, rng: random.Random) -> int:
        return self.min + _java_mod(fnvhash64(self.gen.next_value(rng)), self.itemcount)


class SkewedLatestGenerator:
    """``SkewedLatestGenerator(basis)``: ``last - zipfian(last)``, favouring the newest keys."""

    def __init__(self, basis: CounterGenerator):
        self.basis = basis
        self.zipfian = ZipfianGenerator.of_items(basis.last_value())

    def next_value(self, rng: random.Random) -> int:
        last = self.basis.last_value()
        return last - self.zipfian.next_long(last, rng)


class DiscreteGenerator:
    """``DiscreteGenerator``: a value with probability proportional to its weight."""

    def __init__(self, pairs: list[tuple[float, str]]):
        total = sum(w for w, _ in pairs)
        self.pairs = [(w / total, v) for w, v in pairs]

    def next_value(self, rng: random.Random) -> str:
        val = rng.random()
        for p, value in self.pairs:
            if val < p:
                return value
            val -= p
        return self.pairs[-1][1]  # rounding: YCSB asserts this cannot happen


# ------------------------------------------------------------------ workloads
@dataclass(frozen=True)
class Workload:
    """A YCSB workload file's proportions (``workloads/workloadX``) and its request distribution."""

    name: str
    read: float = 0.0
    update: float = 0.0
    insert: float = 0.0
    scan: float = 0.0
    rmw: float = 0.0
    distribution: str = "zipfian"  # the file's requestdistribution
    max_scan_length: int = 1000  # CoreWorkload's default maxscanlength


WORKLOADS = {
    "A": Workload("A", read=0.5, update=0.5),
    "B": Workload("B", read=0.95, update=0.05),
    "C": Workload("C", read=1.0),
    "D": Workload("D", read=0.95, insert=0.05, distribution="latest"),
    "E": Workload("E", scan=0.95, insert=0.05, max_scan_length=100),
    "F": Workload("F", read=0.5, rmw=0.5),
    "update-only": Workload("update-only", update=1.0),  # the NVDIMM paper's second workload
}


class CoreWorkload:
    """``CoreWorkload.init``: the generators of one run of ``workload`` over ``recordcount`` records."""

    def __init__(self, workload: Workload, recordcount: int, operationcount: int, distribution: str | None = None,
                 fieldcount: int = 10, fieldlength: int = 100):
        self.workload = workload
        self.recordcount = recordcount
        self.distribution = distribution or workload.distribution
        self.fieldnames = [f"field{i}" for i in range(fieldcount)]
        self.fieldlength = fieldlength
        self.keysequence = CounterGenerator(0)  # the load phase (insertstart=0)
        self.insertsequence = AcknowledgedCounterGenerator(recordcount)  # transactioninsertkeysequence
        w = workload
        self.operations = DiscreteGenerator([(p, name) for p, name in (
            (w.read, "READ"), (w.update, "UPDATE"), (w.insert, "INSERT"), (w.scan, "SCAN"),
            (w.rmw, "READMODIFYWRITE")) if p > 0])  # fmt: skip
        self.keychooser: UniformLongGenerator | ScrambledZipfianGenerator | SkewedLatestGenerator
        if self.distribution == "uniform":
            self.keychooser = UniformLongGenerator(0, recordcount - 1)
        elif self.distribution == "zipfian":
            expected_new = int(operationcount * w.insert * 2.0)  # YCSB's "fudge factor" of 2
            self.keychooser = ScrambledZipfianGenerator(0, recordcount + expected_new)
        elif self.distribution == "latest":
            self.keychooser = SkewedLatestGenerator(self.insertsequence)
        else:
            raise ValueError(f"unknown request distribution {self.distribution!r} (uniform, zipfian, latest)")
        self.fieldchooser = UniformLongGenerator(0, fieldcount - 1)
        self.scanlength = UniformLongGenerator(1, w.max_scan_length)

    def next_keynum(self, rng: random.Random) -> int:
        """``nextKeynum``: a key already inserted (drawn again past the acknowledged limit)."""
        while True:
            keynum = self.keychooser.next_value(rng)
            if keynum <= self.insertsequence.last_value():
                return keynum

    def values(self, rng: random.Random) -> dict:
        return {name: rng.randbytes(self.fieldlength) for name in self.fieldnames}

    def single_value(self, rng: random.Random) -> dict:
        return {self.fieldnames[self.fieldchooser.next_value(rng)]: rng.randbytes(self.fieldlength)}


# ------------------------------------------------------------------ phases
@dataclass
class PhaseResult:
    """One phase's operations, wall time, latencies by operation and requested keys."""

    phase: str
    threads: int
    ops: int = 0
    seconds: float = 0.0
    latencies: dict[str, Latency] = field(default_factory=dict)
    keys: Counter = field(default_factory=Counter)
    cut_short: bool = False
    inserted: int = 0  # records inserted (load), or key numbers past recordcount handed out (run)

    @property
    def ops_per_s(self) -> float:
        return self.ops / self.seconds if self.seconds > 0 else 0.0

    @property
    def hottest_key_share(self) -> float | None:
        total = sum(self.keys.values())
        return max(self.keys.values()) / total if total else None

    def columns(self) -> dict:
        """ops, seconds, ops_per_s, hottest_key_share and ``read_p99_ms``-style percentiles."""
        out = {"ops": self.ops, "seconds": round(self.seconds, 3), "ops_per_s": round(self.ops_per_s, 1),
               "hottest_key_share": None if self.hottest_key_share is None else round(self.hottest_key_share, 5)}
        for op, prefix in OPS.items():
            if op in self.latencies and self.latencies[op].count:
                out.update(self.latencies[op].summary(prefix))
        return out


def _split(count: int, threads: int, tid: int) -> int:
    """``Client``: ``opcount / threadcount``, one more for the first ``opcount % threadcount`` threads."""
    return count // threads + (1 if tid < count % threads else 0)


def _run_threads(phase: PhaseResult, body, threads: int) -> None:
    """``body(tid, stats)`` in ``threads`` threads started together; merge their stats into ``phase``."""
    barrier = threading.Barrier(threads + 1)
    errors: list[BaseException] = []
    stats = [PhaseResult(phase.phase, 1) for _ in range(threads)]

    def main(tid: int) -> None:
        barrier.wait()
        try:
            body(tid, stats[tid])
        except Exception as exc:  # noqa: BLE001 - re-raised in the calling thread below
            errors.append(exc)

    workers = [threading.Thread(target=main, args=(t,), name=f"ycsb-{phase.phase}-{t}", daemon=True)
               for t in range(threads)]
    for w in workers:
        w.start()
    barrier.wait()
    t0 = time.perf_counter()
    for w in workers:
        w.join()
    phase.seconds = time.perf_counter() - t0
    if errors:
        raise errors[0]
    for s in stats:
        phase.ops += s.ops
        phase.keys.update(s.keys)
        phase.cut_short |= s.cut_short
        for op, lat in s.latencies.items():
            phase.latencies.setdefault(op, Latency()).add(lat)


def _timed(stats: PhaseResult, op: str, fn, *args, **kwargs):
    lat = stats.latencies.get(op) or stats.latencies.setdefault(op, Latency())
    t = time.perf_counter()
    result = fn(*args, **kwargs)
    lat.record_s(time.perf_counter() - t)
    return result


def load_phase(uri: str, db_name: str, workload: CoreWorkload, threads: int, stop_at: float, *, batch: int = 1,
               seed: int = 1, collection: str = TABLE) -> PhaseResult:
    """Insert ``workload.recordcount`` records from ``threads`` threads (``batch`` per ``insertMany``; YCSB's
    ``batchsize``, 1 by default), stopping at ``stop_at`` (``time.monotonic()``).  INSERT latencies are per
    call: per batch when ``batch`` > 1.  ``inserted`` is the number of records loaded (0 .. n-1)."""
    result = PhaseResult("load", threads)
    client = connect(uri, max_pool_size=max(threads, 16))
    coll = client[db_name][collection]

    def body(tid: int, stats: PhaseResult) -> None:
        rng = random.Random(seed * 1_000_003 + tid)
        todo = _split(workload.recordcount, threads, tid)
        with db_errors(f"YCSB load into {db_name}.{collection}", uri=uri):
            while todo > 0:
                if time.monotonic() >= stop_at:
                    stats.cut_short = True
                    return
                n = min(batch, todo)
                docs = [{"_id": build_key_name(workload.keysequence.next_value()), **workload.values(rng)}
                        for _ in range(n)]
                if n == 1:
                    _timed(stats, "INSERT", coll.insert_one, docs[0])
                else:
                    _timed(stats, "INSERT", coll.insert_many, docs, ordered=False)
                stats.ops += n
                todo -= n

    try:
        _run_threads(result, body, threads)
    finally:
        close_client(client)
    result.inserted = workload.keysequence.last_value() + 1
    return result


def run_phase(uri: str, db_name: str, workload: CoreWorkload, threads: int, operationcount: int, stop_at: float,
              *, seed: int = 2, collection: str = TABLE, write_concern: dict | None = None,
              after=None) -> PhaseResult:
    """``operationcount`` transactions of ``workload`` from ``threads`` threads, or fewer if ``stop_at``
    (``time.monotonic()``) comes first (then ``cut_short``).  ``write_concern`` (e.g. ``{"w": 1, "j": True}``)
    applies to every write; by default the URI's or the server's.  ``after(result)`` is called once the
    threads are done, before the client closes: with w=0 closing waits until the server has read every
    unacknowledged write, so a caller measuring how long the server takes to apply them does it there."""
    result = PhaseResult("run", threads)
    client = connect(uri, max_pool_size=max(threads, 16), write_concern=write_concern)
    coll = client[db_name][collection]

    def body(tid: int, stats: PhaseResult) -> None:
        rng = random.Random(seed * 1_000_003 + tid)
        todo = _split(operationcount, threads, tid)
        with db_errors(f"YCSB workload {workload.workload.name} on {db_name}.{collection}", uri=uri):
            for _ in range(todo):
                if time.monotonic() >= stop_at:
                    stats.cut_short = True
                    return
                op = workload.operations.next_value(rng)
                if op == "INSERT":
                    keynum = workload.insertsequence.next_value()
                    try:
                        doc = {"_id": build_key_name(keynum), **workload.values(rng)}
                        _timed(stats, "INSERT", coll.insert_one, doc)
                    finally:
                        workload.insertsequence.acknowledge(keynum)
                else:
                    keynum = workload.next_keynum(rng)
                    stats.keys[keynum] += 1
                    key = build_key_name(keynum)
                    if op == "READ":
                        _timed(stats, "READ", coll.find_one, {"_id": key})
                    elif op == "UPDATE":
                        _timed(stats, "UPDATE", coll.update_one, {"_id": key}, {"$set": workload.single_value(rng)})
                    elif op == "SCAN":
                        length = workload.scanlength.next_value(rng)
                        _timed(stats, "SCAN", lambda key=key, length=length: list(coll.find({"_id": {"$gte": key}}).sort("_id", 1)
                                                           .limit(length)))  # fmt: skip
                    else:  # READMODIFYWRITE: read, then update one field, timed as a whole too
                        t = time.perf_counter()
                        _timed(stats, "READ", coll.find_one, {"_id": key})
                        _timed(stats, "UPDATE", coll.update_one, {"_id": key}, {"$set": workload.single_value(rng)})
                        stats.latencies.setdefault("READ-MODIFY-WRITE", Latency()).record_s(time.perf_counter() - t)
                stats.ops += 1

    try:
        _run_threads(result, body, threads)
        if after is not None:
            after(result)
    finally:
        close_client(client)
    result.inserted = workload.insertsequence.handed_out() - workload.recordcount
    return result


def remove_run_inserts(uri: str, db_name: str, workload: CoreWorkload, inserted: int, collection: str = TABLE) -> None:
    """Delete the records a run inserted (key numbers ``recordcount ..``), so the next run starts from the
    loaded records, as a fresh YCSB process (whose insert counter starts at ``recordcount`` again) expects."""
    if inserted <= 0:
        return
    client = connect(uri)
    try:
        keys = [build_key_name(k) for k in range(workload.recordcount, workload.recordcount + inserted)]
        with db_errors(f"removing a YCSB run's {inserted} inserts from {db_name}.{collection}", uri=uri):
            for i in range(0, len(keys), 1000):
                client[db_name][collection].delete_many({"_id": {"$in": keys[i:i + 1000]}})
    finally:
        close_client(client)


def drop_table(uri: str, db_name: str, collection: str = TABLE) -> None:
    """Drop the YCSB table: each load starts from an empty collection."""
    client = connect(uri)
    try:
        with db_errors(f"dropping {db_name}.{collection}", uri=uri):
            client[db_name].drop_collection(collection)
    finally:
        close_client(client)
