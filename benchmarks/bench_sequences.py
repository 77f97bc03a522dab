"""Deterministic protein sequences for the benchmark corpora (no clock-seeded randomness).

    python benchmarks/bench_sequences.py library INPUTS_DIR OUT_DIR
        -> OUT_DIR/bench_queries.fa, OUT_DIR/bench_lib.fa
    python benchmarks/bench_sequences.py load-queries INPUTS_DIR OUT_DIR N
        -> OUT_DIR/bench_lib.fa and OUT_DIR/load_00000.fa ... load_<N-1>.fa
    python benchmarks/bench_sequences.py dna INPUTS_DIR OUT_DIR
        -> OUT_DIR/bench_dna_queries.fna, OUT_DIR/bench_dna_lib.fna

INPUTS_DIR is ``samples/pasta/inputs``.  Standard library only.

* **library** (used by ``make_large_pasta.sh`` and ``make_load_corpus.sh``): every
  protein of INPUTS_DIR (its ``*.aa`` files, ``prot_test.lib`` and ``mu.lib``; titin cut
  into 300-residue pieces) plus mutated copies of them (``random.Random(20240611)``:
  substitutions, insertions, deletions), 1100 sequences in all, so ssearch36 computes its
  statistics from the library scores without shuffling.  The queries are the real example
  proteins (every one but titin).
* **load-queries** (``make_load_corpus.sh``): one query file per corpus file.  File ``i``
  holds ``2 + i % 5`` queries (4 on average), each a mutated variant of one of the real
  example proteins, drawn with ``random.Random(LOAD_SEED + i)``: the base protein, a change
  rate of 2 to 30 %, then the same substitution / insertion / deletion mutation as the
  library's.  Every file therefore has its own queries (and content), and file ``i`` is
  the same whatever ``N`` is, so a larger corpus starts with the smaller one's files.
* **dna** (``make_large_pasta.sh``): the DNA side of the study, RNA-fragment-like
  queries (``frag000001`` ...) against gene sequences with NCBI ``gi|NNN|ref|NM_...|`` ids
  (FASTA drops a leading ``gi|NNN|`` from ids in alignments, which the parser reconciles;
  Biopython 1.88 cannot read a gi| *query* id, whose alignment lines show ``ref|...``).  Library:
  every DNA sequence of INPUTS_DIR (``gst.nlib``, ``*.seq``, ``*.nt``; 12 genes) plus mutated
  copies, 60 sequences in all (``random.Random(DNA_SEED)``).  Queries: 900 fragments of
  120 to 260 nt cut from library genes at random places, mutated at 0 to 12 %, a third of
  them reverse-complemented.
"""

from __future__ import annotations

import itertools
import random
import sys
from pathlib import Path

LIBRARY_SEED = 20240611
LIBRARY_SIZE = 1100
LOAD_SEED = 20240611 * 100_000
AA = "ACDEFGHIKLMNPQRSTVWY"
NT = "ACGT"
# the *.aa of samples/pasta/inputs the library is made of (all it held when the benchmark's figures
# began), not the peptide-mixture queries of fasts/fastm/fastf (comma-separated fragments: ngts.aa,
# m1r.aa)
LIBRARY_PROTEINS = ("annot.aa", "gtm1_human.aa", "gtt1_drome.aa", "h10_human.aa", "mchu.aa", "mgstm1.aa", "mwkw.aa",
                    "nameless_query.aa", "titin_hum.aa", "titin_twice.aa")
DNA_SEED = 20261123
DNA_LIBRARY_SIZE = 60
DNA_QUERIES = 900


def read_fasta(path: Path) -> list[tuple[str, str]]:
    """(header, sequence) pairs; sequence letters only, upper case."""
    seqs, header, parts = [], None, []
    for line in path.read_text().splitlines() + [">"]:
        if line.startswith(">"):
            if header is not None and parts:
                seqs.append((header, "".join(parts).upper()))
            header, parts = line[1:].strip(), []
        else:
            parts.append("".join(c for c in line if c.isalpha()))
    return seqs


def mutate(rng: random.Random, seq: str, rate: float, alphabet: str = AA) -> str:
    """Substitutions (80 % of the changes), deletions (10 %) and insertions (10 %) at ``rate``."""
    out = []
    for c in seq:
        r = rng.random()
        if r < rate * 0.8:
            out.append(rng.choice(alphabet))
        elif r < rate * 0.9:
            continue  # deletion
        elif r < rate:
            out.append(c)
            out.append(rng.choice(alphabet))  # insertion
        else:
            out.append(c)
    return "".join(out)


