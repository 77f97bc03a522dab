"""The MongoDB boundary: clients and driver errors (:mod:`.mongo`), a server's disk space
(:mod:`.space`), the collections and their indexes (:mod:`.catalog`), the index policy
(:mod:`.indexes`), the curated declarations analysts query (:mod:`.curated`) and the ledger of
loaded files (:mod:`.ledger`).  Which server a command talks to is :mod:`ingest.server.connection`'s."""
