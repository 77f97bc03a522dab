"""The front page and the manual: README.md stays a front page, its command table is the CLI's,
every relative link of README.md and docs/*.md resolves, and the Quickstart's output is one that
parses.  Whether its counts are a real run's is checked by ``tests/test_cli_run.py``
(``test_run_twice_json``), on the whole-pipeline run it makes anyway.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent / "sci-ingest"
MAX_README_LINES = 300


def section(text: str, heading: str) -> str:
    """The body of the level-2 section ``## heading`` (up to the next level-2 heading)."""
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"no section '## {heading}'"
    return match.group(1)


def _cli(*argv: str) -> str:
    env = {**os.environ}
    env.pop("MONGODB_URI", None)  # neither command needs a server
    proc = subprocess.run([str(BIN), *argv], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


# ------------------------------------------------------------------ the Quickstart's output
def quickstart_counts(text: str | None = None) -> dict:
    """The counts of the ``sci-ingest run`` output shown under Quickstart: files loaded, documents
    inserted, the analyses in order, and the suites as (passed, run)."""
    body = section(text if text is not None else README.read_text(), "Quickstart")
    blocks = [b for b in re.findall(r"^```[a-z]*\n(.*?)^```", body, re.M | re.S) if b.startswith("run run-")]
    assert len(blocks) == 1, "the Quickstart shows one output of `sci-ingest run`"
    out = blocks[0]
    files = re.search(r"^files: ([\d,]+) loaded, ", out, re.M)
    documents = re.search(r"^documents: ([\d,]+) inserted, ", out, re.M)
    suites = re.search(r"^validation: (\d+)/(\d+) suites passed", out, re.M)
    assert files and documents and suites, out
    return {
        "files": int(files.group(1).replace(",", "")),
        "documents": int(documents.group(1).replace(",", "")),
        "analyses": re.findall(r"^analysis (\S+): ", out, re.M),
        "suites": (int(suites.group(1)), int(suites.group(2))),
    }


def test_quickstart_counts_are_read_and_name_the_shipped_analyses():
    counts = quickstart_counts()
    assert counts["files"] > 0 and counts["documents"] > 0 and counts["suites"][1] > 0, counts
    shipped = [a["name"] for a in json.loads(_cli("analyze", "--list", "--json"))["analyses"]]
    assert counts["analyses"] == shipped, "the Quickstart's output names other analyses than `analyze --list`"


def test_quickstart_counts_parse_what_run_prints():
    sample = ("## Quickstart\n\n```\nrun run-1\nfiles: 1,234 loaded, 0 skipped (unchanged), 0 failed\n"
              "documents: 5 inserted, 0 updated, 0 skipped (already loaded)\nanalysis a: 1 in -> 1 out (a, x)\n"
              "analysis b: 2 in -> 1 out (b, y)\nvalidation: 3/4 suites passed, 9 rows checked\n```\n")
    assert quickstart_counts(sample) == {"files": 1234, "documents": 5, "analyses": ["a", "b"], "suites": (3, 4)}
    with pytest.raises(AssertionError):
        quickstart_counts(sample.replace("files: 1,234 loaded", "files loaded"))


# ------------------------------------------------------------------ the front page
def test_readme_is_a_front_page():
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines; move sections to docs/"


def help_commands(help_text: str) -> list[str]:
    """The subcommands ``sci-ingest --help`` lists: the names indented under ``COMMAND``."""
    block = help_text.split("positional arguments:", 1)[1].split("\n\n", 1)[0]
    names = re.findall(r"^ {4}([a-z][a-z0-9-]*)(?: {2,}|$)", block, re.M)
    assert names and names == sorted(set(names), key=names.index), block
    return names


def table_commands(readme: str) -> list[str]:
    """The commands of the README's command table, one per row."""
    return re.findall(r"^\| `sci-ingest ([a-z][a-z0-9-]*)[ `]", section(readme, "Commands"), re.M)


def test_help_commands_are_read_from_argparse_output():
    sample = ("usage: x\n\npositional arguments:\n  COMMAND\n    run       the main job\n    shard-plan\n"
              "              where documents land\n    report    a page\n\noptions:\n  -h, --help  help\n")
    assert help_commands(sample) == ["run", "shard-plan", "report"]


def test_the_command_table_is_the_cli():
    commands = help_commands(_cli("--help"))
    assert {"run", "query", "export", "indexes", "report"} <= set(commands), commands
    rows = table_commands(README.read_text())
    assert len(rows) == len(set(rows)), f"a command has more than one row: {rows}"
    assert sorted(rows) == sorted(commands), (
        f"missing from the README: {sorted(set(commands) - set(rows))}; "
        f"not a command: {sorted(set(rows) - set(commands))}")


# ------------------------------------------------------------------ links
def slug(heading: str) -> str:
    """GitHub's anchor of a heading: its text lower-cased, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"`", "", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)  # no headings in code blocks
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.M):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def strip_code(text: str) -> str:
    """The text without fenced blocks and inline code, where brackets are not links."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def links(page: Path) -> list[str]:
    return re.findall(r"!?\[[^\]]*\]\(([^)\s]+)\)", strip_code(page.read_text()))


def test_slug_is_githubs_anchor():
    assert slug("Measured: many small files (`benchmarks/bench_small_files.py`, in `make bench`)") == \
        "measured-many-small-files-benchmarksbench_small_filespy-in-make-bench"


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_every_relative_link_resolves(page):
    broken = []
    for link in links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", link):  # http:, https:, mailto:
            continue
        path, _, fragment = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.is_relative_to(REPO) or not target.exists():
            broken.append(f"{link}: no such file")
        elif fragment and target.suffix == ".md" and fragment not in anchors(target):
            broken.append(f"{link}: no heading #{fragment} in {target.relative_to(REPO)}")
    assert not broken, f"{page.relative_to(REPO)}: " + "; ".join(broken)


# ------------------------------------------------------------------ the code map
def code_map_rows(readme: str) -> list[str]:
    """The folders of the README's code map, one per row."""
    return re.findall(r"^\| `([\w./-]+/)` \|", section(readme, "Code map"), re.M)


def test_the_code_map_has_a_row_per_folder_and_states_the_layering():
    body = section(README.read_text(), "Code map")
    assert re.search(r"\*\*Layering: `ingest` knows nothing of `analytics`; .*\*\*", body, re.S), \
        "the code map opens with its layering in one sentence"
    assert "tests/test_layering.py" in body, "the code map names the test that holds the code to its layering"
    rows = code_map_rows(README.read_text())
    packages = sorted(f"{p.parent.relative_to(REPO)}/" for top in ("ingest", "analytics")
                      for p in (REPO / top).glob("**/__init__.py")
                      if "experiments" not in p.parts and "pasta" not in p.parts)
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True).stdout.split()
    tops = sorted({f"{path.split('/')[0]}/" for path in tracked if "/" in path and not path.startswith(".")})
    assert tops, "git ls-files listed nothing"
    missing = sorted((set(packages) | set(tops)) - set(rows))
    extra = sorted(r for r in rows if not (REPO / r).is_dir())
    assert not missing, f"folders without a row in the code map: {missing}"
    assert not extra, f"code-map rows for folders that do not exist: {extra}"
    assert len(rows) == len(set(rows)), rows


def test_the_exit_codes_of_the_readme_are_the_cli_s():
    """The README's table of exit codes is ingest.errors' (which every --help prints)."""
    from ingest.errors import EXIT_MEANINGS

    rows = re.findall(r"^\| (\d+) \| (.+) \|$", README.read_text(), re.M)
    assert {int(code): meaning.replace("`", "") for code, meaning in rows} == \
        {int(code): meaning.replace("`", "") for code, meaning in EXIT_MEANINGS.items()}
    assert all(f"  {int(code):<5}" in _cli("--help") for code in EXIT_MEANINGS)
