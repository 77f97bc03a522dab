"""A Dask cluster on TLS: ``sci-ingest certs`` makes a private authority and certificates, a real
``dask scheduler`` and ``dask worker`` (processes, as a deployment runs them) use them, and
``sci-ingest load --scheduler tls://...`` loads exactly what a local load does; a client without
a certificate, or with one of another authority, is refused; a plain-TCP address off this host
is named as a risk."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path

import load_corpus
import pytest

from ingest.tls import plain_tcp_risk

BIN = Path(sys.executable).parent
SAMPLES = Path(__file__).resolve().parent.parent / "samples"
FILES = sorted((SAMPLES / "pasta").glob("*.m10"))[:6]


def cli(*args: str, env: dict | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("DASK_SCHEDULER_ADDRESS", "SCI_INGEST_DASK_TLS")}
    environ.update(env or {})
    return subprocess.run([str(BIN / "sci-ingest"), *args], capture_output=True, text=True, env=environ,
                          timeout=timeout)


def tls_options(folder: Path, role: str) -> list[str]:
    return ["--tls-ca-file", str(folder / "ca.pem"), "--tls-cert", str(folder / f"{role}.pem"),
            "--tls-key", str(folder / f"{role}-key.pem")]


class Cluster:
    """A ``dask scheduler`` and one ``dask worker``, started as processes; all stopped at the end."""

    def __init__(self, folder: Path, host: str, scheduler: list[str], worker: list[str]):
        self.procs: list[subprocess.Popen] = []
        file = folder / f"scheduler-{uuid.uuid4().hex[:6]}.json"
        log = open(folder / "cluster.log", "ab")  # noqa: SIM115 - closed in stop()
        self.log = log
        self._start(["scheduler", "--host", host, "--port", "0", "--no-dashboard", "--scheduler-file", str(file),
                     *scheduler])
        deadline = time.monotonic() + 60
        while not file.exists() or not file.read_text().strip():
            assert time.monotonic() < deadline, (folder / "cluster.log").read_text()[-3000:]
            time.sleep(0.1)
        self.address = json.loads(file.read_text())["address"]
        self._start(["worker", "--scheduler-file", str(file), "--nworkers", "1", "--nthreads", "1",
                     "--no-dashboard", *worker])

    def _start(self, argv: list[str]) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_")}
        self.procs.append(subprocess.Popen([str(BIN / "dask"), *argv], stdout=self.log, stderr=self.log, env=env,
                                           start_new_session=True))

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        self.log.close()


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tls") / "certs"
    proc = cli("certs", str(folder), "--host", "127.0.0.1", "--json")
    assert proc.returncode == 0, proc.stderr
    return folder


@pytest.fixture(scope="module")
def tls_cluster(certs):
    cluster = Cluster(certs.parent, "127.0.0.1", ["--protocol", "tls", *tls_options(certs, "scheduler")],
                      tls_options(certs, "worker"))
    try:
        yield cluster
    finally:
        cluster.stop()


def test_certs_makes_an_authority_and_a_verified_certificate_per_role(certs):
    for role in ("scheduler", "worker", "client"):
        verified = subprocess.run(["openssl", "verify", "-CAfile", str(certs / "ca.pem"), str(certs / f"{role}.pem")],
                                  capture_output=True, text=True)  # fmt: skip
        assert verified.returncode == 0 and verified.stdout.strip().endswith(": OK"), verified.stdout + verified.stderr
        assert stat.S_IMODE((certs / f"{role}-key.pem").stat().st_mode) == 0o600
    assert stat.S_IMODE((certs / "ca-key.pem").stat().st_mode) == 0o600
    text = subprocess.run(["openssl", "x509", "-in", str(certs / "scheduler.pem"), "-noout", "-ext", "subjectAltName"],
                          capture_output=True, text=True).stdout  # fmt: skip
    assert "IP Address:127.0.0.1" in text and "DNS:localhost" in text, text
    again = cli("certs", str(certs))
    assert again.returncode == 64 and "exists" in again.stderr and again.stderr.count("\n") == 1, again.stderr


def test_a_load_on_a_tls_cluster_is_exactly_a_local_load(tls_cluster, certs, mongo_uri, mongo_client):
    remote, local = f"tls_{uuid.uuid4().hex[:6]}", f"tls_local_{uuid.uuid4().hex[:6]}"
    common = ["load", "--json", "-q", "--mongo-uri", mongo_uri]
    try:
        proc = cli(*common, "--db", remote, "--scheduler", tls_cluster.address, *map(str, FILES),
                   env={"SCI_INGEST_DASK_TLS": str(certs)})
        assert proc.returncode == 0, proc.stderr[-3000:]
        report = json.loads(proc.stdout)
        assert report["files"]["files_loaded"] == len(FILES) and report["load"]["workers"] == 1, report["load"]
        assert "Dask scheduler" not in proc.stderr  # no warning about it: the data's own warnings may be there
        proc = cli(*common, "--db", local, "--workers", "1", *map(str, FILES))
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert load_corpus.snapshot(mongo_client[remote]) == load_corpus.snapshot(mongo_client[local])
    finally:
        mongo_client.drop_database(remote)
        mongo_client.drop_database(local)


def test_a_client_without_the_authoritys_certificate_is_refused(tls_cluster, tmp_path, mongo_uri, mongo_client):
    db = f"tls_refused_{uuid.uuid4().hex[:6]}"
    try:
        proc = cli("load", "--mongo-uri", mongo_uri, "--db", db, "--scheduler", tls_cluster.address, str(FILES[0]))
        assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr[-3000:]
        assert "speaks TLS" in proc.stderr and "SCI_INGEST_DASK_TLS" in proc.stderr
        other = tmp_path / "other-ca"
        assert cli("certs", str(other), "--host", "127.0.0.1").returncode == 0
        proc = cli("load", "--mongo-uri", mongo_uri, "--db", db, "--scheduler", tls_cluster.address, str(FILES[0]),
                   env={"SCI_INGEST_DASK_TLS": str(other)})
        assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr[-3000:]
        assert "cannot reach the Dask scheduler" in proc.stderr, proc.stderr
        assert db not in mongo_client.list_database_names() or mongo_client[db].searches.count_documents({}) == 0
    finally:
        mongo_client.drop_database(db)


@pytest.mark.parametrize("address, risky", [
    ("tcp://10.0.0.5:8786", True), ("sched.example.org:8786", True), ("tcp://[2001:db8::1]:8786", True),
    ("tcp://127.0.0.1:8786", False), ("tcp://127.0.0.2:8786", False), ("localhost:8786", False),
    ("tcp://[::1]:8786", False), ("tls://10.0.0.5:8786", False), ("inproc://10.0.0.5/1/2", False),
])
def test_plain_tcp_off_this_host_is_named_as_a_risk(address, risky):
    warning = plain_tcp_risk(address)
    assert (warning is not None) == risky, warning
    if risky:
        assert address in warning and "tls://" in warning and "run code" in warning


def _outward_address() -> str | None:
    """This host's address on its outward interface (no packet is sent), if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))
            address = s.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") else address


def test_a_plain_tcp_scheduler_off_loopback_works_with_a_warning(tmp_path, mongo_uri, mongo_client):
    address = _outward_address()
    if address is None:
        pytest.skip("this host has no address besides loopback")
    cluster = Cluster(tmp_path, "0.0.0.0", [], [])
    db = f"tcp_{uuid.uuid4().hex[:6]}"
    try:
        port = cluster.address.rsplit(":", 1)[1]
        proc = cli("load", "--json", "-q", "--mongo-uri", mongo_uri, "--db", db, "--scheduler",
                   f"tcp://{address}:{port}", str(FILES[0]))
        assert proc.returncode == 0, proc.stderr[-3000:]
        warnings = [line for line in proc.stderr.splitlines() if line.startswith("warning: ")]
        assert len(warnings) == 1 and f"tcp://{address}:{port}" in warnings[0] and "plain TCP" in warnings[0], warnings
    finally:
        cluster.stop()
        mongo_client.drop_database(db)


def test_the_manual_shows_the_warning_as_printed():
    page = (Path(__file__).resolve().parent.parent / "docs" / "cluster.md").read_text()
    assert f"warning: {plain_tcp_risk('tcp://10.0.0.5:8786')}\n" in page
