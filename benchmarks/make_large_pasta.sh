#!/usr/bin/env bash
# Build large, real ssearch36 -m 10 reports (protein and DNA) for benchmarks/bench_pasta.py.
#
#   bash benchmarks/make_large_pasta.sh [OUT_DIR] [MIN_MB]
#
# OUT_DIR defaults to ${TMPDIR:-/tmp}/sci-ingest-bench (kept out of the repository).
# Writes OUT_DIR/large_ssearch36_dna.m10 when missing (about 70 s): 900 RNA-fragment-like
# DNA queries against 60 genes with gi|NNN|ref|NM_...| ids, 40 alignments each (36,000),
# 43 MB (benchmarks/bench_sequences.py dna; -z 3: no shuffles, so no clock-seeded randomness).
# Writes OUT_DIR/large_ssearch36.m10 (one ssearch36 run, >= 20 MB) and, when MIN_MB
# is larger than that file, OUT_DIR/large_ssearch36_<MIN_MB>mb.m10 made by
# concatenating copies of the run (each copy is a complete run ending in ">>>///",
# which the parser accepts; e.g. MIN_MB=200 for the >= 200 MB test).
#
# The library is deterministic (benchmarks/bench_sequences.py library): every protein of
# samples/pasta/inputs/ (titin cut into 300-residue pieces) plus mutated copies of them
# (Python random.Random(20240611): substitutions, insertions, deletions), 1100 sequences
# in all, so ssearch36 computes its statistics from the library scores without shuffling
# (no clock-seeded randomness). The queries are the 26 real example proteins;
# -E "1e6 0.01" -b 1100 -d 1100 shows an alignment for every library sequence.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT_DIR="${1:-${TMPDIR:-/tmp}/sci-ingest-bench}"
MIN_MB="${2:-0}"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
[[ -x "$PY" ]] || PY=python3
command -v ssearch36 >/dev/null || { echo "ssearch36 not found (apt-get install fasta3)" >&2; exit 1; }
mkdir -p "$OUT_DIR"

"$PY" "$ROOT/benchmarks/bench_sequences.py" library "$ROOT/samples/pasta/inputs" "$OUT_DIR"

cd "$OUT_DIR"
if [[ ! -s large_ssearch36_dna.m10 ]]; then
    "$PY" "$ROOT/benchmarks/bench_sequences.py" dna "$ROOT/samples/pasta/inputs" "$OUT_DIR"
    ssearch36 -m 10 -T 2 -z 3 -E "1e6 0.01" -b 40 -d 40 bench_dna_queries.fna bench_dna_lib.fna \
        > large_ssearch36_dna.m10.part
    mv large_ssearch36_dna.m10.part large_ssearch36_dna.m10
    echo "$OUT_DIR/large_ssearch36_dna.m10: $(( $(stat -c %s large_ssearch36_dna.m10) / 1048576 )) MB"
fi
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
