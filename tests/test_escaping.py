"""Data is escaped wherever it is printed for people, and kept as it is in machine formats.

Through the CLI, against the test server: materials whose ids and fields hold NUL, ESC[31m,
U+202E, a newline, a carriage return, DEL, U+2066 and a backslash are loaded from a JSONL file;
then a table (to a pipe and to a file), CSV in a terminal (a pty), the lines on stderr (a value
set aside, a bad --run) and a validation failure show them escaped as paths are
(``ingest.fileio.printable``), one line each, while JSON Lines, CSV to a pipe or a file, and
Parquet give back the exact strings.  (issue 42, item 6)
"""

from __future__ import annotations

import csv
import io
import json
import os
import pty
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from ingest.fileio import printable

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent / "sci-ingest"

HOSTILE_ID = "mp-1\x00\x1b[31m\u202eX\nY"
HOSTILE_FORMULA = "Fe\r\t\x7f\u2066O\\n"
HOSTILE_GAP = "\x1b[2J\u202e1.5"  # not a number: set aside, and named on stderr with its value
#: What no line printed for people may hold raw: C0 (but the line break), DEL, C1, the bidirectional
#: controls, U+2028 / U+2029.
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def _material(material_id: str, formula: str, band_gap) -> dict:
    return {"material_id": material_id, "formula_pretty": formula, "elements": ["Fe", "O"], "nelements": 2,
            "chemsys": "Fe-O", "band_gap": band_gap, "energy_above_hull": 0.0, "is_stable": True,
            "task_ids": [material_id]}


@pytest.fixture(scope="module")
def loaded(mongo_uri, mongo_client, tmp_path_factory):
    """(database name, the load's finished process, the module's home) with three materials: one
    hostile in its id and formula, one whose band gap is a hostile string, one plain."""
    folder = tmp_path_factory.mktemp("escaping")
    data = folder / "hostile.jsonl"
    data.write_text("".join(json.dumps(d) + "\n" for d in (
        _material(HOSTILE_ID, HOSTILE_FORMULA, 1.0), _material("mp-2", "FeO", HOSTILE_GAP),
        _material("mp-3", "Fe2O3", 2.0))), encoding="utf-8")
    name = f"t_escaping_{uuid.uuid4().hex[:8]}"
    home = folder / "home"
    home.mkdir()
    proc = _cli(mongo_uri, name, home, "load", "-q", "--workers", "1", str(data))
    assert proc.returncode == 2, proc.stderr  # a value set aside: partial
    yield name, proc, home
    mongo_client.drop_database(name)


def _cli(mongo_uri, db_name, home, *argv, text=True, **kwargs):
    env = {**os.environ, "MONGODB_URI": mongo_uri, "SCI_INGEST_HOME": str(home)}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    return subprocess.run([str(BIN), *argv, "--db", db_name], capture_output=True, text=text, env=env, cwd=REPO,
                          timeout=300, **kwargs)


def _people(text: str) -> list[str]:
    """The lines of ``text``, each checked free of raw control and bidirectional characters."""
    lines = text.splitlines()
    for line in lines:
        assert not RAW.search(line), repr(line)
    return lines


def test_a_table_shows_the_values_escaped_one_row_a_line(mongo_uri, loaded, tmp_path):
    name, _, home = loaded
    proc = _cli(mongo_uri, name, home, "query", "materials", "--format", "table", "--sort", "material_id",
                "--fields", "material_id,formula_pretty,band_gap")
    assert proc.returncode == 0, proc.stderr
    lines = _people(proc.stdout)
    assert len(lines) == 2 + 3, proc.stdout  # header, rule, a line per material: none forged
    assert lines[2].split("  ")[0] == printable(HOSTILE_ID) == "mp-1\\x00\\x1b[31m\\u202eX\\nY"
    assert printable(HOSTILE_FORMULA) == "Fe\\r\\t\\x7f\\u2066O\\\\n" and printable(HOSTILE_FORMULA) in lines[2]
    out = tmp_path / "table.txt"  # a table is for people wherever it goes
    proc = _cli(mongo_uri, name, home, "query", "materials", "--format", "table", "--sort", "material_id",
                "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert len(_people(out.read_text(encoding="utf-8"))) == 5


def test_json_lines_give_back_the_exact_strings(mongo_uri, loaded):
    name, _, home = loaded
    for argv in (("--format", "jsonl"), ("--json",)):
        proc = _cli(mongo_uri, name, home, "query", "materials", *argv, "--sort", "material_id",
                    "--fields", "material_id,formula_pretty", text=False)
        assert proc.returncode == 0, proc.stderr
        text = proc.stdout.decode("utf-8")
        lines = _people(text)  # JSON escapes C0 itself; DEL, U+202E and U+2066 are written \uNNNN too
        assert [json.loads(line) for line in lines] == [
            {"material_id": HOSTILE_ID, "formula_pretty": HOSTILE_FORMULA},
            {"material_id": "mp-2", "formula_pretty": "FeO"}, {"material_id": "mp-3", "formula_pretty": "Fe2O3"}]


def _csv_rows(raw: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(raw.decode("utf-8"), newline="")))


