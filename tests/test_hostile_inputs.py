"""Hostile inputs through `sci-ingest load` (the CLI as a subprocess, a real server).

The rule: whatever a file's bytes, name or type, it ends loaded or named as failed
(path, line or record, reason), nothing of a failed file stays in the database,
the other files go in, and the run exits 2 -- in bounded time, with no traceback.

Work bounded by the input's worth (docs/loading.md, "Limits of a file"; issue 42): a record file fails
at its 100th bad record (``--max-bad-records``), the rest unread; a file whose first bytes, or bytes
hashed, prove it bad fails there, never read or hashed to its end (a sparse file of NUL bytes, a
``-m 10`` line over its limit); a JSON record whose decoded form would pass the memory budget is
refused before it is built (the loader's peak RSS under 300 MB); a key twice in one object is
refused, named.  No duration is asserted: those hostile files would take minutes to hours unbounded,
and a subprocess's timeout is only the safety net; the bounds asserted are counts (bad records read,
bytes read, peak RSS).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from ingest.errors import ParseError
from ingest.load.early import checked_version
from ingest.load.outcome import FileOutcome
from ingest.load.plan import discover

BIN = Path(sys.executable).parent / "sci-ingest"
SAMPLES = Path(__file__).resolve().parent.parent / "samples"
SPARSE = 100 << 30  # 100 GiB of holes: no disk, and hours of reading and hashing if it were read


def _material(i: int) -> dict:
    return {"material_id": f"mp-{i}", "formula_pretty": "Fe2O3", "elements": ["Fe", "O"], "nsites": 5}


def _env(tmp_path: Path) -> dict:
    env = {**os.environ, "SCI_INGEST_HOME": str(tmp_path / "home"), "SCI_INGEST_KEEP": "0"}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    return env


def _load(mongo_uri: str, db: str, paths, tmp_path: Path, env: dict | None = None, timeout: float = 180):
    proc = subprocess.run([str(BIN), "load", "--json", "-q", "--workers", "1", "--mongo-uri", mongo_uri,
                           "--db", db, *map(str, paths)], capture_output=True, text=True,
                          env={**_env(tmp_path), **(env or {})}, timeout=timeout)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc, json.loads(proc.stdout)


@pytest.fixture()
def dbname(mongo_client):
    name = f"hostile_{uuid.uuid4().hex[:8]}"
    yield name
    mongo_client.drop_database(name)


def _failed(report: dict) -> dict[str, str]:
    return {f["path"]: f["reason"] for f in report["failed"]}


def test_hostile_files_and_names_fail_alone_and_leave_nothing(mongo_uri, mongo_client, dbname, tmp_path):
    inbox = tmp_path / "in"
    (inbox / "sub").mkdir(parents=True)
    good = inbox / "good.json"
    good.write_text(json.dumps([_material(i) for i in range(3)]))
    # an integer literal over Python's 4,300-digit limit
    (inbox / "bigint.json").write_text('[{"material_id": "mp-900", "nsites": ' + "9" * 5000 + "}]")
    # JSON Lines: 1,500 good records, then one over MongoDB's 16 MiB document limit
    with open(inbox / "late_oversize.jsonl", "w") as fh:
        for i in range(1000, 2500):
            fh.write(json.dumps(_material(i)) + "\n")
        fh.write(json.dumps({**_material(9999), "blob": "a" * (17 << 20)}) + "\n")
    # a loop of symbolic links, a broken one, a link to a directory that loops back up
    os.symlink(inbox / "loop_b.json", inbox / "loop_a.json")
    os.symlink(inbox / "loop_a.json", inbox / "loop_b.json")
    os.symlink(inbox / "missing.json", inbox / "dangling.json")
    os.symlink(inbox, inbox / "sub" / "up")
    # a name that is not UTF-8, a FIFO named like a data file
    bad_name = os.fsencode(inbox) + b"/caf\xe9.json"
    with open(bad_name, "w") as fh:
        fh.write(json.dumps([_material(700)]))
    os.mkfifo(inbox / "pipe.json")
    # NUL bytes inside a valid -m 10 alignment
    m10 = (SAMPLES / "pasta" / "fasta36_prot.m10").read_bytes()
    at = m10.index(b"\n", m10.index(b"\n", m10.index(b"; al_display_start")) + 1)
    (inbox / "nul.m10").write_bytes(m10[: at - 3] + b"\0" * 4096 + m10[at - 3 :])

    proc, report = _load(mongo_uri, dbname, [inbox], tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    failed = _failed(report)
    expect = {
        "bigint.json": "number too long",
        "late_oversize.jsonl": "over the 16,777,216-byte limit",
        "loop_a.json": "loop of symbolic links",
        "loop_b.json": "loop of symbolic links",
        "dangling.json": "broken symbolic link",
        "caf\\xe9.json": "not valid UTF-8",
        "pipe.json": "not a regular file: a FIFO",
        "nul.m10": "not residues",
    }
    for name, reason in expect.items():
        hits = [r for p, r in failed.items() if p.endswith("/" + name)]
        assert hits and reason in hits[0], (name, failed)
    assert failed[str(inbox / "late_oversize.jsonl")].startswith(f"{inbox / 'late_oversize.jsonl'}:1501:")
    assert f"{inbox / 'nul.m10'}:" in failed[str(inbox / "nul.m10")]  # file:line
    assert len(failed) == len(expect)
    assert report["files"]["files_loaded"] == 1
    db = mongo_client[dbname]
    # nothing of a failed file stays: not the 1,500 records before the oversize one
    assert sorted(d["_id"] for d in db.materials.find({}, {"_id": 1})) == ["mp-0", "mp-1", "mp-2"]
    assert db.searches.count_documents({}) == 0 and db.hits.count_documents({}) == 0
    assert db.ingest_files.count_documents({"status": "loading"}) == 0
    stored = json.dumps(list(db.ingest_files.find({}, {"_id": 1})), default=str)
    assert "\\udc" not in stored  # no surrogate-escaped name reached the database


def test_concatenated_objects_without_newlines_stream(tmp_path):
    """Objects back to back on one line read at the speed of an array, without holding the line."""
    from ingest.parsers.materials import read_records

    records = [json.dumps({**_material(i), "sites": [{"xyz": [0.1, 0.2, 0.3]}] * 20}) for i in range(4000)]
    (tmp_path / "cat.json").write_text("".join(records))
    (tmp_path / "arr.json").write_text("[" + ",".join(records) + "]")
    for name in ("cat.json", "arr.json"):
        with open(tmp_path / name, "rb") as fh:
            keys = [r.key for r in read_records(fh, name)]
        assert keys == [f"mp-{i}" for i in range(4000)], name


def test_objects_on_one_long_line_are_read_in_bounded_memory(tmp_path):
    """20+ MB of concatenated objects without a newline (more than the layout sniffer peeks at, 16 MB):
    the reader's peak RSS stays small.  (It was 70 MB, 19 CPU-s to read.)"""
    text = "".join(json.dumps({**_material(i), "sites": [{"xyz": [0.1, 0.2, 0.3]}] * 30}) for i in range(12_000))
    path = tmp_path / "one_line.json"
    path.write_text(text * 2)
    assert path.stat().st_size > 20e6
    probe = ("import sys\nfrom ingest.parsers.materials import read_records\n"
             "n = sum(1 for _ in read_records(open(sys.argv[1], 'rb'), sys.argv[1]))\n"
             "hwm = next(l for l in open('/proc/self/status') if l.startswith('VmHWM:'))\n"
             "print(n, int(hwm.split()[1]) // 1024)")
    out = subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True, text=True, timeout=300,
                         check=True).stdout.split()
    assert int(out[0]) == 24_000  # ids repeat across the two copies; every object is read
    assert int(out[1]) < 120, f"peak RSS {out[1]} MB for a {path.stat().st_size / 1e6:.0f} MB line"


