"""Line-level mutations shared by the PASTA property tests (fuzz and fast-path equivalence)."""

from __future__ import annotations

from hypothesis import strategies as st


def mutate_lines(draw, data: bytearray, kind: str, lo: int = 0) -> bytearray:
    """Delete a line, duplicate one line at another's place, or swap two lines (line ``lo`` onwards)."""
    lines = bytes(data).split(b"\n")
    a = draw(st.integers(lo, len(lines) - 1))
    b = draw(st.integers(lo, len(lines) - 1))
    if kind == "delete":
        del lines[a]
    elif kind == "duplicate":
        lines.insert(a, lines[b])
    else:
        lines[a], lines[b] = lines[b], lines[a]
    return bytearray(b"\n".join(lines))
