"""The same commands across hosts: a database host, a Dask scheduler host, two worker hosts and
this process's host (the client), each a network namespace with its own address (``tests/netns.py``).

``make test-hosts`` (root; pytest under ``unshare --net``) runs it; ``make test`` does not.  The
scheduler, the workers and the client speak TLS with the certificates of ``sci-ingest certs``.
Loads of a corpus of a few hundred real files (``tests/load_corpus.py``) and the analyses give
what a run on one host gives, also when, during a load, a worker host's cable is pulled and
plugged back, a worker host dies, a worker's link is slow and lossy, or the database host is cut
off for longer than the load's retry window (a named error in bounded time, then an exact rerun).
What was measured is printed and written to ``test-output/hosts/measured.json``.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
import time
import uuid
from pathlib import Path

import load_corpus
import pymongo
import pytest
from distributed import Client
from netns import Hosts, can_build, namespaces

from ingest.store.mongo import TIMEOUT_MS, heartbeat_timeout_ms
from ingest.tls import client_security

pytestmark = pytest.mark.hosts

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parent.parent
OUT = Path(os.environ.get("SCI_INGEST_TEST_OUTPUT", REPO / "test-output")) / "hosts"
DB_PORT, SCHEDULER_PORT = 27017, 8786
N_PASTA = 290  # with 10 record files and 6 shared ones: 306 real files
RETRY_S = 8  # the load's retry window in the database outage
HEARTBEAT_FREQUENCY_S = pymongo.common.HEARTBEAT_FREQUENCY  # the monitor's interval (no URI here sets one)
MEASURED: dict = {}


def tls_options(certs: Path, role: str) -> list[str]:
    return ["--tls-ca-file", str(certs / "ca.pem"), "--tls-cert", str(certs / f"{role}.pem"),
            "--tls-key", str(certs / f"{role}-key.pem")]


def clean_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DASK_", "SCI_INGEST_", "MONGODB_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["SCI_INGEST_KEEP"] = "0"  # each command in its own process: a kept one would outlive the hosts
    env.update(extra)
    return env


class Site:
    """The hosts with their services, and what the tests need of them."""

    def __init__(self, hosts: Hosts, folder: Path):
        self.hosts, self.folder = hosts, folder
        self.certs = folder / "certs"
        self.uri = f"mongodb://{hosts.addr['db']}:{DB_PORT}/?directConnection=true"
        self.scheduler = f"tls://{hosts.addr['scheduler']}:{SCHEDULER_PORT}"
        self.client = pymongo.MongoClient(self.uri, serverSelectionTimeoutMS=20000)

    def start_database(self) -> None:
        code = ("import sys; from pathlib import Path; from ingest.server.embedded import EmbeddedServer; "
                "print(EmbeddedServer(Path(sys.argv[1]), host=sys.argv[2], port=int(sys.argv[3]), "
                "log_path=Path(sys.argv[4])).start(detach=True))")
        proc = self.hosts.run("db", [str(BIN / "python"), "-c", code, str(self.folder / "db" / "data"),
                                     self.hosts.addr["db"], str(DB_PORT), str(self.folder / "secantusd.log")],
                              env=clean_env(), timeout=120)
        assert proc.returncode == 0, proc.stderr[-3000:]
        self.client.admin.command("ping")

    def start_scheduler(self) -> None:
        self.hosts.start("scheduler", [str(BIN / "dask"), "scheduler", "--host", self.hosts.addr["scheduler"],
                                       "--port", str(SCHEDULER_PORT), "--protocol", "tls", "--no-dashboard",
                                       *tls_options(self.certs, "scheduler")], env=clean_env())
        self.hosts.wait_for_port("scheduler", SCHEDULER_PORT)

    def start_worker(self, host: str) -> None:
        self.hosts.start(host, [str(BIN / "dask"), "worker", self.scheduler, "--host", self.hosts.addr[host],
                                "--nworkers", "1", "--nthreads", "1", "--no-dashboard", "--name", host,
                                *tls_options(self.certs, "worker")], env=clean_env(), log=f"{host}-worker")

    def workers(self) -> list[str]:
        with Client(self.scheduler, security=client_security(self.certs), timeout="20s") as client:
            return sorted(w["name"] for w in client.scheduler_info()["workers"].values())

    def ensure_workers(self, timeout: float = 90) -> None:
        """Both worker hosts up, each with its worker in the cluster."""
        deadline = time.monotonic() + timeout
        present = self.workers()
        for host in ("w1", "w2"):
            if host not in present and not self.hosts.left_running().get(host):  # a host killed earlier
                self.start_worker(host)
        while self.workers() != ["w1", "w2"]:
            assert time.monotonic() < deadline, f"the workers did not join: {self.workers()}"
            time.sleep(0.5)

    def cli_env(self) -> dict:
        """The client's environment: the production setting on, the Dask client certificate."""
        return clean_env(SCI_INGEST_HOME=str(self.folder / "home"), SCI_INGEST_NO_EMBEDDED="1",
                         SCI_INGEST_DASK_TLS=str(self.certs))

    def cli(self, *args: str, scheduler: bool = True, timeout: float = 900) -> subprocess.CompletedProcess:
        extra = ["--scheduler", self.scheduler] if scheduler else []
        return self.hosts.run("client", [str(BIN / "sci-ingest"), *args, "--mongo-uri", self.uri, *extra],
                              env=self.cli_env(), timeout=timeout)

    def start_cli(self, *args: str, log: str, uri: str | None = None):
        return self.hosts.start("client", [str(BIN / "sci-ingest"), *args, "--mongo-uri", uri or self.uri,
                                           "--scheduler", self.scheduler], env=self.cli_env(), log=log)



