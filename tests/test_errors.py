"""One error hierarchy: every error class of the project under SciIngestError, drawn in
ingest/errors.py exactly as the code has it, each with the exit code its class declares."""

from __future__ import annotations

import importlib
import pkgutil
import re
import subprocess
import sys

import pytest

import ingest.errors as errors
from ingest.errors import Exit, SciIngestError, UsageError

PACKAGES = ("ingest", "analytics")
_ROW = re.compile(r"^(?P<lead>[ │├└─]*)(?P<name>[A-Z]\w+)(?:\s+\((?P<module>[\w.]+)\))?(?P<rest>.*)$")


def _import_all() -> None:
    for top in PACKAGES:
        package = importlib.import_module(top)
        for found in pkgutil.walk_packages(package.__path__, top + "."):
            if not found.name.endswith("__main__"):
                importlib.import_module(found.name)


def project_classes() -> dict[str, type]:
    """Every subclass of SciIngestError defined in the project, by name (imported module by module)."""
    _import_all()
    found, todo = {"SciIngestError": SciIngestError}, [SciIngestError]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub.__module__.split(".")[0] in PACKAGES:
                assert sub.__name__ not in found, f"two error classes named {sub.__name__}"
                found[sub.__name__] = sub
                todo.append(sub)
    return found


def drawing(doc: str) -> list[tuple[str, str | None, str | None, str]]:
    """The rows of the docstring's tree: (name, parent, module named or None, the rest of the row)."""
    block = doc.split("::", 1)[1]
    rows, parents = [], []
    for line in block.splitlines():
        if not line.strip():
            if rows:
                break
            continue
        m = _ROW.match(line.strip("\n")[4:] if line.startswith("    ") else line)
        assert m, f"not a row of the drawing: {line!r}"
        depth = len(m["lead"]) // 4
        del parents[depth:]
        rows.append((m["name"], parents[-1] if parents else None, m["module"], m["rest"]))
        parents.append(m["name"])
    return rows


def differences(rows, classes: dict[str, type]) -> list[str]:
    """What the drawing says that the code does not, and the reverse."""
    out = []
    drawn = {name: (parent, module, rest) for name, parent, module, rest in rows}
    for name, cls in classes.items():
        if name not in drawn:
            out.append(f"{name} ({cls.__module__}) is not drawn")
            continue
        parent, module, rest = drawn[name]
        base = next((b.__name__ for b in cls.__bases__ if issubclass(b, SciIngestError)), None)
        if parent != base:
            out.append(f"{name} is drawn under {parent}, the code derives it from {base}")
        own = cls.__module__ if cls.__module__ != errors.__name__ else None
        if module != own:
            out.append(f"{name} is drawn as of {module or 'ingest.errors'}, it is defined in {cls.__module__}")
        said = re.search(r"\bexit (\d+)", rest)
        if "exit_code" in vars(cls) and not said:
            out.append(f"{name} declares exit {int(cls.exit_code)}, the drawing does not say it")
        if said and int(said[1]) != int(cls.exit_code):
            out.append(f"{name} is drawn with exit {said[1]}, its class exits {int(cls.exit_code)}")
    out += [f"{name} is drawn but no class of the project has that name" for name in drawn if name not in classes]
    return out


def test_the_drawing_in_errors_py_is_the_code():
    classes = project_classes()
    assert len(classes) >= 25
    assert differences(drawing(errors.__doc__), classes) == []


def test_the_drawing_check_can_fail():
    classes = project_classes()
    rows = drawing(errors.__doc__)
    missing = [r for r in rows if r[0] != "ClaimLost"]
    assert differences(missing, classes) == ["ClaimLost (ingest.load.claims) is not drawn"]
    moved = [(n, "ConfigError" if n == "QueryError" else p, m, r) for n, p, m, r in rows]
    assert differences(moved, classes) == ["QueryError is drawn under ConfigError, the code derives it from UsageError"]
    wrong_exit = [(n, p, m, "exit 1" if n == "UsageError" else r) for n, p, m, r in rows]
    assert differences(wrong_exit, classes) == ["UsageError is drawn with exit 1, its class exits 64"]


def test_no_error_of_the_project_is_outside_the_hierarchy():
    """Every public exception class of the project is a SciIngestError (private ones are signals inside
    one module, never raised out of it)."""
    _import_all()
    outside = []
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] not in PACKAGES or module is None:
            continue
        for attr, value in vars(module).items():
            if (isinstance(value, type) and issubclass(value, Exception) and value.__module__ == name
                    and not attr.startswith("_") and not issubclass(value, SciIngestError)):
                outside.append(f"{name}.{attr} ({', '.join(b.__name__ for b in value.__bases__)})")
    # the one kept outside: an OSError the file opener raises for a path that is not a regular file,
    # caught where OSErrors are (ingest.fileio)
    assert outside == ["ingest.fileio.NotRegularFile (OSError)"], outside


@pytest.mark.parametrize("argv, code", [
    (["query", "no_such_collection"], Exit.USAGE),  # UnknownCollection
    (["query", "hits", "--where", "evalue <"], Exit.USAGE),  # QueryError
    (["analyze", "--list", "no_such_analysis"], Exit.USAGE),  # UnknownAnalysis
    (["bench", "no_such_experiment"], Exit.USAGE),  # UnknownExperiment
])
def test_a_name_that_does_not_exist_exits_64_wherever_it_is_found(argv, code, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "ingest.cli", *argv], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env={**__import__("os").environ, "SCI_INGEST_HOME": str(tmp_path / "home")})
    assert proc.returncode == code, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Error" not in lines[0], proc.stderr


def test_usage_errors_exit_64_and_the_rest_1():
    classes = project_classes()
    for name, cls in classes.items():
        assert cls.exit_code == (Exit.USAGE if issubclass(cls, UsageError) else Exit.FATAL), name
