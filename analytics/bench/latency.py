"""Latency percentiles through HdrHistogram (PyPI ``hdrhistogram``).

One :class:`Latency` per operation kind and per thread or process; they merge exactly
(``encode()`` in a worker process, :meth:`Latency.add_encoded` in the parent), as YCSB's
HdrHistogram measurements do.  Values are recorded in microseconds, from 1 µs to 60 s,
with 3 significant digits.
"""

from __future__ import annotations

import time

from hdrh.histogram import HdrHistogram

__all__ = ["Latency", "PERCENTILES", "timed"]

PERCENTILES = (50, 95, 99, 99.9)
_LOW, _HIGH, _DIGITS = 1, 60_000_000, 3


class Latency:
    """Operation latencies of one kind: count, and percentiles in milliseconds."""

    def __init__(self):
        self.hist = HdrHistogram(_LOW, _HIGH, _DIGITS)

    def record_s(self, seconds: float) -> None:
        us = int(seconds * 1e6)
        self.hist.record_value(min(max(us, _LOW), _HIGH))

    def add(self, other: Latency) -> None:
        self.hist.add(other.hist)

    def encode(self) -> bytes:
        return self.hist.encode()

    def add_encoded(self, data: bytes) -> None:
        self.hist.decode_and_add(data)

    @property
    def count(self) -> int:
        return self.hist.get_total_count()

    def percentile_ms(self, p: float) -> float | None:
        if not self.count:
            return None
        return self.hist.get_value_at_percentile(p) / 1000.0

    def summary(self, prefix: str = "") -> dict:
        """``{prefix}p50_ms`` ... ``{prefix}p99.9_ms`` (the study's percentiles) and the count."""
        out: dict[str, float | None] = {f"{prefix}count": self.count}
        for p in PERCENTILES:
            value = self.percentile_ms(p)
            out[f"{prefix}p{p:g}_ms"] = None if value is None else round(value, 3)
        return out


def timed(latency: Latency, fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, its duration recorded in ``latency``."""
    t = time.perf_counter()
    try:
        return fn(*args, **kwargs)
    finally:
        latency.record_s(time.perf_counter() - t)