@pytest.fixture(scope="module")
def site(tmp_path_factory):
    why = can_build()
    if why:
        pytest.fail(f"cannot build the hosts: {why}")
    folder = tmp_path_factory.mktemp("hosts")
    with Hosts(["db", "scheduler", "w1", "w2"], here="client", folder=folder) as hosts:
        s = Site(hosts, folder)
        made = hosts.run("client", [str(BIN / "sci-ingest"), "certs", str(s.certs),
                                    *[a for h in ("scheduler", "w1", "w2", "client") for a in ("--host", hosts.addr[h])]],
                         env=clean_env())
        assert made.returncode == 0, made.stderr
        s.start_database()
        s.start_scheduler()
        s.ensure_workers()
        yield s
        s.client.close()
        hosts.close()
        assert len(hosts.seen) >= 5, hosts.seen  # the server, the scheduler, two workers (and nannies)
        assert hosts.survivors() == [], hosts.survivors()
        assert not [ns for ns in namespaces() if ns.startswith(hosts.tag)]
        for _host, proc in hosts.procs:
            assert proc.poll() is not None, f"still running: {proc.args}"
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "measured.json").write_text(json.dumps(MEASURED, indent=2) + "\n")
    print("\nmeasured across hosts:", json.dumps(MEASURED, indent=2))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("corpus")
    load_corpus.build(folder, n_pasta=N_PASTA, shared_files=6)
    return folder


@pytest.fixture(scope="module")
def local(site, corpus) -> dict:
    """A load on one host (this one, one process) and the analyses there: what every run must give."""
    name = "local"
    started = time.monotonic()
    proc = site.cli("load", "--json", "-q", "--db", name, "--workers", "1", str(corpus), scheduler=False)
    MEASURED["local_load_s"] = round(time.monotonic() - started, 2)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["failed"] == [] and report["files"]["files_loaded"] == n_files(corpus)
    MEASURED["files"] = report["files"]["files_loaded"]
    MEASURED["documents"] = report["inserted"]
    started = time.monotonic()
    proc = site.cli("analyze", "--json", "--db", name, scheduler=False)
    MEASURED["local_analyze_s"] = round(time.monotonic() - started, 2)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"snapshot": load_corpus.snapshot(site.client[name]), "outputs": outputs(site.client[name],
                                                                                    json.loads(proc.stdout))}


def n_files(corpus: Path) -> int:
    return sum(1 for p in corpus.rglob("*") if p.is_file())


