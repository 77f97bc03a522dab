"""The fast path (``ingest/parsers/pasta/fastpath.py``: one regular expression per
alignment layout, in the read buffer) and the checking path
(``ingest/parsers/pasta/checking.py``: line by line) must agree exactly: on every real
sample (``test_pasta_parser``) and - this file - on damaged ones.

For each mutated real output the parser runs three times: with and without the fast
path (``fast=False``), and as ``parse_dicts`` (whose fast path builds the dicts itself); all runs must
yield the same queries (as dicts; for ``parse_dicts`` as JSON text, key order
included) and end the same way: either all complete, or all with a ParseError naming
the same line and reason.  Whatever the
fast path does not fully recognise it leaves to the checking path, so a difference
means the fast path accepted something the checking path reads otherwise.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings, strategies as st
from pasta_mutations import mutate_from

import ingest.parsers.pasta as pasta
from ingest.errors import ParseError
from ingest.parsers.pasta.checking import parse_hit

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "pasta"
NAMES = [
    "ssearch36_prot.m10",
    "ssearch36_prot_alt.m10",
    "ssearch36_table_only.m10",
    "ssearch36_m9c.m10",
    "ssearch36_m9C_alt.m10",
    "ssearch36_dna_m9B.m10",
    "ssearch36_rna.m10",
    "fasta36_dna.m10",
    "glsearch36.m10",
    "fastx36.m10",
    "tfasty36.m10",
    "ssearch36_F10_file.m10",
    "ssearch36_annot_m9c.m10",
]
DATA = {name: (SAMPLES / name).read_bytes() for name in NAMES}
# bytes that matter to the layout of an alignment
SPECIAL = [b"\n", b";", b">", b" ", b"-", b"\r", b"\n\n", b"; al_cons:\n", b">--\n", b"\t", b"\xe9", b"0", b"e"]


@st.composite
def mutated(draw):
    name = draw(st.sampled_from(NAMES))
    data = bytearray(DATA[name])
    # mutations inside the alignments (after the first ">>" line), where the fast path works
    first = data.find(b"\n>>", data.find(b">>>") + 3)
    return name, bytes(mutate_from(draw, data, first, SPECIAL))


def _run(data: bytes, name: str, fast: bool, sequences: bool, dicts: bool = False):
    out, warnings = [], []
    kw = {"sequences": sequences, "warn": warnings.append, "fast": fast}
    try:
        if dicts:
            for d in pasta.parse_dicts(io.BytesIO(data), name, **kw):
                out.append(json.dumps(d))
        else:
            for q in pasta.parse(io.BytesIO(data), name, **kw):
                out.append(q.to_dict())
        end = None
    except ParseError as err:
        end = (err.line, err.reason)
    return out, end, warnings


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(), st.booleans())
def test_fast_path_agrees_with_checking_path_on_damaged_input(case, sequences):
    name, data = case
    fast = _run(data, name, True, sequences)
    slow = _run(data, name, False, sequences)
    assert fast[1] == slow[1]  # same end: complete, or the same line and reason
    assert fast[0] == slow[0]  # same queries before it
    assert fast[2] == slow[2]  # same warnings
    dicts = _run(data, name, True, sequences, dicts=True)
    assert dicts[1] == fast[1]
    assert dicts[0] == [json.dumps(d) for d in fast[0]]
    assert dicts[2] == fast[2]


def test_a_first_hit_without_score_lines_is_refused_on_both_paths():
    """Found by the test above: the first hit's score lines moved up among the query's
    parameters left its ``>>`` line followed by the query side; the fast path learned a layout
    of no score lines from it and read the file as complete."""
    data = (SAMPLES / "ssearch36_prot.m10").read_bytes()
    hit = data.index(b">>GT8.7")
    nl = data.index(b"\n", hit) + 1
    side = data.index(b">GTT1_DROME ..", hit)
    moved = data[:hit] + data[nl:side] + data[hit:nl] + data[side:]
    assert moved.count(b"\n") == data.count(b"\n") and moved != data
    for sequences in (True, False):
        fast = _run(moved, "x.m10", True, sequences)
        slow = _run(moved, "x.m10", False, sequences)
        assert slow[1] is not None and "no '; key: value' lines after a '>>' hit line" in slow[1][1]
        assert fast[1] == slow[1]


def test_a_query_line_spliced_into_an_alignment_is_refused_on_both_paths():
    """Found by the mutation test: in a run without ">>><<<" (-m "F10 FILE") a query line
    duplicated among an alignment's sequence lines was read as a sequence line when
    sequences were skipped."""
    data = (SAMPLES / "ssearch36_F10_file.m10").read_bytes()
    qline = next(line for line in data.splitlines(keepends=True) if line.startswith(b"  3>>>"))
    at = data.index(b"\n", data.index(b"; al_display_start:", data.index(b"  2>>>"))) + 1
    spliced = data[:at] + qline + data[at:]
    for sequences in (True, False):
        fast = _run(spliced, "x.m10", True, sequences)
        slow = _run(spliced, "x.m10", False, sequences)
        assert slow[1] is not None and fast[1] == slow[1]
        assert fast[0] == slow[0]


def _checking_path_calls(data: bytes, name: str, **kw) -> int:
    """How many hit blocks the checking path (``parse_hit``) parsed: its calls are
    counted by a profile hook (matching its code object); nothing is replaced."""
    code = parse_hit.__code__
    calls = 0

    def profile(frame, event, arg):
        nonlocal calls
        if event == "call" and frame.f_code is code:
            calls += 1

    before = sys.getprofile()
    sys.setprofile(profile)
    try:
        list(pasta.parse(io.BytesIO(data), name, **kw))
    finally:
        sys.setprofile(before)
    return calls


def test_fast_path_takes_the_usual_alignments():
    """On the samples every alignment goes through the fast path (else it would
    silently stop being the fast one): count the hits left to the checking path."""
    for sequences in (True, False):  # (without sequences the fast path checks other things)
        for path in sorted([*SAMPLES.glob("*.m10"), *(SAMPLES.parent / "pasta_extra").glob("*.m10")]):
            name = path.name
            if name == "ssearch36_nameless.m10":
                continue  # sequences FASTA shows without a name ("> ..") are rare: checking path
            assert _checking_path_calls(path.read_bytes(), name, sequences=sequences) == 0, name
        nameless = (SAMPLES / "ssearch36_nameless.m10").read_bytes()
        # each of its hits has a nameless query side
        assert _checking_path_calls(nameless, "nameless", sequences=sequences) == 11
    # the count sees the checking path: with fast=False it parses every aligned hit
    data = (SAMPLES / "ssearch36_prot.m10").read_bytes()
    aligned = sum(h.aligned for q in pasta.parse(io.BytesIO(data), "prot") for h in q.hits)
    assert aligned and _checking_path_calls(data, "prot", fast=False) == aligned


def test_threads_learning_layouts_at_once_read_what_one_thread_reads():
    """Dask workers with several threads parse files side by side in one process, sharing the
    learned layouts.  A layout was published before its line count and absent fields: a thread
    that found it in between failed the file with a KeyError (seen in the suite: a load on a
    cluster of two-thread workers exited 2) or, where it read them with a default, counted lines
    and built dicts wrongly.  From an empty cache, with the interpreter switching threads as
    often as it can, every thread reads what one thread alone reads."""
    import threading

    from ingest.parsers.pasta import fastpath

    names = [n for n in NAMES if (SAMPLES / n).exists()]
    data = {n: (SAMPLES / n).read_bytes() for n in names}
    expected = {n: [json.dumps(d, sort_keys=False) for d in pasta.parse_dicts(io.BytesIO(b), n)]
                for n, b in data.items()}  # fmt: skip
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(20):
            for cache in (fastpath._LAYOUTS, fastpath._FIXED_LINES, fastpath._ABSENT):
                cache.clear()
            got: dict = {}
            errors: list = []

            def parse(name: str, slot: int, got=got, errors=errors) -> None:
                try:
                    got[name, slot] = [json.dumps(d, sort_keys=False)
                                       for d in pasta.parse_dicts(io.BytesIO(data[name]), name)]  # fmt: skip
                except Exception as exc:  # noqa: BLE001 - reported below, with the file
                    errors.append(f"{name}: {type(exc).__name__}: {exc}"[:300])

            threads = [threading.Thread(target=parse, args=(n, i)) for n in names for i in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert not errors, errors
            assert all(got[n, i] == expected[n] for n in names for i in range(2))
    finally:
        sys.setswitchinterval(switch)
