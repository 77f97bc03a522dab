"""The stored form of search results (``searches`` and ``hits``), from a search parser's dicts.

``_id``s are derived from the input (the file's sha256 and positions in it), so
loading the same content twice adds nothing, whatever path it was read from.
"""

from __future__ import annotations


def search_id(sha256: str, query_index: int) -> str:
    return f"{sha256[:20]}:{query_index}"


def search_id_prefix(sha256: str) -> str:
    """The prefix every search id made from the content ``sha256`` starts with (hits' ids too)."""
    return search_id(sha256, 0)[:-1]


def prefix_range(prefix: str) -> dict:
    """The filter of the strings that start with ``prefix``: a range an index seeks."""
    return {"$gte": prefix, "$lt": prefix[:-1] + chr(ord(prefix[-1]) + 1)}


def search_documents(query: dict, *, sha256: str, path: str, query_index: int,
                     fmt: str = "pasta") -> tuple[dict, list[dict]]:
    """One ``searches`` document and one ``hits`` document per hit of ``query``, a
    query as a search parser's ``parse_dicts`` yields it (``Query.to_dict()``)."""
    doc = dict(query)
    hits = doc.pop("hits", [])
    sid = search_id(sha256, query_index)
    doc["_id"] = sid
    doc["query_index"] = query_index
    doc["n_hits"] = len(hits)
    doc["source"] = {"path": path, "sha256": sha256, "format": fmt}
    shared = {
        "search_id": sid,
        "query_id": doc.get("query_id"),
        "program": doc.get("program"),
        "library": doc.get("library"),
    }
    hit_docs = []
    for position, hit in enumerate(hits, start=1):
        rank = hit.get("rank", position)
        hit_doc = {"_id": f"{sid}:{rank}", **{k: v for k, v in shared.items() if v is not None}, **hit}
        hit_doc["rank"] = rank
        hit_doc["source"] = {"path": path, "sha256": sha256}
        hit_docs.append(hit_doc)
    return doc, hit_docs

