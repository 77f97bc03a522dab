"""Read the outputs of samples/pasta_tab/sweep.sh: each by the format its content gives (as `parse` and
`load` choose it), and the -m 8CBL, -m 8, -m 9c and "-m 10,8CC -d 3" ones against the -m 10 output of
the same search (run here: the same command with -m 10, -m 10 -m 9c, or -m 10 -d 3), value by value
(a hit shown only in the -m 10 table: its E() and bits; a hit with an -m 10 block beside the table's
rows: every value of its -m 10 alignments).  Prints what differs,
then a count of each outcome.

    .venv/bin/python samples/pasta_tab/sweep_check.py [OUT_DIR]    # default /tmp/pasta_tab_sweep
"""

from __future__ import annotations

import collections
import io
import subprocess
import sys
from pathlib import Path

from ingest import parsers
from ingest.errors import InputError, ParseError
from ingest.parsers import pasta

PASTA = Path(__file__).resolve().parent.parent / "pasta"
KEYS = ("query_start", "query_end", "hit_start", "hit_end", "query_strand", "hit_strand", "evalue", "bits")


def read(path: Path):
    """(format name, queries) of one output, or (format name, ParseError)."""
    fmt = parsers.detect(path)
    try:
        with open(path, "rb") as fh:
            return fmt.name, list(fmt.load()(fh, str(path), warn=lambda message: None))
    except ParseError as exc:
        return fmt.name, exc


def differences(mode: str, got: list[dict], m10: list[dict]) -> list[str]:
    if mode == "8":  # no comment lines: a query without rows leaves no trace
        m10 = [q for q in m10 if q["hits"]]
    out = [] if len(got) == len(m10) else [f"queries {len(got)} vs {len(m10)}"]
    for t, m in zip(got, m10):
        if len(t["hits"]) != len(m["hits"]):
            out.append(f"{m['query_id']}: hits {len(t['hits'])} vs {len(m['hits'])}")
        if mode == "8CBL":
            out += [f"query {k} {t.get(k)!r} vs {m.get(k)!r}" for k in
                    ("query_id", "query_length", "query_type", "library_type", "library", "version")
                    if t.get(k) != m.get(k)]
        for ht, hm in zip(t["hits"], m["hits"]):
            if len(ht["hsps"]) != len(hm["hsps"]) and hm["aligned"]:  # a table-only hit: its first row
                out.append(f"{ht['hit_id']}: alignments {len(ht['hsps'])} vs {len(hm['hsps'])}")
            if "hit_length" in ht and ht["hit_length"] != hm.get("hit_length"):
                out.append(f"{ht['hit_id']}: hit_length {ht['hit_length']} vs {hm.get('hit_length')}")
            keys = KEYS if hm["aligned"] else ("evalue", "bits")  # a table-only hit: no coordinates
            if mode == "108CCd3" and hm["aligned"]:  # its -m 10 block: every value of it
                keys = [k for k in {**ht["hsps"][0], **hm["hsps"][0]} if k != "extra"]
            for st, sm in zip(ht["hsps"], hm["hsps"]):
                out += [f"{ht['hit_id']} {k} {st.get(k)} vs {sm.get(k)}" for k in keys
                        if (k in st or mode != "8") and st.get(k) != sm.get(k)]
    return out


def main(out_dir: Path) -> int:
    outcome: collections.Counter = collections.Counter()
    for path in sorted(out_dir.glob("*.out")):
        if not path.stat().st_size:
            outcome["FASTA printed nothing"] += 1
            continue
        try:
            name, got = read(path)
        except InputError as exc:
            outcome["no format"] += 1
            print(f"{path.name}: {exc}")
            continue
        if isinstance(got, ParseError):
            outcome[f"refused ({name})"] += 1
            print(f"{path.name}: refused: {got.reason[:160]}")
            continue
        outcome[f"read ({name})"] += 1
        mode = path.stem.rsplit(".", 1)[1]
        if mode not in ("8CBL", "8", "9c", "108CCd3"):
            continue
        command = path.with_suffix(".cmd").read_text().strip()
        option = {"108CCd3": "10,8CC"}.get(mode, mode)
        twin = command.replace(f"-m {option} ", "-m 10 " if mode != "9c" else "-m 10 -m 9c ")
        text = subprocess.run(twin, shell=True, capture_output=True, cwd=PASTA).stdout
        m10 = list(pasta.parse_dicts(io.BytesIO(text), twin, warn=lambda message: None))
        diff = differences(mode, got, m10)
        outcome["the same as -m 10" if not diff else "differs from -m 10"] += 1
        if diff:
            print(f"{path.name}: " + "; ".join(diff[:4]))
    for what, n in sorted(outcome.items()):
        print(f"{n:5d}  {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/pasta_tab_sweep")))
