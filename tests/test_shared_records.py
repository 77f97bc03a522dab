"""Records shared between files, and files that change while they are loaded.

The rule (``ingest.load.records``): a record stays while one loaded file holds
it; the version stored is the newest holder's (latest modification time); when
that file changes or fails, the record falls back to the next holder's version;
it goes only with its last holder.  Every test runs ``sci-ingest load`` as a
user does (a subprocess) against the session's server, except where a file must
change at a given moment of the load (then ``load_paths`` in this process,
against the same real server, with its ``on_plan`` hook or a writer's callback).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ingest.store.catalog import VERSIONS

BIN = Path(sys.executable).parent / "sci-ingest"


#: Files over 64 KiB are not read whole, and a record file keeps at most 2,000 documents between
#: its passes: the paths of big files, reached with small ones.
SMALL_BYTES, KEEP_DOCUMENTS = 64 << 10, 2000


@pytest.fixture()
def load(mongo_uri, db, tmp_path):
    """``load(*paths, *extra)``: ``sci-ingest load --json`` into the test's database; (process, report)."""
    env = {**os.environ, "MONGODB_URI": mongo_uri, "SCI_INGEST_HOME": str(tmp_path / "home"),
           "SCI_INGEST_SMALL_FILE_BYTES": str(SMALL_BYTES), "SCI_INGEST_KEEP_DOCUMENTS": str(KEEP_DOCUMENTS)}
    env.pop("DASK_SCHEDULER_ADDRESS", None)

    def run(*args, workers: int = 1, db_name: str | None = None):
        proc = subprocess.run([str(BIN), "load", "--json", "-q", "--db", db_name or db.name, "--workers", str(workers),
                               *map(str, args)], env=env, capture_output=True, text=True, timeout=600)
        report = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else None
        return proc, report

    return run


def write(path: Path, records: list[dict], mtime: float | None = None) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def stored(db, key: str, coll: str = "materials") -> dict | None:
    return db[coll].find_one({"_id": key})


def test_a_record_stays_when_another_file_that_held_it_changes(db, tmp_path, load):
    """The issue's first scenario, verbatim: X survives B's rewrite, in A's version."""
    folder = tmp_path / "d"
    folder.mkdir()
    a = write(folder / "A.jsonl", [{"material_id": "X", "v": "A"}], mtime=1_700_000_000)
    proc, _ = load(a)
    assert proc.returncode == 0, proc.stderr
    b = write(folder / "B.jsonl", [{"material_id": "X", "v": "B"}], mtime=1_700_000_100)
    proc, _ = load(b)
    assert proc.returncode == 0, proc.stderr
    assert stored(db, "X")["v"] == "B"  # the newest holder's version
    write(b, [{"material_id": "Y"}], mtime=1_700_000_200)
    proc, report = load(folder)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert stored(db, "X")["v"] == "A" and stored(db, "X")["_source"]["path"] == str(a)
    assert stored(db, "Y") is not None
    entry = db.ingest_files.find_one({"_id": str(a)})
    assert entry["status"] == "loaded" and entry["records"] == {"materials": 1}
    assert {v["_id"]["k"] for v in db[VERSIONS].find()} == {"X", "Y"}  # B's old version of X is gone


def test_the_newest_holder_wins_whatever_the_order_of_the_loads(mongo_client, tmp_path, load, db):
    folder = tmp_path / "d"
    folder.mkdir()
    old = write(folder / "z_old.jsonl", [{"material_id": "X", "v": "old"}], mtime=1_600_000_000)
    new = write(folder / "a_new.jsonl", [{"material_id": "X", "v": "new"}], mtime=1_700_000_000)
    proc, _ = load(new)
    assert proc.returncode == 0, proc.stderr
    proc, report = load(old)  # loaded last, but older: stored, kept, not shown
    assert proc.returncode == 0, proc.stderr
    assert stored(db, "X")["v"] == "new"
    assert (report["inserted"], report["updated"], report["skipped"]) == (0, 0, 1)
    assert db[VERSIONS].count_documents({"_id.k": "X"}) == 2
    both = mongo_client[db.name + "_both"]  # the same files in one load, on two workers
    try:
        proc, _ = load(folder, workers=2, db_name=both.name)
        assert proc.returncode == 0, proc.stderr
        assert both.materials.find_one({"_id": "X"})["v"] == "new"
    finally:
        mongo_client.drop_database(both.name)


def test_a_record_goes_only_with_its_last_holder(db, tmp_path, load):
    folder = tmp_path / "d"
    folder.mkdir()
    a = write(folder / "a.jsonl", [{"material_id": "X", "v": "a"}, {"material_id": "P"}], mtime=1_700_000_000)
    b = write(folder / "b.jsonl", [{"material_id": "X", "v": "b"}], mtime=1_700_000_100)
    proc, _ = load(folder)
    assert proc.returncode == 0, proc.stderr
    assert stored(db, "X")["v"] == "b"
    write(a, [{"material_id": "P"}], mtime=1_700_000_200)  # a no longer holds X: b still does
    proc, _ = load(folder)
    assert stored(db, "X")["v"] == "b"
    write(b, [{"material_id": "Q"}], mtime=1_700_000_300)  # nor b: X goes
    proc, _ = load(folder)
    assert proc.returncode == 0, proc.stderr
    assert stored(db, "X") is None and db[VERSIONS].count_documents({"_id.k": "X"}) == 0
    assert sorted(d["_id"] for d in db.materials.find()) == ["P", "Q"]


