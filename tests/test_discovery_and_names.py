"""Hidden files are named, never dropped; every path in a message is one line without control characters.

* A hidden file named like a data file (``.a.m10``, ``.m10``) found in a directory is not loaded
  but named as skipped with its reason (stderr, the summary, ``--json``), exit 0;
  ``--include-hidden`` loads it.  A hidden directory is not walked: named once when it holds
  data files (``.snapshot``), passed over quietly when it holds none (``.git``).
* A file named with a newline or an ESC that fails is one ``failed:`` line, escaped; no control
  character reaches stderr, stdout or a ``--json`` reason; the ledger and ``path`` keep the real path.

The commands run as users run them: the console script in a subprocess, against the session's
test server (``MONGODB_URI``), with a home of this module's own.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from ingest.errors import InputError, ParseError
from ingest.fileio import printable, stderr_line
from ingest.inputs import HIDDEN_FILE, find_inputs, is_hidden_reason
from ingest.load.outcome import FileOutcome, LoadSummary
from ingest.load.plan import discover

BIN = Path(sys.executable).parent / "sci-ingest"
SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "pasta"
SUFFIXES = (".m10", ".json")

#: Every character that must never reach a terminal or a log raw (a line break separates lines only).
BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
RAW_CONTROL = re.compile(f"[\\x00-\\x09\\x0b-\\x1f\\x7f-\\x9f{BIDI}\\u2028\\u2029\\ud800-\\udfff]")
FORGED = "bad\nfailed: forged.m10"
RED = "x\x1b[31mred.m10"


# ------------------------------------------------------------------ printable
def _unescape(shown: str) -> str:
    """The reader's side of ``printable``: ``\\\\`` a backslash, ``\\n \\r \\t \\xNN \\uNNNN`` escapes,
    any other backslash itself (``\\xNN`` from 0x80 up: a byte of a name that is not UTF-8, as
    ``os.fsdecode`` holds it)."""
    out, i = [], 0
    while i < len(shown):
        c = shown[i]
        nxt = shown[i + 1] if i + 1 < len(shown) else ""
        if c == "\\" and nxt == "\\":
            out.append("\\")
            i += 2
        elif c == "\\" and nxt in "nrt" and nxt:
            out.append({"n": "\n", "r": "\r", "t": "\t"}[nxt])
            i += 2
        elif c == "\\" and nxt == "x" and re.fullmatch(r"[0-9a-f]{2}", shown[i + 2:i + 4]):
            code = int(shown[i + 2:i + 4], 16)
            out.append(chr(code) if code < 0x80 else chr(0xDC00 + code))
            i += 4
        elif c == "\\" and nxt == "u" and re.fullmatch(r"[0-9a-f]{4}", shown[i + 2:i + 6]):
            out.append(chr(int(shown[i + 2:i + 6], 16)))
            i += 6
        else:
            out.append(c)
            i += 1
    return "".join(out)


def test_printable_shows_every_class_of_control_character_as_an_escape():
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
    for code in list(range(0x00, 0x20)) + [0x7F]:  # C0, DEL
        char = chr(code)
        assert printable(f"a{char}b") == "a" + named.get(char, f"\\x{code:02x}") + "b", hex(code)
    for code in range(0x80, 0xA0):  # C1: \u, as \x80 and up are the bytes of names that are not UTF-8
        assert printable(f"a{chr(code)}b") == f"a\\u{code:04x}b", hex(code)
    assert printable("x\x1b[31mred") == "x\\x1b[31mred"  # ESC: no colour reaches the terminal
    assert printable("\x85") == "\\u0085"  # NEL, a C1 line break
    assert printable(b"\xc2\x85") == "\\u0085" and printable(b"\x85") == "\\x85"  # the character, the byte
    for char in BIDI + "\u2028\u2029":  # bidirectional controls, line and paragraph separators
        assert printable(f"a{char}b") == f"a\\u{ord(char):04x}b"
    assert printable("evil\u202egnp.m10") == "evil\\u202egnp.m10"
    # a name that is not UTF-8: its bytes as \xNN, as display_path stores it
    assert printable(b"bad\xff\xfe.m10") == "bad\\xff\\xfe.m10"
    assert printable(os.fsdecode(b"bad\xff.m10")) == "bad\\xff.m10"
    assert printable(Path(os.fsdecode(b"p/\xc3.m10"))) == "p/\\xc3.m10"
    assert printable("\ud800") == "\\ud800"  # a lone surrogate that is no byte of a name
    # what is no control stays as it is
    for text in ("plain.m10", "dir with spaces/ü é 漢字 🧬.m10", "a:b;c'd\"e", "C:\\data\\a.m10", "\u00a0\u200b"):
        assert printable(text) == text
    # a backslash is doubled exactly where it would read as an escape
    assert printable("a\\nb") == "a\\\\nb"  # the two characters \ and n
    assert printable("a\nb") == "a\\nb"  # a newline
    assert printable("a\\\nb") == "a\\\\\\nb"  # a backslash, then a newline
    assert printable("a\\\\b") == "a\\\\\\b"  # two backslashes
    for letter in "nrtxu":
        assert printable(f"\\{letter}") == f"\\\\{letter}"
    assert printable("\\x1b") == "\\\\x1b" and printable("\\u202e") == "\\\\u202e"
    assert printable("end\\") == "end\\"
    # backslash=False: characters only (for a whole message whose paths are shown already)
    assert printable("a\\nb\n", backslash=False) == "a\\nb\\n"
    for text in ("a\nb\\n", "x\x1b\u202e"):
        once = printable(text)
        assert printable(once, backslash=False) == once  # idempotent on what printable made


@settings(max_examples=400, deadline=None)
@given(st.text(st.one_of(st.sampled_from("\\nrtxu0123456789abcdef\n\r\t\x1b\x00\x7f\x85\x9f" + BIDI
                                         + "\u2028\u2029"), st.characters()), max_size=24))
def test_printable_is_one_line_unambiguous_and_idempotent_without_backslashes(text):
    _check_round_trip(text)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=16))
def test_printable_shows_any_file_name_so_that_it_can_be_read_back(name):
    shown = printable(name)
    assert not RAW_CONTROL.search(shown) and "\n" not in shown, repr(shown)
    assert os.fsencode(_unescape(shown)) == name


def _check_round_trip(text: str) -> None:
    shown = printable(text)
    assert not RAW_CONTROL.search(shown) and "\n" not in shown, repr(shown)
    assert _unescape(shown) == text, (text, shown)  # a reader gets the name back: no two names shown alike
    plain = printable(text, backslash=False)
    assert not RAW_CONTROL.search(plain) and "\n" not in plain
    assert printable(plain, backslash=False) == plain


def test_stderr_line_is_one_line_but_keeps_indented_continuations(capsys):
    stderr_line("failed: a\nfailed: forged \x1b[2J\u202e")
    stderr_line("error: 2 critical expectation(s) failed\n  - suite: x\n  - suite: y")
    err = capsys.readouterr().err
    assert err.splitlines() == ["failed: a\\nfailed: forged \\x1b[2J\\u202e",
                                "error: 2 critical expectation(s) failed", "  - suite: x", "  - suite: y"]


# ------------------------------------------------------------------ messages
def test_a_parse_error_shows_its_source_escaped_and_keeps_it_raw():
    exc = ParseError("bad line \x1b[31m", source="/in/" + FORGED, line=3)
    assert exc.source == "/in/" + FORGED  # the real path, for the program
    assert str(exc) == "/in/bad\\nfailed: forged.m10:3: bad line \\x1b[31m"
    assert exc.reason == "bad line \\x1b[31m"
    assert str(ParseError("empty file", source="/in/" + RED)) == "/in/x\\x1b[31mred.m10: empty file"
    assert str(InputError(f"/in/{FORGED}: cannot read")) == "/in/bad\\nfailed: forged.m10: cannot read"


def test_an_outcome_line_and_its_json_hold_no_control_character():
    path = "/in/" + FORGED
    failed = FileOutcome(path=path, status="failed", reason=str(ParseError("no records", source=path, line=2)),
                         errors=[{"line": 2, "reason": "raw \x1b"}], warnings=["w\n"])
    assert failed.line == "/in/bad\\nfailed: forged.m10:2: no records"  # the path once, escaped
    raw = FileOutcome(path=path, status="failed", reason=f"{path}: cannot read: \x1b")  # a reason made raw
    assert raw.line == "/in/bad\\nfailed: forged.m10: cannot read: \\x1b"
    other = FileOutcome(path="/in/" + RED, status="skipped", reason="same content already loaded from /in/a\nb")
    assert other.line == "/in/x\\x1b[31mred.m10: same content already loaded from /in/a\\nb"
    data = LoadSummary(files=[failed, raw, other]).as_dict()
    assert data["files"][0]["path"] == path  # the real path: JSON escapes it
    assert "shown_path" not in data["files"][0]
    for reason in [f["reason"] for f in data["files"]] + [f["reason"] for f in data["failed"]]:
        assert not RAW_CONTROL.search(reason) and "\n" not in reason, reason
    assert data["files"][0]["errors"] == [{"line": 2, "reason": "raw \\x1b"}]
    assert data["files"][0]["warnings"] == ["w\\n"]
    assert FileOutcome.from_dict(failed.as_dict()).line == failed.line


def test_json_keeps_real_paths_with_no_control_character_raw():
    from ingest.report import dumps

    value = {"path": "/in/a\x85b\u202ec\x7f\x1b\n\u2028.m10"}
    text = dumps(value)
    assert json.loads(text) == value  # the real path, for programs
    assert not RAW_CONTROL.search(text.replace("\n", "")), text  # and nothing a terminal acts on


def test_the_text_and_html_reports_show_file_names_escaped():
    from analytics.report import html as html_report
    from ingest.report import timing_table

    row = {"stage": "load", "file": "/in/" + FORGED, "records_in": 1, "status": "failed",
           "error": "/in/" + RED + ": bad \u202e"}
    text = timing_table([row], with_file=True)
    assert "/in/bad\\nfailed: forged.m10" in text and len(text.splitlines()) == 3
    assert not RAW_CONTROL.search(text.replace("\n", ""))
    page = html_report._stages_section({"stages": [], "files": [row]})
    assert "/in/bad\\nfailed: forged.m10" in page and "/in/x\\x1b[31mred.m10: bad \\u202e" in page
    assert not RAW_CONTROL.search(page.replace("\n", ""))
    assert html_report.esc("a\x1b<b>\u2028") == "a\\x1b&lt;b&gt;\\u2028"


# ------------------------------------------------------------------ discovery
def _sample(i: int = 0) -> bytes:
    return sorted(SAMPLES.glob("*.m10"))[i].read_bytes()


def _folder(base: Path) -> Path:
    """A directory with visible, hidden and oddly named data files, and hidden directories."""
    (base / ".git" / "objects" / "ab").mkdir(parents=True)
    (base / ".git" / "config").write_text("[core]\n")
    (base / ".git" / "objects" / "ab" / "cdef").write_bytes(b"blob")
    (base / ".snapshot" / "hourly.0").mkdir(parents=True)
    (base / ".snapshot" / "hourly.0" / "a.m10").write_bytes(_sample(0))
    (base / "sub" / ".cache").mkdir(parents=True)
    (base / "sub" / ".cache" / "notes.txt").write_text("no data here")
    (base / "a.m10").write_bytes(_sample(0))
    (base / ".hidden.m10").write_bytes(_sample(1))
    (base / ".m10").write_bytes(_sample(2))
    (base / ".DS_Store").write_bytes(b"\0\0")  # hidden, but not named like data: not a word
    (base / "sub" / ".inner.json").write_text('[{"material_id": "mp-1"}]')
    return base


def test_hidden_files_and_directories_are_named_not_loaded(tmp_path):
    base = _folder(tmp_path / "in")
    files, refused, skipped = find_inputs([base], SUFFIXES)
    assert [f.name for f in files] == ["a.m10"]
    assert refused == []
    by_path = {s.path: s.reason for s in skipped}
    assert set(by_path) == {str(base / ".hidden.m10"), str(base / ".m10"), str(base / ".snapshot"),
                            str(base / "sub" / ".inner.json")}  # not .git, .cache, .DS_Store
    assert by_path[str(base / ".m10")] == HIDDEN_FILE
    assert "--include-hidden" in HIDDEN_FILE and "hidden" in HIDDEN_FILE
    snap = by_path[str(base / ".snapshot")]
    assert snap.startswith("a hidden directory") and "hourly.0/a.m10" in snap and "--include-hidden" in snap
    assert all(is_hidden_reason(r) for r in by_path.values())

    files, refused, skipped = find_inputs([base], SUFFIXES, include_hidden=True)
    assert sorted(str(f.relative_to(base)) for f in files) == [
        ".hidden.m10", ".m10", ".snapshot/hourly.0/a.m10", "a.m10", "sub/.inner.json"]
    assert refused == [] and skipped == []

    # a hidden path given itself is read as asked
    files, refused, skipped = find_inputs([base / ".hidden.m10", base / ".snapshot"], SUFFIXES)
    assert [f.name for f in files] == [".hidden.m10", "a.m10"] and not refused and not skipped

    # discover: the skipped ones are outcomes to name, next to the refused ones
    files, named = discover([base, base / "missing.m10"])
    assert [(o.status, Path(o.path).name) for o in named] == [
        ("failed", "missing.m10"), ("skipped", ".hidden.m10"), ("skipped", ".m10"), ("skipped", ".snapshot"),
        ("skipped", ".inner.json")]
    assert named[1].line == f"{base}/.hidden.m10: {HIDDEN_FILE}"
    files, named = discover([base], include_hidden=True)
    assert len(files) == 5 and named == []


def test_a_hidden_directory_too_big_to_search_is_named(tmp_path, monkeypatch):
    import ingest.inputs

    big = tmp_path / "in" / ".big"
    big.mkdir(parents=True)
    for i in range(30):
        (big / f"f{i:02d}.txt").write_text("x")
    (big / "zz").mkdir()
    (big / "zz" / "late.m10").write_bytes(b"")
    monkeypatch.setattr(ingest.inputs, "HIDDEN_DIR_SEARCH", 10)
    _, _, skipped = find_inputs([tmp_path / "in"], SUFFIXES)
    assert len(skipped) == 1 and "too big to tell" in skipped[0].reason and "--include-hidden" in skipped[0].reason


def test_odd_names_are_shown_escaped_and_stored_as_they_are(tmp_path):
    base = tmp_path / "in"
    base.mkdir()
    raw = os.fsencode(base)
    with open(raw + b"/bad\xff.m10", "wb"), open(raw + b"/.hid\xfe.m10", "wb"):
        pass
    (base / "lit\\xff.m10").write_bytes(b"")  # a valid name holding a backslash and "xff"
    (base / "sub\x1b[2J").mkdir()
    (base / "sub\x1b[2J" / ".h\nx.m10").write_bytes(b"")
    files, named = discover([base])
    assert [f.name for f in files] == ["lit\\xff.m10"]
    lines = sorted(o.line for o in named)
    assert lines == sorted([
        f"{base}/bad\\xff.m10: the file name is not valid UTF-8 (shown escaped); rename the file to load it",
        f"{base}/.hid\\xfe.m10: {HIDDEN_FILE}",
        f"{base}/sub\\x1b[2J/.h\\nx.m10: {HIDDEN_FILE}",
    ]), lines
    for o in named:
        json.dumps(o.as_dict())
        o.path.encode("utf-8")  # storable: the display form of a name that is not UTF-8
    assert printable(files[0]) == f"{base}/lit\\\\xff.m10"  # not to be read as the byte 0xff


# ------------------------------------------------------------------ the commands
@pytest.fixture(scope="module")
def home(tmp_path_factory, mongo_uri):
    """This module's home; commands use the session's test server, and any server of the home is stopped."""
    path = tmp_path_factory.mktemp("names_home")
    env = {**os.environ, "SCI_INGEST_HOME": str(path), "MONGODB_URI": mongo_uri}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    yield env
    subprocess.run([str(BIN), "server", "stop"], env=env, capture_output=True, timeout=120)


@pytest.fixture()
def dbname(mongo_client):
    name = f"names_{uuid.uuid4().hex[:8]}"
    yield name
    mongo_client.drop_database(name)


def cli(env, *args, timeout=600):
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, env=env, timeout=timeout,
                          errors="surrogateescape")


def _clean(proc) -> None:
    """No control character anywhere in what the command printed (a newline only ends a line)."""
    for name, text in (("stderr", proc.stderr), ("stdout", proc.stdout)):
        found = RAW_CONTROL.search(text)
        assert found is None, (name, repr(text[max(0, found.start() - 80):found.end() + 80]))


def _lines(text: str, prefix: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(prefix)]


def _hidden_inbox(base: Path) -> Path:
    base.mkdir()
    (base / "a.m10").write_bytes(_sample(0))
    (base / ".hidden.m10").write_bytes(_sample(1))
    (base / ".m10").write_bytes(_sample(2))
    return base


def test_load_names_hidden_files_as_skipped_and_include_hidden_loads_them(home, dbname, mongo_client, tmp_path):
    inbox = _hidden_inbox(tmp_path / "in")
    proc = cli(home, "load", "-q", "--workers", "1", "--json", "--db", dbname, str(inbox))
    assert proc.returncode == 0, proc.stderr[-3000:]
    _clean(proc)
    assert sorted(_lines(proc.stderr, "skipped: ")) == [f"skipped: {inbox}/.hidden.m10: {HIDDEN_FILE}",
                                                        f"skipped: {inbox}/.m10: {HIDDEN_FILE}"]
    data = json.loads(proc.stdout)
    assert data["files"] == {"files_loaded": 1, "files_skipped": 2, "files_failed": 0, "files_not_reached": 0,
                             "kept_from_last_good": 0}
    assert data["failed"] == []
    ledger = mongo_client[dbname].ingest_files
    assert ledger.count_documents({}) == 1  # the hidden ones were not read

    text = cli(home, "load", "-q", "--workers", "1", "--db", dbname, str(inbox))
    assert text.returncode == 0, text.stderr[-3000:]
    _clean(text)
    assert len(_lines(text.stderr, "skipped: ")) == 2
    assert "files: 0 loaded, 3 skipped (1 unchanged, 2 hidden: each named on stderr), 0 failed" in text.stdout

    proc = cli(home, "load", "-q", "--workers", "1", "--json", "--include-hidden", "--db", dbname, str(inbox))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _lines(proc.stderr, "skipped: ") == []
    data = json.loads(proc.stdout)
    assert data["files"]["files_loaded"] == 2 and data["files"]["files_skipped"] == 1
    assert ledger.count_documents({"status": "loaded"}) == 3
    assert ledger.find_one({"_id": str(inbox / ".m10")})["status"] == "loaded"


def test_run_names_hidden_files_and_include_hidden_loads_them(home, dbname, tmp_path):
    inbox = _hidden_inbox(tmp_path / "in")
    (inbox / "a.m10").unlink()
    proc = cli(home, "run", "-q", "--workers", "1", "--json", "--db", dbname, str(inbox))
    assert proc.returncode == 0, proc.stderr[-3000:]
    _clean(proc)
    assert len(_lines(proc.stderr, "skipped: ")) == 2
    data = json.loads(proc.stdout)
    assert data["files"]["files_skipped"] == 2 and data["inserted"] == 0
    proc = cli(home, "run", "-q", "--workers", "1", "--json", "--include-hidden", "--db", dbname, str(inbox))
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(proc.stdout)
    assert data["files"]["files_loaded"] == 2 and data["inserted"] > 0


def test_a_failing_file_named_with_a_newline_or_an_escape_is_one_escaped_line(home, dbname, mongo_client,
                                                                              tmp_path):
    inbox = tmp_path / "in"
    inbox.mkdir()
    (inbox / "good.m10").write_bytes(_sample(0))
    for name in (FORGED, RED):
        (inbox / name).write_text("garbage, not a -m 10 report\n")
    shown = {FORGED: f"{inbox}/bad\\nfailed: forged.m10", RED: f"{inbox}/x\\x1b[31mred.m10"}

    proc = cli(home, "load", "-q", "--workers", "1", "--db", dbname, str(inbox))
    assert proc.returncode == 2, proc.stderr[-3000:]
    _clean(proc)
    failed = _lines(proc.stderr, "failed:")
    assert len(failed) == 2, proc.stderr  # one per failing file: no forged line
    for name in (FORGED, RED):
        assert sum(line.startswith(f"failed: {shown[name]}:1: ") for line in failed) == 1, (name, failed)
    assert "files: 1 loaded, 0 skipped (unchanged), 2 failed (each named on stderr)" in proc.stdout

    proc = cli(home, "load", "-q", "--workers", "1", "--json", "--force", "--db", dbname, str(inbox))
    assert proc.returncode == 2, proc.stderr[-3000:]
    _clean(proc)
    assert len(_lines(proc.stderr, "failed:")) == 2
    data = json.loads(proc.stdout)
    assert sorted(f["path"] for f in data["failed"]) == sorted(str(inbox / n) for n in (FORGED, RED))  # real
    for f in data["failed"]:
        assert not RAW_CONTROL.search(f["reason"]) and "\n" not in f["reason"], f
        assert f["reason"].startswith(shown[Path(f["path"]).name] + ":1: ")
        for e in f["errors"]:
            assert not RAW_CONTROL.search(e["reason"])
    ledger = mongo_client[dbname].ingest_files
    for name in (FORGED, RED):  # the ledger keys the real path; what it says is escaped
        entry = ledger.find_one({"_id": str(inbox / name)})
        assert entry is not None and entry["status"] == "failed", entry
        assert not RAW_CONTROL.search(entry.get("error") or ""), entry


def test_parse_names_hidden_files_and_escapes_names(tmp_path):
    env = {**os.environ}
    inbox = _hidden_inbox(tmp_path / "in")
    (inbox / FORGED).write_text("garbage\n")
    proc = cli(env, "parse", "--no-sequences", str(inbox))
    assert proc.returncode == 2
    _clean(proc)
    assert sorted(_lines(proc.stderr, "skipped: ")) == [f"skipped: {inbox}/.hidden.m10: {HIDDEN_FILE}",
                                                        f"skipped: {inbox}/.m10: {HIDDEN_FILE}"]
    errors = _lines(proc.stderr, "error: ")
    assert len(errors) == 1 and errors[0].startswith(f"error: {inbox}/bad\\nfailed: forged.m10:1: "), proc.stderr
    assert not _lines(proc.stderr, "failed:")
    n_visible = len(proc.stdout.splitlines())
    proc = cli(env, "parse", "--no-sequences", "--include-hidden", str(inbox))
    assert proc.returncode == 2 and not _lines(proc.stderr, "skipped: ")
    assert len(proc.stdout.splitlines()) > n_visible
    shutil.rmtree(inbox)
