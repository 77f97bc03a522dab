"""best_hits's array code gives, to the bit, what its pandas group-by version gave.

:func:`reference` is that version (the analysis until issue 29), kept here as the rule: the
highest score wins, ties go to the lower E-value, then the lower rank, then the smaller hit id;
a missing value sorts last; statistics ignore missing scores; quantiles interpolate linearly;
metadata is each search's first non-missing value.  The properties feed both the frames the
reader builds (``Schema.frame`` of generated hit documents: ``str``, ``Int64`` and ``float64``
columns) and plain object frames, with ties, missing values, infinities, signed zeros, one-hit
and all-missing searches, and any row order.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from hypothesis import given, settings, strategies as st

from analytics.analyses import best_hits as bh
from ingest.schema import Schema, conform, empty


def reference(df: pd.DataFrame) -> pd.DataFrame:
    """best_hits as a pandas group-by (the definition the array code is held to)."""
    if df.empty:
        return empty(bh.OUTPUT_TYPES)
    data = df.loc[:, list(bh.INPUT_COLUMNS)].copy()
    for col in ("score", "evalue", "bits", "identity"):
        data[col] = pd.to_numeric(data[col], errors="coerce").astype("float64")
    data["rank"] = data["rank"].astype("Int64")
    groups = data.groupby("search_id", sort=True)
    score = groups["score"]
    stats = pd.DataFrame({
        "n_hits": groups.size(), "n_scored": score.count(), "score_min": score.min(),
        "score_p25": score.quantile(0.25), "score_median": score.quantile(0.5),
        "score_p75": score.quantile(0.75), "score_max": score.max(), "score_mean": score.mean(),
        "query_id": groups["query_id"].first(), "library": groups["library"].first(),
        "program": groups["program"].first(),
    })
    ordered = data.sort_values(["search_id", "score", "evalue", "rank", "hit_id"],
                               ascending=[True, False, True, True, True], na_position="last", kind="mergesort")
    best = ordered.drop_duplicates("search_id", keep="first").set_index("search_id")
    best = best.rename(columns={"hit_id": "best_hit_id", "rank": "best_rank", "score": "best_score",
                                "evalue": "best_evalue", "bits": "best_bits", "identity": "best_identity"})[
        ["best_hit_id", "best_rank", "best_score", "best_evalue", "best_bits", "best_identity"]]
    return conform(stats.join(best, how="left").rename_axis("search_id").reset_index(), bh.OUTPUT_TYPES)


def assert_same(actual: pd.DataFrame, expected: pd.DataFrame) -> None:
    """Equal to the bit, NaN for NaN (a zero's sign aside: -0.0 == 0.0, and which of a tied
    0.0 and -0.0 a sort puts first is not the rule's)."""
    pd.testing.assert_frame_equal(actual, expected, check_exact=True)


numbers = st.one_of(st.none(), st.sampled_from([0.0, -0.0, 1.0, 2.5, math.inf, -math.inf, 1e-300]),
                    st.floats(-1e6, 1e6, allow_nan=False), st.integers(-50, 50))
names = st.one_of(st.none(), st.sampled_from(["h1", "h2", "H1", "h10", "é", "h1 "]))
hit = st.fixed_dictionaries({
    "search_id": st.sampled_from(["s1", "s2", "s10", "S1", "s1:1", "ß"]),
    "query_id": names, "library": names, "program": st.sampled_from(["ssearch36", None]),
    "rank": st.one_of(st.none(), st.integers(1, 5)), "hit_id": names,
    "hsps": st.lists(st.fixed_dictionaries({"score": numbers, "evalue": numbers, "bits": numbers,
                                            "identity": numbers}), max_size=2),
})


@settings(max_examples=150, deadline=None)
@given(st.lists(hit, max_size=40))
def test_frames_the_reader_builds(docs):
    frame = Schema(bh.COLUMNS).frame(Schema(bh.COLUMNS).read(docs))
    assert_same(bh.best_hits(frame), reference(frame))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.one_of(st.none(), st.integers(1, 3)),
                          st.one_of(st.none(), st.sampled_from(["x", "y"])), numbers, numbers, numbers, numbers),
                max_size=30))
def test_plain_object_frames(rows):
    frame = pd.DataFrame(rows, columns=["search_id", "rank", "hit_id", "score", "evalue", "bits", "identity"],
                         dtype=object)
    frame["query_id"], frame["library"], frame["program"] = frame["search_id"], "lib", "ssearch36"
    assert_same(bh.best_hits(frame), reference(frame))


def test_a_chunk_of_the_reader_s_size_and_its_shuffle():
    rng = np.random.default_rng(29)
    n = 5_000
    frame = pd.DataFrame({
        "search_id": [f"q{i}" for i in rng.integers(0, 400, n)], "query_id": "Q", "library": "L",
        "program": "ssearch36", "rank": pd.array(rng.integers(1, 50, n), dtype="Int64"),
        "hit_id": [f"h{i}" for i in rng.integers(0, 60, n)], "score": rng.integers(20, 60, n).astype(float),
        "evalue": rng.choice([1e-5, 1e-3, 0.1], n), "bits": rng.random(n), "identity": rng.random(n)})
    out = bh.best_hits(frame)
    assert_same(out, reference(frame))
    assert out["search_id"].is_monotonic_increasing and out["n_hits"].sum() == n
    shuffled = frame.sample(frac=1.0, random_state=1).reset_index(drop=True)
    again = bh.best_hits(shuffled)
    assert_same(again, reference(shuffled))
    assert again[["search_id", "n_hits", "score_min", "score_median", "best_score"]].equals(
        out[["search_id", "n_hits", "score_min", "score_median", "best_score"]])