def test_a_failed_reload_keeps_every_other_files_version(db, tmp_path, load):
    """A file that turns bad fails alone: its last loaded version stays, and no record another
    file holds is touched."""
    folder = tmp_path / "d"
    folder.mkdir()
    write(folder / "a.jsonl", [{"material_id": "X", "v": "a"}], mtime=1_700_000_000)
    c = write(folder / "c.jsonl", [{"material_id": "X", "v": "c"}, {"material_id": "Z"}], mtime=1_700_000_100)
    proc, _ = load(folder)
    assert stored(db, "X")["v"] == "c"
    c.write_text(json.dumps({"material_id": "X", "v": "c2"}) + "\n{not json\n")
    proc, report = load(folder)
    assert proc.returncode == 2 and proc.stderr.count("failed:") == 1, proc.stderr
    assert stored(db, "X")["v"] == "c" and stored(db, "Z") is not None  # c's loaded version stays


class Appender(threading.Thread):
    """Appends a bad line to ``path`` every few milliseconds until stopped."""

    def __init__(self, path: Path):
        super().__init__(daemon=True)
        self.path, self.stop = path, threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            with self.path.open("a") as fh:
                fh.write("{not json\n")
            time.sleep(0.01)


def test_a_big_record_file_that_changes_while_it_is_read_fails_alone(db, tmp_path, load):
    """The issue's second scenario: a record file over the in-memory limits (read twice: here with
    the limits lowered, as ``SCI_INGEST_SMALL_FILE_BYTES`` and ``SCI_INGEST_KEEP_DOCUMENTS`` allow), a bad line
    appended meanwhile.  It is named as changed (no traceback), the good file beside it goes in,
    and the record it shares with a file loaded before keeps that file's version."""
    folder = tmp_path / "d"
    folder.mkdir()
    write(folder / "first.jsonl", [{"material_id": "X", "v": "first"}], mtime=1_600_000_000)
    proc, _ = load(folder / "first.jsonl")
    assert proc.returncode == 0, proc.stderr
    big = write(folder / "big.jsonl", [{"material_id": "X", "v": "big"}] +  # not read whole, not kept
                [{"material_id": f"mp-{i}", "pad": "p" * 40} for i in range(2_100)])
    assert big.stat().st_size > SMALL_BYTES
    write(folder / "good.jsonl", [{"material_id": "G"}])
    appender = Appender(big)
    appender.start()
    try:
        proc, report = load(big, folder / "good.jsonl")
    finally:
        appender.stop.set()
        appender.join()
    assert "Traceback" not in proc.stderr and proc.returncode == 2, proc.stderr[-2000:]
    failed = [line for line in proc.stderr.splitlines() if line.startswith("failed:")]
    assert len(failed) == 1 and "big.jsonl" in failed[0] and "changed while it was being loaded" in failed[0]
    assert stored(db, "G") is not None and stored(db, "X")["v"] == "first"
    assert db.materials.count_documents({}) == 2 and db[VERSIONS].count_documents({}) == 2
    assert db.ingest_files.find_one({"_id": str(big)})["status"] == "failed"
    # the file settles: loaded whole, and its version of X is the newest
    lines = big.read_text().splitlines(keepends=True)
    big.write_text("".join(line for line in lines if not line.startswith("{not json")))
    proc, _ = load(folder)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert stored(db, "X")["v"] == "big" and db.materials.count_documents({}) == 2_102


