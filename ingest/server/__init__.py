"""The embedded SecantusDB server: its process (:mod:`.embedded`), the keeper that shares one per
home (:mod:`.keeper`), access control (:mod:`.access`), the secrets it keeps (:mod:`.secrets`) and
what a home keeps of its server on disk, its record and locks (:mod:`.state`).

Lowest first: ``secrets``, ``state``, ``access``, ``embedded``, ``keeper``; each imports only those
before it (``access`` is handed the server it needs, :func:`.access.enable_auth`)."""
