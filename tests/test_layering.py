"""The layering of README's code map, checked over every import of the project's own modules.

    `ingest` knows nothing of `analytics`; `analytics` builds on `ingest` and plugs its steps,
    commands and outputs into `ingest` through one registration point (the `sci_ingest.plugins`
    entry point); `dags/` only wire the functions of both.

Every import counts: at the top of a module, inside a function, under ``TYPE_CHECKING``. The test
fails on an import from a lower floor to a higher one, on an import loop (modules that reach
each other, however long the way), and on a private name taken from another module: a name with a
leading ``_`` (not a dunder) never leaves its module, inside a package's subpackages too (a name the
modules of a package share is public, the package's internal API, listed in its ``__all__`` or not).

``python tests/test_layering.py`` prints the arrows and loops it finds.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("ingest", "analytics")
#: Floors, lowest first: a module may import its own floor and those below it.
FLOORS = (("ingest",), ("analytics",), ("dags",))


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    found = {}
    for top in (*PACKAGES, "dags"):
        for path in sorted((REPO / top).rglob("*.py")):
            found[_module_name(path)] = path
    return found


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The project module that ``name`` names (a module, or a name defined in one)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def imports(modules: dict[str, Path]) -> list[tuple[str, str, int, str]]:
    """Every import between project modules: ``(importer, imported, line, names)``."""
    edges = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    target = _resolve(alias.name, modules)
                    if target:
                        edges.append((module, target, node.lineno, alias.name))
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in node.names:
                    target = _resolve(f"{base}.{alias.name}", modules) or _resolve(base, modules)
                    if target:
                        edges.append((module, target, node.lineno, alias.name))
    return [e for e in edges if e[0] != e[1]]


def floor_of(module: str) -> int:
    for number, prefixes in enumerate(FLOORS):
        if module.split(".")[0] in prefixes:
            return number
    raise AssertionError(f"{module} is on no floor")


def loops(edges) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    graph = defaultdict(set)
    for a, b, *_ in edges:
        graph[a].add(b)
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], [0]
    for root in list(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def is_private(name: str) -> bool:
    """``name`` (``_x``, ``pkg.mod._x``) is private: one leading underscore, not a dunder."""
    last = name.rpartition(".")[2]
    return last.startswith("_") and not last.startswith("__")


def private_imports(edges) -> list[tuple[str, str, int, str]]:
    """The imports that take another module's private name (the edges are between two modules)."""
    return [e for e in edges if is_private(e[3])]


def report() -> tuple[list[str], list[str], list[str]]:
    modules = project_modules()
    edges = imports(modules)
    against = [f"{modules[a].relative_to(REPO)}:{line}: {a} imports {b} ({name}), a higher floor"
               for a, b, line, name in edges if floor_of(a) < floor_of(b)]
    circles = []
    for component in loops(edges):
        members = set(component)
        ties = [f"{a} -> {b} ({name}, line {line})" for a, b, line, name in edges if a in members and b in members]
        circles.append(f"loop of {len(component)}: " + "; ".join(ties))
    private = [f"{modules[a].relative_to(REPO)}:{line}: {a} takes the private name {name} from {b} "
               "(make it public there, or keep it to its module)"
               for a, b, line, name in private_imports(edges)]
    return against, circles, private


def test_no_import_runs_against_the_layering():
    against, _, _ = report()
    assert not against, "\n".join(against)


def test_no_import_loops():
    _, circles, _ = report()
    assert not circles, "\n".join(circles)


def test_no_private_name_leaves_its_module():
    _, _, private = report()
    assert not private, "\n".join(private)


def rooms(edges) -> list[tuple[str, str, int, str, str]]:
    """The imports between the parts of a package (``ingest.store``, ``ingest.server``, a module such
    as ``ingest.errors``): the edges with each end cut to its first two names."""
    def room(module: str) -> str:
        return ".".join(module.split(".")[:2])

    return [(room(a), room(b), line, name, a) for a, b, line, name in edges if room(a) != room(b)]


