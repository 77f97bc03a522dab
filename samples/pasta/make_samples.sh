#!/usr/bin/env bash
# Regenerate every FASTA-suite -m 10 sample in samples/pasta/ from the sequences
# in samples/pasta/inputs/ (real FASTA-suite 36.3.8i output; Debian package fasta3).
#
#   bash samples/pasta/make_samples.sh                  # rebuild the *.m10 samples
#   bash samples/pasta/make_samples.sh --refresh-inputs # first re-copy inputs from
#                                                       # /usr/share/doc/fasta3/examples/seq
#
# Determinism: FASTA 36 has no random-seed option (it seeds its shuffles from the
# clock: gettimeofday in mrandom.c), so every search here avoids shuffling:
# small libraries use `-z 3` (Altschul-Gish parameters, no shuffles) or `-z -1`
# (no statistics).  `-T 1` makes the trailer independent of the number of cores.
# The only lines that differ between two runs are the trailer's
# " start: ... done: ..." timestamps and the "Scan time"/"Display time" figures,
# which the parser ignores.  Commands run from this directory with relative paths,
# so the recorded command lines (first line, pg_argv) do not depend on the checkout.
set -euo pipefail
cd "$(dirname "$0")"

EXAMPLES=/usr/share/doc/fasta3/examples/seq

if [[ "${1:-}" == "--refresh-inputs" ]]; then
    mkdir -p inputs
    for f in gtt1_drome.aa mchu.aa h10_human.aa mgstm1.aa gtm1_human.aa prot_test.lib mu.lib \
             mgstm1.nt mgstm1.rev gst.nlib gstm1b_human_fs.nt humgstd.seq gstm1b_human.nt \
             hsgstm1b.seq bovprl.seq mwkw.aa titin_hum.aa ngts.aa m1r.aa; do
        cp "$EXAMPLES/$f" "inputs/$f"
    done
fi

for t in ssearch36 fasta36 ggsearch36 glsearch36 lalign36 fastx36 fasty36 tfastx36 tfasty36 \
         fasts36 fastm36 fastf36 tfasts36 tfastm36 tfastf36; do
    command -v "$t" >/dev/null || { echo "missing $t (apt-get install fasta3)" >&2; exit 1; }
done

# ---- derived inputs (deterministic text transformations of the copied files)

# DNA library whose ids look like NCBI RefSeq "gi|NNNN|ref|NM_XXXX.N|": the example
# DNA sequences, relabelled with synthetic gi/NM numbers (the original header text is
# kept as the description); spaces and digits are removed from sequence lines.
relabel() {  # relabel FIRST_GI FIRST_NM files...
    local gi=$1 nm=$2
    shift 2
    awk -v gi="$gi" -v nm="$nm" '
        /^>/ { sub(/^>/, ""); printf(">gi|%d|ref|NM_%06d.1| %s\n", gi++, nm++, $0); next }
        { gsub(/[ 0-9\t\r]/, ""); if (length($0)) print }
    ' "$@"
}
relabel 900001 900001 inputs/gst.nlib inputs/humgstd.seq inputs/gstm1b_human.nt \
    inputs/hsgstm1b.seq inputs/bovprl.seq > inputs/dna_ref_lib.fna
relabel 910001 910001 inputs/mgstm1.nt inputs/gstm1b_human_fs.nt > inputs/dna_ref_queries.fna

