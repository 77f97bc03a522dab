"""Hostile inputs through `sci-ingest load` (the CLI as a subprocess, a real server).

The rule: whatever a file's bytes, name or type, it ends loaded or named as failed
(path, line or record, reason), nothing of a failed file stays in the database,
the other files go in, and the run exits 2 -- in bounded time, with no traceback.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from ingest.load.plan import discover

BIN = Path(sys.executable).parent / "sci-ingest"
SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def _material(i: int) -> dict:
    return {"material_id": f"mp-{i}", "formula_pretty": "Fe2O3", "elements": ["Fe", "O"], "nsites": 5}


def _load(mongo_uri: str, db: str, paths, tmp_path: Path, env: dict | None = None, timeout: float = 180):
    environ = {**os.environ, "SCI_INGEST_HOME": str(tmp_path / "home"), **(env or {})}
    environ.pop("DASK_SCHEDULER_ADDRESS", None)
    proc = subprocess.run([str(BIN), "load", "--json", "-q", "--workers", "1", "--mongo-uri", mongo_uri,
                           "--db", db, *map(str, paths)], capture_output=True, text=True, env=environ,
                          timeout=timeout)
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


def test_a_record_over_the_limit_is_skipped_without_reading_it_into_memory(tmp_path, monkeypatch):
    from ingest.parsers import materials

    monkeypatch.setattr(materials, "MAX_RECORD_BYTES", 10_000)
    for layout, text in {
        "array": "[" + json.dumps(_material(1)) + ", " + json.dumps({"x": "y" * 50_000, "z": "}]"})
                 + ", " + json.dumps(_material(3)) + "]",
        "concatenated": json.dumps(_material(1)) + json.dumps({"x": ["y" * 50_000, "{"]}) + json.dumps(_material(3)),
        "lines": json.dumps(_material(1)) + "\n" + json.dumps({"x": "y" * 50_000}) + "\n" + json.dumps(_material(3)),
    }.items():
        path = tmp_path / f"{layout}.json"
        path.write_text(text)
        with open(path, "rb") as fh:
            out = list(materials.read_records(fh, str(path)))
        assert [getattr(r, "key", None) for r in out] == ["mp-1", None, "mp-3"], (layout, out)
        assert "over the 10,000-byte limit" in out[1].reason, layout


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
