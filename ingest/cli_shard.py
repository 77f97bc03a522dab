"""The sharding commands of ``sci-ingest``: ``hash``, ``shard`` and ``shard-plan``.

Kept apart from :mod:`ingest.cli` (which registers them through
:func:`register`) so that the main command module stays readable; the logic
lives in :mod:`ingest.hashkey`, :mod:`ingest.sharding` and
:mod:`analytics.shard_plan`.
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["register", "cmd_hash"]

EXIT_HASH = ("\nexit codes:\n  0  every value hashed\n"
             "  2  some values were not Extended JSON (each named on stderr as <stdin>:LINE: reason or\n"
             "     argument N: reason); the others were printed, one line each, in order\n")


def cmd_hash(args) -> int:
    """One signed 64-bit decimal per value: argument values, else one value per line of stdin."""
    from ingest.hashkey import hash64, parse_value

    if not -(2**31) <= args.seed < 2**31:
        print(f"error: --seed is a 32-bit signed integer, not {args.seed}", file=sys.stderr)
        return 1
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
    return 2 if failed else 0


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
            "Without VALUE arguments, one value per line of stdin (blank lines are skipped).\n",
            parents=(), exit_codes=EXIT_HASH)
    p.add_argument("values", nargs="*", metavar="VALUE", help="Extended JSON values (default: lines of stdin)")
    p.add_argument("--seed", type=int, default=0, help="hash seed, a 32-bit signed integer (default 0, what "
                   "hashed indexes and shard keys use)")
