"""Opening input files: plain or gzip-compressed, recognised by the gzip magic number.

Kept free of heavy imports: ``sci-ingest parse`` uses it at start-up.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)

if TYPE_CHECKING:  # annotations only: pathlib and typing cost start-up time
    from pathlib import Path
    from typing import BinaryIO

GZIP_MAGIC = b"\x1f\x8b"


def is_gzip(path: str | Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == GZIP_MAGIC


def open_binary(path: str | Path) -> BinaryIO:
    """The file's bytes, gunzipped when it is gzip-compressed."""
    if is_gzip(path):
        import gzip

        return gzip.open(path, "rb")
    return open(path, "rb")
