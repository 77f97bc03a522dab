"""Lazy public APIs for the ``ingest`` and ``analytics`` packages (PEP 562).

A package lists its public names as ``{name: "module:attribute"}``; the name is
imported on first access and then cached in the package's namespace, so
importing the package costs nothing and ``sci-ingest parse`` stays fast.
"""

from __future__ import annotations

import importlib


def lazy_exports(package: str, exports: dict[str, str], namespace: dict):
    """``(__getattr__, __dir__)`` for a package whose public names are ``exports``."""

    def __getattr__(name: str):
        target = exports.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attribute = target.partition(":")
        value = getattr(importlib.import_module(module), attribute)
        namespace[name] = value  # the next access is a plain lookup
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
