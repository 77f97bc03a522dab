"""Hashed shard keys (issue 11): the command documents per server version, MongoDB's initial
split, the upsert filter with the full shard key, and `sci-ingest shard` as a user runs it.
The commands are sent to the real embedded server (which refuses them) and read back through
pymongo's command monitoring: what a mongos would receive, byte for byte."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pymongo
import pytest
from pymongo import monitoring

from ingest.errors import SciIngestError
from ingest.sharding.collections import (
    KEYS,
    ClusterState,
    CollectionState,
    hashed_split_points,
    plan_commands,
    run_commands,
    shard,
)
from ingest.store.catalog import HITS, MATERIALS, SHARD_KEYS
from ingest.store.mongo import key_filter, replace_documents

BIN = Path(sys.executable).parent / "sci-ingest"


def _state(version: str, shards: int = 3, **collections) -> ClusterState:
    from ingest.sharding.collections import version_tuple

    state = ClusterState("mongos", version_tuple(version), version, [f"s{i}" for i in range(shards)])
    state.collections = {c: collections.get(c, CollectionState()) for c in KEYS}
    return state


def _by_name(commands, name):
    return [c.document for c in commands if next(iter(c.document)) == name]


# ------------------------------------------------------------------ the plan
def test_every_data_collection_has_a_hashed_key_and_a_reason():
    assert set(KEYS) == set(SHARD_KEYS) and KEYS[HITS][0] == "search_id" and KEYS[MATERIALS][0] == "_id"
    assert all(len(why) > 20 for _, why in KEYS.values())


@pytest.mark.parametrize("version, enable, chunks", [("5.0.24", True, 6), ("6.0.3", False, 6), ("7.0.12", False, 6),
                                                      ("7.2.0", False, None), ("8.0.4", False, None)])
def test_commands_follow_the_server_version(version, enable, chunks):
    commands, outcomes = plan_commands("sci", _state(version))
    assert bool(_by_name(commands, "enableSharding")) is enable
    shard_docs = _by_name(commands, "shardCollection")
    assert [d["shardCollection"] for d in shard_docs] == [f"sci.{c}" for c in KEYS]
    assert all(d["key"] == {KEYS[d["shardCollection"][4:]][0]: "hashed"} for d in shard_docs)
    assert all(d.get("numInitialChunks") == chunks for d in shard_docs)  # two per shard before 7.2
    indexes = _by_name(commands, "createIndexes")
    assert {(d["createIndexes"], tuple(d["indexes"][0]["key"].items())) for d in indexes} == {
        (c, ((k, "hashed"),)) for c, (k, _) in KEYS.items()}
    # each collection's index comes before its shardCollection
    order = [next(iter(c.document)) + ":" + (c.collection or "") for c in commands]
    assert all(order.index(f"createIndexes:{c}") < order.index(f"shardCollection:{c}") for c in KEYS)
    assert {o.status for o in outcomes} == {"planned"}


def test_zones_presplit_along_them_and_existing_state_is_respected():
    state = _state("7.0", hits=CollectionState(exists=True, zones=2),
                   materials=CollectionState(exists=True, empty=False),
                   searches=CollectionState(exists=True, empty=False, sharded_key={"_id": "hashed"}),
                   tasks=CollectionState(exists=True, sharded_key={"task_id": 1}))
    commands, outcomes = plan_commands("sci", state)
    (hits_doc,) = _by_name(commands, "shardCollection")
    assert hits_doc == {"shardCollection": "sci.hits", "key": {"search_id": "hashed"}, "presplitHashedZones": True}
    status = {o.collection: (o.status, o.reason) for o in outcomes}
    assert status["searches"][0] == "already sharded"
    assert status["tasks"][0] == "refused" and "already sharded on {'task_id': 1}" in status["tasks"][1]
    assert status["materials"][0] == "refused" and "not empty" in status["materials"][1]


def test_mongodbs_hashed_split_points():
    assert hashed_split_points(1) == [] and hashed_split_points(2) == [0]
    assert hashed_split_points(3) == [-3074457345618258602, 3074457345618258602]
    assert hashed_split_points(4) == [-4611686018427387902, 0, 4611686018427387902]
    for n in range(1, 40):
        points = hashed_split_points(n)
        assert len(points) == n - 1 and points == sorted(points) and points == [-p for p in reversed(points)]


def test_upserts_name_the_full_shard_key(mongo_uri, db):
    assert key_filter(HITS, {"_id": "q:1", "search_id": "q"}) == {"_id": "q:1", "search_id": "q"}
    assert key_filter(MATERIALS, {"_id": "mp-1", "x": 1}) == {"_id": "mp-1"}
    listener = _Listener()
    client = pymongo.MongoClient(mongo_uri, event_listeners=[listener])
    try:
        replace_documents(client[db.name][HITS], [{"_id": "q:1", "search_id": "q", "rank": 1}])
    finally:
        client.close()
    (update,) = [c for c in listener.commands if "update" in c]
    assert update["updates"][0]["q"] == {"_id": "q:1", "search_id": "q"} and update["updates"][0]["upsert"]
    assert db[HITS].find_one({"_id": "q:1"})["rank"] == 1


# ------------------------------------------------------------------ what the server receives
class _Listener(monitoring.CommandListener):
    """Every command document the client sends, as sent (driver fields left out)."""

    DRIVER_FIELDS = ("$db", "lsid", "$clusterTime", "$readPreference", "txnNumber")

    def __init__(self):
        self.sent: list[tuple[str, dict]] = []

    @property
    def commands(self) -> list[dict]:
        return [doc for _, doc in self.sent]

    def started(self, event):
        if event.command_name == "endSessions":  # the client's own bookkeeping at close
            return
        self.sent.append((event.database_name,
                          {k: v for k, v in event.command.items() if k not in self.DRIVER_FIELDS}))

    def succeeded(self, event):
        pass

    def failed(self, event):
        pass


def test_the_server_receives_the_exact_documents(mongo_uri, db):
    """On the embedded server every command is refused; with SCI_INGEST_TEST_URI naming a mongos
    (docker/README.md) the same documents shard the collections and config.collections shows it."""
    from ingest.sharding.collections import inspect
    from ingest.store.servers import describe

    listener = _Listener()
    client = pymongo.MongoClient(mongo_uri, event_listeners=[listener])
    try:
        on_mongos = describe(client).sharding
        state = inspect(client, db.name) if on_mongos else _state("7.0", shards=2)
        commands, _ = plan_commands(db.name, state)
        listener.sent.clear()
        for command in commands:
            if on_mongos:
                run_commands(client, [command])
            else:
                with pytest.raises(SciIngestError):  # SecantusDB has neither hashed indexes nor sharding
                    run_commands(client, [command])
        assert listener.sent == [(c.database, c.document) for c in commands]
        if on_mongos:
            keys = {d["_id"]: d["key"] for d in client.config.collections.find({"_id": {"$regex": f"^{db.name}\\."}})}
            assert keys == {f"{db.name}.{c}": {k: "hashed"} for c, (k, _) in KEYS.items()}
            _, again = plan_commands(db.name, inspect(client, db.name))
            assert {o.status for o in again} == {"already sharded"}  # idempotent
    finally:
        client.close()


# ------------------------------------------------------------------ the command
def _cli(mongo_uri, db_name, *args):
    return subprocess.run([str(BIN), "shard", "--mongo-uri", mongo_uri, "--db", db_name, *args],
                          capture_output=True, text=True, timeout=120)


def test_shard_on_the_embedded_server_exits_1_and_sends_nothing(mongo_uri, db, mongo_client):
    from ingest.store.servers import describe

    if describe(mongo_client).sharding:
        pytest.skip("SCI_INGEST_TEST_URI is a mongos: this test is about a server that is not")
    db.materials.insert_one({"_id": "mp-1"})
    out = _cli(mongo_uri, db.name)
    assert out.returncode == 1 and out.stdout == ""  # nothing was done: fatal, not partial (2)
    assert "mongos" in out.stderr and "nothing was sent" in out.stderr and len(out.stderr.splitlines()) == 1
    assert list(db.materials.index_information()) == ["_id_"]
    with pytest.raises(SciIngestError, match="mongos"):
        shard(pymongo.MongoClient(mongo_uri), db.name)


def test_dry_run_prints_the_command_documents(mongo_uri, db):
    out = _cli(mongo_uri, db.name, "--dry-run", "--server-version", "6.0", "--shards", "4")
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stdout.splitlines() if not line.startswith("#")]
    docs = [json.loads(line.split(": ", 1)[1]) for line in lines]
    assert {"shardCollection": f"{db.name}.hits", "key": {"search_id": "hashed"}, "numInitialChunks": 8} in docs
    assert len(docs) == 2 * len(KEYS)
    as_json = json.loads(_cli(mongo_uri, db.name, "--dry-run", "--json").stdout)
    assert as_json["dry_run"] and all("numInitialChunks" not in c["command"] for c in as_json["commands"])
    old = _cli(mongo_uri, db.name, "--dry-run", "--server-version", "5.0")
    assert old.returncode == 1 and "--shards" in old.stderr
