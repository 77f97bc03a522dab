"""The public API of ``ingest`` and ``analytics``: small, listed in ``__all__``, lazy (as httpx checks its own)."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import types
from pathlib import Path

import pytest

PACKAGES = ("ingest", "analytics")
#: Where a package's public names may be defined: its own modules, or a floor below it that
#: it builds on (analytics hands on ingest's field vocabulary and Dask client to analysis authors).
DEFINED_IN = {"ingest": {"ingest"}, "analytics": {"analytics", "ingest"}}
NOT_API = {"annotations"}
REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_sorted_and_every_name_resolves(name):
    package = importlib.import_module(name)
    assert package.__all__ == sorted(package.__all__, key=str.casefold)
    assert len(package.__all__) == len(set(package.__all__))
    for attr in package.__all__:
        value = getattr(package, attr)
        assert not isinstance(value, types.ModuleType), attr
        assert getattr(value, "__module__", name).split(".")[0] in DEFINED_IN[name], (attr, value)
    with pytest.raises(AttributeError, match="no attribute 'not_there'"):
        package.not_there  # noqa: B018 - the attribute read is what must raise


@pytest.mark.parametrize("name", PACKAGES)
def test_every_public_member_is_exported(name):
    package = importlib.import_module(name)
    for attr in package.__all__:
        getattr(package, attr)
    public = {m for m, v in vars(package).items()
              if not m.startswith("_") and m not in NOT_API and not isinstance(v, types.ModuleType)}
    assert public == set(package.__all__)
    assert set(package.__all__) <= set(dir(package))


@pytest.mark.parametrize("name", PACKAGES)
def test_the_stub_types_exactly_the_lazy_names(name):
    """``<package>/__init__.pyi`` (what type checkers and IDEs read for the names loaded on first use)
    imports each name of ``_EXPORTS`` from where it loads, and nothing else."""
    package = importlib.import_module(name)
    stub = ast.parse((REPO / name / "__init__.pyi").read_text())
    typed, listed = {}, None
    for node in stub.body:
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            for alias in node.names:
                assert alias.asname, f"{name}/__init__.pyi: {alias.name} is not re-exported (import X as X)"
                typed[alias.asname] = f"{node.module}:{alias.name}"
        elif isinstance(node, ast.Assign) and node.targets[0].id == "__all__":
            listed = ast.literal_eval(node.value)
    assert typed == package._EXPORTS
    assert listed == package.__all__


def test_the_api_names_are_unique_across_packages():
    import analytics
    import ingest

    assert not set(ingest.__all__) & set(analytics.__all__)


def test_importing_the_packages_imports_nothing_heavy():
    code = ("import sys, ingest, analytics; "
            "heavy = [m for m in ('pymongo', 'pandas', 'dask', 'pyarrow', 'great_expectations', 'typing') "
            "if m in sys.modules]; print(heavy); sys.exit(1 if heavy else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