def outputs(db, report: dict) -> dict:
    """Every analysis's output collection, without the run id, in a fixed order."""
    found = {}
    for analysis in report["analysis"]:
        coll = analysis["collection"]
        rows = [{k: v for k, v in doc.items() if k != "run_id"} for doc in db[coll].find()]
        found[coll] = sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)
    assert found and all(found.values()), found.keys()
    return found


def loaded(site: Site, name: str) -> int:
    return site.client[name].ingest_files.count_documents({"status": "loaded"})


def wait_until_loaded(site: Site, name: str, share: float, proc, total: int) -> int:
    """Block until ``share`` of the files are loaded while ``proc`` runs; the count then."""
    deadline = time.monotonic() + 300
    while True:
        n = loaded(site, name)
        assert proc.poll() is None, "the load ended before the fault"
        if n >= share * total:
            return n
        assert time.monotonic() < deadline, "the load made no progress"
        time.sleep(0.05)


def assert_exact(site: Site, name: str, local: dict) -> None:
    load_corpus.assert_exact(site.client[name], local["snapshot"])


def log_of(site: Site, log: str) -> str:
    path = site.folder / f"{log}.log"
    return path.read_text(errors="replace")[-3000:] if path.exists() else ""


# ---------------------------------------------------------------------------------------------- tests
def test_tls_is_enforced_a_client_without_a_certificate_is_refused(site):
    """The scheduler speaks TLS only and asks for a certificate of its authority: a TLS client that
    trusts the authority but shows no certificate is refused in the handshake, plain TCP gets no
    Dask scheduler, and ``sci-ingest`` without its certificates says what to set."""
    assert site.scheduler.startswith("tls://")
    address = (site.hosts.addr["scheduler"], SCHEDULER_PORT)
    trusting = ssl.create_default_context(cafile=str(site.certs / "ca.pem"))
    trusting.check_hostname = False
    with socket.create_connection(address, timeout=10) as raw:
        with pytest.raises((ssl.SSLError, ConnectionError)):
            with trusting.wrap_socket(raw) as tls:  # TLS 1.3: the refusal is an alert on the first read
                tls.sendall(b"\0" * 8)
                if not tls.recv(1):
                    raise ConnectionError("closed by the scheduler")
    shown = ssl.create_default_context(cafile=str(site.certs / "ca.pem"))  # the control: with a certificate
    shown.check_hostname = False
    shown.load_cert_chain(site.certs / "client.pem", site.certs / "client-key.pem")
    with socket.create_connection(address, timeout=10) as raw, shown.wrap_socket(raw) as tls:
        assert tls.version() in ("TLSv1.2", "TLSv1.3")
    with pytest.raises((OSError, TimeoutError)):  # plain TCP to the TLS port gets no Dask scheduler
        Client(f"tcp://{address[0]}:{address[1]}", timeout="8s").close()
    env = clean_env(SCI_INGEST_HOME=str(site.folder / "home"))  # the CLI without SCI_INGEST_DASK_TLS
    proc = site.hosts.run("client", [str(BIN / "sci-ingest"), "analyze", "--mongo-uri", site.uri, "--db", "none",
                                     "--scheduler", site.scheduler], env=env)
    assert proc.returncode == 1 and "speaks TLS" in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