# a protein library of both example libraries, and a multi-query file
cat inputs/prot_test.lib inputs/mu.lib > inputs/prot_lib.fa
cat inputs/gtt1_drome.aa inputs/mchu.aa inputs/h10_human.aa inputs/mgstm1.aa > inputs/prot_queries.fa
# two DNA queries, one given reverse-complemented (mgstm1.rev)
cat inputs/mgstm1.nt inputs/mgstm1.rev > inputs/dna_queries.fna
# two RNA fragments (U for T) of mgstm1.nt: residues 1-240 and 301-420
# FASTA headers with a space after ">": FASTA gives such sequences no name
sed '1s/^>/> /' inputs/gtt1_drome.aa > inputs/nameless_query.aa
sed -E 's/^>(CCHU|K3HU|GT8\.7) />  \1 /' inputs/prot_test.lib > inputs/prot_test_nameless.lib
# -V annotations: "*" and "@" after residues 60 and 120 of GTT1_DROME
seq=$(sed 1d inputs/gtt1_drome.aa | tr -d '\n ')
printf ">GTT1_ann annotated\n%s*%s@%s\n" "${seq:0:60}" "${seq:60:60}" "${seq:120}" > inputs/annot.aa
# a "chromosome": 6000 random nt (seeded) with pGT875 (mgstm1.nt) inserted after nt 2500
python3 - <<'PY'
import random
r = random.Random(7)
seq = "".join(open("inputs/mgstm1.nt").read().split("\n", 1)[1].split())
s = "".join(r.choice("ACGT") for _ in range(6000))
s = s[:2500] + seq + s[2500:]
with open("inputs/chr_small.fa", "w") as f:
    f.write(">chrT synthetic chromosome: 6000 random nt with pGT875 (mgstm1.nt) at 2501\n")
    f.write("\n".join(s[i:i + 60] for i in range(0, len(s), 60)) + "\n")
PY
# a "genomic clone" longer than FASTA's longest query (MAXTST 40000): 85000 random nt (seeded) with
# pGT875 (mgstm1.nt, 657 nt) across the first segment boundary (39,990 nt) at 39501 and,
# reverse-complemented, inside the third segment at 82001; then a short query after it
python3 - <<'PY'
import random
r = random.Random(11)
seq = "".join(open("inputs/mgstm1.nt").read().split("\n", 1)[1].split()).upper()
rc = "".join({"A": "T", "C": "G", "G": "C", "T": "A"}.get(c, "N") for c in reversed(seq))
s = "".join(r.choice("ACGT") for _ in range(85000))
s = s[:39500] + seq + s[39500:]
s = s[:82000] + rc + s[82000:]
with open("inputs/clone_long.fna", "w") as f:
    f.write(">clone_long synthetic clone: 85000 random nt with pGT875 (mgstm1.nt) at 39501"
            " and reverse-complemented at 82001\n")
    f.write("\n".join(s[i:i + 60] for i in range(0, len(s), 60)) + "\n")
PY
cat inputs/clone_long.fna inputs/mgstm1.nt > inputs/clone_long_and_short.fna
# where a query sits in its sequence (issue 26): the clone numbered from 1,000,001 by an "@C:" in its
# header; the clone under a 495-character NCBI-style title ending in a space (FASTA keeps 511 bytes
# of a title: the " - N nt" of later segments is cut); a short query under a 600-character title
# (no " - N nt" at all); two pieces of the clone as a library (20001-21000, inside the first read,
# and 50001-50500, in the second); the titin protein twice (68,700 aa: two segments)
python3 - <<'PY'
lines = open("inputs/clone_long.fna").read().split("\n", 1)
seq = "".join(lines[1].split())
body = "\n".join(seq[i:i + 60] for i in range(0, len(seq), 60)) + "\n"
words = "gi|900100|ref|NC_900100.1| Synthetic clone for title-length tests, " + "long description " * 30
with open("inputs/clone_long_at_c.fna", "w") as f:
    f.write(">clone_at_c synthetic clone numbered from 1000001 @C:1000001\n" + body)
with open("inputs/clone_long_title.fna", "w") as f:
    f.write(">" + words[:494] + " \n" + body)
short = "".join(open("inputs/mgstm1.nt").read().split("\n", 1)[1].split())
with open("inputs/long_title_query.fna", "w") as f:
    f.write(">" + words[:600] + "\n" + "\n".join(short[i:i + 60] for i in range(0, len(short), 60)) + "\n")
with open("inputs/clone_pieces.fna", "w") as f:
    for name, a, b in (("clone_20001_21000", 20001, 21000), ("clone_50001_50500", 50001, 50500)):
        piece = seq[a - 1:b]
        f.write(f">{name} residues {a}-{b} of clone_long\n" + "\n".join(piece[i:i + 60] for i in range(0, len(piece), 60)) + "\n")
