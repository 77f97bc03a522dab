"""The static checks `make test` runs: ruff with the project's rule set over the whole project, and mypy over
ingest/ and analytics/ (pyproject.toml's ``[tool.mypy]``).

The rule set is pyproject.toml's ``[tool.ruff.lint]``: pyflakes (F), bugbear (B), the import order
(I), pyupgrade (UP) and the import rule (PLC0415, whose reasons tests/test_layering.py holds).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUFF = Path(sys.executable).with_name("ruff")
RULES = {"F", "B", "I", "UP", "PLC0415"}


def _ruff(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([str(RUFF), "check", "--no-cache", "--output-format", "concise", *args], cwd=cwd,
                          capture_output=True, text=True)


def test_the_rule_set_is_the_one_the_project_states():
    lint = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]
    assert set(lint["select"]) == RULES
    assert set(lint.get("ignore", ())) <= {"B905"}, "a rule left out must say why in pyproject.toml"


def test_ruff_finds_nothing_in_the_project():
    proc = _ruff(".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_with_the_project_rules_catches_what_they_are_for(tmp_path):
    """The check can fail: an unused import, a closure over a loop variable, a deprecated import and
    imports out of order, each flagged under the project's configuration."""
    bad = tmp_path / "ingest" / "made_up.py"
    bad.parent.mkdir()
    bad.write_text("import sys\nimport os\nfrom typing import Callable\n\n"
                   "def f(xs: list) -> list[Callable]:\n    return [lambda: x for x in xs]\n")
    proc = _ruff("--config", str(REPO / "pyproject.toml"), str(bad), cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    found = {line.split(" ")[1] for line in proc.stdout.splitlines() if "made_up.py:" in line}
    assert {"F401", "B023", "UP035", "I001"} <= found, proc.stdout


MYPY = Path(sys.executable).with_name("mypy")


def _mypy(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([str(MYPY), *args], cwd=cwd, capture_output=True, text=True)


def test_mypy_finds_nothing_in_ingest_and_analytics():
    """What pyproject.toml's ``[tool.mypy]`` names (``files``: ingest/ and analytics/), type-checked clean."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]
    assert set(config["files"]) == {"ingest", "analytics"}
    assert not {"ignore_errors", "disable_error_code"} & set(config), "the check covers every error code"
    skipped = [m for o in config.get("overrides", ()) for m in o["module"]]
    assert not [m for m in skipped if m.split(".")[0] in ("ingest", "analytics")], "the project's own code is checked"
    proc = _mypy()
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_with_the_project_config_catches_what_it_is_for(tmp_path):
    """The check can fail: a wrong return type and an Optional used unchecked, flagged under the
    project's configuration."""
    bad = tmp_path / "made_up.py"
    bad.write_text("def f(x: int) -> str:\n    return x\n\n\n"
                   "def g(d: dict[str, int]) -> int:\n    return d.get('a') + 1\n")
    proc = _mypy("--config-file", str(REPO / "pyproject.toml"), "--cache-dir", str(tmp_path / "cache"), str(bad),
                 cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "[return-value]" in proc.stdout and "[operator]" in proc.stdout, proc.stdout


_IGNORE = re.compile(r"#\s*type:\s*ignore(?P<codes>\[[^\]]*\])?(?P<rest>.*)$")


def test_every_type_ignore_names_its_code_and_says_why():
    """A silenced error is one error code, with its reason after it on the line (``# type: ignore[code]  # why``)."""
    bare = []
    for top in ("ingest", "analytics"):
        for path in sorted((REPO / top).rglob("*.py")):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                found = _IGNORE.search(line)
                if found and (not found["codes"] or not re.match(r"\s*#\s*\S", found["rest"])):
                    bare.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not bare, "\n".join(bare)


def test_no_test_imports_its_helpers_through_the_name_tests():
    """tests/ is no package: its modules import each other by their own names (pytest puts tests/ on the
    path).  ``from tests.x import`` would find a dependency's own ``tests`` package instead (optimade
    1.5.0 installs one into site-packages, and a regular package wins over a folder without
    ``__init__.py``): a fresh clone's make test failed to collect four modules on it."""
    found = [f"{path.relative_to(REPO)}:{number}: {line.strip()}"
             for top in ("tests", "benchmarks") for path in sorted((REPO / top).rglob("*.py"))
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if re.match(r"\s*(from tests[.\s]|import tests\b)", line)]
    assert not found, "\n".join(found)
