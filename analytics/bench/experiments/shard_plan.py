"""``shard-plan``: where sequentially arriving keys land on N shards, hashed against ranged.

The placement model is :mod:`ingest.sharding.plan` (the ``sci-ingest shard-plan`` command);
this experiment sweeps the shard count for keys that grow with time (as ``_id``s and
search ids do) and measures the balance at rest and the share of the newest inserts that
all go to one shard: the reason the SSEARCH thesis sharded on a hashed key (SS-F5.6).
"""

from __future__ import annotations

import time

from analytics.bench.core import Experiment, Plot, Published
from ingest.sharding.plan import generated_keys, plan_collection

__all__ = ["EXPERIMENTS"]


def run(ctx, params: dict) -> list[dict]:
    sample = generated_keys("hits", "search_id", params["documents"], params["doc_bytes"])
    points = []
    for shards in params["shards"]:
        if ctx.remaining() < 0:
            ctx.note(f"stopped before {shards} shards: the time budget of this size ran out")
            break
        t = time.perf_counter()
        plan = plan_collection(sample, shards, chunk_bytes=params["chunk_bytes"])
        for scheme in ("hashed", "ranged"):
            p = plan[scheme]
            points.append({
                "shards": shards, "scheme": scheme, "documents": plan["documents"],
                "max_over_mean": round(p.max_over_mean, 4), "cv": round(p.cv, 4),
                "last_10pct_on_busiest": round(p.last_share, 4), "chunks": p.chunks,
                "plan_s": round(time.perf_counter() - t, 3),
            })  # fmt: skip
        ctx.log(f"  {shards} shards: hashed {points[-2]['last_10pct_on_busiest']:.0%} / "
                f"ranged {points[-1]['last_10pct_on_busiest']:.0%} of the newest inserts on the busiest shard")
    return points


EXPERIMENTS = (
    Experiment(
        name="shard-plan",
        study="001 SSEARCH thesis (MongoDB vs Riak)",
        figures="SS-F5.6, SS-F5.7",
        title="hashed vs ranged shard key: balance and the newest inserts' hot shard, against N shards",
        run=run,
        sizes={
            "tiny": {"documents": 5_000, "doc_bytes": 258, "chunk_bytes": 64 * 1024, "shards": [2, 4]},
            "quick": {"documents": 300_000, "doc_bytes": 258, "chunk_bytes": 8 * 2**20, "shards": [1, 2, 4, 8, 13]},
            "full": {"documents": 4_014_329, "doc_bytes": 258, "chunk_bytes": 128 * 2**20,
                     "shards": [1, 2, 3, 4, 6, 8, 10, 13]},
        },
        plot=Plot(x="shards", y=("last_10pct_on_busiest",), series="scheme", xlabel="shards",
                  ylabel="share of the newest 10 % of inserts on the busiest shard",
                  title="shard-plan: where the newest inserts go (SS-F5.6 sharded on a hashed key)"),
        published=(
            Published("SS-F5.6", "newest inserts on the busiest shard, hashed key", None, "",
                      "AWS m1.xlarge nodes, 4 x 30 workers", "last_10pct_on_busiest", {"scheme": "hashed", "shards": 13},
                      note="the thesis measured 4,142 -> 11,642 writes/s from 1 to 13 nodes on a hashed key, not the "
                           "placement; ours shows why its writes spread"),
        ),
        differences="A placement model (MongoDB's split and balancer rules), not a cluster: no writes are sent. "
                    "The thesis's 4,014,329 documents of 258 bytes (gs collection) are the full size.",
    ),
)
