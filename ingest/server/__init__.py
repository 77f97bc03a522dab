"""Where the server is: the embedded SecantusDB's process (:mod:`.embedded`), the keeper that shares
one per home (:mod:`.keeper`), access control (:mod:`.access`), what a home keeps of its server on
disk, its record and locks (:mod:`.state`), and the connection a command uses (:mod:`.connection`:
a MongoDB URI, or the embedded server started or found).

Lowest first: ``state``, ``access``, ``embedded``, ``keeper``, ``connection``; each imports only those
before it (``access`` is handed the server it needs, :func:`.access.enable_auth`), and below them
:mod:`ingest.store` (clients, driver errors, disk space) and :mod:`ingest.secrets`; nothing in
:mod:`ingest.store` imports this package."""
