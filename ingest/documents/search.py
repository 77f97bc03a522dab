"""The stored form of search results (``searches`` and ``hits``), from a search parser's dicts.

``_id``s are derived from the input (the file's sha256 and positions in it), so
loading the same content twice adds nothing, whatever path it was read from.  The
same *search* can still sit in several files (a run copied into a concatenation, the
same search run twice): each copy has its own ids, and every copy carries the search's
fingerprint (:func:`search_fingerprint`; ``fingerprint`` on searches,
``search_fingerprint`` on hits), so that counts can be of distinct searches.
"""

from __future__ import annotations

import hashlib
import os

import orjson

#: What a search's fingerprint leaves out: where its block sat in its file, the command line (it names
#: the input files as they were given), and what only the output's options print (the aligned
#: sequences, consensus and encoded alignments): the same search printed by another run or copied into
#: another file has the same fingerprint.
_NOT_CONTENT = frozenset(("query_index", "run_index", "run_query_number", "command", "hits", "library"))
_NOT_HSP_CONTENT = frozenset(("query_seq", "hit_seq", "consensus", "extra"))


def search_id(sha256: str, query_index: int) -> str:
    return f"{sha256[:20]}:{query_index}"


def search_id_prefix(sha256: str) -> str:
    """The prefix every search id made from the content ``sha256`` starts with (hits' ids too)."""
    return search_id(sha256, 0)[:-1]


def prefix_range(prefix: str) -> dict:
    """The filter of the strings that start with ``prefix``: a range an index seeks."""
    return {"$gte": prefix, "$lt": prefix[:-1] + chr(ord(prefix[-1]) + 1)}


def search_fingerprint(query: dict) -> str:
    """The fingerprint of a search's content (a query as ``parse_dicts`` yields it): the program,
    its version and parameters (``pg_argv`` aside), the query, the library (its file name, sequence
    and residue counts) and every hit with its scores and coordinates; never the file it came from.
    32 hex digits of a SHA-256."""
    content = {k: v for k, v in query.items() if k not in _NOT_CONTENT}
    params = content.get("params")
    if isinstance(params, dict) and "pg_argv" in params:
        content["params"] = {k: v for k, v in params.items() if k != "pg_argv"}
    library = query.get("library")
    content["library"] = os.path.basename(library) if isinstance(library, str) else library
    content["hits"] = [{**{k: v for k, v in hit.items() if k != "hsps"},
                        "hsps": [{k: v for k, v in hsp.items() if k not in _NOT_HSP_CONTENT}
                                 for hsp in hit.get("hsps") or ()]} for hit in query.get("hits") or ()]
    return hashlib.sha256(orjson.dumps(content, option=orjson.OPT_SORT_KEYS)).hexdigest()[:32]


def search_documents(query: dict, *, sha256: str, path: str, query_index: int,
                     fmt: str = "pasta") -> tuple[dict, list[dict]]:
    """One ``searches`` document and one ``hits`` document per hit of ``query``, a
    query as a search parser's ``parse_dicts`` yields it (``Query.to_dict()``)."""
    doc = dict(query)
    fingerprint = search_fingerprint(query)
    hits = doc.pop("hits", [])
    sid = search_id(sha256, query_index)
    doc["_id"] = sid
    doc["query_index"] = query_index
    doc["n_hits"] = len(hits)
    doc["fingerprint"] = fingerprint
    doc["source"] = {"path": path, "sha256": sha256, "format": fmt}
    shared = {
        "search_id": sid,
        "search_fingerprint": fingerprint,
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