def test_a_record_over_the_limit_ends_the_reading_without_reading_it_into_memory(tmp_path, monkeypatch):
    """Known once the limit's bytes and one more are read without its end: named there, and nothing more is
    read (neither held nor skipped to its end: the file fails whatever follows)."""
    from ingest.parsers import materials

    monkeypatch.setattr(materials, "MAX_RECORD_BYTES", 10_000)
    for layout, text in {
        "array": "[" + json.dumps(_material(1)) + ", " + json.dumps({"x": "y" * 5_000_000, "z": "}]"})
                 + ", " + json.dumps(_material(3)) + "]",
        "concatenated": json.dumps(_material(1)) + json.dumps({"x": ["y" * 5_000_000, "{"]}) + json.dumps(_material(3)),
        "lines": json.dumps(_material(1)) + "\n" + json.dumps({"x": "y" * 5_000_000}) + "\n" + json.dumps(_material(3)),
    }.items():
        path = tmp_path / f"{layout}.json"
        path.write_text(text)
        with open(path, "rb") as fh:
            out = list(materials.read_records(fh, str(path)))
            read = fh.tell()
        assert [getattr(r, "key", None) for r in out] == ["mp-1", None], (layout, out)
        assert "record of more than 10,000 bytes is over the 10,000-byte limit" in out[1].reason, layout
        assert "the rest of the file is not read" in out[1].reason, layout
        assert read <= 10_000 + 4 * materials.CHUNK, (layout, read)  # not the 5 MB record's end


