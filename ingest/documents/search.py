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
from collections.abc import Iterator

import orjson

#: What a search's fingerprint leaves out: where its block sat in its file, the command line (it names
#: the input files as they were given), and what only the output's options print (the aligned
#: sequences, consensus and encoded alignments, the -H histogram): the same search printed by another
#: run or copied into another file has the same fingerprint.
_NOT_CONTENT = frozenset(("query_index", "run_index", "run_query_number", "command", "hits", "library", "histogram"))
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
    32 hex digits of a SHA-256.  Hits that are not a list (a large block's spool) are hashed as they
    are read, to the same digest."""
    content = {k: v for k, v in query.items() if k not in _NOT_CONTENT}
    params = content.get("params")
    if isinstance(params, dict) and "pg_argv" in params:
        content["params"] = {k: v for k, v in params.items() if k != "pg_argv"}
    library = query.get("library")
    content["library"] = os.path.basename(library) if isinstance(library, str) else library
    hits = query.get("hits") or []
    if not isinstance(hits, list):
        return _streamed_fingerprint(content, hits)
    content["hits"] = [_hit_content(hit) for hit in hits]
    return hashlib.sha256(orjson.dumps(content, option=orjson.OPT_SORT_KEYS)).hexdigest()[:32]


def _hit_content(hit: dict) -> dict:
    return {**{k: v for k, v in hit.items() if k != "hsps"},
            "hsps": [{k: v for k, v in hsp.items() if k not in _NOT_HSP_CONTENT} for hsp in hit.get("hsps") or ()]}


def _streamed_fingerprint(content: dict, hits) -> str:
    """:func:`search_fingerprint` of ``content`` with ``hits`` (iterated once): the bytes of
    ``orjson.dumps(content with hits, OPT_SORT_KEYS)`` fed to the hash piece by piece (orjson
    writes no white space, so the pieces joined are those bytes; the tests compare)."""
    h = hashlib.sha256()
    content["hits"] = None
    sort = orjson.OPT_SORT_KEYS
    h.update(b"{")
    for n, key in enumerate(sorted(content)):
        h.update((b"," if n else b"") + orjson.dumps(key) + b":")
        if key != "hits":
            h.update(orjson.dumps(content[key], option=sort))
            continue
        h.update(b"[")
        comma = b""
        for hit in hits:
            h.update(comma + orjson.dumps(_hit_content(hit), option=sort))
            comma = b","
        h.update(b"]")
    h.update(b"}")
    return h.hexdigest()[:32]


def search_documents(query: dict, *, sha256: str, path: str, query_index: int,
                     fmt: str = "pasta") -> tuple[dict, list[dict] | Iterator[dict]]:
    """One ``searches`` document and one ``hits`` document per hit of ``query``, a
    query as a search parser's ``parse_dicts`` yields it (``Query.to_dict()``).  Hits that
    are not a list (a large block's spool: :mod:`ingest.parsers.pasta.spool`) give their
    documents as an iterator, built as they are read (after a first pass for the fingerprint)."""
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
    shared = {k: v for k, v in shared.items() if v is not None}
    hit_docs = _hit_documents(hits, sid, shared, {"path": path, "sha256": sha256})
    return doc, (list(hit_docs) if isinstance(hits, list) else hit_docs)


def _hit_documents(hits, sid: str, shared: dict, source: dict) -> Iterator[dict]:
    for position, hit in enumerate(hits, start=1):
        rank = hit.get("rank", position)
        hit_doc = {"_id": f"{sid}:{rank}", **shared, **hit}
        hit_doc["rank"] = rank
        hit_doc["source"] = dict(source)
        yield hit_doc