titin = "".join(open("inputs/titin_hum.aa").read().split("\n", 1)[1].split())
with open("inputs/titin_twice.aa", "w") as f:
    f.write(">TITIN_TWICE titin (TITIN_HUM) twice, 68700 aa\n" + "\n".join((titin * 2)[i:i + 60] for i in range(0, 2 * len(titin), 60)) + "\n")
PY
# blocks past a long query's subrange (issue 43): pieces of the clone from each of FASTA's reads
# (3001-3300, 20201-20400; 45001-45300, 60001-60250 reverse-complemented; 84001-84300), the
# standard-code translations of three of its stretches (45001-45600, 70001-70600 on the reverse
# strand, 83001-83450; "*" for stops), and pieces of the 68,700 aa titin_twice (1001-1200,
# 41001-41200, 60001-60300)
python3 - <<'PY'
import itertools
def body(path):
    return "".join(open(path).read().split("\n", 1)[1].split())
def fasta(f, name, text, s):
    f.write(f">{name} {text}\n" + "\n".join(s[i:i + 60] for i in range(0, len(s), 60)) + "\n")
seq = body("inputs/clone_long.fna")
rc = lambda s: s[::-1].translate(str.maketrans("ACGT", "TGCA"))
aas = "FFLLSSSSYY**CC*WLLLLPPPPHHQQRRRRIIIMTTTTNNKKSSRRVVVVAAAADDEEGGGG"
code = {"".join(c): aas[i] for i, c in enumerate(itertools.product("TCAG", repeat=3))}
tr = lambda s: "".join(code[s[i:i + 3]] for i in range(0, len(s) - 2, 3))
with open("inputs/clone_pieces_far.fna", "w") as f:
    for a, b, minus in ((3001, 3300, 0), (20201, 20400, 0), (45001, 45300, 0), (60001, 60250, 1), (84001, 84300, 0)):
        piece = seq[a - 1:b]
        fasta(f, f"clone_{a}_{b}" + "r" * minus, f"residues {a}-{b} of clone_long" + " reverse-complemented" * minus,
              rc(piece) if minus else piece)
with open("inputs/clone_translated.fa", "w") as f:
    for a, b, minus in ((45001, 45600, 0), (70001, 70600, 1), (83001, 83450, 0)):
        piece = seq[a - 1:b]
        fasta(f, f"tr_{a}_{b}" + "r" * minus, f"translation of residues {a}-{b} of clone_long" + " reverse strand" * minus,
              tr(rc(piece) if minus else piece))
titin = body("inputs/titin_twice.aa")
with open("inputs/titin_pieces.fa", "w") as f:
    for a, b in ((1001, 1200), (41001, 41200), (60001, 60300)):
        fasta(f, f"titin_{a}_{b}", f"residues {a}-{b} of TITIN_TWICE", titin[a - 1:b])
PY
rna_fragment() {  # rna_fragment HEADER FIRST LAST
    echo ">$1"
    sed -n '2,$p' inputs/mgstm1.nt | tr -d ' 0-9\n' | cut -c"$2-$3" | tr 'Tt' 'Uu' | fold -w 60
}
{
    rna_fragment "rna_frag1 GSTM1 fragment as RNA (U for T)" 1 240
    rna_fragment "rna_frag2 second fragment" 301 420
} > inputs/rna_frags.fna

run() {  # run OUTPUT COMMAND...
    local out=$1
    shift
    "$@" > "$out"
    echo "$out: $*"
}

# ---- ssearch36 (Smith-Waterman)
run ssearch36_prot.m10            ssearch36 -m 10 -T 1 -z 3 inputs/gtt1_drome.aa inputs/prot_test.lib
run ssearch36_prot_multi.m10      ssearch36 -m 10 -T 1 -z 3 -E 0.5 inputs/prot_queries.fa inputs/prot_lib.fa
run ssearch36_prot_alt.m10        ssearch36 -m 10 -T 1 -z 3 -E "10 1" inputs/mchu.aa inputs/prot_test.lib
run ssearch36_titin_alt.m10       ssearch36 -m 10 -T 1 -z 3 -E "10 1" inputs/titin_hum.aa inputs/mwkw.aa
run ssearch36_table_only.m10      ssearch36 -m 10 -T 1 -z 3 -b 12 -d 4 inputs/prot_queries.fa inputs/prot_lib.fa
run ssearch36_no_alignments.m10   ssearch36 -m 10 -T 1 -z 3 -d 0 inputs/gtt1_drome.aa inputs/prot_test.lib
run ssearch36_nostats.m10         ssearch36 -m 10 -T 1 -z -1 inputs/gtt1_drome.aa inputs/prot_lib.fa
run ssearch36_dna_ref.m10         ssearch36 -m 10 -T 1 -z 3 inputs/dna_ref_queries.fna inputs/dna_ref_lib.fna
run ssearch36_dna_fwd.m10         ssearch36 -m 10 -T 1 -z 3 -3 inputs/dna_queries.fna inputs/dna_ref_lib.fna
run ssearch36_dna_revcomp.m10     ssearch36 -m 10 -T 1 -z 3 -i inputs/dna_queries.fna inputs/dna_ref_lib.fna