def test_check_reaches_a_scheduler_on_another_host_and_names_one_nobody_answers_at(site):
    """``sci-ingest check`` from the client host: the TLS scheduler host with its two workers is
    reached with the client certificate; a plain TCP scheduler on that host is refused while the
    client certificate is set (it makes sci-ingest speak TLS only: one line, not Dask's traceback),
    and reached without it, with warnings (plain TCP off this host, no worker yet), exit 0; an
    address on a host where nothing listens is missing, exit 1, named on stderr in one line."""
    site.ensure_workers()
    proc = site.cli("check", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {r["check"]: r for r in json.loads(proc.stdout)["checks"]}
    assert rows["dask TLS"]["status"] == "ok" and "SCI_INGEST_DASK_TLS" in rows["dask TLS"]["detail"], rows
    assert rows["dask scheduler"]["status"] == "ok", rows["dask scheduler"]
    assert f"{site.scheduler} answers: 2 worker(s)" in rows["dask scheduler"]["detail"]
    assert rows["server"]["status"] == "ok" and rows["rights: load"]["status"] == "ok"

    plain_port = SCHEDULER_PORT + 10
    plain = f"tcp://{site.hosts.addr['scheduler']}:{plain_port}"
    started = site.hosts.start("scheduler", [str(BIN / "dask"), "scheduler", "--host", site.hosts.addr["scheduler"],
                                             "--port", str(plain_port), "--no-dashboard"], env=clean_env(),
                               log="plain-scheduler")
    try:
        site.hosts.wait_for_port("scheduler", plain_port)
        proc = site.cli("check", "--scheduler", plain, scheduler=False)  # the client certificate: TLS only
        errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
        assert proc.returncode == 1 and len(errors) == 1 and "dask TLS (SCI_INGEST_DASK_TLS=" in errors[0], proc.stderr
        env = {k: v for k, v in site.cli_env().items() if k != "SCI_INGEST_DASK_TLS"}
        proc = site.hosts.run("client", [str(BIN / "sci-ingest"), "check", "--json", "--mongo-uri", site.uri,
                                         "--scheduler", plain], env=env, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        rows = {r["check"]: r for r in json.loads(proc.stdout)["checks"]}
        assert rows["dask TLS"]["status"] == "warn" and "plain TCP" in rows["dask TLS"]["detail"], rows
        assert rows["dask scheduler"]["status"] == "warn", rows["dask scheduler"]
        assert f"{plain} answers, but no worker has joined" in rows["dask scheduler"]["detail"]
    finally:
        os.killpg(started.pid, 9)
        started.wait(30)

    nobody = f"tls://{site.hosts.addr['w2']}:{SCHEDULER_PORT + 11}"
    proc = site.cli("check", "--scheduler", nobody, scheduler=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: missing what the pipeline needs: dask scheduler (cannot reach {nobody})"], proc.stderr


def test_a_load_and_the_analyses_across_hosts_equal_one_hosts(site, corpus, local):
    name = "across"
    started = time.monotonic()
    proc = site.cli("load", "--json", "-q", "--db", name, str(corpus))
    MEASURED["across_load_s"] = round(time.monotonic() - started, 2)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["load"]["workers"] == 2 and report["failed"] == [], report["load"]
    assert_exact(site, name, local)
    started = time.monotonic()
    proc = site.cli("analyze", "--json", "--db", name)
    MEASURED["across_analyze_s"] = round(time.monotonic() - started, 2)
    assert proc.returncode == 0, proc.stderr[-3000:]
    analyzed = json.loads(proc.stdout)
    cluster = next(s for s in analyzed["stages"] if s["stage"] == "cluster")
    assert cluster["detail"]["scheduler"] == site.scheduler and cluster["workers"] == 2, cluster
    assert outputs(site.client[name], analyzed) == local["outputs"]
    MEASURED["load_ratio_across_vs_local"] = round(MEASURED["across_load_s"] / MEASURED["local_load_s"], 2)
    MEASURED["analyze_ratio_across_vs_local"] = round(MEASURED["across_analyze_s"] / MEASURED["local_analyze_s"], 2)


def load_with_a_fault(site: Site, corpus: Path, prefix: str, fault, *options: str, uri: str | None = None):
    """A load across the hosts; ``fault()`` once a fifth of the files are loaded, while it runs.
    (the process, its database's name, the seconds from the start to its end)"""
    site.ensure_workers()
    name = f"{prefix}_{uuid.uuid4().hex[:6]}"
    started = time.monotonic()
    proc = site.start_cli("load", "--json", "-q", "--db", name, *options, str(corpus), log=name, uri=uri)
    wait_until_loaded(site, name, 0.2, proc, MEASURED["files"])
    fault()
    proc.wait(900)
    return proc, name, round(time.monotonic() - started, 2)


def test_a_worker_hosts_cable_pulled_and_plugged_back_mid_load_ends_exact(site, corpus, local):
    def unplug_for_10_s():
        site.hosts.unplug("w2")
        time.sleep(10)
        site.hosts.plug("w2")

    proc, name, MEASURED["unplugged_10s_load_s"] = load_with_a_fault(site, corpus, "unplugged", unplug_for_10_s)
    assert proc.returncode == 0, log_of(site, name)
    assert_exact(site, name, local)


def test_a_worker_host_that_dies_mid_load_loses_nothing(site, corpus, local):
    def kill_w2():
        assert site.hosts.kill("w2"), "w2 had no process to kill"

    proc, name, MEASURED["host_killed_load_s"] = load_with_a_fault(site, corpus, "died", kill_w2)
    assert proc.returncode == 0, log_of(site, name)
    assert_exact(site, name, local)
    assert site.workers() == ["w1"]


def test_a_slow_lossy_worker_link_ends_exact(site, corpus, local):
    site.ensure_workers()
    name = f"lossy_{uuid.uuid4().hex[:6]}"
    MEASURED["shaping"] = site.hosts.shape("w1")
    try:
        started = time.monotonic()
        proc = site.start_cli("load", "--json", "-q", "--db", name, str(corpus), log=name)
        proc.wait(900)
        MEASURED["lossy_load_s"] = round(time.monotonic() - started, 2)
    finally:
        site.hosts.unshape("w1")
    assert proc.returncode == 0, log_of(site, name)
    assert_exact(site, name, local)


@pytest.mark.parametrize("connect_timeout_s", [None, 10], ids=["default", "connectTimeoutMS=10000"])
def test_the_database_host_cut_off_past_the_retry_window_is_a_named_error_then_an_exact_rerun(
        site, corpus, local, connect_timeout_s):
    """The documented bound (docs/cluster.md): the driver's monitor checks the server every
    heartbeatFrequencyMS (pymongo's 10 s), so a cut just after a check waits that long before
    the next one begins; that check gives the silent server up after its heartbeat timeout (20 s
    for a server on another host, or the URI's connectTimeoutMS); the first failure can itself
    come from a server selection that waited (TIMEOUT_MS), then the retry window runs, and its
    last attempt can wait one more selection."""
    uri = site.uri + (f"&connectTimeoutMS={connect_timeout_s * 1000}" if connect_timeout_s else "")
    detection_s = connect_timeout_s or heartbeat_timeout_ms(site.uri) / 1000
    key = f"db_cut_to_error_s[{connect_timeout_s or 'default'}]"
    cut = {}

    def unplug_db():
        cut["at"] = time.monotonic()
        site.hosts.unplug("db")

    try:
        proc, name, _ = load_with_a_fault(site, corpus, "dbcut", unplug_db, "--retry-for", str(RETRY_S), uri=uri)
        MEASURED[key] = round(time.monotonic() - cut["at"], 2)
    finally:
        site.hosts.plug("db")
    text = log_of(site, name)
    assert proc.returncode == 1, text
    errors = [line for line in text.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "cannot reach MongoDB" in errors[0], text
    MEASURED[key.replace("to_error_s", "error")] = errors[0]
    bound = HEARTBEAT_FREQUENCY_S + detection_s + RETRY_S + 2 * TIMEOUT_MS / 1000 + 10  # 10 s: backoff, ARP
    MEASURED[key.replace("to_error_s", "bound_s")] = bound
    assert MEASURED[key] <= bound, MEASURED
    again = site.cli("load", "--json", "-q", "--db", name, str(corpus))
    assert again.returncode == 0, again.stderr[-3000:]
    held = list(site.client[name].ingest_claims.find())
    if held:
        # Claims the stopped run's tasks could not release (the server was gone), held by worker
        # processes that live on: nobody can tell their tasks are over, so the rerun leaves them
        # until their lease ends (60 s, docs/loading.md); a load after that takes them over.
        rerun = json.loads(again.stdout)["run_id"]
        assert all((c.get("owner") or {}).get("run_id") not in (None, rerun) for c in held), held
        server_now = site.client.admin.command("hello")["localTime"]
        wait_s = max(0.0, (max(c["lease_until"] for c in held) - server_now).total_seconds()) + 1
        MEASURED[key.replace("to_error_s", "claims_left")] = [len(held), round(wait_s, 1)]
        time.sleep(wait_s)
        after = site.cli("load", "--json", "-q", "--db", name, str(corpus))
        assert after.returncode == 0, after.stderr[-3000:]
    assert_exact(site, name, local)
