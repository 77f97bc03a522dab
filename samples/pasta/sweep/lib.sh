# helper: run NAME 'COMMAND' [M10FILE]   (COMMAND's stdout -> out/NAME.m10 unless M10FILE given;
# SWEEP_REUSE=1: a run whose FASTA output is there is only parsed and checked again; FASTA is
# stopped after FASTA_TIMEOUT seconds, 600 unless set: exit 124)
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
SWEEP="${SWEEP:-${SWEEP_DIR:-${TMPDIR:-/tmp}/sci-ingest-sweep}}"
PARSE="$ROOT/.venv/bin/sci-ingest"
PY="$ROOT/.venv/bin/python"
run() {
    local name=$1 cmd=$2 m10=${3:-}
    cd "$SWEEP" || return
    if [ -n "${SWEEP_REUSE:-}" ] && [ -f "out/$name.frc" ]; then  # parse and check FASTA's output again
        frc=$(cat "out/$name.frc"); m10=${m10:-out/$name.m10}
    elif [ -n "$m10" ]; then
        ( timeout "${FASTA_TIMEOUT:-600}" bash -c "$cmd" ) > "out/$name.stdout" 2> "out/$name.fasta.err"; frc=$?
    else
        m10="out/$name.m10"
        ( timeout "${FASTA_TIMEOUT:-600}" bash -c "$cmd" ) > "$m10" 2> "out/$name.fasta.err"; frc=$?  # ( ): a crash said in fasta.err
    fi
    echo "$frc" > "out/$name.frc"
    [ -f "$m10" ] || : > "$m10"
    timeout 600 "$PARSE" parse "$m10" > "out/$name.jsonl" 2> "out/$name.parse.err"; prc=$?
    timeout 600 "$PARSE" parse --no-sequences "$m10" > "out/$name.ns.jsonl" 2> "out/$name.ns.err"; nrc=$?
    timeout 120 "$PY" "$ROOT/samples/pasta/sweep/check.py" "$m10" "out/$name.jsonl" "out/$name.ns.jsonl" "$cmd" > "out/$name.check.json" 2> "out/$name.check.err"
    "$PY" - "$name" "$cmd" "$frc" "$prc" "$nrc" "$m10" > "out/$name.result.json" <<'PYEOF'
import json, sys
name, cmd, frc, prc, nrc, m10 = sys.argv[1:]
try:
    chk = json.load(open(f"out/{name}.check.json"))
except Exception as e:
    chk = {"checker_error": open(f"out/{name}.check.err").read()[-500:]}
print(json.dumps(dict(name=name, cmd=cmd, frc=int(frc), prc=int(prc), nrc=int(nrc), m10=m10,
    fasta_err=open(f"out/{name}.fasta.err", errors="replace").read()[-300:],
    parse_err=open(f"out/{name}.parse.err", errors="replace").read()[-600:], check=chk)))
PYEOF
    cat "out/$name.result.json" >> results.jsonl
    echo "$name frc=$frc prc=$prc nrc=$nrc $(head -c 400 out/$name.check.json)"
}