# ---- fasta36 (protein and DNA; DNA prints bs_ident/bs_sim/bs_overlap)
run fasta36_prot.m10              fasta36 -m 10 -T 1 -z 3 inputs/prot_queries.fa inputs/prot_lib.fa
run fasta36_dna.m10               fasta36 -m 10 -T 1 -z 3 inputs/dna_queries.fna inputs/gst.nlib
run fasta36_dna_ref.m10           fasta36 -m 10 -T 1 -z 3 inputs/dna_ref_queries.fna inputs/dna_ref_lib.fna

# ---- global / glocal / non-overlapping local
run ggsearch36.m10                ggsearch36 -m 10 -T 1 -z 3 inputs/mgstm1.aa inputs/mu.lib
run glsearch36.m10                glsearch36 -m 10 -T 1 -z 3 inputs/gtt1_drome.aa inputs/mu.lib
run lalign36.m10                  lalign36 -m 10 -z 3 inputs/gtm1_human.aa inputs/mgstm1.aa

# ---- translated searches (DNA query vs protein library, protein query vs DNA library)
run fastx36.m10                   fastx36 -m 10 -T 1 -z 3 inputs/dna_queries.fna inputs/prot_lib.fa
run fasty36.m10                   fasty36 -m 10 -T 1 -z 3 inputs/gstm1b_human_fs.nt inputs/prot_lib.fa
run tfastx36.m10                  tfastx36 -m 10 -T 1 -z 3 inputs/mgstm1.aa inputs/dna_ref_lib.fna
run tfasty36.m10                  tfasty36 -m 10 -T 1 -z 3 inputs/gtm1_human.aa inputs/gst.nlib

# ---- more options: -m 9c/9C/9B alongside -m 10, -a/-w, -M, RNA queries (-n, -U)
run ssearch36_m9c.m10             ssearch36 -m 10 -m 9c -T 1 -z 3 -b 8 -d 4 inputs/gtt1_drome.aa inputs/prot_test.lib
run ssearch36_m9C_alt.m10         ssearch36 -m 10 -m 9C -T 1 -z 3 -E "10 1" -b 8 -d 2 inputs/mchu.aa inputs/prot_test.lib
run ssearch36_dna_m9B.m10         ssearch36 -m 10 -m 9B -T 1 -z 3 -b 8 -d 2 inputs/mgstm1.nt inputs/gst.nlib
run ssearch36_full_seq.m10        ssearch36 -m 10 -T 1 -z 3 -a -w 80 -E 1 inputs/gtt1_drome.aa inputs/prot_test.lib
run ssearch36_range.m10           ssearch36 -m 10 -T 1 -z 3 -M 200-250 inputs/gtt1_drome.aa inputs/prot_lib.fa
run ssearch36_rna.m10             ssearch36 -m 10 -T 1 -z 3 -n inputs/rna_frags.fna inputs/gst.nlib
run fasta36_rna_U.m10             fasta36 -m 10 -T 1 -z 3 -U inputs/rna_frags.fna inputs/gst.nlib
run ssearch36_nameless.m10        ssearch36 -m 10 -T 1 -z 3 inputs/nameless_query.aa inputs/prot_test_nameless.lib
run ssearch36_annot_m9c.m10       ssearch36 -m 10 -m 9c -T 1 -z 3 -V "*@" -b 10 -d 6 inputs/annot.aa inputs/prot_test.lib
run ssearch36_dna_pieces.m10      ssearch36 -m 10 -T 1 -z 3 -N 2000 inputs/mgstm1.nt inputs/chr_small.fa
run ssearch36_m9i.m10             ssearch36 -m 10 -m 9i -T 1 -z 3 -b 6 -d 3 inputs/gtt1_drome.aa inputs/prot_test.lib
# -m 9i with -d 0 and several queries: no alignments, no summary line and no blank line, the
# last table row runs into the next query's line
run ssearch36_m9i_d0.m10          ssearch36 -m 10 -m 9i -T 1 -z 3 -d 0 inputs/prot_queries.fa inputs/prot_lib.fa
# -m 9C rows of hits shown only in the table: their sw column (not the opt column) is the score
run tfastx36_m9C_table.m10        tfastx36 -m 10 -m 9C -T 1 -z 3 -b 8 -d 2 inputs/mgstm1.aa inputs/dna_ref_lib.fna

