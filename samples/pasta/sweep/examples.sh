#!/usr/bin/env bash
# The examples sweep (issue 43): every example query of Debian's fasta3 package (examples/seq,
# .gz unzipped) x every FASTA program that accepts it x with and without -H, each against a
# library large enough for FASTA to draw a histogram (example_libs.py: 400 sequences built from
# the examples); always -q -m 10 -T 1; then the peptide-mixture examples against FASTA's own
# mixture libraries (n2_fs.lib, n_fs.lib). Each output is parsed (+ --no-sequences) and checked
# by check.py (lib.sh's run); summary.py prints the result.
#
#   bash samples/pasta/sweep/sweep.sh examples [OUT_DIR]     (or: bash .../examples.sh [OUT_DIR])
#
# OUT_DIR defaults to ${TMPDIR:-/tmp}/sci-ingest-sweep-examples (never the repository);
# JOBS=2 runs two at a time (default); FASTA_TIMEOUT=300 stops a FASTA run after 300 s (exit 124); FASTA_EXAMPLES=DIR to read the examples elsewhere;
# SWEEP_ONLY=REGEX runs only the runs whose name (PROG__FILE[__H]) matches; SWEEP_REUSE=1 parses
# and checks the outputs of an earlier run in OUT_DIR again (a new parser) without running FASTA.
HERE="$(cd "$(dirname "$0")" && pwd)"
export SWEEP="$(mkdir -p "${1:-${TMPDIR:-/tmp}/sci-ingest-sweep-examples}" && cd "${1:-${TMPDIR:-/tmp}/sci-ingest-sweep-examples}" && pwd)"
[ -n "$SWEEP" ] || { echo "examples.sh: cannot make or enter OUT_DIR ${1:-}" >&2; exit 64; }
EX="${FASTA_EXAMPLES:-/usr/share/doc/fasta3/examples/seq}"
. "$HERE/lib.sh"
cd "$SWEEP" && mkdir -p out inputs || exit 1
if [ -z "${SWEEP_REUSE:-}" ] || [ ! -f inputs/queries.tsv ]; then
    "$PY" "$HERE/example_libs.py" "$EX" inputs || exit 1
fi

# program -> the library it searches for a protein (P) or DNA (N) query; fastf36 reads any
# query as protein, tfast* take a protein query only
PROT_PROGS="ssearch36:P fasta36:P ggsearch36:P glsearch36:P lalign36:P fasts36:P fastm36:P fastf36:P
            tfastx36:N tfasty36:N tfasts36:N tfastm36:N tfastf36:N"
DNA_PROGS="ssearch36:N fasta36:N ggsearch36:N glsearch36:N lalign36:N fasts36:N fastm36:N fastx36:P fasty36:P"
declare -A LIB=([P]=inputs/ex_prot_lib.fa [N]=inputs/ex_dna_lib.fna)

: > commands.tsv
while IFS=$'\t' read -r f kind _ longest; do
    case $kind in prot) progs=$PROT_PROGS;; dna) progs=$DNA_PROGS;; *) continue;; esac
    for pl in $progs; do
        prog=${pl%:*}
        # the peptide programs on a query of more than 10,000 residues that is not a mixture
        # (titin_hum.aa, titin_hum.seq, mgstm1_genclone.seq) run for longer than 4 minutes
        # (stopped), or crash: left out
        case $prog in *fast[smf]36) [ "${longest:-0}" -gt 10000 ] && continue;; esac
        for H in "" "-H"; do
            printf '%s\t%s\n' "${prog%36}__$f${H:+__H}" \
                "$prog -q -m 10 -T 1 $H inputs/q/$f ${LIB[${pl#*:}]}" >> commands.tsv
        done
    done
done < inputs/queries.tsv
# the peptide mixtures (a ',' in the sequence) against FASTA's mixture libraries
for f in $(awk -F'\t' '$2 == "prot" && $3 == "mixture" {print "inputs/q/" $1}' inputs/queries.tsv); do
    for lib in n2_fs.lib n_fs.lib; do
        for prog in fasts36 fastm36 fastf36; do
            printf '%s\t%s\n' "${prog%36}__${f##*/}__$lib" "$prog -q -m 10 -T 1 $f inputs/q/$lib" >> commands.tsv
        done
    done
done

if [ -n "${SWEEP_ONLY:-}" ]; then
    awk -F'\t' -v re="$SWEEP_ONLY" '$1 ~ re' commands.tsv > commands.only; mv commands.only commands.tsv
fi
export HERE FASTA_TIMEOUT="${FASTA_TIMEOUT:-300}"
tr '\n' '\0' < commands.tsv | xargs -0 -P "${JOBS:-2}" -n 1 bash -c \
    '. "$HERE/lib.sh"; run "${1%%$'"'"'\t'"'"'*}" "${1#*$'"'"'\t'"'"'}" > /dev/null' _
# results.jsonl in the commands' order (the runs finish in any order)
cut -f1 commands.tsv | while read -r name; do cat "out/$name.result.json"; done > results.jsonl
echo "skipped (FASTA reads a query only as FASTA): $(awk -F'\t' '$2 == "skip" {printf "%s ", $1}' inputs/queries.tsv)"
echo "not run with the peptide programs (over 10,000 residues): $(awk -F'\t' '$4 > 10000 {printf "%s ", $1}' inputs/queries.tsv)"
"$PY" "$HERE/summary.py" "$SWEEP/results.jsonl"
