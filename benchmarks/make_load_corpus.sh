#!/usr/bin/env bash
# Build the corpus of benchmarks/bench_load.py: real ssearch36 -m 10 files plus
# Materials-Project-style JSON Lines records, deterministically.
#
#   bash benchmarks/make_load_corpus.sh [OUT_DIR] [SCALE]
#
# SCALE (a whole number, default 1) multiplies the number of files: 200 x SCALE -m 10 files
# and 20 x SCALE materials/tasks files (SCALE=10: 2000 + 200 files, 10x the documents).
# OUT_DIR defaults to ${TMPDIR:-/tmp}/sci-ingest-bench/load-corpus (SCALE 1) or
# .../load-corpus-x<SCALE>.  JOBS (default: the number of cores) ssearch36 runs at a time.
# Needs the project installed (make install) and ssearch36 (Debian package fasta3).
#
# Layout and commands (run in OUT_DIR, relative paths, so the recorded command lines do
# not depend on OUT_DIR):
#   .inputs/bench_lib.fa, .inputs/load_NNNNN.fa   python benchmarks/bench_sequences.py load-queries
#       samples/pasta/inputs OUT_DIR/.inputs 200xSCALE: the 1100-sequence library of
#       make_large_pasta.sh (real example proteins + seeded mutated copies) and one query file
#       per -m 10 file: 2 + i % 5 queries (4 on average), each a seeded mutated variant
#       (2-30 % changes) of a real example protein, seed 2024061100000 + i: every file has its
#       own queries, and file i is the same at every SCALE.
#   pasta/load_NNNNN.m10, for each i (JOBS at a time):
#       ssearch36 -m 10 -T 1 -E "1e6 0.01" -b 250 -d 200 .inputs/load_NNNNN.fa .inputs/bench_lib.fa
#     250 hits per query (each one a `hits` document; the best 200 with their alignment, the
#     other 50 from the best-scores table only), so a file has 251 documents per query, and the
#     statistics come from the library's 1100 scores (no shuffles, no clock-seeded randomness).
#     The only run-dependent lines FASTA prints are its clock readings (" Scan time:" per
#     query, the trailer's " start: ... done: ..." and " Total Scan time: ... Total Display
#     time: ..."); they are set to a fixed value (sed below) so that the files, hence their
#     sha256 and the documents' _ids, are the same on every build.  The parser ignores them.
#   materials/{materials,tasks}_cKK_pPP.jsonl.gz   python benchmarks/load_corpus.py materials
#       OUT_DIR SCALE: samples/materials/*.jsonl.gz split into 10 files each, SCALE copies with
#       the ids of copy k shifted by k x 10,000,000 (distinct natural keys everywhere).
#   .corpus.json   python benchmarks/load_corpus.py summary OUT_DIR ...: files, bytes, documents
#       (1 + hits per query by the project's parser; one per record) and the generation time;
#       hidden, so that `sci-ingest load OUT_DIR` (which reads .json files) leaves it out.
# SCALE=1 gives 200 + 20 files and 209,840 documents (200,800 searches + hits, 9,040 records).
# A finished corpus (.corpus.json for the same SCALE) is reused; files already written by an
# interrupted build are kept (each is written to .part first, then renamed).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SCALE="${2:-1}"
[[ "$SCALE" =~ ^[1-9][0-9]*$ ]] || { echo "SCALE must be a whole number >= 1, not '$SCALE'" >&2; exit 2; }
if (( SCALE == 1 )); then default="load-corpus"; else default="load-corpus-x$SCALE"; fi
OUT_DIR="${1:-${TMPDIR:-/tmp}/sci-ingest-bench/$default}"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
[[ -x "$PY" ]] || { echo "$PY not found: run make install first" >&2; exit 1; }
command -v ssearch36 >/dev/null || { echo "ssearch36 not found (apt-get install fasta3)" >&2; exit 1; }
JOBS="${JOBS:-$(nproc)}"
N=$((200 * SCALE))
mkdir -p "$OUT_DIR"
OUT_DIR="$(cd "$OUT_DIR" && pwd)"

if [[ -s "$OUT_DIR/.corpus.json" ]] \
        && "$PY" -c 'import json, sys; sys.exit(json.load(open(sys.argv[1]))["scale"] != int(sys.argv[2]))' \
           "$OUT_DIR/.corpus.json" "$SCALE"; then
    echo "$OUT_DIR: already built; $(cat "$OUT_DIR/.corpus.json")"
    exit 0
fi
started=$(date +%s.%N)  # generation time: from here to the end of the materials part
rm -f "$OUT_DIR/.corpus.json"
mkdir -p "$OUT_DIR/pasta"
"$PY" "$ROOT/benchmarks/bench_sequences.py" load-queries "$ROOT/samples/pasta/inputs" "$OUT_DIR/.inputs" "$N"

cd "$OUT_DIR"
search() {  # search INDEX: one -m 10 file
    set -euo pipefail
    local name
    name=$(printf 'load_%05d' "$1")
    [[ -s "pasta/$name.m10" ]] && return 0
    ssearch36 -m 10 -T 1 -E "1e6 0.01" -b 250 -d 200 ".inputs/$name.fa" .inputs/bench_lib.fa \
        | sed -E -e 's/^ Scan time: +[0-9.]+$/ Scan time:  0.000/' \
                 -e 's/^ start: .* done: .*$/ start: Thu Jan  1 00:00:00 1970 done: Thu Jan  1 00:00:00 1970/' \
                 -e 's/^ Total Scan time: +[0-9.]+ Total Display time: +[0-9.]+$/ Total Scan time:  0.000 Total Display time:  0.000/' \
        > "pasta/$name.m10.part"
    mv "pasta/$name.m10.part" "pasta/$name.m10"
}
export -f search
seq 0 $((N - 1)) | xargs -P "$JOBS" -I{} bash -c 'search {}'
"$PY" "$ROOT/benchmarks/load_corpus.py" materials "$OUT_DIR" "$SCALE"
"$PY" "$ROOT/benchmarks/load_corpus.py" summary "$OUT_DIR" "$SCALE" "$started" "$JOBS"
