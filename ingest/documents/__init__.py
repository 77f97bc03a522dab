"""Parsed objects and records -> MongoDB documents: the storage form, one module per format.

A parser yields neutral objects (a search parser's query dicts, the materials parser's
``Record``s); these modules turn them into the documents the loader writes, and back:

* :mod:`ingest.documents.search`    -- ``searches`` and ``hits`` documents of ``-m 10`` queries;
* :mod:`ingest.documents.materials` -- ``materials`` and ``tasks`` documents of JSON records.

Pure: no I/O, no database.
"""

from ingest.documents.materials import from_document, record_document, to_document
from ingest.documents.search import prefix_range, search_documents, search_id, search_id_prefix

__all__ = ["from_document", "record_document", "prefix_range", "search_documents", "search_id", "search_id_prefix",
           "to_document"]
