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


def mutate_from(draw, data: bytearray, first: int, special: list[bytes]) -> bytearray:
    """One to three mutations at byte ``first`` or after: a byte flipped, 1-4 bytes inserted, one
    of ``special`` inserted, a line deleted, duplicated or swapped (from the line of ``first`` on)."""
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["flip", "insert", "delete_line", "duplicate_line", "swap_lines", "special"]))
        i = draw(st.integers(first, len(data) - 1))
        if kind == "flip":
            data[i] = draw(st.integers(0, 255))
        elif kind == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=4))
        elif kind == "special":
            data[i:i] = draw(st.sampled_from(special))
        else:
            lo = bytes(data[:first]).count(b"\n") + 1
            data = mutate_lines(draw, data, kind.removesuffix("_line").removesuffix("_lines"), lo)
    return data
