"""Property: whatever files and names a directory holds, `load` keeps the rule.

Every file ends loaded or failed with a reason; nothing of a failed file is in the
database; nothing stays ``loading``; the load never raises.  Hypothesis builds the
directories: real samples, mutated (bytes flipped, lines dropped or doubled, NULs,
truncation, gzip), JSON made hostile (huge numbers, deep nesting, bad UTF-8, a
record over the limit), odd names (non-UTF-8 bytes, spaces, newlines, dots) and
odd file types (FIFOs, symbolic links that loop or dangle, directories named like
data files).  The load runs in this process against the real test server.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import tempfile
import uuid
from pathlib import Path

from hypothesis import HealthCheck, given, settings, strategies as st
from pasta_mutations import mutate_lines

from ingest.load import LoadOptions, load_paths

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
PASTA = sorted((SAMPLES / "pasta").glob("*.m10"))
GOOD_RECORD = {"material_id": "mp-1", "formula_pretty": "Fe2O3", "elements": ["Fe", "O"], "nsites": 5}


@st.composite
def contents(draw) -> bytes:
    kind = draw(st.sampled_from(["pasta", "pasta", "records", "records", "junk"]))
    if kind == "pasta":
        data = bytearray(draw(st.sampled_from(PASTA)).read_bytes())
    elif kind == "records":
        n = draw(st.integers(1, 30))
        base = draw(st.integers(0, 10_000))
        records = [{**GOOD_RECORD, "material_id": f"mp-{base + i}"} for i in range(n)]
        layout = draw(st.sampled_from(["array", "lines", "concatenated"]))
        texts = [json.dumps(r) for r in records]
        data = bytearray({"array": "[" + ",".join(texts) + "]", "lines": "\n".join(texts) + "\n",
                          "concatenated": "".join(texts)}[layout].encode())
    else:
        data = bytearray(draw(st.binary(max_size=300)))
    damage = draw(st.sampled_from(["none"] * 4 + ["flip", "lines", "nul", "truncate", "hostile_json"]))
    if damage == "flip" and data:
        at = draw(st.integers(0, len(data) - 1))
        data[at] = draw(st.integers(0, 255))
    elif damage == "lines" and data.count(b"\n") > 2:
        data = mutate_lines(draw, data, draw(st.sampled_from(["delete", "duplicate", "swap"])))
    elif damage == "nul" and data:
        at = draw(st.integers(0, len(data)))
        data[at:at] = b"\0" * draw(st.integers(1, 64))
    elif damage == "truncate" and data:
        data = data[: draw(st.integers(0, len(data) - 1))]
    elif damage == "hostile_json":
        data = bytearray(draw(st.sampled_from([
            b'[{"material_id": "mp-9", "n": ' + b"9" * 5000 + b"}]",
            b'{"material_id": "mp-9", "v": ' + b"[" * 200 + b"]" * 200 + b"}\n",
            b'[{"material_id": "mp-9", "f": "\xff\xfe"}]',
            b'[{"material_id": "mp-9", "blob": "' + b"a" * 70_000 + b'"}]',
            b'{"material_id": "mp-9"}{"material_id": ',
        ])))
    if draw(st.booleans()) and draw(st.booleans()):
        return gzip.compress(bytes(data))
    return bytes(data)


NAMES = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="/\0"), min_size=1, max_size=12),
    st.binary(min_size=1, max_size=12).filter(lambda b: b"/" not in b and b"\0" not in b),
)
SUFFIXES = st.sampled_from([".m10", ".m10.gz", ".json", ".jsonl", ".json.gz", ".txt"])


@st.composite
def entries(draw) -> list[tuple[bytes, str, bytes]]:
    """(name, kind, content) for a directory: kind is file, fifo, loop, dangling or dir."""
    out = []
    for _ in range(draw(st.integers(1, 6))):
        raw = draw(NAMES)
        name = (raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogateescape")) + \
            draw(SUFFIXES).encode()
        kind = draw(st.sampled_from(["file"] * 6 + ["fifo", "loop", "dangling", "dir"]))
        out.append((name, kind, draw(contents()) if kind == "file" else b""))
    return out


def _build(folder: bytes, items) -> None:
    for i, (name, kind, data) in enumerate(items):
        path = folder + b"/" + (b"x" + name if name.startswith(b".") or name in (b".", b"..") else name)
        if os.path.lexists(path):
            continue
        if kind == "file":
            with open(path, "wb") as fh:
                fh.write(data)
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "loop":
            os.symlink(path, path)
        elif kind == "dangling":
            os.symlink(folder + b"/missing-%d" % i, path)
        else:
            os.mkdir(path)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(items=entries())
def test_every_file_ends_loaded_or_failed_and_a_failed_one_leaves_nothing(mongo_uri, mongo_client, items):
    folder = tempfile.mkdtemp(prefix="sci-ingest-hostile-").encode()
    name = f"prop_{uuid.uuid4().hex[:8]}"
    try:
        _build(folder, items)
        summary = load_paths(mongo_uri, name, [os.fsdecode(folder)], "prop-run",
                             LoadOptions(workers=1, progress=False, retry_s=5), server_kind="test")
        db = mongo_client[name]
        assert db.ingest_files.count_documents({"status": "loading"}) == 0
        assert db.ingest_files.count_documents({"owner": {"$exists": True}}) == 0
        for outcome in summary.files:
            assert outcome.status in ("loaded", "skipped", "failed"), outcome
            json.dumps(outcome.path)  # printable and storable: no surrogate-escaped bytes
            outcome.path.encode("utf-8")
            if outcome.status == "failed":
                assert outcome.reason, outcome
                digest = _sha256(outcome.path)
                if digest and not _loaded_elsewhere(summary, digest):
                    assert db.searches.count_documents({"_id": {"$regex": f"^{digest}"}}) == 0, outcome
                    assert db.hits.count_documents({"_id": {"$regex": f"^{digest}"}}) == 0, outcome
                    for coll in ("materials", "tasks"):
                        assert db[coll].count_documents({"_source.sha256": digest}) == 0, outcome
        # every entry named like a data file is accounted for (a directory so named is walked)
        data_files = [p for p in Path(os.fsdecode(folder)).iterdir()
                      if p.name.lower().endswith((".m10", ".m10.gz", ".json", ".jsonl", ".json.gz"))
                      and not p.name.startswith(".") and (p.is_symlink() or not p.is_dir())]
        assert len(summary.files) == len(data_files), (sorted(f.path for f in summary.files), data_files)
    finally:
        mongo_client.drop_database(name)
        shutil.rmtree(folder, ignore_errors=True)


def _sha256(path: str) -> str | None:
    if not os.path.isfile(path):  # a FIFO would block the open
        return None
    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError:
        return None


def _loaded_elsewhere(summary, digest: str) -> bool:
    """The same content loaded from another path of the folder (a failed twin leaves those documents)."""
    return any(o.status == "loaded" and o.sha256 == digest for o in summary.files)
