"""sci-ingest: FASTA-suite ``-m 10`` searches and Materials-Project records into MongoDB.

The public API, imported lazily (``import ingest`` costs nothing; a name is
imported from its module on first use, so ``sci-ingest parse`` stays fast to
start)::

    import ingest
    report = ingest.run(ingest.Settings.from_env(mongo_uri="mongodb://..."), ["results/"])
    with ingest.open_input("run1.m10.gz") as fh:
        for query in ingest.parse_search(fh, "run1.m10.gz"):
            ...

Everything else (``ingest.load``, ``ingest.store.mongo``, ...) is importable too,
but only the names in ``__all__`` are promised to stay.
"""

from __future__ import annotations

from ingest._lazy import lazy_exports as _lazy_exports

# name -> "module:attribute"
_EXPORTS = {
    # the main job and its settings
    "run": "ingest.pipeline:run",
    "RunReport": "ingest.pipeline:RunReport",
    "STEPS": "ingest.pipeline:STEPS",
    "Settings": "ingest.config:Settings",
    # loading
    "load_paths": "ingest.load:load_paths",
    "LoadOptions": "ingest.load:LoadOptions",
    "LoadSummary": "ingest.load:LoadSummary",
    "LoadStopped": "ingest.load:LoadStopped",
    "detect_format": "ingest.parsers:detect",
    "get_format": "ingest.parsers:get",
    "open_input": "ingest.fileio:open_binary",
    "parse_search": "ingest.parsers.pasta:parse",
    "Query": "ingest.model:Query",
    "Hit": "ingest.model:Hit",
    "Hsp": "ingest.model:Hsp",
    # MongoDB and the embedded server
    "connect": "ingest.store.mongo:connect",
    "describe_server": "ingest.store.servers:describe",
    "ServerInfo": "ingest.store.servers:ServerInfo",
    "EmbeddedServer": "ingest.server.embedded:EmbeddedServer",
    "Timings": "ingest.timing:Timings",
    # errors
    "SciIngestError": "ingest.errors:SciIngestError",
    "ConfigError": "ingest.errors:ConfigError",
    "ServerError": "ingest.errors:ServerError",
    "DatabaseError": "ingest.errors:DatabaseError",
    "UnsupportedFeature": "ingest.errors:UnsupportedFeature",
    "InputError": "ingest.errors:InputError",
    "UnknownFormat": "ingest.errors:UnknownFormat",
    "ParseError": "ingest.errors:ParseError",
    "AnalysisError": "ingest.errors:AnalysisError",
    "ValidationFailed": "ingest.errors:ValidationFailed",
}

__all__ = sorted(_EXPORTS, key=str.casefold)

# the names' types, for type checkers and IDEs: __init__.pyi beside this file
__getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS, globals())