def test_the_parts_of_ingest_import_each_other_one_way():
    """``ingest``'s parts stand on floors: no two of them import each other, however long the way
    (``ingest.store`` imports nothing of ``ingest.server``, which builds on it).  (In ``analytics`` the
    registry lists the package of analyses, whose modules declare themselves with it: a discovery,
    as a format registry's, kept.)"""
    parts = [e for e in rooms(imports(project_modules())) if e[0].startswith("ingest.")]
    circles = []
    for component in loops(parts):
        members = set(component)
        circles.append("parts that reach each other: " + "; ".join(
            f"{who} -> {b} ({name}, line {line})" for a, b, line, name, who in parts if a in members and b in members))
    assert not circles, "\n".join(circles)


#: Where the embedded server's engine may be named: the server's own package, the store (its traits and
#: the differences probed: ingest/store/servers.py, ingest/store/differences.py), the command line (its
#: messages) and the benchmarks that measure it.
ENGINE_NAMED_IN = ("ingest/server/", "ingest/store/", "ingest/cli/", "analytics/bench/")


def test_only_the_server_and_its_description_name_the_embedded_engine():
    """Everything else asks the server's description (ingest.store.servers.traits) what to do, and
    names the embedded server as such."""
    named = [str(path.relative_to(REPO)) for path in project_modules().values()
             if not str(path.relative_to(REPO)).startswith(ENGINE_NAMED_IN)
             and "secantus" in path.read_text().lower()]
    assert named == [], named