@pytest.mark.parametrize("kind", ["records", "searches", "small"])
def test_a_file_changed_during_its_writing_pass_is_rolled_back(db, mongo_uri, tmp_path, kind, monkeypatch):
    """Deterministic: the file is appended to as its first batch is queued (records: in the second
    pass; searches: in the only one).  The file fails as changed and leaves nothing of itself.  A
    small file (read whole into memory, then parsed) is loaded as the one version it read."""
    from ingest.config import SAMPLES_DIR
    from ingest.load import LoadOptions, load_paths, run as run_module, writer as writer_module

    folder = tmp_path / "d"
    folder.mkdir()
    if kind == "records":
        monkeypatch.setattr("ingest.load.content.KEEP_CHECKED_DOCUMENTS", KEEP_DOCUMENTS)
        path = write(folder / "r.jsonl", [{"material_id": f"mp-{i}", "pad": "p" * 40} for i in range(2_100)])
    else:  # 12 queries in 70 KB (over the size read whole), or 4
        path = folder / "s.m10"
        path.write_bytes((SAMPLES_DIR / "pasta" / "ssearch36_prot_multi.m10").read_bytes() * (3 if kind == "searches" else 1))
    monkeypatch.setattr("ingest.load.batch.SMALL_FILE_BYTES", SMALL_BYTES)
    assert (path.stat().st_size > SMALL_BYTES) == (kind != "small")
    original, original_prepare = writer_module.PipelinedWriter.put, run_module.prepare
    calls = []
    before = path.read_bytes()

    def put(*args, **kwargs):  # the loader hands its first batch to the writer (parsing goes on)
        if not calls:
            with path.open("ab") as fh:
                fh.write(b"\n")
        calls.append(1)
        return original(*args, **kwargs)

    def prepare(*args, **kwargs):  # a small file: appended to once it is read
        prepared = original_prepare(*args, **kwargs)
        with path.open("ab") as fh:
            fh.write(b"\n")
        return prepared

    monkeypatch.setattr(writer_module.PipelinedWriter, "put", put)
    if kind == "small":
        monkeypatch.setattr(run_module, "prepare", prepare)

    summary = load_paths(mongo_uri, db.name, [path], "changed", LoadOptions(workers=1, progress=False, batch_size=100))
    (outcome,) = summary.files
    if kind == "small":
        import hashlib

        entry = db.ingest_files.find_one({"_id": str(path)})
        assert outcome.status == "loaded" and entry["sha256"] == hashlib.sha256(before).hexdigest()
        assert entry["size"] == len(before) != path.stat().st_size  # the next load sees the change
        return
    assert outcome.status == "failed" and "changed while it was being loaded" in outcome.reason, outcome
    assert calls and all(db[c].count_documents({}) == 0 for c in ("materials", "searches", "hits", VERSIONS))


def test_files_deleted_or_replaced_by_a_link_after_discovery_fail_alone(db, mongo_uri, mongo_client, tmp_path, load):
    """Between the plan and the load one file is deleted and one replaced by a symbolic link to a
    file outside the folder: each fails with its reason and nothing is read through the link.
    With the link removed, a load of the folder ends as a clean load of it."""
    from ingest.load import LoadOptions, load_paths

    folder = tmp_path / "d"
    folder.mkdir()
    gone = write(folder / "gone.jsonl", [{"material_id": "A"}])
    linked = write(folder / "linked.jsonl", [{"material_id": "B"}])
    write(folder / "kept.jsonl", [{"material_id": "C"}])
    elsewhere = write(tmp_path / "elsewhere.jsonl", [{"material_id": "EVIL"}])

    def meanwhile(todo) -> None:
        gone.unlink()
        linked.unlink()
        linked.symlink_to(elsewhere)

    summary = load_paths(mongo_uri, db.name, [folder], "meanwhile", LoadOptions(workers=1, progress=False),
                         on_plan=meanwhile)
    by_name = {Path(f.path).name: f for f in summary.files}
    assert by_name["gone.jsonl"].status == "failed" and "No such file" in by_name["gone.jsonl"].reason
    assert by_name["linked.jsonl"].status == "failed" and "symbolic link" in by_name["linked.jsonl"].reason
    assert by_name["kept.jsonl"].status == "loaded"
    assert sorted(d["_id"] for d in db.materials.find()) == ["C"]  # nothing read through the link
    # the ledger agrees: only kept.jsonl stands for documents
    assert sorted(e["_id"] for e in db.ingest_files.find({"sha256": {"$exists": True}})) == [str(folder / "kept.jsonl")]
    # and a clean load of the final folder, after the same load again, holds the same
    linked.unlink()
    clean = mongo_client[db.name + "_clean"]
    try:
        for name in (db.name, clean.name):
            proc, _ = load(folder, db_name=name)
            assert proc.returncode == 0, proc.stderr
        assert [d for d in db.materials.find()] == [d for d in clean.materials.find()]
        assert {v["_id"]["k"] for v in db[VERSIONS].find()} == {v["_id"]["k"] for v in clean[VERSIONS].find()} == {"C"}
    finally:
        mongo_client.drop_database(clean.name)


def test_a_database_loaded_before_versions_were_kept_is_given_them_once(db, tmp_path, load):
    folder = tmp_path / "d"
    folder.mkdir()
    a = write(folder / "a.jsonl", [{"material_id": "X", "v": "a"}], mtime=1_700_000_000)
    proc, _ = load(a)
    assert proc.returncode == 0, proc.stderr
    # as an earlier sci-ingest left it: no order on the record, no version, no marker
    db.materials.update_many({}, {"$unset": {"_source.order": ""}})
    db[VERSIONS].delete_many({})
    db.ingest_meta.delete_many({})
    b = write(folder / "b.jsonl", [{"material_id": "X", "v": "b"}], mtime=1_600_000_000)
    proc, _ = load(b)  # older than a, but a's record has no order: b's replaces it
    assert proc.returncode == 0, proc.stderr
    assert db.ingest_meta.find_one({"_id": "record_versions"})["records_given_a_version"] == 1
    assert stored(db, "X")["v"] == "b"
    write(b, [{"material_id": "Y"}], mtime=1_600_000_100)
    proc, _ = load(folder)
    assert stored(db, "X")["v"] == "a"  # a's version was kept for it