# ---- peptide mixtures (fasts/fastm: "linked" peptides, one FASTA entry of comma-separated
# fragments; the announce line reads "- 39 aa in 6 fragments"), against proteins and, translated, DNA
run fasts36_peptides.m10          fasts36 -m 10 -T 1 -z 3 inputs/ngts.aa inputs/prot_test.lib
run fastm36_peptides.m10          fastm36 -m 10 -T 1 -z 3 inputs/ngts.aa inputs/prot_test.lib
run tfasts36_peptides.m10         tfasts36 -m 10 -T 1 -z 3 inputs/ngts.aa inputs/gst.nlib
run tfastm36_peptides.m10         tfastm36 -m 10 -T 1 -z 3 inputs/ngts.aa inputs/gst.nlib
# hits of the best-scores table only (-b 6 -d 2): a peptide-mixture table prints no opt column, so such a
# hit has no score (validation asks a score of aligned hits only)
run ../pasta_extra/fasts36_table_only.m10 fasts36 -m 10 -T 1 -z 3 -b 6 -d 2 inputs/n2s.aa inputs/n2_fs.lib
# -E 1000: rows of empty alignments (every score 0) past the E() bound, some aligned, some not: FASTA prints
# no alignment for BTGST [1] and [5], pGT875 [1] and [6], RABGLTR [4] among those it aligns
run ../pasta_extra/tfasts36_unaligned_rows.m10 tfasts36 -m 10 -T 1 -z 3 -E 1000 inputs/n2s.aa inputs/gst.nlib
# fastf36 lists a row of E() 2.7e+29 among those it aligns and prints no alignment for it; its
# library is the examples sweep's (samples/pasta/sweep/example_libs.py, the same on every run)
if [ -r /usr/share/doc/fasta3/examples/seq/mwkw.aa ]; then
    libs=$(mktemp -d)
    "${PYTHON:-python3}" sweep/example_libs.py /usr/share/doc/fasta3/examples/seq "$libs/inputs" > /dev/null
    (cd "$libs" && fastf36 -q -m 10 -T 1 inputs/q/mwkw.aa inputs/ex_prot_lib.fa) > ../pasta_extra/fastf36_unaligned_rows.m10
    echo "../pasta_extra/fastf36_unaligned_rows.m10: fastf36 -q -m 10 -T 1 inputs/q/mwkw.aa inputs/ex_prot_lib.fa"
    rm -rf "$libs"
fi
# fastf/tfastf: a mixture of 4 peptides of mgstm1 (m1r.aa; fastf36 36.3.8i crashes with SIGSEGV on
# ngts.aa).  With -z 3 on a library this small the statistics overflow: "; ff_z-score:  inf",
# bits "inf" and E() 0 are what the program prints, and what the parser reads.
run fastf36_peptides.m10          fastf36 -m 10 -T 1 -z 3 inputs/m1r.aa inputs/prot_test.lib
run tfastf36_peptides.m10         tfastf36 -m 10 -T 1 -z 3 inputs/m1r.aa inputs/gst.nlib

