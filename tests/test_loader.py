"""Loading files into a real server: idempotence, the ledger, and bad input set aside."""

from __future__ import annotations

import gzip
import json
import random
import shutil
from pathlib import Path

import pytest

from ingest.config import SAMPLES_DIR

PASTA = SAMPLES_DIR / "pasta"
MATERIALS = SAMPLES_DIR / "materials"


def pasta_samples() -> list[Path]:
    return sorted(p for p in PASTA.iterdir() if p.name.endswith((".m10", ".m10.gz")))


@pytest.fixture()
def small_inputs(tmp_path) -> Path:
    """Two real search outputs and a few hundred material and task records."""
    folder = tmp_path / "in"
    folder.mkdir()
    for sample in pasta_samples()[:2]:
        shutil.copy(sample, folder / sample.name)
    for name, keep in (("materials.jsonl.gz", 300), ("tasks.jsonl.gz", 200)):
        with gzip.open(MATERIALS / name, "rt") as src:
            lines = [next(src) for _ in range(keep)]
        (folder / name.replace(".gz", "")).write_text("".join(lines))
    return folder


def count_all(db) -> dict[str, int]:
    return {c: db[c].count_documents({}) for c in ("searches", "hits", "materials", "tasks")}


def test_load_is_idempotent_and_skips_known_files_quickly(db, small_inputs, load_files):
    first = load_files([small_inputs], "r1")
    assert first.count("loaded") == 4 and not first.failed
    counts = count_all(db)
    assert all(counts.values()), counts
    assert counts["materials"] == 300 and counts["tasks"] == 200
    assert first.inserted == sum(counts.values())

    second = load_files([small_inputs], "r2")
    assert second.count("skipped") == 4
    assert second.inserted == 0
    assert second.skipped_documents == sum(counts.values())
    assert count_all(db) == counts
    ledger = {d["_id"]: d for d in db.ingest_files.find()}
    assert {d["status"] for d in ledger.values()} == {"loaded"}
    assert all(len(d["sha256"]) == 64 and d["size"] > 0 for d in ledger.values())


def test_same_content_under_another_path_adds_nothing(db, small_inputs, tmp_path, load_files):
    load_files([small_inputs])
    before = count_all(db)
    copy = tmp_path / "copy.m10"
    shutil.copy(next(small_inputs.glob("*.m10*")), copy)
    result = load_files([copy])
    assert result.files[0].status == "skipped"
    assert "same content" in result.files[0].reason
    assert count_all(db) == before


def test_forced_reload_of_searches_inserts_nothing_new(db, small_inputs, load_files):
    load_files([small_inputs])
    before = count_all(db)
    again = load_files([small_inputs], force=True)
    assert again.inserted == 0
    assert count_all(db) == before
    assert sum(f.existing for f in again.files) + again.updated == sum(before.values())


def test_changed_record_file_updates_by_natural_key(db, tmp_path, load_files):
    path = tmp_path / "m.jsonl"
    with gzip.open(MATERIALS / "materials.jsonl.gz", "rt") as src:
        docs = [json.loads(next(src)) for _ in range(5)]
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    load_files([path])
    docs[0]["band_gap"] = 42.5
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    result = load_files([path])
    assert result.files[0].status == "loaded"
    # every record of the new version replaces its stored one (its _source names the new sha256)
    assert result.updated == 5 and result.inserted == 0
    assert db.materials.distinct("_source.sha256") == [result.files[0].sha256]
    assert db.materials.count_documents({}) == 5
    assert db.materials.find_one({"_id": docs[0]["material_id"]})["band_gap"] == 42.5


def test_changed_search_file_replaces_its_old_version(db, tmp_path, load_files):
    samples = pasta_samples()
    path = tmp_path / "run.m10"
    shutil.copy(samples[0], path)
    load_files([path])
    old = count_all(db)
    shutil.copy(samples[1], path)
    load_files([path])
    shas = db.searches.distinct("source.sha256")
    assert len(shas) == 1, "documents of the file's previous version were left behind"
    assert db.hits.distinct("source.sha256") == shas
    assert old["searches"] > 0


