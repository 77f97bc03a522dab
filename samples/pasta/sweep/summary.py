"""Summary of a sweep (sweep.sh): how many outputs parsed, were refused, or disagreed with
the independent checker (check.py), and the refusals and disagreements themselves.

    python samples/pasta/sweep/summary.py [RESULTS.jsonl]
"""

from __future__ import annotations

import json
import os
import sys


def main(argv: list[str]) -> int:
    default = os.path.join(os.environ.get("SWEEP_DIR", os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                                                    "sci-ingest-sweep")), "results.jsonl")
    path = argv[0] if argv else default
    counts = {"parsed": 0, "refused": 0, "checker disagrees": 0}
    for line in open(path):
        r = json.loads(line)
        check = r.get("check") or {}
        issues = check.get("issues") or []
        if r["prc"] != 0:
            counts["refused"] += 1
            print(f"refused   {r['name']:<16} {r['cmd']}\n          {r['parse_err'].strip().splitlines()[0]}")
        elif issues or check.get("blocks") != check.get("json"):
            counts["checker disagrees"] += 1
            print(f"DISAGREES {r['name']:<16} {r['cmd']}\n          {issues[:2]}")
        else:
            counts["parsed"] += 1
    print(", ".join(f"{v} {k}" for k, v in counts.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
