#!/usr/bin/env bash
# A sweep of FASTA's tables: 25 searches (every FASTA 36 program; DNA and protein; nameless sequences, a
# 600-character title, a long library sequence in pieces with alternates, a query subrange, a long query
# in segments, -z -1) x 14 output options (-m 8, 8C, 8CB, 8CC, 8CBL, "8CB -m 10", "10,8CC -d 3", 9, 9c,
# 9C, 9B, 9i, "9c -d 0", "8C -d 2"), each output with its command in OUT_DIR (NAME.out, NAME.cmd);
# then samples/pasta_tab/sweep_check.py OUT_DIR parses each (format by content) and compares the
# -m 8CBL, -m 8 and -m 9c ones with the -m 10 output of the same search.
#
#   bash samples/pasta_tab/sweep.sh [OUT_DIR]     # default /tmp/pasta_tab_sweep; a few seconds
#   .venv/bin/python samples/pasta_tab/sweep_check.py [OUT_DIR]
set -uo pipefail
out=$(realpath -m "${1:-/tmp/pasta_tab_sweep}"); mkdir -p "$out"; rm -f "$out"/*.out "$out"/*.cmd
cd "$(dirname "$0")/../pasta"
P="inputs/prot_queries.fa inputs/prot_lib.fa"
D="inputs/dna_queries.fna inputs/gst.nlib"
declare -A ARGS=(
 [ssearch36_p]="ssearch36|$P" [ssearch36_d]="ssearch36|$D" [fasta36_p]="fasta36|$P" [fasta36_d]="fasta36|$D"
 [ggsearch36]="ggsearch36|inputs/mgstm1.aa inputs/mu.lib" [glsearch36]="glsearch36|inputs/gtt1_drome.aa inputs/mu.lib"
 [lalign36]="lalign36|inputs/gtm1_human.aa inputs/mgstm1.aa" [fastx36]="fastx36|inputs/dna_queries.fna inputs/prot_lib.fa"
 [fasty36]="fasty36|inputs/gstm1b_human_fs.nt inputs/prot_lib.fa" [tfastx36]="tfastx36|inputs/mgstm1.aa inputs/dna_ref_lib.fna"
 [tfasty36]="tfasty36|inputs/gtm1_human.aa inputs/gst.nlib" [fasts36]="fasts36|inputs/ngts.aa inputs/prot_test.lib"
 [fastm36]="fastm36|inputs/ngts.aa inputs/prot_test.lib" [fastf36]="fastf36|inputs/m1r.aa inputs/prot_test.lib"
 [tfasts36]="tfasts36|inputs/ngts.aa inputs/gst.nlib" [tfastm36]="tfastm36|inputs/ngts.aa inputs/gst.nlib"
 [tfastf36]="tfastf36|inputs/m1r.aa inputs/gst.nlib" [n2]="ssearch36|inputs/n2.aa inputs/prot_test.lib"
 [n2t]="fasta36|inputs/n2t.aa inputs/prot_test.lib" [title]="ssearch36|inputs/long_title_query.fna inputs/gst.nlib"
 [nameless]="ssearch36|inputs/nameless_query.aa inputs/prot_test_nameless.lib" [pieces]="ssearch36|-N 2000 -E \"10 1\" inputs/mgstm1.nt inputs/chr_small.fa"
 [sub]="ssearch36|inputs/mgstm1.nt:101-400 inputs/gst.nlib" [long]="fasta36|inputs/clone_long.fna inputs/gst.nlib"
 [zneg]="ssearch36|-z -1 inputs/gtt1_drome.aa inputs/prot_test.lib"
)
for k in "${!ARGS[@]}"; do
  IFS='|' read prog rest <<< "${ARGS[$k]}"
  for m in 8 8C 8CB 8CC 8CBL "8CB -m 10" "10,8CC -d 3" 9 9c 9C 9B 9i "9c -d 0" "8C -d 2"; do
    name="$k.$(echo $m | tr -d ' ,-')"
    eval timeout 60 $prog -m $m -T 1 -z 3 $rest > "$out/$name.out" 2>/dev/null
    echo "$prog -m $m -T 1 -z 3 $rest" > "$out/$name.cmd"
  done
done