def test_a_record_over_the_limit_that_ends_in_the_chunk_read_is_named_with_its_size(tmp_path, monkeypatch):
    from ingest.parsers import materials

    monkeypatch.setattr(materials, "MAX_RECORD_BYTES", 10_000)
    text = "[" + json.dumps(_material(1)) + ", " + json.dumps({"x": "y" * 20_000}) + ", " + json.dumps(_material(3)) + "]"
    path = tmp_path / "array.json"
    path.write_text(text)
    with open(path, "rb") as fh:
        out = list(materials.read_records(fh, str(path)))
    assert [getattr(r, "key", None) for r in out] == ["mp-1", None, "mp-3"], out
    assert "record of 20,010 bytes is over the 10,000-byte limit" in out[1].reason, out[1].reason


def test_a_directory_that_cannot_be_read_is_reported(tmp_path):
    """Run as an unprivileged user (root reads any directory): the unreadable one is named."""
    base = Path(tempfile.mkdtemp(prefix="sci-ingest-unreadable-"))
    try:
        os.chmod(base, 0o755)
        (base / "ok").mkdir()
        (base / "ok" / "a.json").write_text(json.dumps([_material(1)]))
        (base / "closed").mkdir()
        (base / "closed" / "b.json").write_text(json.dumps([_material(2)]))
        os.chmod(base / "closed", 0o000)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child drops to nobody when it is root, then discovers
            try:
                os.close(read)
                if os.geteuid() == 0:
                    os.setgid(65534)
                    os.setuid(65534)
                files, refused = discover([base])
                os.write(write, json.dumps([[str(f) for f in files],
                                            [[r.path, r.reason] for r in refused]]).encode())
            finally:
                os._exit(0)
        os.close(write)
        with os.fdopen(read) as fh:
            files, refused = json.loads(fh.read() or "[[], []]")
        os.waitpid(pid, 0)
        assert files == [str(base / "ok" / "a.json")]
        assert refused == [[str(base / "closed"), "cannot read the directory: Permission denied"]]
    finally:
        os.chmod(base / "closed", 0o755)
        shutil.rmtree(base)


