"""The ``sci-ingest`` command line: :mod:`.main` builds the parser and runs a command; the
commands of one subject live beside it (:mod:`.query`, :mod:`.shard`)."""
