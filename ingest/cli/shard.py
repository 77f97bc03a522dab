"""The sharding commands of ``sci-ingest``: ``hash``, ``shard`` and ``shard-plan``.

Kept apart from :mod:`ingest.cli.main` (which registers them through
:func:`register`) so that the main command module stays readable; the logic
lives in :mod:`ingest.sharding.hashkey`, :mod:`ingest.sharding.collections` and
:mod:`ingest.sharding.plan`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ingest.cli.options import typed
from ingest.config import Number
from ingest.errors import Exit, UsageError
from ingest.report import dumps, table

#: The declared type and range of the options (:func:`ingest.cli.options.typed`).
SEED = typed(Number(noun="a 32-bit signed integer", least=-(2**31), most=2**31 - 1))
_SHARDS = Number("shards", least=1, most=1024)
SHARDS = typed(_SHARDS)
_KEYS = Number("keys", least=1, most=1_000_000)
_CHUNK_MB = Number("MB", least=1, most=1024, integer=False)

__all__ = ["register", "cmd_hash", "cmd_shard", "cmd_shard_plan"]


def cmd_hash(args) -> int:
    """One signed 64-bit decimal per value: argument values, else one value per line of stdin."""
    from ingest.sharding.hashkey import hash64, parse_value  # noqa: PLC0415 - lazy: bson, hashlib, decimal (ingest.sharding.hashkey: 15 ms); --help must not pay them

    if args.values:
        items = ((f"argument {i}", text) for i, text in enumerate(args.values, 1))
    else:
        items = ((f"<stdin>:{n}", line) for n, line in enumerate(sys.stdin, 1) if line.strip())
    failed = 0
    out = sys.stdout
    for where, text in items:
        try:
            value = parse_value(text)
            digest = hash64(value, args.seed)
        except (ValueError, TypeError) as exc:
            failed += 1
            out.flush()
            print(f"{where}: {exc}", file=sys.stderr)
            continue
        out.write(f"{digest}\n")
    out.flush()
    return Exit.PARTIAL if failed else Exit.OK


def cmd_shard(args) -> int:
    """Shard the data collections on their hashed keys through mongos (or print the commands)."""
    from ingest.cli.common import settings_from  # noqa: PLC0415 - lazy: ingest.cli.common and ingest.parsers (1.5 ms); --help must not pay them
    from ingest.server.connection import database  # noqa: PLC0415 - lazy: pymongo, as shard
    from ingest.sharding.collections import shard  # noqa: PLC0415 - lazy: pymongo costs 0.1 s (0.2 s cold); parse and --help must not pay it

    with database(settings_from(args)) as conn:  # not a mongos: UnsupportedFeature, exit 1 (nothing was sent)
        db_name = args.db or conn.db.name
        state, commands, outcomes = shard(conn.client, db_name, dry_run=args.dry_run,
                                          version=args.server_version, shards=args.shards)
    refused = [o for o in outcomes if o.status == "refused"]
    if args.json:
        print(dumps({"database": db_name, "server": state.kind, "version": state.version_text,
                     "shards": state.shards, "dry_run": args.dry_run,
                     "commands": [{"database": c.database, "command": c.document} for c in commands],
                     "collections": [vars(o) for o in outcomes]}))
    else:
        where = "mongos" if state.is_mongos else f"{state.kind}, not a mongos: nothing is sent"
        count = f"{len(state.shards)} shard(s)" if state.shards else "shards not known here (--shards N)"
        print(f"# MongoDB {state.version_text}, {count} ({where})")
        if args.dry_run:
            for command in commands:
                print(command.describe())
        for o in outcomes:
            print(f"# {o.collection}: {o.status} on {o.key}" + (f": {o.reason}" if o.reason else ""))
    for o in refused:
        print(f"error: {db_name}.{o.collection}: {o.reason}", file=sys.stderr)
    return Exit.PARTIAL if refused else Exit.OK


def cmd_shard_plan(args) -> int:
    """Hashed against ranged placement of each collection's keys on N shards: a table and a PNG."""
    from ingest.cli.common import settings_from  # noqa: PLC0415 - lazy: ingest.cli.common and ingest.parsers (1.5 ms); --help must not pay them
    from ingest.server.connection import database  # noqa: PLC0415 - lazy: pymongo, as KEYS
    from ingest.sharding.collections import KEYS, version_tuple  # noqa: PLC0415 - lazy: pymongo costs 0.1 s (0.2 s cold); parse and --help must not pay it
    from ingest.sharding.plan import DEFAULT_CHUNK_BYTES, generated_keys, plan_collection, read_keys, rows, write_png  # noqa: PLC0415 - lazy: pymongo, as KEYS
    from ingest.store.mongo import db_errors  # noqa: PLC0415 - lazy: pymongo, as KEYS

    wanted = args.collection or list(KEYS)
    unknown = [c for c in wanted if c not in KEYS]
    if unknown:
        raise UsageError(f"no shard key for {', '.join(unknown)}; collections: {', '.join(KEYS)}")
    settings = settings_from(args)
    chunk_bytes = int(args.chunk_mb * 2**20) if args.chunk_mb is not None else DEFAULT_CHUNK_BYTES
    plans, skipped = [], []
    with database(settings) as conn:
        version = version_tuple(args.server_version or conn.info.version)
        for coll in wanted:
            key_field = KEYS[coll][0]
            if args.generate:
                sample = generated_keys(coll, key_field, args.generate)
            else:
                with db_errors(f"reading the {key_field} keys of {coll}"):
                    sample = read_keys(conn.db, coll, key_field)
            if not sample.keys:
                skipped.append(coll)
                continue
            plans.append(plan_collection(sample, args.shards, version, chunk_bytes))
    png = Path(args.png) if args.png else Path(settings.out_dir) / "shard_plan.png"
    if plans:
        png.parent.mkdir(parents=True, exist_ok=True)
        write_png(plans, png, args.shards)
    if args.json:
        print(dumps({"shards": args.shards, "version": ".".join(map(str, version)), "png": str(png) if plans else None,
                     "skipped": skipped, "collections": [{**{k: v for k, v in p.items() if k not in ("hashed", "ranged")},
                                                          "hashed": p["hashed"].as_dict(),
                                                          "ranged": p["ranged"].as_dict()} for p in plans]}))
    else:
        print(f"{args.shards} shards; hashed: MongoDB {'.'.join(map(str, version))}'s even initial split; "
              f"ranged: at rest split at the key's quantiles, while loading MongoDB's split and balancer rules "
              f"({chunk_bytes / 2**20:g} MB chunks)")
        print(table(rows(plans), [("collection", "collection"), ("key", "key"), ("docs", "docs per shard"),
                                  ("max_mean", "max/mean"), ("cv", "CV"), ("mb", "MB per shard"),
                                  ("bytes_max_mean", "MB max/mean"),
                                  ("last", "last 10 % of inserts on one shard")], left=2))
        if plans:
            print(f"chart: {png}")
    for coll in skipped:
        print(f"note: {coll} holds no documents (load first, or --generate N)", file=sys.stderr)
    if not plans:
        print("error: no collection holds documents: nothing to plan (load first, or --generate N)",
              file=sys.stderr)
        return Exit.FATAL
    return Exit.OK