def test_a_record_that_grows_over_the_bson_limit_fails_its_file_with_its_line(mongo_uri, mongo_client, dbname,
                                                                               tmp_path):
    """Small as JSON (3 MB), too big as BSON (19 MB): refused by the server, named, rolled back."""
    inbox = tmp_path / "in"
    inbox.mkdir()
    path = inbox / "grows.jsonl"
    with open(path, "w") as fh:
        for i in range(100):
            fh.write(json.dumps(_material(i)) + "\n")
        fh.write(json.dumps({**_material(100), "v": [1] * 1_500_000}) + "\n")
    (inbox / "ok.json").write_text(json.dumps([_material(500)]))
    proc, report = _load(mongo_uri, dbname, [inbox], tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    reason = _failed(report)[str(path)]
    assert reason.startswith(f"{path}:101: document 'mp-100' is ") and "bytes as BSON" in reason, reason
    assert [d["_id"] for d in mongo_client[dbname].materials.find({}, {"_id": 1})] == ["mp-500"]


def test_the_ledger_lists_each_bad_record_once_and_the_summary_apart(mongo_uri, mongo_client, dbname, tmp_path):
    path = tmp_path / "two_bad.jsonl"
    path.write_text("\n".join([json.dumps(_material(1)), "{not json", json.dumps(_material(2)), "[1, 2]"]) + "\n")
    proc, report = _load(mongo_uri, dbname, [path], tmp_path)
    assert proc.returncode == 2
    entry = mongo_client[dbname].ingest_files.find_one({"_id": str(path)})
    assert [e["line"] for e in entry["errors"]] == [2, 4], entry["errors"]
    assert not any("bad record(s)" in e["reason"] for e in entry["errors"])
    assert entry["error"].startswith(f"{path}:2: 2 bad record(s); first: ")


def _record(i: int) -> str:
    return json.dumps(_material(i))


def _failures(report: dict) -> dict[str, dict]:
    return {f["path"]: f for f in report["failed"]}


#: Runs a command and writes its peak RSS (KB) to a file: from this small process, since a child's
#: ru_maxrss counts the pages it shared with its parent between fork and exec (a test process holding
#: its hostile inputs, 140-310 MB here, would be measured instead of the loader).
_MEASURE = ("import os, sys\n"
            "pid = os.spawnv(os.P_NOWAIT, sys.argv[2], sys.argv[2:])\n"
            "_, status, usage = os.wait4(pid, 0)\n"
            "open(sys.argv[1], 'w').write(str(usage.ru_maxrss))\n"
            "sys.exit(os.waitstatus_to_exitcode(status))\n")


def _load_measured(mongo_uri: str, db: str, paths, tmp_path: Path, *options: str, timeout: float = 300):
    """`sci-ingest load --json` in one process: (its exit code, stderr, report, peak RSS in MB)."""
    peak = tmp_path / "peak_rss_kb"
    args = [sys.executable, "-c", _MEASURE, str(peak), str(BIN), "load", "--json", "-q", "--workers", "1",
            "--mongo-uri", mongo_uri, "--db", db, *options, *map(str, paths)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(tmp_path),
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)  # the safety net: a hang fails, nothing is timed
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.communicate()
        raise AssertionError(f"still running after {timeout} s: the work was not bounded") from None
    assert "Traceback" not in stderr, stderr[-3000:]
    return proc.returncode, stderr, json.loads(stdout), int(peak.read_text()) // 1024


# ------------------------------------------------------------------ item 1: a bound on bad records
def test_a_gzip_of_millions_of_bad_records_fails_at_the_bound(mongo_uri, mongo_client, dbname, tmp_path):
    """10 million `{}` in 29 KB of gzip (unbounded: about 90 us each, 15 minutes), and 2 million in a file small
    enough for a batch: each fails at its 100th bad record, naming the first ones and the count."""
    inbox = tmp_path / "in"
    inbox.mkdir()
    with gzip.open(inbox / "bomb.json.gz", "wb", compresslevel=9) as fh:
        block = b"{}\n" * 100_000
        for _ in range(100):
            fh.write(block)
    with gzip.open(inbox / "small_bomb.jsonl.gz", "wb") as fh:  # 6 MB inflated: read whole into a batch
        fh.write(b'{"x": 1}\n' * 2_000_000)
    (inbox / "good.jsonl").write_text("\n".join(_record(i) for i in range(3)) + "\n")
    assert (inbox / "bomb.json.gz").stat().st_size < 64_000

    code, stderr, report, _ = _load_measured(mongo_uri, dbname, [inbox], tmp_path)
    assert code == 2, stderr[-2000:]
    failed = _failures(report)
    assert set(failed) == {str(inbox / "bomb.json.gz"), str(inbox / "small_bomb.jsonl.gz")}, failed
    for name in ("bomb.json.gz", "small_bomb.jsonl.gz"):
        path = str(inbox / name)
        reason = failed[path]["reason"]
        assert reason.startswith(f"{path}:1: 100 bad record(s), the bound (--max-bad-records): the rest of the "
                                 "file is not read; first: "), reason
        assert f"; then {path}:2: the same; {path}:3: the same (the first 50 are listed in the ledger)" in reason
        assert [e["line"] for e in failed[path]["errors"]] == [1, 2, 3, 4, 5]
        entry = mongo_client[dbname].ingest_files.find_one({"_id": path})
        assert entry["status"] == "failed" and [e["line"] for e in entry["errors"]] == list(range(1, 51))
        assert f"failed: {reason}" in stderr
    assert report["files"]["files_loaded"] == 1
    assert sorted(d["_id"] for d in mongo_client[dbname].materials.find()) == ["mp-0", "mp-1", "mp-2"]


def test_blanks_cost_no_more_than_a_record(mongo_uri, mongo_client, dbname, tmp_path):
    """A GB of newlines fits in a MB of gzip, and they were read one by one (0.27 us each), and counted again
    for each line read while the layout was sniffed (40,000 took 40 s): a run of blanks is skipped a buffer at a
    time and may be as long as a record, no longer; the rest of the file is then not read."""
    inbox = tmp_path / "in"
    inbox.mkdir()
    blanks = b"\n" * (64 << 20)
    (inbox / "lines.jsonl.gz").write_bytes(gzip.compress(_record(1).encode() + b"\n" + blanks + _record(2).encode(), 1))
    (inbox / "after.json.gz").write_bytes(gzip.compress(b"[" + _record(3).encode() + b"]" + blanks, 1))
    sniffed = b'{"material_id": "mp-4",}\n' + b"\n" * 4_000_000 + _record(5).encode() + b"\n"
    (inbox / "sniffed.jsonl").write_bytes(sniffed)
    (inbox / "good.jsonl").write_text(_record(7) + "\n")
    code, stderr, report, _ = _load_measured(mongo_uri, dbname, [inbox], tmp_path)
    assert code == 2, stderr[-2000:]
    failed = {path: f["reason"] for path, f in _failures(report).items()}
    assert failed == {
        str(inbox / "lines.jsonl.gz"): f"{inbox / 'lines.jsonl.gz'}:2: 1 bad record(s); first: more than 16,777,216 "
        "bytes of nothing but whitespace (the limit of a record; SCI_INGEST_MAX_RECORD_BYTES): the rest of the file "
        "is not read",
        str(inbox / "after.json.gz"): f"{inbox / 'after.json.gz'}:2: 1 bad record(s); first: more than 16,777,216 "
        "bytes of nothing but whitespace after the closing ']' (the limit of a record): the rest of the file is not "
        "read",
        str(inbox / "sniffed.jsonl"): f"{inbox / 'sniffed.jsonl'}:1: 1 bad record(s); first: invalid JSON: Expecting "
        "property name enclosed in double quotes at column 24"}, failed
    assert [d["_id"] for d in mongo_client[dbname].materials.find()] == ["mp-7"]


def test_the_bound_is_an_option_and_zero_reads_every_record(mongo_uri, dbname, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(f'{{"n": {i}}}\n' for i in range(150)))
    code, _, report, _ = _load_measured(mongo_uri, dbname, [path], tmp_path, "--max-bad-records", "3")
    reason = _failures(report)[str(path)]["reason"]
    assert code == 2 and reason.startswith(f"{path}:1: 3 bad record(s), the bound (--max-bad-records)"), reason
    code, _, report, _ = _load_measured(mongo_uri, dbname, [path], tmp_path, "--max-bad-records", "0")
    reason = _failures(report)[str(path)]["reason"]
    assert code == 2 and reason.startswith(f"{path}:1: 150 bad record(s); first: "), reason  # every one read


@pytest.mark.parametrize("command", ["load", "run"])
@pytest.mark.parametrize("value", ["-1", "x", "1.5", "nan", ""])
def test_a_bad_bound_is_a_usage_error_before_any_work(tmp_path, command, value):
    proc = subprocess.run([str(BIN), command, "--max-bad-records", value, str(tmp_path)], capture_output=True,
                          text=True, env=_env(tmp_path), timeout=120)
    assert proc.returncode == 64, proc.stderr
    assert "argument --max-bad-records: must be a whole number of bad records, 0 or more" in proc.stderr
    assert not (tmp_path / "home").exists()  # no server started, nothing done


# ------------------------------------------------------------------ item 1: fail at the first MiB that proves it
def _sparse(path: Path, head: bytes = b"") -> Path:
    path.write_bytes(head)
    os.truncate(path, SPARSE)
    return path


def test_sparse_files_fail_at_the_bytes_that_prove_it(mongo_uri, mongo_client, dbname, tmp_path):
    """100 GiB of holes (NUL bytes), bare or after a good start of 2 MB (past the first MiB looked at before
    the hash): each fails where its bytes prove it, not after reading and hashing 100 GiB."""
    inbox = tmp_path / "in"
    inbox.mkdir()
    m10 = (SAMPLES / "pasta" / "fasta36_prot.m10").read_bytes()
    m10 *= (2 << 20) // len(m10)  # runs one after another, 2 MB
    start = "".join(_record(i) + "\n" for i in range(30_000)).encode()
    start = start[: start.rindex(b"\n", 0, 2_000_000) + 1]
    start_lines, m10_lines = start.count(b"\n"), m10.count(b"\n")
    files = {
        "nul.json": (_sparse(inbox / "nul.json"), ":1: 1 bad record(s) in its first 1 MiB", "record of more than "
                     "16,777,216 bytes is over the 16,777,216-byte limit"),
        "nul.m10": (_sparse(inbox / "nul.m10"), ":1: line longer than 1048576 bytes", ""),
        "late.json": (_sparse(inbox / "late.json", start), f":{start_lines + 1}: a NUL byte (byte "
                      f"{len(start) + 1:,} of the file): not JSON text", ""),
        "late.m10": (_sparse(inbox / "late.m10", m10), f":{m10_lines + 1}: "
                     "line longer than 1048576 bytes", ""),
    }
    (inbox / "good.jsonl").write_text(_record(7) + "\n")
    code, stderr, report, _ = _load_measured(mongo_uri, dbname, [inbox], tmp_path, timeout=240)
    assert code == 2, stderr[-2000:]
    failed = _failures(report)
    assert set(failed) == {str(path) for path, _, _ in files.values()}, failed
    for path, said, more in files.values():
        assert failed[str(path)]["reason"].startswith(f"{path}{said}"), failed[str(path)]["reason"]
        assert more in failed[str(path)]["reason"]
    assert [d["_id"] for d in mongo_client[dbname].materials.find()] == ["mp-7"]


def _bytes_read() -> int:
    return int(next(line for line in open("/proc/self/io") if line.startswith("rchar:")).split()[1])


@pytest.mark.parametrize("head", [b"", b"{}\n" * 1000, "\n".join(_record(i) for i in range(40_000)).encode()])
def test_a_big_file_that_fails_is_read_no_further_than_its_proof(tmp_path, head):
    """Bytes read, counted by the kernel (/proc/self/io): a few MiB of a 100 GiB file, never its size."""
    path = _sparse(tmp_path / "x.json", head)
    outcome = FileOutcome(path=str(path), status="loading")
    before = _bytes_read()
    with pytest.raises(ParseError):
        checked_version(str(path), SPARSE, outcome)
    assert _bytes_read() - before < len(head) * 2 + (40 << 20)
    assert outcome.errors and outcome.errors[0]["line"] >= 1


# ------------------------------------------------------------------ item 2: memory bounded whatever one record holds
def test_a_record_of_millions_of_empty_objects_is_refused_before_it_is_built(mongo_uri, mongo_client, dbname,
                                                                              tmp_path):
    """16 MB of `{},{},...` in one record (5.5 million objects: 899 MB once decoded, copied and encoded), in
    each layout: refused with its file and line before it is decoded, the loader's peak RSS under 300 MB."""
    inbox = tmp_path / "in"
    inbox.mkdir()
    bomb = '{"material_id": "mp-9", "a": [' + ",".join(["{}"] * 5_500_000) + "]}"
    (inbox / "lines.jsonl").write_text(_record(1) + "\n" + bomb + "\n" + _record(2) + "\n")
    (inbox / "array.json").write_text("[" + _record(3) + ",\n" + bomb + ",\n" + _record(4) + "]")
    (inbox / "objects.json").write_text('{"material_id": "mp-5",\n"nsites": 5}' + bomb + _record(6))  # pretty
    (inbox / "good.jsonl").write_text(_record(7) + "\n")
    code, stderr, report, peak_mb = _load_measured(mongo_uri, dbname, [inbox], tmp_path)
    assert code == 2, stderr[-2000:]
    failed = _failures(report)
    expect = {"lines.jsonl": ":2: 1 bad record(s); first: record too large to decode in memory: about ",
              "array.json": ":2: 1 bad record(s); first: record too large to decode in memory: at least ",
              "objects.json": ":2: 1 bad record(s); first: record too large to decode in memory: at least "}
    assert set(failed) == {str(inbox / name) for name in expect}, failed
    for name, said in expect.items():
        reason = failed[str(inbox / name)]["reason"]
        assert reason.startswith(f"{inbox / name}{said}") and "over the 128 MiB a record may take" in reason, reason
    assert [d["_id"] for d in mongo_client[dbname].materials.find()] == ["mp-7"]
    assert peak_mb <= 300, f"the loader's peak RSS: {peak_mb} MB"


def test_a_key_twice_in_an_object_refuses_its_record_naming_the_key(mongo_uri, mongo_client, dbname, tmp_path):
    inbox = tmp_path / "in"
    inbox.mkdir()
    (inbox / "twice.jsonl").write_text(
        _record(1) + "\n" + '{"material_id": "mp-2", "sites": [{"xyz": [0, 0, 0]}, {"xyz": [1, 0, 0], '
        '"label": "Fe", "xyz": [0, 1, 0]}]}\n')
    (inbox / "top.json").write_text('[{"material_id": "mp-3", "nsites": 5, "nsites": 6}]')
    (inbox / "good.jsonl").write_text(_record(7) + "\n")
    code, stderr, report, _ = _load_measured(mongo_uri, dbname, [inbox], tmp_path)
    assert code == 2, stderr[-2000:]
    failed = _failures(report)
    assert failed[str(inbox / "twice.jsonl")]["reason"] == (
        f'{inbox / "twice.jsonl"}:2: 1 bad record(s); first: key "xyz" twice in the object at sites.1: which of '
        "its values was meant cannot be known (JSON readers keep one), so the record is refused")
    assert failed[str(inbox / "top.json")]["reason"].startswith(
        f'{inbox / "top.json"}:1: 1 bad record(s); first: key "nsites" twice in the record\'s top-level object')
    assert [d["_id"] for d in mongo_client[dbname].materials.find()] == ["mp-7"]
