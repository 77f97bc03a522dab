"""Summary of a sweep (sweep.sh): how many outputs parsed, were refused, or disagreed with
the independent checker (check.py), the refusals and disagreements themselves, and then
the refusals grouped by reason (file and line left out), the runs where FASTA itself failed
and what Biopython could not read.

    python samples/pasta/sweep/summary.py [RESULTS.jsonl]
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections import Counter

_WHERE = re.compile(r"^(?:error: )?\S+?:\d+: ")
_QUOTED = re.compile(r"""b?'[^']*'|b?"[^"]*\"""")


def reason(err: str) -> str:
    """A refusal's first line without its file:line and the quoted text."""
    first = (err.strip().splitlines() or ["(no message)"])[0]
    return _QUOTED.sub("'…'", _WHERE.sub("", first))


def main(argv: list[str]) -> int:
    default = os.path.join(os.environ.get("SWEEP_DIR", os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                                                    "sci-ingest-sweep")), "results.jsonl")
    path = argv[0] if argv else default
    counts = {"parsed": 0, "refused": 0, "checker disagrees": 0}
    refusals, fasta_failed, bio_errors = Counter(), Counter(), Counter()
    totals = Counter()
    for line in open(path):
        r = json.loads(line)
        check = r.get("check") or {}
        issues = check.get("issues") or []
        totals["outputs"] += 1
        for key in ("seq_checks", "histogram_rows", "set_aside"):
            totals[key] += check.get(key) or 0
        if r["frc"] != 0:
            said = [x for x in r["fasta_err"].strip().splitlines() if "lib.sh: line" not in x] or ["(no message)"]
            signal = {134: " (SIGABRT)", 139: " (SIGSEGV)"}.get(r["frc"], "")
            fasta_failed[f"{r['cmd'].split()[0]} exit {r['frc']}{signal}: {re.sub(r'[0-9]+', 'N', said[-1])[:80]}"] += 1
        if str(check.get("bio", "")).startswith("error"):
            bio_errors[re.sub(r"\d+", "N", re.sub(r"'[^']*'", "'…'", check["bio"].splitlines()[0]))[:90]] += 1
        if r["prc"] != 0:
            counts["refused"] += 1
            refusals[reason(r["parse_err"])] += 1
            print(f"refused   {r['name']:<16} {r['cmd']}\n          {r['parse_err'].strip().splitlines()[0]}")
        elif issues or check.get("blocks") != check.get("json"):
            counts["checker disagrees"] += 1
            print(f"DISAGREES {r['name']:<16} {r['cmd']}\n          {issues[:2]}")
        else:
            counts["parsed"] += 1
    print(", ".join(f"{v} {k}" for k, v in counts.items()) + f" (of {totals['outputs']} outputs)")
    print(f"input-sequence checks {totals['seq_checks']}, histogram rows equal to the file's "
          f"{totals['histogram_rows']}, blocks set aside {totals['set_aside']}")
    for title, counter in (("refused, by reason", refusals), ("FASTA itself failed", fasta_failed),
                           ("Biopython could not read", bio_errors)):
        if counter:
            print(f"{title}:")
            for text, n in counter.most_common():
                print(f"  {n:5d}  {text}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
