"""The experiments of ``sci-ingest bench``: each module binds its declarations to ``EXPERIMENTS``."""