def test_the_plugins_registered_sit_above_ingest():
    """The registration point runs upward only: what `ingest` loads through its entry points lives
    in `analytics` (so the inversion hides no import from `ingest` into itself)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    plugins = project["project"]["entry-points"]["sci_ingest.plugins"]
    assert plugins, "no plugin registered"
    modules = project_modules()
    for name, target in plugins.items():
        module = target.partition(":")[0]
        assert module in modules, f"plugin {name}: {module} is not a module of the project"
        assert floor_of(module) > floor_of("ingest"), f"plugin {name}: {module} is not above ingest"


#: A lazy import's reason, the cost it gives (``0.12 s``, ``3 ms``, ``0.3-0.9 s``), the purpose that
#: needs no cost (a function that imports to load ahead), and a reference to another line.
_LAZY = re.compile(r"noqa: PLC0415\S* - lazy: (.*)")
_COST = re.compile(r"\d(?:[\d.,-]*\d)? ?(?:µs|ms|s)\b")
_PURPOSE = re.compile(r"\ba (?:warm-up|preload)\b")
_AS = re.compile(r"\bas (above|[A-Za-z_]\w*)")


def unmeasured(lines: list[str]) -> list[int]:
    """The lines (from 1) of one module whose lazy reason gives no measured cost: neither a cost, nor
    a warm-up or preload (importing is the purpose), nor ``as above`` (the lazy line before it gives
    one) or ``as NAME`` (a lazy line that gives one names NAME, or sits in ``def NAME``)."""
    reasons = {n: m.group(1) for n, line in enumerate(lines, 1) if (m := _LAZY.search(line))}
    costed = {n for n, reason in reasons.items() if _COST.search(reason) or _PURPOSE.search(reason)}
    owner, in_def = None, {}
    for n, line in enumerate(lines, 1):
        if found := re.match(r"\s*(?:async )?def (\w+)", line):
            owner = found.group(1)
        in_def[n] = owner
    grounded, bad = set(costed), []
    for n, reason in reasons.items():
        ref = None if n in costed else _AS.search(reason)
        if ref is not None and ref.group(1) == "above":
            before = [k for k in reasons if k < n]
            ok = bool(before) and before[-1] in grounded
        elif ref is not None:
            name = ref.group(1)
            ok = any(in_def[k] == name or re.search(rf"\b{name}\b", lines[k - 1].partition("#")[0]) for k in costed)
        else:
            ok = n in costed
        if ok:
            grounded.add(n)
        else:
            bad.append(n)
    return bad


def test_imports_stay_at_the_top_unless_a_line_says_why():
    """ruff's import-outside-toplevel over the project (pyproject.toml lists the allowed places),
    and every import allowed on its line gives the start-up cost it avoids, measured (or says it is
    its function's purpose, or refers to a line that gives the cost)."""
    ruff = Path(sys.executable).with_name("ruff")
    proc = subprocess.run([str(ruff), "check", "--output-format", "concise", "ingest", "analytics", "dags"],
                          cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    silent, unmeasured_ = [], []
    for path in project_modules().values():
        lines = path.read_text().splitlines()
        for number, line in enumerate(lines, 1):
            if "noqa: PLC0415" in line and not re.search(r"noqa: PLC0415\S* - lazy: \S", line):
                silent.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
        unmeasured_ += [f"{path.relative_to(REPO)}:{n}: {lines[n - 1].strip()}" for n in unmeasured(lines)]
    assert not silent, "an import inside a function without its reason:\n" + "\n".join(silent)
    assert not unmeasured_, "a lazy import whose reason gives no measured cost:\n" + "\n".join(unmeasured_)


def test_the_checker_sees_a_lazy_reason_without_its_cost():
    """The cost check can fail: made-up lazy reasons without a cost, or referring to a line without
    one, are found; a cost, a preload, ``as above`` and ``as NAME`` (a line or a function) pass."""
    lines = ["def load():",
             "    import pymongo  # noqa: PLC0415 - lazy: pymongo (seconds); --help must not pay it",
             "    import bson  # noqa: PLC0415 - lazy: as above",
             "    import dask  # noqa: PLC0415 - lazy: as nowhere",
             "def heavy():",
             "    import pandas  # noqa: PLC0415 - lazy: pandas costs 0.3 s",
             "    import numpy  # noqa: PLC0415 - lazy: as above",
             "    import pyarrow  # noqa: PLC0415,F401 - lazy: a preload: importing once is this process's purpose",
             "def other():",
             "    from x import KEYS  # noqa: PLC0415 - lazy: pymongo costs 0.12 s (0.1-0.2 s)",
             "    from y import z  # noqa: PLC0415 - lazy: pymongo, as KEYS",
             "    from y import w  # noqa: PLC0415 - lazy: as heavy's",
             "    import tqdm  # noqa: PLC0415 - lazy: the settings; parse must not pay them (40 modules)"]
    assert unmeasured(lines) == [2, 3, 4, 13]


def test_the_checker_sees_a_loop_and_an_arrow_up(tmp_path):
    """The checks can fail: a made-up pair of modules that import each other, one from a lower floor."""
    edges = [("ingest.a", "analytics.b", 3, "f"), ("analytics.b", "ingest.a", 5, "g"), ("ingest.c", "ingest.a", 1, "h")]
    assert loops(edges) == [["analytics.b", "ingest.a"]]
    parts = rooms([("ingest.store.mongo", "ingest.server.secrets", 2, "s"), ("ingest.server.keeper", "ingest.store.mongo", 4, "m"),
                   ("ingest.store.mongo", "ingest.store.names", 1, "n")])
    assert loops(parts) == [["ingest.server", "ingest.store"]]
    assert [e for e in edges if floor_of(e[0]) < floor_of(e[1])] == [edges[0]]


def test_the_checker_sees_a_private_name_leave_its_module(tmp_path):
    """The private-name check can fail, inside one subpackage too (the first two parts of both ends
    the same, as in ``ingest.parsers.pasta``), by an absolute or a relative import; a dunder and a
    public name pass.  The made-up modules are parsed as the project's are."""
    pasta = tmp_path / "ingest" / "parsers" / "pasta"
    pasta.mkdir(parents=True)
    (pasta / "__init__.py").write_text("from ingest.parsers.pasta.query import parse\n")
    (pasta / "common.py").write_text("__all__ = ['decode']\n_CONTROL = b'\\x00'\n\n\n"
                                     "def _decode(raw):\n    return raw\n\n\ndecode = _decode\n")
    (pasta / "query.py").write_text("from ingest.parsers.pasta.common import __all__, _decode, decode\n"
                                    "from .common import _CONTROL\n\n\ndef parse():\n    return decode, _decode, _CONTROL, __all__\n")
    modules = {".".join(path.relative_to(tmp_path).with_suffix("").parts).removesuffix(".__init__"): path
               for path in sorted(tmp_path.rglob("*.py"))}
    edges = imports(modules)
    assert ("ingest.parsers.pasta.query", "ingest.parsers.pasta.common", 1, "decode") in edges
    common = "ingest.parsers.pasta.common"
    assert sorted(private_imports(edges)) == [("ingest.parsers.pasta.query", common, 1, "_decode"),
                                              ("ingest.parsers.pasta.query", common, 2, "_CONTROL")]


if __name__ == "__main__":
    sections = zip(("against the layering", "loops", "private names out of their module"), report())
    for title, rows in sections:
        print(f"{title}: {len(rows)}")
        for row in rows:
            print("  " + row)
    sys.exit(0)
