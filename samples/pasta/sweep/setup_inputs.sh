#!/usr/bin/env bash
# inputs for commands.sh: the project's sample inputs + a few FASTA example files + crafted files
set -e
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
cd "${SWEEP:-${SWEEP_DIR:-${TMPDIR:-/tmp}/sci-ingest-sweep}}"
mkdir -p inputs out
cp -n "$ROOT"/samples/pasta/inputs/* inputs/
for f in mgstm1.lc xurt8c.lc grou_drome.pseg gstm1_human.vaa prot_test.lseg m2.aa n2_fs.lib n_fs.lib mgstm1.3nt; do
    cp -n /usr/share/doc/fasta3/examples/seq/$f inputs/
done
python3 - <<'PY'
import random
seq="".join(open('inputs/mgstm1.nt').read().split('\n',1)[1].split())
r=random.Random(3)
with open('inputs/reads.fq','w') as f:
    for i in range(6):
        st=r.randrange(0,len(seq)-150); s=seq[st:st+150]
        f.write(f"@read{i} pos={st+1}\n{s}\n+\n{'I'*150}\n")
gtt="".join(open('inputs/gtt1_drome.aa').read().split('\n',1)[1].split())
lib=open('inputs/prot_test.lib').read()
with open('inputs/tricky_q.aa','w') as f:
    f.write(">Q1|x, 12 aa vs lib - 99 aa tricky >>>desc ; al_start: 5\n"+gtt+"\n")
    f.write(">Q2 - 30 aa\n"+gtt[20:150]+"\n")
with open('inputs/tricky_lib.aa','w') as f:
    f.write(">L1 desc with ( 999) parens and E() 1e-5 >>inner\n"+gtt[10:180]+"\n")
    f.write(">L2\t tab\there\n"+gtt[::-1]+"\n")
    f.write(">averyveryveryverylongidentifier_that_is_longer_than_sixty_characters_for_sure_1234567890 long\n"+gtt[30:200]+"\n")
    f.write(lib)
PY
