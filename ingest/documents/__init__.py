"""Parsed objects and records -> MongoDB documents: the storage form, one module per format.

* :mod:`ingest.documents.search`    -- ``searches`` and ``hits`` documents of ``-m 10`` queries;
* :mod:`ingest.documents.materials` -- ``materials`` and ``tasks`` documents of JSON records.

Pure: no I/O, no database.
"""

from ingest.documents.materials import record_document
from ingest.documents.search import search_documents, search_id

__all__ = ["record_document", "search_documents", "search_id"]