# a long query searched in segments of 39,990 nt (three query blocks with one id; the announce
# line gains " - N nt" at each), then an ordinary query
run fasta36_long_query.m10         fasta36 -m 10 -T 1 -z 3 inputs/clone_long.fna inputs/gst.nlib
run ssearch36_long_query.m10       ssearch36 -m 10 -T 1 -z 3 inputs/clone_long_and_short.fna inputs/mgstm1.nt

# ---- where a query sits in its sequence (issue 26; segments.py has what FASTA's source says)
# a subrange of the query ("file:start-end", "file:start-", "file:-end"): alignments numbered in the
# whole sequence; FASTA cuts the first query of the file only
run ssearch36_subrange.m10         ssearch36 -m 10 -T 1 -z 3 inputs/mgstm1.nt:101-400 inputs/gst.nlib
run ssearch36_subrange_multi.m10   ssearch36 -m 10 -T 1 -z 3 -E 0.5 inputs/prot_queries.fa:11-100 inputs/prot_lib.fa
run ggsearch36_subrange_head.m10   ggsearch36 -m 10 -T 1 -z 3 inputs/mgstm1.aa:-100 inputs/prot_lib.fa
run fasta36_subrange_open.m10      fasta36 -m 10 -T 1 -z 3 inputs/mgstm1.aa:101- inputs/prot_lib.fa
# a subrange of the library ("lib:101-500"): FASTA cuts every library sequence to it; hit coordinates
# in the whole sequence, the table's length the piece's.  Kept out of the bundled run (samples/pasta_extra):
# validation's "hit_length >= hit_end" check (not critical) flags every such hit
run ../pasta_extra/ssearch36_lib_subrange.m10 ssearch36 -m 10 -T 1 -z 3 inputs/mgstm1.nt inputs/gst.nlib:101-500
# a subrange of a long query: FASTA searches it, then goes on past it through the rest of the
# sequence from residue 39,991, numbered from the subrange's length (a defect: those blocks are
# placed, shifted by 39,990 less that length); a subrange ending past residue 39,990 is searched by
# its own block only up to there.  Issue 43: other programs, starts, ends, @C:, -o with -i, -3
run ssearch36_long_subrange.m10    ssearch36 -m 10 -T 1 -z 3 inputs/clone_long.fna:20001-21000 inputs/clone_pieces.fna
run fasta36_long_subrange_cross.m10 fasta36 -m 10 -T 1 -z 3 inputs/clone_long.fna:39001-41000 inputs/gst.nlib
run ../pasta_extra/fasta36_long_subrange_head.m10 fasta36 -m 10 -T 1 -z 3 inputs/clone_long.fna:-5000 inputs/clone_pieces_far.fna
run ../pasta_extra/fasta36_long_subrange_open.m10 fasta36 -m 10 -T 1 -z 3 inputs/clone_long.fna:30001- inputs/clone_pieces_far.fna
run ../pasta_extra/fasta36_long_subrange_at_c.m10 fasta36 -m 10 -T 1 -z 3 inputs/clone_long_at_c.fna:20001-21000 inputs/clone_pieces_far.fna
run ../pasta_extra/fasta36_long_subrange_o_i.m10 fasta36 -m 10 -T 1 -z 3 -i -o "101 1" inputs/clone_long.fna:20001-21000 inputs/clone_pieces_far.fna
run ../pasta_extra/fasta36_long_subrange_3.m10 fasta36 -m 10 -T 1 -z 3 -3 inputs/clone_long.fna:-39990 inputs/clone_pieces_far.fna
run ../pasta_extra/fasty36_long_subrange.m10 fasty36 -m 10 -T 1 -z 3 inputs/clone_long.fna:2001-3000 inputs/clone_translated.fa
run ../pasta_extra/lalign36_long_subrange.m10 lalign36 -m 10 -T 1 -z 3 inputs/clone_long.fna:20001-21000 inputs/clone_pieces_far.fna
run ../pasta_extra/ssearch36_long_subrange_protein.m10 ssearch36 -m 10 -T 1 -z 3 inputs/titin_twice.aa:1001-3000 inputs/titin_pieces.fa
run ../pasta_extra/glsearch36_long_subrange_nohit.m10 glsearch36 -m 10 -T 1 -z 3 inputs/titin_twice.aa:1001-3000 inputs/titin_pieces.fa
# segments numbered from an @C: header (FASTA drops it after the first segment: renumbered), from -o
run fasta36_long_at_c.m10          fasta36 -m 10 -T 1 -z 3 inputs/clone_long_at_c.fna inputs/gst.nlib
run fasta36_long_o.m10             fasta36 -m 10 -T 1 -z 3 -o "101 1" inputs/clone_long.fna inputs/gst.nlib
# long titles: the " - N nt" suffix cut at 511 bytes; a short query whose line has no length at all
run fasta36_long_title.m10         fasta36 -m 10 -T 1 -z 3 -E 1 inputs/clone_long_title.fna inputs/gst.nlib
run ssearch36_title_cut.m10        ssearch36 -m 10 -T 1 -z 3 inputs/long_title_query.fna inputs/gst.nlib
# segments under other options and programs: reverse complement (-i), forward only with -m 9c,
# translated (fastx36), a protein of 68,700 aa
run fasta36_long_revcomp.m10       fasta36 -m 10 -T 1 -z 3 -i inputs/clone_long.fna inputs/gst.nlib
run fasta36_long_3_m9c.m10         fasta36 -m 10 -m 9c -T 1 -z 3 -3 inputs/clone_long.fna inputs/gst.nlib
run fastx36_long_query.m10         fastx36 -m 10 -T 1 -z 3 inputs/clone_long.fna inputs/prot_lib.fa
run ssearch36_long_protein.m10     ssearch36 -m 10 -T 1 -z 3 -E 1e-3 inputs/titin_twice.aa inputs/prot_lib.fa