def bad_inputs(folder: Path) -> dict[str, str]:
    """Broken files next to good ones; returns {file name: expected words in the reason}."""
    sample = next(p for p in pasta_samples() if p.name.endswith(".m10")).read_bytes()
    cut = sample[: int(len(sample) * 0.6)]
    (folder / "truncated.m10").write_bytes(cut)
    rng = random.Random(7)
    (folder / "random.m10").write_bytes(bytes(rng.randrange(256) for _ in range(5000)))
    (folder / "empty.m10").write_bytes(b"")
    with gzip.open(MATERIALS / "materials.jsonl.gz", "rt") as src:
        lines = [next(src) for _ in range(10)]
    lines[6] = lines[6][: len(lines[6]) // 2] + "\n"  # one malformed line among good ones
    (folder / "one_bad_line.jsonl").write_text("".join(lines))
    return {"truncated.m10": "", "random.m10": "", "empty.m10": "", "one_bad_line.jsonl": ":7"}


def test_bad_files_are_named_set_aside_and_the_rest_goes_in(db, small_inputs, load_files):
    expected = bad_inputs(small_inputs)
    result = load_files([small_inputs])
    failed = {Path(f.path).name: f for f in result.failed}
    assert set(failed) == set(expected)
    for name, words in expected.items():
        reason = failed[name].reason
        assert name in reason and words in reason, reason
        assert failed[name].errors and failed[name].errors[0]["reason"], failed[name]
    assert failed["one_bad_line.jsonl"].errors[0]["line"] == 7
    assert result.count("loaded") == 4
    counts = count_all(db)
    assert counts["materials"] == 300 and counts["tasks"] == 200
    # nothing of a failed file is left half-written
    bad_shas = [f.sha256 for f in failed.values() if f.sha256]
    assert db.searches.count_documents({"source.sha256": {"$in": bad_shas}}) == 0
    assert db.hits.count_documents({"source.sha256": {"$in": bad_shas}}) == 0
    assert db.materials.count_documents({"_source.path": {"$regex": "one_bad_line"}}) == 0
    ledger = {Path(d["_id"]).name: d for d in db.ingest_files.find()}
    for name in expected:
        assert ledger[name]["status"] == "failed" and ledger[name]["error"]


def unstorable_records(folder: Path, name: str, changed: bool = False) -> Path:
    """Ten good sample records but for two the stored form cannot hold: record 7 nested deeper
    than MongoDB allows, record 9 holding a lone surrogate.  ``changed``: record 1 also differs."""
    with gzip.open(MATERIALS / "materials.jsonl.gz", "rt") as src:
        records = [json.loads(next(src)) for _ in range(10)]
    if changed:
        records[0]["band_gap"] = 42.5
    lines = [json.dumps(r) for r in records]
    lines[6] = lines[6][:-1] + ', "deep": ' + "[" * 120 + "]" * 120 + "}"
    lines[8] = lines[8][:-1] + ', "note": "\\ud800"}'
    path = folder / name
    path.write_text("\n".join(lines) + "\n")
    return path


def test_unstorable_record_is_named_and_sets_the_file_aside(db, tmp_path, load_files):
    """Found while building the documents in the checking pass: named file:record like a parse
    error, and nothing is written, although the good records before it fill several batches."""
    path = unstorable_records(tmp_path, "unstorable.jsonl")
    result = load_files([path], batch_size=2)
    [outcome] = result.files
    assert outcome.status == "failed"
    assert "unstorable.jsonl:7: 2 bad record(s); first: nested more than 100 levels deep" in outcome.reason
    assert [e["line"] for e in outcome.errors[:2]] == [7, 9] and "surrogate" in outcome.errors[1]["reason"]
    assert outcome.inserted == outcome.updated == 0
    assert count_all(db) == {"searches": 0, "hits": 0, "materials": 0, "tasks": 0}
    [entry] = db.ingest_files.find()
    assert entry["status"] == "failed" and entry["error"] == outcome.reason
    assert entry["errors"] == outcome.errors


def test_unstorable_record_leaves_the_loaded_version_untouched(db, tmp_path, load_files):
    path = tmp_path / "m.jsonl"
    with gzip.open(MATERIALS / "materials.jsonl.gz", "rt") as src:
        path.write_text("".join(next(src) for _ in range(10)))
    first = load_files([path])
    before = {d["_id"]: d for d in db.materials.find()}
    assert first.files[0].status == "loaded" and len(before) == 10
    unstorable_records(tmp_path, "m.jsonl", changed=True)  # a new version of the same file
    result = load_files([path], batch_size=2)
    assert result.files[0].status == "failed" and result.files[0].errors[0]["line"] == 7
    assert {d["_id"]: d for d in db.materials.find()} == before  # record 1's change is not written either


def test_truncated_search_file_rolls_back_partial_writes(db, tmp_path, load_files):
    """A file that breaks after many complete queries leaves no document behind."""
    big = max(pasta_samples(), key=lambda p: p.stat().st_size if p.suffix == ".m10" else 0)
    text = big.read_bytes()
    last_query = text.rfind(b">>><<<")
    assert last_query > 0
    (tmp_path / "cut.m10").write_bytes(text[: last_query + 3])  # ends mid-marker, after complete queries
    result = load_files([tmp_path / "cut.m10"], batch_size=5)
    assert result.files[0].status == "failed"
    assert db.searches.count_documents({}) == 0 and db.hits.count_documents({}) == 0


def test_missing_path_is_reported(db, tmp_path, load_files):
    result = load_files([tmp_path / "nope.m10"])
    assert result.files[0].status == "failed"
    assert "no such file" in result.files[0].reason


def test_timings_rows_are_written_per_file(db, small_inputs, load_files):
    load_files([small_inputs], "timed")
    rows = list(db.stage_timings.find({"run_id": "timed"}))
    stages = {(r["stage"], Path(r["file"]).name) for r in rows}
    assert ("parse", "materials.jsonl") in stages and ("load", "materials.jsonl") in stages
    for row in rows:
        assert row["seconds"] >= 0 and row["records_out"] > 0 and row["peak_rss_mb"] > 0


def _dead_owner(run_id: str) -> dict:
    """The claim of a loader process of this host that no longer runs."""
    import socket
    import subprocess
    import sys

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(gone.stdout)
    return {"id": f"{run_id}@{socket.gethostname()}:{pid}:0", "run_id": run_id, "host": socket.gethostname(),
            "pid": pid, "started": 0.0}


@pytest.mark.parametrize("file_state", ["unchanged", "changed since"])
def test_a_load_whose_last_ledger_write_was_lost_is_finished_not_rolled_back(db, tmp_path, load_files,
                                                                            file_state):
    """A server restart can lose the ledger's final ``loaded`` write of a file whose documents
    were made durable (the journaled barrier keeps the entry's final state in ``pending``):
    the recovery of that entry finishes the load, unless the file changed since."""
    samples = pasta_samples()
    path, other = tmp_path / "a.m10", tmp_path / "b.m10"
    shutil.copy(samples[0], path)
    shutil.copy(samples[1], other)
    load_files([path], "r1")
    key = str(path.resolve())
    entry = db.ingest_files.find_one({"_id": key})
    loaded = count_all(db)
    final = {k: entry[k] for k in ("status", "sha256", "size", "mtime", "format", "records", "inserted",
                                   "updated", "existing", "run_id", "finished")}
    # the state the barrier leaves: documents written, entry 'loading' with its final state pending
    db.ingest_files.replace_one({"_id": key}, {
        "_id": key, "path": key, "status": "loading", "run_id": "r1", "format": entry["format"],
        "pending": {"sha256": entry["sha256"], "size": entry["size"], "mtime": entry["mtime"],
                    "format": entry["format"], "written": final},
        "owner": _dead_owner("r1"), "lease_until": entry["finished"]})
    if file_state == "changed since":
        path.write_bytes(path.read_bytes() + b"\n")
    load_files([other], "r2")  # another path: the stale entry is recovered, not loaded again
    after = db.ingest_files.find_one({"_id": key})
    assert "owner" not in after and "pending" not in after
    if file_state == "unchanged":
        assert after["status"] == "loaded" and after["sha256"] == entry["sha256"]
        assert after["records"] == entry["records"]
        assert db.searches.count_documents({"source.sha256": entry["sha256"]}) == loaded["searches"]
    else:  # not the file's content any more: rolled back, loaded again by the next load of the path
        assert after["status"] == "failed" and "rolled back" in after["error"]
        assert db.searches.count_documents({"source.sha256": entry["sha256"]}) == 0


def test_paths_that_vanish_or_turn_unreadable_after_discovery_fail_alone(db, mongo_uri, small_inputs):
    """Between the plan and the load one file is deleted and another replaced by a directory:
    each is a failed file with its reason, the others go in."""
    from ingest.load import LoadOptions, load_paths

    gone, odd = sorted(small_inputs.glob("*.m10"))[:2]

    def meanwhile(todo) -> None:
        assert {Path(t.key).name for t in todo} >= {gone.name, odd.name}
        gone.unlink()
        odd.unlink()
        odd.mkdir()

    summary = load_paths(mongo_uri, db.name, [small_inputs], "vanish", LoadOptions(workers=1, progress=False),
                         on_plan=meanwhile)
    by_name = {Path(f.path).name: f for f in summary.files}
    assert by_name[gone.name].status == "failed" and "cannot read" in by_name[gone.name].reason
    assert by_name[odd.name].status == "failed" and "cannot read" in by_name[odd.name].reason
    assert summary.count("loaded") == 2
    assert db.searches.count_documents({}) == 0  # both search files failed: nothing of them written
    assert db.materials.count_documents({}) == 300
    assert db.ingest_files.find_one({"_id": str(gone.resolve())})["status"] == "failed"


def test_infinite_scores_are_stored_as_the_doubles_the_file_printed(db, tmp_path, load_files):
    """fastf36 -z 3 on a small library prints "; ff_z-score:  inf": BSON has the double."""
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(PASTA / "fastf36_peptides.m10", folder / "fastf36_peptides.m10")
    result = load_files([folder], "inf")
    assert result.count("loaded") == 1 and not result.failed
    (hsp,) = db.hits.find_one({"hit_id": "GT8.7"})["hsps"]
    assert (hsp["z_score"], hsp["bits"], hsp["evalue"]) == (float("inf"), float("inf"), 0.0)


def test_a_long_query_loads_as_one_search_per_segment(db, tmp_path, load_files):
    """Each segment of a long query is its own `searches` document, with the whole query's
    length; its hits keep whole-query coordinates."""
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(PASTA / "ssearch36_long_query.m10", folder / "long.m10")
    result = load_files([folder], "long")
    assert result.count("loaded") == 1 and not result.failed
    segments = list(db.searches.find({"query_id": "clone_long"}).sort("query_segment.index", 1))
    assert [(s["query_segment"]["offset"], s["query_length"]) for s in segments] == [
        (1, 86314), (39991, 86314), (79981, 86314)]
    starts = sorted(h["hsps"][0]["query_start"] for h in db.hits.find({"query_id": "clone_long"}))
    assert starts[0] == 2098 and 82001 in starts
    assert db.searches.count_documents({"query_id": "pGT875", "query_segment": {"$exists": False}}) == 1


def test_copies_of_a_search_share_its_fingerprint(db, tmp_path, load_files):
    """The same search in two files (glsearch36's run, and the concatenation that holds it): each
    copy its own ids, one fingerprint on both searches and on every hit; other searches differ."""
    folder = tmp_path / "in"
    folder.mkdir()
    for name in ("glsearch36.m10", "concatenated_runs.m10", "ssearch36_prot.m10"):
        shutil.copy(PASTA / name, folder / name)
    result = load_files([folder], "copies")
    assert result.count("loaded") == 3 and not result.failed
    by_file: dict[str, set] = {}
    for s in db.searches.find({}, {"fingerprint": 1, "source.path": 1}):
        by_file.setdefault(Path(s["source"]["path"]).name, set()).add(s["fingerprint"])
    assert by_file["glsearch36.m10"] <= by_file["concatenated_runs.m10"]
    assert not by_file["ssearch36_prot.m10"] & (by_file["glsearch36.m10"] | by_file["concatenated_runs.m10"])
    for h in db.hits.find({}, {"search_id": 1, "search_fingerprint": 1}):
        assert h["search_fingerprint"] == db.searches.find_one({"_id": h["search_id"]})["fingerprint"]


def test_a_load_is_bulk_into_empty_collections_or_when_it_at_least_doubles_them(db, monkeypatch):
    """The index plan (ingest.load.indexes): empty data collections -> bulk, whatever the size;
    otherwise bulk only when at least BULK_MIN_DOCUMENTS and at least as many as are held.  What is
    held is what the loads recorded (their tally; a database without it, the ledger's records), never
    counted (tests/test_load_counts.py watches the wire)."""
    from ingest.load import indexes
    from ingest.load.plan import FileTask
    from ingest.store.retry import Retry

    monkeypatch.setattr(indexes, "BULK_MIN_DOCUMENTS", 100)
    retry = Retry(5)
    per_doc = indexes.BYTES_PER_DOCUMENT["pasta"]
    few = [FileTask(key="/in/few.m10", size=per_doc * 10, format="pasta")]  # about 10 documents
    more = [FileTask(key="/in/more.m10", size=per_doc * 200, format="pasta")]  # about 200
    assert indexes.expected_documents(few) == 10 and indexes.expected_documents(more) == 200
    assert not indexes.is_bulk(db, [], retry)  # nothing to load
    assert indexes.is_bulk(db, few, retry)  # nothing held: build once, after
    indexes.add_written(db, 1, retry)  # a load inserted one document
    assert not indexes.is_bulk(db, few, retry)  # below the minimum: kept up
    assert indexes.is_bulk(db, more, retry)  # at least the minimum, and more than held
    indexes.add_written(db, 300, retry)
    assert not indexes.is_bulk(db, more, retry)  # fewer than held: a small incremental load
    # a database an earlier version made has no tally: it is taken once from the ledger's records
    db.ingest_meta.delete_one({"_id": "documents_held"})
    db.ingest_files.insert_many([
        {"_id": "/in/a.m10", "status": "loaded", "sha256": "a", "records": {"searches": 1, "hits": 150}},
        {"_id": "/in/b.m10", "status": "failed", "sha256": "b", "records": {"searches": 1, "hits": 149}},
        {"_id": "/in/c.m10", "status": "failed", "records": {"hits": 1000}},  # never loaded: nothing held
        {"_id": "/in/d.m10", "status": "loading", "sha256": "d", "records": {"hits": 1000}}])  # not yet
    assert indexes.documents_held(db, retry) == 301
    assert not indexes.is_bulk(db, more, retry)
    assert db.ingest_meta.find_one({"_id": "documents_held"})["documents"] == 301  # kept: read once
    # what a bulk load does to the indexes: dropped before, built after
    indexes.after_load(db)
    built = {c: len(db[c].index_information()) for c in ("searches", "hits", "materials", "tasks")}
    assert indexes.before_load(db, bulk=True) > 0
    assert indexes.after_load(db) > 0
    assert {c: len(db[c].index_information()) for c in built} == built
