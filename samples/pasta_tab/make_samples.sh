#!/usr/bin/env bash
# Regenerate the FASTA-suite tabular samples in samples/pasta_tab/ (real FASTA 36.3.8i output, Debian
# package fasta3) from the sequences in samples/pasta/inputs/ (see samples/pasta/README.md; run
# `bash samples/pasta/make_samples.sh` first if they are missing).
#
#   bash samples/pasta_tab/make_samples.sh
#
# The commands run in samples/pasta/ with relative paths, so the command line FASTA records (the
# first comment line of -m 8C) names the inputs as the -m 10 samples' commands do: several samples
# are the same search as one of samples/pasta/*.m10 (the tests compare them).  -z 3 and -T 1 as
# there (no shuffles: the same output on every run, the comment lines included).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../pasta"
command -v ssearch36 >/dev/null || { echo "missing ssearch36 (apt-get install fasta3)" >&2; exit 1; }

# the same searches as ssearch36_prot_multi.m10 (query 3 without hits), ssearch36_dna_ref.m10,
# fastx36.m10, tfastx36.m10 and ssearch36_dna_pieces.m10
ssearch36 -m 8C -T 1 -z 3 -E 0.5 inputs/prot_queries.fa inputs/prot_lib.fa > "$here/ssearch36_prot_multi.m8c"
ssearch36 -m 8CBL -T 1 -z 3 inputs/dna_ref_queries.fna inputs/dna_ref_lib.fna > "$here/ssearch36_dna_ref.m8cb"
fastx36 -m 8C -T 1 -z 3 inputs/dna_queries.fna inputs/prot_lib.fa > "$here/fastx36.m8c"
tfastx36 -m 8CC -T 1 -z 3 inputs/mgstm1.aa inputs/dna_ref_lib.fna > "$here/tfastx36_cigar.m8c"
ssearch36 -m 8C -T 1 -z 3 -N 2000 inputs/mgstm1.nt inputs/chr_small.fa > "$here/ssearch36_dna_pieces.m8c"
# alternate alignments (-E "10 1") with BTOP
ssearch36 -m 8CB -T 1 -z 3 -E "10 1" inputs/gtt1_drome.aa inputs/prot_lib.fa > "$here/ssearch36_alt.m8cb"
# no comment lines: DNA, the second query reverse-complemented
fasta36 -m 8 -T 1 -z 3 -E 1 inputs/dna_queries.fna inputs/gst.nlib > "$here/fasta36_dna.m8"
# -d 1: FASTA prints -m 0 alignments after each query's rows (skipped by the parser)
ssearch36 -m 8 -T 1 -z 3 -E 0.5 -d 1 inputs/prot_queries.fa inputs/prot_lib.fa > "$here/ssearch36_d1.m8"
# -m 8CB -m 10: the table, then -m 10 alignment blocks; named .m10, read as tabular by its content
ssearch36 -m 8CB -m 10 -T 1 -z 3 -b 3 -d 2 inputs/gtt1_drome.aa inputs/prot_test.lib > "$here/ssearch36_8CB_and_10.m10"

# -m 10,8CC -d 3: the table, then -m 10 blocks of the first 3 hits (joined to their rows); the search of
# ssearch36_dna_ref.m10, DNA on both strands
ssearch36 -m 10,8CC -T 1 -z 3 -d 3 inputs/dna_ref_queries.fna inputs/dna_ref_lib.fna > "$here/ssearch36_dna_ref_10_8CC.m10"

# ---- -m 9 family without -m 10 (format pasta-m9): -m 10's layout with FASTA's -m 0 alignments
# (their trailers hold the time of the run, " start: ... done: ...", and the scan and display times: the
# only lines that differ from one run to the next)
# the same searches as ssearch36_m9c.m10, ssearch36_dna_m9B.m10 and ssearch36_m9i.m10 (without -m 10)
ssearch36 -m 9c -T 1 -z 3 -b 8 -d 4 inputs/gtt1_drome.aa inputs/prot_test.lib > "$here/ssearch36_9c.m9"
ssearch36 -m 9B -T 1 -z 3 -b 8 -d 2 inputs/mgstm1.nt inputs/gst.nlib > "$here/ssearch36_dna_9B.m9"
ssearch36 -m 9i -T 1 -z 3 -b 6 -d 3 inputs/gtt1_drome.aa inputs/prot_test.lib > "$here/ssearch36_9i.m9"
# several queries, query 3 without hits; plain -m 9
ssearch36 -m 9 -T 1 -z 3 -E 0.5 -d 1 inputs/prot_queries.fa inputs/prot_lib.fa > "$here/ssearch36_prot_multi_9.m9"
# -m "F10 FILE" beside -m 9c: FASTA writes the -m 9c layout both to standard output and to FILE (36.3.8i);
# FILE is named .m10 and read as pasta-m9 by its command line
ssearch36 -m "F10 ../pasta_tab/ssearch36_F10_9c_file.m10" -m 9c -T 1 -z 3 -b 3 -d 1 inputs/gtt1_drome.aa \
    inputs/prot_test.lib > "$here/ssearch36_F10_9c.m9"
# a translated search (nt coordinates of the DNA query, both frames), -m 9C (CIGAR)
fastx36 -m 9C -T 1 -z 3 -b 5 -d 1 inputs/dna_queries.fna inputs/prot_lib.fa > "$here/fastx36_9C.m9"

# ---- more -m 8C (a sweep of every program with -m 8/8C/8CB/8CC/8CBL/9*/... found these)
# nameless sequences (a space after ">"): rows with an empty query or subject id; the search of ssearch36_nameless.m10
ssearch36 -m 8C -T 1 -z 3 inputs/nameless_query.aa inputs/prot_test_nameless.lib > "$here/ssearch36_nameless.m8c"
# a long library sequence in pieces with alternate alignments: 36 rows of chrT, '# 8 hits found'
ssearch36 -m 8C -T 1 -z 3 -N 2000 -E "10 1" inputs/mgstm1.nt inputs/chr_small.fa > "$here/ssearch36_pieces_alt.m8c"
# -z -1 (no statistics): FASTA still prints E() and bits columns; the search of ssearch36_nostats.m10
ssearch36 -m 8C -T 1 -z -1 inputs/gtt1_drome.aa inputs/prot_lib.fa > "$here/ssearch36_nostats.m8c"
# a peptide mixture: "# Query: ... - 44 aa" for 39 residues in 6 peptides; the search of fasts36_peptides.m10
fasts36 -m 8CBL -T 1 -z 3 inputs/ngts.aa inputs/prot_test.lib > "$here/fasts36_peptides.m8cb"

# refused (tests/data/pasta_tab/): lalign36 prints no best-scores table, so its -m 9c output holds its
# alignments only in the -m 0 display
mkdir -p "$here/../../tests/data/pasta_tab"
lalign36 -m 9c -z 3 inputs/gtm1_human.aa inputs/mgstm1.aa > "$here/../../tests/data/pasta_tab/lalign36_9c.m9"