# -m "F10 FILE": -m 10 written to FILE (stdout gets the default -m 0 report)
ssearch36 -m "F10 ssearch36_F10_file.m10" -T 1 -z 3 -E 0.5 inputs/prot_queries.fa inputs/prot_lib.fa > /dev/null
echo "ssearch36_F10_file.m10: ssearch36 -m \"F10 ssearch36_F10_file.m10\" -T 1 -z 3 -E 0.5 inputs/prot_queries.fa inputs/prot_lib.fa"

# ---- a gzip-compressed sample (gzip -n: no name/time stamp, so the bytes are stable)
ssearch36 -m 10 -T 1 -z 3 -E 1 inputs/prot_queries.fa inputs/mu.lib | gzip -n -9 > ssearch36_mu.m10.gz
echo "ssearch36_mu.m10.gz: ssearch36 -m 10 -T 1 -z 3 -E 1 inputs/prot_queries.fa inputs/mu.lib | gzip -n -9"

# ---- several runs concatenated into one file
{
    ssearch36 -m 10 -T 1 -z 3 inputs/mchu.aa inputs/prot_test.lib
    fasta36 -m 10 -T 1 -z 3 inputs/mgstm1.nt inputs/gst.nlib
    glsearch36 -m 10 -T 1 -z 3 inputs/gtt1_drome.aa inputs/mu.lib
} > concatenated_runs.m10
echo "concatenated_runs.m10: ssearch36 ... ; fasta36 ... ; glsearch36 ... (see README)"

# ---- issue 43: -H histograms, FASTA's gi-stripped names, titles cut inside " - N aa"
# FASTA draws the -H histogram only when more than 20 library scores sample its statistics: the
# titin protein and the clone, cut into pieces by -N, give it a few hundred.  FASTA's own n2*.aa
# examples are titled "gi|345664 gi|345664|pir||A45388 ...": stripping "gi|N|" for the alignments,
# FASTA reads up to the "|" past the space ("345664|pir||"), for the query and for the library
# (n2_fs.lib); fastf36 and tfastf36 crash on them (exit 139) and are left out.
if [[ "${1:-}" == "--refresh-inputs" ]]; then
    for f in n2.aa n2s.aa n2t.aa n2_fs.lib; do cp "$EXAMPLES/$f" "inputs/$f"; done