def library(inputs: Path) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(queries, library): the real example proteins, and the 1100-sequence library."""
    # named, not globbed: inputs added for the samples since do not change the benchmark's files
    files = [inputs / name for name in LIBRARY_PROTEINS]
    files += [inputs / "prot_test.lib", inputs / "mu.lib"]
    queries, lib = [], []
    for f in files:
        for header, seq in read_fasta(f):
            if len(seq) > 2000:  # titin: library pieces only
                for i in range(0, 3000, 300):
                    lib.append((f"{header.split()[0]}_{i + 1}-{i + 300} fragment of {header}", seq[i: i + 300]))
            else:
                queries.append((header, seq))
                lib.append((header, seq))
    lib += itertools.islice(mutants(random.Random(LIBRARY_SEED), queries, "MUT"), LIBRARY_SIZE - len(lib))
    return queries, lib


def mutants(rng: random.Random, base: list[tuple[str, str]], prefix: str, alphabet: str = AA):
    """Mutated copies of ``base``'s sequences in turn, without end: ``PREFIXnnnn|ID mutated copy
    (R% changes) of ID`` at a rate drawn from 5 to 60 % (the library's, and the examples sweep's)."""
    n = 0
    while True:
        header, seq = base[n % len(base)]
        n += 1
        rate = rng.choice((0.05, 0.15, 0.3, 0.45, 0.6))
        ident = header.split()[0]
        yield (f"{prefix}{n:04d}|{ident} mutated copy ({int(rate * 100)}% changes) of {ident}",
               mutate(rng, seq, rate, alphabet))


def load_queries(queries: list[tuple[str, str]], index: int) -> list[tuple[str, str]]:
    """The queries of corpus file ``index``: 2 to 6 variants of the real proteins."""
    rng = random.Random(LOAD_SEED + index)
    out = []
    for j in range(2 + index % 5):
        header, seq = rng.choice(queries)
        rate = rng.choice((0.02, 0.05, 0.1, 0.2, 0.3))
        out.append((f"LQ{index:05d}_{j + 1} variant ({int(rate * 100)}% changes) of {header}",
                    mutate(rng, seq, rate)))
    return out


def dna(inputs: Path) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(queries, library) of the DNA benchmark (module docstring)."""
    files = [inputs / "gst.nlib"] + sorted(inputs.glob("*.seq")) + sorted(inputs.glob("*.nt"))
    genes = [(h, "".join(c for c in s if c in NT)) for f in files for h, s in read_fasta(f)]
    genes = [(h, s) for h, s in genes if len(s) >= 300]
    rng = random.Random(DNA_SEED)
    lib = []
    for n in range(DNA_LIBRARY_SIZE):
        header, seq = genes[n % len(genes)]
        if n >= len(genes):
            rate = rng.choice((0.03, 0.08, 0.15, 0.25))
            seq = mutate(rng, seq, rate, NT)
            header = f"mutated copy ({int(rate * 100)}% changes) of {header}"
        lib.append((f"gi|{880001 + n}|ref|NM_{880001 + n:06d}.1| {header}", seq))
    comp = str.maketrans("ACGT", "TGCA")
    queries = []
    for n in range(DNA_QUERIES):
        _, seq = lib[rng.randrange(len(lib))]
        size = rng.randint(120, 260)
        start = rng.randrange(max(1, len(seq) - size))
        frag = mutate(rng, seq[start: start + size], rng.choice((0.0, 0.02, 0.05, 0.12)), NT)
        strand = "-" if rng.random() < 1 / 3 else "+"
        if strand == "-":
            frag = frag.translate(comp)[::-1]
        queries.append((f"frag{n + 1:06d} RNA fragment ({len(frag)} nt, {strand} strand)", frag))
    return queries, lib


def write_fasta(path: Path, records: list[tuple[str, str]]) -> None:
    with open(path, "w") as fh:
        for header, seq in records:
            fh.write(f">{header}\n")
            for i in range(0, len(seq), 60):
                fh.write(seq[i: i + 60] + "\n")


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[0] not in ("library", "load-queries", "dna") or (argv[0] == "load-queries") != (len(argv) == 4):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    inputs, out = Path(argv[1]), Path(argv[2])
    out.mkdir(parents=True, exist_ok=True)
    if argv[0] == "dna":
        queries, lib = dna(inputs)
        write_fasta(out / "bench_dna_queries.fna", queries)
        write_fasta(out / "bench_dna_lib.fna", lib)
        print(f"{len(queries)} DNA queries, {len(lib)} library sequences", file=sys.stderr)
        return 0
    queries, lib = library(inputs)
    write_fasta(out / "bench_lib.fa", lib)
    if argv[0] == "library":
        write_fasta(out / "bench_queries.fa", queries)
        print(f"{len(queries)} queries, {len(lib)} library sequences", file=sys.stderr)
        return 0
    n = int(argv[3])
    for index in range(n):
        write_fasta(out / f"load_{index:05d}.fa", load_queries(queries, index))
    print(f"{n} query files, {len(lib)} library sequences", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
