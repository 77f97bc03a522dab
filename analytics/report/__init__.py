"""``sci-ingest report``: one run on a self-contained HTML page (:mod:`.html`, :mod:`.page`),
and its command (:mod:`.cli`)."""
