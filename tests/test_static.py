"""The static checks `make test` runs: ruff with the project's rule set, over the whole project.

The rule set is pyproject.toml's ``[tool.ruff.lint]``: pyflakes (F), bugbear (B), the import order
(I), pyupgrade (UP) and the import rule (PLC0415, whose reasons tests/test_layering.py holds).
"""

from __future__ import annotations

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
