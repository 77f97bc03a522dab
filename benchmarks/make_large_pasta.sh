#!/usr/bin/env bash
# Build a large, real ssearch36 -m 10 protein report for benchmarks/bench_pasta.py.
#
#   bash benchmarks/make_large_pasta.sh [OUT_DIR] [MIN_MB]
#
# OUT_DIR defaults to ${TMPDIR:-/tmp}/sci-ingest-bench (kept out of the repository).
# Writes OUT_DIR/large_ssearch36.m10 (one ssearch36 run, >= 20 MB) and, when MIN_MB
# is larger than that file, OUT_DIR/large_ssearch36_<MIN_MB>mb.m10 made by
# concatenating copies of the run (each copy is a complete run ending in ">>>///",
# which the parser accepts; e.g. MIN_MB=200 for the >= 200 MB test).
#
# The library is deterministic: every protein of samples/pasta/inputs/ (titin cut into
# 300-residue pieces) plus mutated copies of them (Python random.Random(20240611):
# substitutions, insertions, deletions), 1100 sequences in all, so ssearch36 computes
# its statistics from the library scores without shuffling (no clock-seeded randomness).
# The queries are the 24 real example proteins; -E "1e6 0.01" -b 1100 -d 1100 shows an
# alignment for every library sequence.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT_DIR="${1:-${TMPDIR:-/tmp}/sci-ingest-bench}"
MIN_MB="${2:-0}"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
[[ -x "$PY" ]] || PY=python3
command -v ssearch36 >/dev/null || { echo "ssearch36 not found (apt-get install fasta3)" >&2; exit 1; }
mkdir -p "$OUT_DIR"

"$PY" - "$ROOT/samples/pasta/inputs" "$OUT_DIR" <<'EOF'
import pathlib, random, sys

inputs, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
files = sorted(inputs.glob("*.aa")) + [inputs / "prot_test.lib", inputs / "mu.lib"]
seqs = []  # (header, sequence)
for f in files:
    header, parts = None, []
    for line in f.read_text().splitlines() + [">"]:
        if line.startswith(">"):
            if header is not None and parts:
                seqs.append((header, "".join(parts).upper()))
            header, parts = line[1:].strip(), []
        else:
            parts.append("".join(c for c in line if c.isalpha()))
queries, lib = [], []
for header, seq in seqs:
    if len(seq) > 2000:  # titin: library pieces only
        for i in range(0, 3000, 300):
            lib.append((f"{header.split()[0]}_{i + 1}-{i + 300} fragment of {header}", seq[i : i + 300]))
    else:
        queries.append((header, seq))
        lib.append((header, seq))
rng = random.Random(20240611)
AA = "ACDEFGHIKLMNPQRSTVWY"
n = 0
while len(lib) < 1100:
    header, seq = queries[n % len(queries)]
    n += 1
    rate = rng.choice((0.05, 0.15, 0.3, 0.45, 0.6))
    out_seq = []
    for c in seq:
        r = rng.random()
        if r < rate * 0.8:
            out_seq.append(rng.choice(AA))
        elif r < rate * 0.9:
            continue  # deletion
        elif r < rate:
            out_seq.append(c)
            out_seq.append(rng.choice(AA))  # insertion
        else:
            out_seq.append(c)
    ident = header.split()[0]
    lib.append((f"MUT{n:04d}|{ident} mutated copy ({int(rate * 100)}% changes) of {ident}", "".join(out_seq)))

def write(path, records):
    with open(path, "w") as fh:
        for header, seq in records:
            fh.write(f">{header}\n")
            for i in range(0, len(seq), 60):
                fh.write(seq[i : i + 60] + "\n")

write(out / "bench_queries.fa", queries)
write(out / "bench_lib.fa", lib)
print(f"{len(queries)} queries, {len(lib)} library sequences", file=sys.stderr)
EOF

cd "$OUT_DIR"
ssearch36 -m 10 -T 2 -E "1e6 0.01" -b 1100 -d 1100 bench_queries.fa bench_lib.fa > large_ssearch36.m10
size=$(stat -c %s large_ssearch36.m10)
echo "$OUT_DIR/large_ssearch36.m10: $((size / 1048576)) MB"
if (( MIN_MB * 1048576 > size )); then
    big="large_ssearch36_${MIN_MB}mb.m10"
    : > "$big"
    while (( $(stat -c %s "$big") < MIN_MB * 1048576 )); do
        cat large_ssearch36.m10 >> "$big"
    done
    echo "$OUT_DIR/$big: $(( $(stat -c %s "$big") / 1048576 )) MB"
fi