def register(add, common: argparse.ArgumentParser) -> None:
    """Add the sharding commands with the main parser's ``add`` helper."""
    p = add("hash", cmd_hash, "MongoDB's hashed-index value of each Extended JSON value (as a hashed shard key "
            "stores it)",
            "examples:\n  sci-ingest hash '\"mp-149\"' '{\"$numberLong\": \"42\"}' '{\"$oid\": "
            "\"5b2f6ec2c0a8f4a3c1e4d4a1\"}'\n"
            "  sci-ingest hash --seed 1 '[1, {\"a\": null}]'\n"
            "  printf '%s\\n' 1 2.9 '{\"$numberDouble\": \"NaN\"}' | sci-ingest hash\n"
            "\nValues are MongoDB Extended JSON, canonical or relaxed; a plain JSON number is a double\n"
            "or an integer, which hash alike (every number is hashed as the int64 it truncates to).\n"
            "Without VALUE arguments, one value per line of stdin (blank lines are skipped).\n"
            "Its output is JSON already (one number a line): it has no --json.\n",
            db=False, json=None,
            here={Exit.PARTIAL: "some values were not Extended JSON (each named on stderr as <stdin>:LINE: reason "
                                "or argument N: reason); the others were printed, one line each, in order",
                  Exit.USAGE: "--seed is not a 32-bit signed integer"})
    p.add_argument("values", nargs="*", metavar="VALUE", help="Extended JSON values (default: lines of stdin)")
    p.add_argument("--seed", type=SEED, default=0, help="hash seed, a 32-bit signed integer (default 0, what "
                   "hashed indexes and shard keys use)")

    p = add("shard", cmd_shard, "shard the data collections on hashed keys through mongos (--dry-run: print the "
            "commands)",
            "examples:\n  sci-ingest shard --mongo-uri mongodb://mongos:27017/ --dry-run\n"
            "  sci-ingest shard --mongo-uri mongodb://mongos:27017/\n"
            "  sci-ingest shard --dry-run --server-version 7.0 --shards 4     the commands for another cluster\n"
            "\nKeys: hits on hashed search_id; searches, materials and tasks on hashed _id (docs/sharding.md).\n"
            "Shard before loading: MongoDB splits a hashed key evenly only on an empty collection.\n",
            here={Exit.FATAL: "the server is not a mongos: nothing was sent",
                  Exit.PARTIAL: "a collection was refused (sharded on another key, not empty), each named on "
                                "stderr; the others were sharded"})
    p.add_argument("--dry-run", action="store_true", help="print the command documents, send nothing")
    p.add_argument("--shards", type=SHARDS, metavar="N", help=f"--dry-run off a mongos: plan for N shards ({_SHARDS.range()})")
    p.add_argument("--server-version", metavar="X.Y", help="--dry-run: plan for this MongoDB version "
                   "(default: the server's)")

    p = add("shard-plan", cmd_shard_plan, "where each collection's documents would land on N shards: hashed "
            "against ranged key (table and PNG)",
            "examples:\n  sci-ingest shard-plan --shards 4\n  sci-ingest shard-plan --shards 8 --collection hits --json\n"
            "  sci-ingest shard-plan --shards 4 --generate 1000000 --png plan.png   sequential keys, no data needed\n",
            here={Exit.FATAL: "no collection holds documents: nothing to plan (load first, or --generate N)",
                  Exit.USAGE: "--collection names a collection without a shard key, or --shards, --generate or "
                              "--chunk-mb is out of its range"})
    p.add_argument("--shards", type=SHARDS, required=True, metavar="N", help=f"number of shards, {_SHARDS.range()}")
    p.add_argument("--collection", action="append", metavar="NAME",
                   help="a collection to plan (repeatable; default: every data collection)")
    p.add_argument("--generate", type=typed(_KEYS), metavar="N",
                   help=f"plan N generated sequential keys instead of the loaded ones ({_KEYS.range()})")
    p.add_argument("--server-version", metavar="X.Y", help="MongoDB version whose initial split to use "
                   "(default: the server's)")
    p.add_argument("--chunk-mb", type=typed(_CHUNK_MB), metavar="MB", help="range (chunk) size for the ranged key "
                   f"while loading, {_CHUNK_MB.range()} as MongoDB's chunksize (default 128, MongoDB's)")
    p.add_argument("--png", metavar="PATH", help="where to write the chart (default: <out dir>/shard_plan.png)")
