"""The embedded server launcher and server description, against real processes."""

from __future__ import annotations

import socket

import pytest

from ingest.errors import ServerError, UnsupportedFeature
from ingest.server import embedded
from ingest.server.embedded import EmbeddedServer, running_server, start_background, stop_background
from ingest.sharding.collections import shard
from ingest.store.mongo import connect, ping, redact
from ingest.store.servers import describe, ensure_hashed_indexes, ensure_indexes


def test_describe_names_kind_version_topology(mongo_client):
    info = describe(mongo_client)
    assert info.kind in ("SecantusDB", "MongoDB")
    assert info.version[0].isdigit()
    assert info.topology in ("standalone", "replica set", "sharded (mongos)")
    if info.kind == "SecantusDB":
        assert info.engine_version and info.engine_version in info.label()


def test_hashed_indexes_degrade_with_clear_message_on_secantus(mongo_client, db):
    info = describe(mongo_client)
    if info.kind != "SecantusDB":
        pytest.skip("hashed-index refusal is specific to SecantusDB")
    with pytest.raises(UnsupportedFeature, match="hashed indexes"):
        ensure_hashed_indexes(db)
    with pytest.raises(UnsupportedFeature, match="mongos"):
        shard(mongo_client, db.name)


def test_indexes_are_created(db):
    ensure_indexes(db)
    names = {tuple(v["key"]) for v in db.hits.index_information().values()}
    assert (("search_id", 1), ("rank", 1)) in names


def test_server_persists_data_across_restart_and_stops_cleanly(tmp_path):
    server = EmbeddedServer(tmp_path / "db")
    uri = server.start()
    client = connect(uri)
    client.keep.things.insert_one({"_id": "a", "v": 1})
    client.close()
    proc = server.process
    server.stop()
    assert proc.poll() is not None, "server process still running after stop()"
    assert ping(uri) is None
    with EmbeddedServer(tmp_path / "db") as again:
        client = connect(again.uri)
        assert client.keep.things.find_one({"_id": "a"})["v"] == 1
        client.close()


def test_server_failure_is_reported_with_log(tmp_path):
    blocker = tmp_path / "db"
    blocker.write_text("a file where the data directory should be")
    with pytest.raises(ServerError, match="data directory"):
        EmbeddedServer(blocker).start(timeout=20)


def test_a_picked_port_taken_before_the_server_binds_it_is_picked_again(tmp_path, monkeypatch):
    """free_port's port is free when picked; another process can bind it before the server does
    (a CI run: "Address already in use").  The start picks another; a port it was given it
    does not change, and says the address is in use."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    picks = iter([port])
    real = embedded.free_port
    monkeypatch.setattr(embedded, "free_port", lambda host="127.0.0.1": next(picks, None) or real(host))
    try:
        with EmbeddedServer(tmp_path / "db") as server:
            assert server.port != port and ping(server.uri) is not None
        with pytest.raises(ServerError, match="address is in use"):
            EmbeddedServer(tmp_path / "db2", port=port).start(timeout=20)
    finally:
        taken.close()


def test_background_server_is_found_and_stopped(tmp_path):
    state = start_background(tmp_path)
    try:
        assert state["already_running"] is False
        again = start_background(tmp_path)
        assert again["already_running"] is True and again["uri"] == state["uri"]
        assert running_server(tmp_path)["pid"] == state["pid"]
    finally:
        assert stop_background(tmp_path) == "stopped"
    assert running_server(tmp_path) is None
    assert ping(state["uri"]) is None


def test_redact_hides_password():
    assert redact("mongodb://u:secret@h:1/") == "mongodb://u:***@h:1/"
    assert redact("mongodb://h:1/") == "mongodb://h:1/"
