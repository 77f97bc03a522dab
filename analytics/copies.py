"""Copies of one search counted once, by the analyses that count searches or hits.

The same search can sit in several files: a run copied into a concatenation, the same
search run twice (``ingest.documents.search``).  Each copy has its own ids, and every
copy's hits carry the search's fingerprint (``search_fingerprint``: the program, its
parameters, the query, the library and the hits, never the file).  ``library_hits`` and
``hit_distributions`` read it (:data:`COLUMNS`), are grouped on it (:data:`GROUP_KEY`: all
copies of a search reach one partition) and keep one copy of each hit (:func:`one_copy`),
so their counts are of distinct searches and hits.  Hits loaded before fingerprints were
stored count as a search of their own.  To select one copy in a query of your own:
group the hits on ``search_fingerprint`` and ``rank`` and keep the first of each.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ingest.schema import Column
from ingest.store import curated

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["COLUMNS", "GROUP_KEY", "one_copy", "drop_known"]

COLUMNS = (
    curated.HITS.column("search_id"),
    Column("search_fingerprint", "search_fingerprint", "string"),  # not an analyst's field: the copies' key
    curated.HITS.column("rank"),
)
GROUP_KEY = "search_fingerprint"


def one_copy(df: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """``df`` with one copy of each hit (its search's fingerprint and its rank; a hit without a
    fingerprint is its search's own), the fingerprint filled in; and how many copies went."""
    import pandas as pd  # noqa: PLC0415 - lazy: analytics.increment reads COLUMNS at every `analyze` start-up; pandas costs 0.3 s there

    fingerprint = df["search_fingerprint"].astype("object").where(df["search_fingerprint"].notna(),
                                                                  df["search_id"].astype("object"))
    ranked = df["rank"].notna().to_numpy()  # a hit without a rank is nobody's copy
    copies = pd.DataFrame({"fingerprint": fingerprint, "rank": df["rank"]}).duplicated().to_numpy() & ranked
    kept = df.loc[~copies].copy()
    kept["search_fingerprint"] = fingerprint[~copies].to_numpy()
    return kept, int(copies.sum())


def drop_known(new: pd.DataFrame, before: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """``new`` (hits of files just loaded) without the hits of searches ``before`` holds (hits of
    files loaded earlier): those are copies, counted already; and how many went.  A hit without a
    fingerprint is its search's own (its search id), so never one of ``before``'s."""
    if not len(new) or not len(before):
        return new, 0
    known = set(before["search_fingerprint"].dropna())
    copy = (new["search_fingerprint"].isin(known).to_numpy() & new["search_fingerprint"].notna().to_numpy()
            & new["rank"].notna().to_numpy())  # as one_copy: a hit without a rank is nobody's copy
    return new.loc[~copy], int(copy.sum())