fi
cat inputs/n2.aa inputs/h10_human.aa inputs/gtt1_drome.aa > inputs/n2_then_others.aa
# one-word titles of 700, 509 and 505 letters, and titles of words whose end FASTA's cut at 511 bytes
# leaves inside the " - 133 aa" it appends (after "... words", and after "... words - 1", which is
# the title's own), all on the same 133-residue sequence
python3 - <<'PY'
seq = "".join(open("inputs/mgstm1.aa").read().split("\n", 1)[1].split())[:133]
words = "cut title words " * 40
titles = ["A" * 700, "B" * 509, "C" * 505, ("D_ID " + words)[:507].rstrip() + "x",
          ("E_ID " + words)[:503].rstrip() + "x - 1"]
with open("inputs/cut_suffix_titles.aa", "w") as f:
    for t in titles:
        f.write(f">{t}\n" + "\n".join(seq[i:i + 60] for i in range(0, len(seq), 60)) + "\n")
PY
run ../pasta_extra/histogram_ssearch36_prot.m10 ssearch36 -m 10 -H -T 1 -z 3 -N 300 -b 3 -d 1 inputs/prot_queries.fa inputs/titin_hum.aa
run ../pasta_extra/histogram_fasta36_prot.m10 fasta36 -m 10 -H -T 1 -z 3 -N 200 -b 3 -d 1 inputs/prot_queries.fa inputs/titin_hum.aa
run ../pasta_extra/histogram_ssearch36_dna.m10 ssearch36 -m 10 -H -T 1 -z 3 -N 500 -b 3 -d 1 inputs/dna_queries.fna inputs/clone_long.fna
run ../pasta_extra/histogram_fasta36_dna.m10 fasta36 -m 10 -H -T 1 -z 3 -N 300 -b 3 -d 1 inputs/dna_queries.fna inputs/clone_long.fna
# 2,155 pieces of 200 nt: bins of over 120 sequences, so FASTA adds an inset (rows with a second bar
# after a ":" from the row "inset = represents N library sequences" down)
run ../pasta_extra/histogram_ssearch36_inset.m10 ssearch36 -m 10 -H -T 1 -z 3 -N 200 -b 1 -d 1 inputs/mgstm1.nt inputs/clone_long.fna
run ../pasta_extra/ssearch36_title_suffix_cut.m10 ssearch36 -m 10 -T 1 -z 3 -b 1 -d 1 inputs/cut_suffix_titles.aa inputs/prot_test.lib
{
    ssearch36 -m 10 -T 1 -z 3 -b 4 -d 2 inputs/n2_then_others.aa inputs/n2_fs.lib
    fasta36 -m 10 -T 1 -z 3 -d 2 inputs/n2t.aa inputs/n2_fs.lib
    ggsearch36 -m 10 -T 1 -z -1 -d 1 inputs/n2.aa inputs/n2_fs.lib
    glsearch36 -m 10 -T 1 -z -1 -d 1 inputs/n2.aa inputs/n2_fs.lib
    lalign36 -m 10 -z 3 -K 2 inputs/n2.aa inputs/n2s.aa
    fasts36 -m 10 -T 1 -z 3 -b 2 -d 2 inputs/n2s.aa inputs/n2_fs.lib
    fastm36 -m 10 -T 1 -z 3 -b 2 -d 2 inputs/n2t.aa inputs/n2_fs.lib
    tfastx36 -m 10 -T 1 -z 3 -E 1000 -d 1 inputs/n2.aa inputs/gst.nlib
    tfasty36 -m 10 -T 1 -z 3 -E 1000 -d 1 inputs/n2.aa inputs/gst.nlib
    tfasts36 -m 10 -T 1 -z 3 -E 5 -b 2 -d 2 inputs/n2s.aa inputs/gst.nlib
    tfastm36 -m 10 -T 1 -z 3 -E 5 -d 2 inputs/n2t.aa inputs/gst.nlib
    fastx36 -m 10 -T 1 -z 3 -d 6 inputs/mgstm1.nt inputs/n2_fs.lib
    fasty36 -m 10 -T 1 -z 3 -d 6 inputs/mgstm1.nt inputs/n2_fs.lib
} > ../pasta_extra/gi_stripped_runs.m10
echo "../pasta_extra/gi_stripped_runs.m10: ssearch36, fasta36, ggsearch36, glsearch36, lalign36, fasts36, fastm36, tfastx36, tfasty36, tfasts36, tfastm36, fastx36, fasty36 on FASTA's n2*.aa, n2_fs.lib (see README)"
