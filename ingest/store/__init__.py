"""The MongoDB boundary: clients and driver errors (:mod:`.mongo`), the connection a command uses
(:mod:`.connection`), the collections and their indexes (:mod:`.catalog`), the curated
declarations analysts query (:mod:`.curated`) and the ledger of loaded files (:mod:`.ledger`)."""
