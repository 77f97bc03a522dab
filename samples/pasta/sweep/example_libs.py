"""Inputs of the examples sweep (``sweep.sh examples``): the queries and two libraries.

    python samples/pasta/sweep/example_libs.py EXAMPLES_SEQ_DIR OUT_DIR

Copies every file of EXAMPLES_SEQ_DIR (Debian ``fasta3``'s ``examples/seq``; ``.gz`` files
unzipped) to OUT_DIR/q/ and writes:

* OUT_DIR/queries.tsv: ``FILE<TAB>prot|dna<TAB>mixture|-<TAB>LONGEST`` for each file FASTA can
  read as a query (a FASTA header line; the GCG files have none and are listed as ``skip``);
  ``mixture``: a peptide mixture (``,`` between fragments: fasts/fastm/fastf queries); LONGEST:
  the residues of its longest sequence;
* OUT_DIR/ex_prot_lib.fa and OUT_DIR/ex_dna_lib.fna: LIBRARY_SIZE sequences each, large
  enough for FASTA to compute its statistics from the library and draw a ``-H`` histogram:
  every protein (DNA) sequence of the examples, long ones cut into PIECE-residue pieces (the
  first MAX_PIECES of them), peptide mixtures left out, then mutated copies
  (``random.Random(SEED)``, the benchmark corpora's mutation), so the libraries are the same on
  every run.
"""

from __future__ import annotations

import gzip
import itertools
import random
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from bench_sequences import AA, NT, mutants, write_fasta  # noqa: E402 - the benchmark's generator

SEED = 20261129
LIBRARY_SIZE = 400
PIECE = 300
MAX_PIECES = 4


def records(path: Path) -> list[tuple[str, str]]:
    """(header, residues) of a FASTA file; ``,`` kept (a peptide mixture)."""
    out, header, parts = [], None, []
    for line in path.read_text(encoding="latin-1").splitlines() + [">"]:
        if line.startswith(">"):
            if header is not None and parts:
                out.append((header, "".join(parts).upper()))
            header, parts = line[1:].strip(), []
        elif header is not None:
            parts.append("".join(c for c in line if c.isalpha() or c == ","))
    return out


def kind(recs: list[tuple[str, str]]) -> str:
    letters = "".join(s for _, s in recs).replace(",", "")
    if not letters:
        return "skip"
    return "dna" if sum(letters.count(c) for c in "ACGTUN") >= 0.85 * len(letters) else "prot"


def main(src: Path, out: Path) -> int:
    qdir = out / "q"
    qdir.mkdir(parents=True, exist_ok=True)
    table, pool, seen = [], {"prot": [], "dna": []}, set()
    for f in sorted(src.iterdir()):
        name = f.name[:-3] if f.name.endswith(".gz") else f.name
        dest = qdir / name
        if f.name.endswith(".gz"):
            with gzip.open(f, "rb") as fin, open(dest, "wb") as fout:
                shutil.copyfileobj(fin, fout)
        else:
            shutil.copyfile(f, dest)
        recs = records(dest)
        k = kind(recs)
        mixture = any("," in seq for _, seq in recs)
        longest = max((len(seq) for _, seq in recs), default=0)
        table.append(f"{name}\t{k}\t{'mixture' if mixture else '-'}\t{longest}\n")
        if k == "skip":
            continue
        for header, seq in recs:
            if "," in seq:
                continue  # a peptide mixture (fasts/fastm/fastf queries)
            alphabet = NT if k == "dna" else AA
            seq = "".join(c for c in seq if c in alphabet)
            ident = header.split()[0] if header.split() else name
            desc = header[len(ident):].strip()
            ident = ident.lstrip(">")  # mgtt2_x.seq's header is ">>mgtt2_x ..."
            if ident in seen:  # one id, one sequence (mgstm1.nt, .nt1, .seq... are all pGT875)
                ident = f"{ident}_{name}"
            seen.add(ident)
            size = PIECE
            if len(seq) <= 2 * size:
                pool[k].append((f"{ident} {desc} ({name})", seq))
            else:
                for i in range(0, min(len(seq), size * MAX_PIECES), size):
                    pool[k].append((f"{ident}_{i + 1}-{i + size} piece of {name}", seq[i: i + size]))
    (out / "queries.tsv").write_text("".join(table))
    rng = random.Random(SEED)
    for k, path, alphabet in (("prot", "ex_prot_lib.fa", AA), ("dna", "ex_dna_lib.fna", NT)):
        lib = pool[k] + list(itertools.islice(mutants(rng, pool[k], "EXMUT", alphabet), LIBRARY_SIZE - len(pool[k])))
        write_fasta(out / path, lib[:LIBRARY_SIZE])
    return 0


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1]), Path(sys.argv[2])))