def test_csv_to_a_pipe_or_a_file_keeps_the_bytes(mongo_uri, loaded, tmp_path):
    name, _, home = loaded
    argv = ("query", "materials", "--format", "csv", "--sort", "material_id", "--fields", "material_id,formula_pretty")
    proc = _cli(mongo_uri, name, home, *argv, text=False)
    assert proc.returncode == 0, proc.stderr
    expected = [["material_id", "formula_pretty"], [HOSTILE_ID, HOSTILE_FORMULA], ["mp-2", "FeO"], ["mp-3", "Fe2O3"]]
    assert _csv_rows(proc.stdout) == expected
    out = tmp_path / "m.csv"
    proc = _cli(mongo_uri, name, home, *argv, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert _csv_rows(out.read_bytes()) == expected


def test_csv_in_a_terminal_shows_the_values_escaped(mongo_uri, loaded):
    name, _, home = loaded
    main, child = pty.openpty()
    try:
        env = {**os.environ, "MONGODB_URI": mongo_uri, "SCI_INGEST_HOME": str(home)}
        env.pop("DASK_SCHEDULER_ADDRESS", None)
        proc = subprocess.Popen([str(BIN), "query", "materials", "--format", "csv", "--sort", "material_id",
                                 "--fields", "material_id,formula_pretty", "--db", name],
                                stdout=child, stderr=subprocess.PIPE, env=env, cwd=REPO)
        os.close(child)
        child = None
        raw = b""
        while True:  # until the command's end closes the terminal's other side (EIO)
            try:
                chunk = os.read(main, 65536)
            except OSError:
                break
            if not chunk:
                break
            raw += chunk
        assert proc.wait(timeout=300) == 0, proc.stderr.read()
    finally:
        os.close(main)
        if child is not None:
            os.close(child)
    lines = _people(raw.decode("utf-8").replace("\r\n", "\n"))  # the terminal's own line ends
    assert lines == ["material_id,formula_pretty", f"{printable(HOSTILE_ID)},{printable(HOSTILE_FORMULA)}",
                     "mp-2,FeO", "mp-3,Fe2O3"]


def test_parquet_keeps_the_bytes(mongo_uri, loaded, tmp_path):
    name, _, home = loaded
    out = tmp_path / "m.parquet"
    proc = _cli(mongo_uri, name, home, "export", "materials", "--format", "parquet", "--out", str(out),
                "--fields", "material_id,formula_pretty", "--sort", "material_id")
    assert proc.returncode == 0, proc.stderr
    table = pq.read_table(out)
    assert table.column("material_id").to_pylist() == [HOSTILE_ID, "mp-2", "mp-3"]
    assert table.column("formula_pretty").to_pylist()[0] == HOSTILE_FORMULA
    _people(proc.stderr)


def test_stderr_shows_values_escaped_one_line_each(mongo_uri, loaded):
    name, load, home = loaded
    lines = _people(load.stderr)
    aside = [line for line in lines if line.startswith("set aside: ")]
    assert len(aside) == 1 and printable(json.dumps(HOSTILE_GAP, ensure_ascii=False), backslash=False) in aside[0]
    proc = _cli(mongo_uri, name, home, "timings", "--run", "r\x1b[31m\u202eX\nY")  # argv holds no NUL
    assert proc.returncode == 64, proc.stderr
    assert _people(proc.stderr) == ["error: no run 'r\\x1b[31m\\u202eX\\nY' is recorded; "
                                    "`sci-ingest timings --list` lists the runs"]
    proc = _cli(mongo_uri, name, home, "query", "materials", "--fields", "a\x1b[31m\u202e")
    assert proc.returncode == 64
    (line,) = _people(proc.stderr)
    assert line.startswith("error: --fields: materials has no field 'a\\x1b[31m\\u202e'")


def test_a_validation_failure_shows_the_sample_escaped(mongo_uri, loaded):
    name, _, home = loaded
    proc = _cli(mongo_uri, name, home, "validate")
    assert proc.returncode == 4, proc.stdout + proc.stderr  # material_id's pattern fails: an error
    lines = _people(proc.stdout)
    failed = [line for line in lines if line.strip().startswith("ERROR materials:") and "material_id" in line]
    assert failed and "mp-1\\x00\\x1b[31m\\u202eX\\nY" in failed[0], proc.stdout
    _people(proc.stderr)
