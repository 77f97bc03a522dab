"""Property test: on mutated real outputs the parser either succeeds or raises
ParseError (with a line number) - never another exception.

Mutations: truncate, delete / duplicate / swap lines, flip bytes, insert random
bytes; several at once; read with various chunk sizes so that buffer boundaries fall
anywhere.  Kept to a few hundred examples (well under 20 s).
"""

from __future__ import annotations

import io
from pathlib import Path

from hypothesis import HealthCheck, given, settings, strategies as st
from pasta_mutations import mutate_lines

import ingest.parsers.pasta as pasta
from ingest.errors import ParseError

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "pasta"
NAMES = [
    "ssearch36_prot.m10",
    "ssearch36_prot_multi.m10",
    "ssearch36_prot_alt.m10",
    "ssearch36_table_only.m10",
    "ssearch36_no_alignments.m10",
    "fasta36_dna.m10",
    "ggsearch36.m10",
    "lalign36.m10",
    "fastx36.m10",
    "tfasty36.m10",
    "concatenated_runs.m10",
    "ssearch36_m9c.m10",
    "ssearch36_m9C_alt.m10",
    "ssearch36_F10_file.m10",
]
DATA = {name: (SAMPLES / name).read_bytes() for name in NAMES}


@st.composite
def mutated(draw):
    name = draw(st.sampled_from(NAMES))
    data = bytearray(DATA[name])
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["truncate", "delete", "duplicate", "swap", "flip", "insert"]))
        if not data:
            break
        if kind == "truncate":
            del data[draw(st.integers(0, len(data) - 1)) :]
        elif kind == "flip":
            i = draw(st.integers(0, len(data) - 1))
            data[i] = draw(st.integers(0, 255))
        elif kind == "insert":
            i = draw(st.integers(0, len(data)))
            data[i:i] = draw(st.binary(min_size=1, max_size=8))
        else:
            data = mutate_lines(draw, data, kind)
    return name, bytes(data)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(), st.sampled_from([1 << 20, 4096, 61]), st.booleans())
def test_mutated_outputs_parse_or_raise_parse_error(case, chunk, sequences):
    name, data = case
    queries = []
    try:
        for q in pasta.parse(io.BytesIO(data), name, sequences=sequences, warn=lambda m: None, chunk_size=chunk):
            queries.append(q.to_dict())
    except ParseError as err:
        assert err.source == name
        assert isinstance(err.line, int) and 1 <= err.line <= data.count(b"\n") + 1
