"""Regenerate the bad-input fixtures in tests/data/pasta/bad/ (deterministic).

    .venv/bin/python tests/data/pasta/make_bad_inputs.py

Each fixture is a real FASTA-suite output (samples/pasta/) or a real input file,
damaged in one documented way; tests/test_pasta_bad_input.py states the line number
and reason the parser must report for each.  ``blast_tabular.m8`` is real
``ssearch36 -m 8`` output (regenerated when ssearch36 is installed, else kept).
"""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
BAD = HERE / "bad"
ROOT = HERE.parent.parent.parent
SAMPLES = ROOT / "samples" / "pasta"


def lines_of(name: str) -> list[bytes]:
    return (SAMPLES / name).read_bytes().split(b"\n")


def write(name: str, data: bytes) -> None:
    (BAD / name).write_bytes(data)


def main() -> None:
    BAD.mkdir(parents=True, exist_ok=True)
    prot = (SAMPLES / "ssearch36_prot.m10").read_bytes()
    multi = lines_of("ssearch36_prot_multi.m10")

    # empty file
    write("empty.m10", b"")
    # a plain FASTA sequence file (real example input)
    shutil.copy(SAMPLES / "inputs" / "prot_test.lib", BAD / "plain_fasta.m10")
    # 4 KiB of pseudo-random bytes
    write("random_bytes.m10", random.Random(1234).randbytes(4096))
    # real ssearch36 -m 8 (BLAST tabular) output
    if shutil.which("ssearch36"):
        out = subprocess.run(
            ["ssearch36", "-m", "8", "-T", "1", "-z", "3", "inputs/gtt1_drome.aa", "inputs/prot_test.lib"],
            cwd=SAMPLES,
            check=True,
            capture_output=True,
        ).stdout
        write("blast_tabular.m8", out)
        # real output of two other -m combinations that are not -m 10 reports:
        # -m 9c alone (best-scores table with -m 9c columns, default -m 0 alignments)
        # and -m 10 -m B (the last -m wins: BLAST-like alignments)
        for fixture, fmt in (("m9c_default_alignments.m10", ["-m", "9c"]), ("m10_then_mB.m10", ["-m", "10", "-m", "B"])):
            out = subprocess.run(
                ["ssearch36", *fmt, "-T", "1", "-z", "3", "inputs/gtt1_drome.aa", "inputs/prot_test.lib"],
                cwd=SAMPLES,
                check=True,
                capture_output=True,
            ).stdout
            write(fixture, out)
    # cut in the middle of an alignment: 20 characters into the 2nd sequence line
    # of the library side of hit 1 (GT8.7), line 73 of ssearch36_prot.m10
    lines = prot.split(b"\n")
    assert lines[71].startswith(b"EKRYTMGDAP") and lines[72].startswith(b"LARKHHLDGE")
    cut = sum(len(x) + 1 for x in lines[:72]) + 20
    write("cut_mid_alignment.m10", prot[:cut])
    # cut in the middle of the 2nd sequence line of the query side of hit 1 (line 62)
    cut = sum(len(x) + 1 for x in lines[:61]) + 20
    write("cut_mid_query_side.m10", prot[:cut])
    # complete queries 1 and 2, then the file stops (no query 3, no ">>>///")
    write("truncated_after_query2.m10", b"\n".join(multi[:430]) + b"\n")
    # the last line ">>>///" and the trailer removed: every query is complete
    end = multi.index(b">>>///")
    write("no_end_of_run.m10", b"\n".join(multi[:end]) + b"\n")
    # the ">>><<<" ending query 1 (line 366) removed
    write("missing_end_of_query.m10", b"\n".join(multi[:365] + multi[366:]))
    # a score that is not a number (line 49: "; sw_expect: 0.00061")
    bad = list(lines)
    assert bad[48] == b"; sw_expect: 0.00061"
    bad[48] = b"; sw_expect: 0.0O061"
    write("bad_number.m10", b"\n".join(bad))
    # the first two hit blocks swapped: alignments no longer follow the table
    start1 = lines.index(b">>GT8.7 | 266 | transl. of pa875.con, 19 to 675")
    start2 = next(i for i, x in enumerate(lines) if x.startswith(b">>OKBO2C"))
    start3 = next(i for i, x in enumerate(lines) if x.startswith(b">>FEPE"))
    swapped = lines[:start1] + lines[start2:start3] + lines[start1:start2] + lines[start3:]
    write("table_mismatch.m10", b"\n".join(swapped))
    # non-UTF-8 bytes (Latin-1) in the query description (line 9) and in a hit
    # description (line 44); the table row (line 20) is left as it was
    latin = list(lines)
    assert latin[8].startswith(b"  1>>>GTT1_DROME") and latin[43].startswith(b">>GT8.7")
    latin[8] = latin[8].replace(b"GLUTATHIONE", b"GLUTATHIONE \xe9\xe8", 1)
    latin[43] = latin[43].replace(b"transl.", b"transl\xe9.", 1)
    write("non_utf8_description.m10", b"\n".join(latin))
    # -m 10 -m 9c: the table rows of the first three sequences (lines 20-22) removed,
    # so that the table starts with a "+-" row (more alignments of no sequence)
    m9c = lines_of("ssearch36_m9c.m10")
    assert m9c[19].startswith(b"GT8.7") and m9c[22].startswith(b"+-")
    write("m9c_plus_row_first.m10", b"\n".join(m9c[:19] + m9c[22:]))


if __name__ == "__main__":
    main()
