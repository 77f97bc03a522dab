"""The types of ``ingest``'s public names, loaded on first use (PEP 562); tests/test_public_api.py checks them."""

from __future__ import annotations

from ingest.config import Settings as Settings
from ingest.errors import (
    AnalysisError as AnalysisError,
    ConfigError as ConfigError,
    DatabaseError as DatabaseError,
    InputError as InputError,
    ParseError as ParseError,
    SciIngestError as SciIngestError,
    ServerError as ServerError,
    UnknownFormat as UnknownFormat,
    UnsupportedFeature as UnsupportedFeature,
    ValidationFailed as ValidationFailed,
)
from ingest.fileio import open_binary as open_input
from ingest.load import (
    LoadOptions as LoadOptions,
    LoadStopped as LoadStopped,
    LoadSummary as LoadSummary,
    load_paths as load_paths,
)
from ingest.model import Hit as Hit, Hsp as Hsp, Query as Query
from ingest.parsers import detect as detect_format, get as get_format
from ingest.parsers.pasta import parse as parse_search
from ingest.pipeline import STEPS as STEPS, RunReport as RunReport, run as run
from ingest.server.embedded import EmbeddedServer as EmbeddedServer
from ingest.store.mongo import connect as connect
from ingest.store.servers import ServerInfo as ServerInfo, describe as describe_server
from ingest.timing import Timings as Timings

__all__ = [
    "AnalysisError",
    "ConfigError",
    "connect",
    "DatabaseError",
    "describe_server",
    "detect_format",
    "EmbeddedServer",
    "get_format",
    "Hit",
    "Hsp",
    "InputError",
    "load_paths",
    "LoadOptions",
    "LoadStopped",
    "LoadSummary",
    "open_input",
    "parse_search",
    "ParseError",
    "Query",
    "run",
    "RunReport",
    "SciIngestError",
    "ServerError",
    "ServerInfo",
    "Settings",
    "STEPS",
    "Timings",
    "UnknownFormat",
    "UnsupportedFeature",
    "ValidationFailed",
]
