"""docker/docker-compose.yml is a valid Compose file whose pieces fit together.

No Docker engine here: the file is parsed with PyYAML, validated against the
known subset of the Compose Specification's keys, and its cross-references are checked: depends_on, volumes, the Dockerfile, the
MongoDB cluster topology, the shard keys and the sci-ingest wiring.
"""

from __future__ import annotations

import copy
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from ingest.store.catalog import SHARD_KEYS

REPO_ROOT = Path(__file__).resolve().parent.parent
DOCKER_DIR = REPO_ROOT / "docker"
COMPOSE_FILE = DOCKER_DIR / "docker-compose.yml"
DOCKERFILE = DOCKER_DIR / "Dockerfile"
MONGO_SCRIPTS = DOCKER_DIR / "mongo"

MONGOS_URI = "mongodb://mongos:27017/"
DASK_ADDRESS = "tcp://dask-scheduler:8786"
# The shard keys the production shape requires (and ingest.store.catalog.SHARD_KEYS must agree).
REQUIRED_SHARD_KEYS = {"searches": "_id", "hits": "search_id", "materials": "_id", "tasks": "_id"}
ENV_REF = re.compile(r"\$\{[^}]*\}")


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE_FILE.read_text())


@pytest.fixture(scope="module")
def services(compose) -> dict:
    return compose["services"]


def deps(service: dict) -> dict[str, str]:
    """depends_on in either syntax, as {target: condition}."""
    raw = service.get("depends_on") or {}
    if isinstance(raw, list):
        return {name: "service_started" for name in raw}
    return {name: (spec or {}).get("condition", "service_started") for name, spec in raw.items()}


def env_of(service: dict) -> dict[str, str]:
    raw = service.get("environment") or {}
    if isinstance(raw, list):
        return dict(item.split("=", 1) for item in raw)
    return {k: "" if v is None else str(v) for k, v in raw.items()}


def command_of(service: dict) -> list[str]:
    cmd = service.get("command") or []
    return shlex.split(cmd) if isinstance(cmd, str) else [str(c) for c in cmd]


def option(cmd: list[str], name: str) -> str | None:
    return cmd[cmd.index(name) + 1] if name in cmd else None


def parse_replset(spec: str) -> tuple[str, list[str]]:
    name, _, hosts = spec.partition("/")
    return name, [h for h in hosts.split(",") if h]


# ------------------------------------------------------------------ the file itself
# The keys of the Compose Specification this file may use (a deliberate subset:
# anything else is more likely a typo than a feature we rely on).
TOP_LEVEL_KEYS = {"name", "services", "volumes", "networks", "configs", "secrets"}
SERVICE_KEYS = {
    "build", "command", "container_name", "depends_on", "entrypoint", "env_file", "environment",
    "expose", "healthcheck", "hostname", "image", "init", "labels", "logging", "networks", "ports",
    "profiles", "restart", "stop_grace_period", "user", "volumes", "working_dir",
}
HEALTHCHECK_KEYS = {"test", "interval", "timeout", "retries", "start_period", "start_interval", "disable"}
DEPENDS_CONDITIONS = {"service_started", "service_healthy", "service_completed_successfully"}
RESTART_POLICIES = {"no", "always", "on-failure", "unless-stopped"}


def compose_problems(compose: dict) -> list[str]:
    """Keys and values outside the Compose Specification subset above."""
    problems = [f"top-level key {k!r}" for k in compose if k not in TOP_LEVEL_KEYS and not k.startswith("x-")]
    for name, svc in compose.get("services", {}).items():
        problems += [f"{name}: key {k!r}" for k in svc if k not in SERVICE_KEYS and not k.startswith("x-")]
        problems += [f"{name}: healthcheck key {k!r}" for k in (svc.get("healthcheck") or {})
                     if k not in HEALTHCHECK_KEYS]
        problems += [f"{name}: depends_on condition {c!r}" for c in deps(svc).values() if c not in DEPENDS_CONDITIONS]
        if "restart" in svc and str(svc["restart"]).split(":")[0] not in RESTART_POLICIES:
            problems.append(f"{name}: restart {svc['restart']!r}")
    return problems


def test_compose_file_uses_only_known_compose_keys(compose):
    assert compose_problems(compose) == []


def test_key_check_is_strict(compose):
    """The check rejects a misspelled key and a bad depends_on condition."""
    typo = copy.deepcopy(compose)
    typo["services"]["mongos"]["depend_on"] = typo["services"]["mongos"].pop("depends_on")
    assert compose_problems(typo) == ["mongos: key 'depend_on'"]
    bad = copy.deepcopy(compose)
    bad["services"]["mongos"]["depends_on"]["mongo-init-replsets"]["condition"] = "service_done"
    assert compose_problems(bad) == ["mongos: depends_on condition 'service_done'"]


def test_every_service_has_an_image(services):
    for name, svc in services.items():
        assert svc.get("image") or svc.get("build"), name


# ------------------------------------------------------------------ depends_on
def test_depends_on_targets_and_conditions(services):
    for name, svc in services.items():
        for target, condition in deps(svc).items():
            assert target in services, f"{name} depends on unknown service {target}"
            assert target != name
            tsvc = services[target]
            if condition == "service_healthy":
                hc = tsvc.get("healthcheck")
                assert hc and not hc.get("disable") and hc.get("test"), f"{name} waits for {target} to be healthy, but it has no healthcheck"
            if condition == "service_completed_successfully":
                assert tsvc.get("restart", "no") == "no", f"{target} must be one-shot (restart: 'no') for {name} to wait for its completion"
            # A dependency must be started whenever the dependent is: no profile-only targets
            # unless the dependent is in the same profile.
            if tsvc.get("profiles"):
                assert set(tsvc["profiles"]) & set(svc.get("profiles") or []), f"{name} depends on profile-only {target}"


def test_depends_on_has_no_cycle(services):
    state: dict[str, str] = {}

    def visit(name: str, path: list[str]) -> None:
        if state.get(name) == "done":
            return
        assert state.get(name) != "active", f"dependency cycle: {' -> '.join(path + [name])}"
        state[name] = "active"
        for target in deps(services[name]):
            visit(target, path + [name])
        state[name] = "done"

    for name in services:
        visit(name, [])


def test_one_shot_services_are_one_shot(services):
    one_shot = {"mongo-init-replsets", "mongo-init-sharding", "airflow-init"}
    for name in one_shot:
        assert services[name].get("restart") == "no", name


# ------------------------------------------------------------------ volumes and files
def test_volumes_declared_used_and_bind_sources_exist(compose, services):
    declared = set(compose.get("volumes") or {})
    used = set()
    for name, svc in services.items():
        for vol in svc.get("volumes") or []:
            if isinstance(vol, dict):
                source, kind = vol.get("source"), vol.get("type", "volume")
            else:
                source = ENV_REF.sub("${VAR}", vol).split(":", 1)[0]  # "${A:-x}:/dst" has colons inside
                kind = "bind" if source.startswith((".", "/", "~", "$")) else "volume"
            if kind == "volume":
                assert source in declared, f"{name} uses undeclared volume {source}"
                used.add(source)
            elif not ENV_REF.search(source):  # ${...} sources are the operator's choice
                assert (DOCKER_DIR / source).resolve().exists(), f"{name} bind-mounts missing {source}"
    assert declared == used, f"declared but unused volumes: {declared - used}"


def test_build_context_and_dockerfile_copy_sources(services):
    builds = [svc["build"] for svc in services.values() if "build" in svc]
    assert builds, "no service builds the sci-ingest image"
    for build in builds:
        context = (DOCKER_DIR / build["context"]).resolve()
        assert context == REPO_ROOT
        assert (context / build["dockerfile"]).resolve() == DOCKERFILE
    text = DOCKERFILE.read_text()
    assert re.search(r"^FROM python:3\.11-slim\b", text, re.M)
    sources = []
    for line in text.splitlines():
        if line.startswith("COPY "):
            parts = [p for p in line.split()[1:] if not p.startswith("--")]
            sources.extend(parts[:-1])
    assert "requirements.lock" in sources and "pyproject.toml" in sources
    for src in sources:
        if src == "requirements.lock":
            continue  # generated by `make lock`; see test_requirements_lock_present
        assert (REPO_ROOT / src).exists(), f"Dockerfile copies missing {src}"
    assert re.search(r"pip install -r requirements\.lock", text)
    assert re.search(r"pip install --no-deps -e \.", text)


def test_requirements_lock_present():
    if not (REPO_ROOT / "requirements.lock").exists():
        pytest.skip("requirements.lock is not generated yet (`make lock`); the image build needs it")
    assert (REPO_ROOT / "requirements.lock").read_text().strip()


# ------------------------------------------------------------------ MongoDB cluster
def test_mongo_cluster_topology(services):
    init_rs = env_of(services["mongo-init-replsets"])
    init_sh = env_of(services["mongo-init-sharding"])
    config_spec = init_rs["MONGO_CONFIG_REPLSET"]
    assert option(command_of(services["mongos"]), "--configdb") == config_spec
    assert init_sh["MONGO_SHARD_REPLSETS"] == init_rs["MONGO_SHARD_REPLSETS"]

    def check_members(spec: str, role: str) -> str:
        rs_name, hosts = parse_replset(spec)
        assert hosts, spec
        for hostport in hosts:
            host, _, port = hostport.partition(":")
            assert host in services, f"replica set {rs_name} names unknown host {host}"
            cmd = command_of(services[host])
            assert cmd[0] == "mongod" and role in cmd, f"{host}: {cmd}"
            assert option(cmd, "--replSet") == rs_name, host
            assert option(cmd, "--port") == port, host
            assert "--bind_ip_all" in cmd, host
            assert any(v.endswith(":/data/db") for v in services[host]["volumes"]), f"{host} keeps no data volume"
            assert deps(services["mongo-init-replsets"]).get(host) == "service_healthy", host
        return rs_name

    check_members(config_spec, "--configsvr")
    shard_specs = init_rs["MONGO_SHARD_REPLSETS"].split()
    shard_names = [check_members(spec, "--shardsvr") for spec in shard_specs]
    assert len(shard_names) == 2 and len(set(shard_names)) == 2
    # Every mongod in the file belongs to exactly one replica set listed for the init script.
    listed = {h.split(":")[0] for spec in [config_spec, *shard_specs] for h in parse_replset(spec)[1]}
    mongods = {name for name, svc in services.items() if command_of(svc)[:1] == ["mongod"]}
    assert mongods == listed

    assert option(command_of(services["mongos"]), "--port") == "27017"
    assert urlsplit(init_sh["MONGOS_URI"]).hostname == "mongos"
    assert deps(services["mongos"]) == {"mongo-init-replsets": "service_completed_successfully"}
    assert deps(services["mongo-init-sharding"]).get("mongos") == "service_healthy"


def test_shard_keys_match_the_application(services):
    env = env_of(services["mongo-init-sharding"])
    keys = dict(pair.split(":", 1) for pair in env["SHARD_KEYS"].split())
    assert keys == REQUIRED_SHARD_KEYS
    assert keys == dict(SHARD_KEYS)
    assert env["SCI_INGEST_DB"] == "sci_ingest"


def test_init_scripts_exist_and_parse(services):
    for name in ("mongo-init-replsets", "mongo-init-sharding"):
        cmd = command_of(services[name])
        assert cmd[:3] == ["mongosh", "--nodb", "--quiet"], cmd
        script = MONGO_SCRIPTS / Path(cmd[3]).name
        assert cmd[3].startswith("/scripts/") and script.is_file(), cmd
        assert "./mongo:/scripts:ro" in services[name]["volumes"]
    text = (MONGO_SCRIPTS / "init-sharding.js").read_text()
    for needle in ("addShard", "enableSharding", "shardCollection", '"hashed"'):
        assert needle in text, needle
    assert "replSetInitiate" in (MONGO_SCRIPTS / "init-replica-sets.js").read_text()
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: JavaScript syntax not checked")
    for script in sorted(MONGO_SCRIPTS.glob("*.js")):
        proc = subprocess.run([node, "--check", str(script)], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, f"{script.name}: {proc.stderr}"


# ------------------------------------------------------------------ sci-ingest wiring
def test_sci_ingest_processes_are_wired_to_mongos_and_dask(services):
    wired = ["airflow-init", "airflow-apiserver", "airflow-scheduler", "airflow-dag-processor",
             "dask-worker-1", "dask-worker-2", "sci-ingest"]
    for name in wired:
        env = env_of(services[name])
        assert env.get("MONGODB_URI") == MONGOS_URI, name
        assert env.get("DASK_SCHEDULER_ADDRESS") == DASK_ADDRESS, name
        assert env.get("SCI_INGEST_DB") == "sci_ingest", name
        assert env.get("SCI_INGEST_NO_EMBEDDED") == "1", name  # never a private database in a container
    sched = command_of(services["dask-scheduler"])
    assert sched[:2] == ["dask", "scheduler"] and option(sched, "--port") == "8786"
    workers = [n for n, s in services.items() if command_of(s)[:2] == ["dask", "worker"]]
    assert sorted(workers) == ["dask-worker-1", "dask-worker-2"]
    for name in workers:
        cmd = command_of(services[name])
        assert cmd[2] == DASK_ADDRESS
        assert deps(services[name]) == {"dask-scheduler": "service_healthy"}
    # Work can start only once the cluster is sharded.
    for name in ("airflow-scheduler", "sci-ingest"):
        assert deps(services[name]).get("mongo-init-sharding") == "service_completed_successfully", name


def test_airflow_services(services):
    commands = {name: command_of(svc) for name, svc in services.items()}
    assert commands["airflow-init"] == ["airflow", "db", "migrate"]
    assert commands["airflow-apiserver"][:2] == ["airflow", "api-server"]
    assert commands["airflow-scheduler"] == ["airflow", "scheduler"]
    assert commands["airflow-dag-processor"] == ["airflow", "dag-processor"]
    api_port = option(commands["airflow-apiserver"], "--port")
    dockerfile = DOCKERFILE.read_text()
    for name in ("airflow-init", "airflow-apiserver", "airflow-scheduler", "airflow-dag-processor"):
        env = env_of(services[name])
        assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
        db_url = urlsplit(ENV_REF.sub("secret", env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]))
        assert db_url.scheme.startswith("postgresql") and db_url.hostname == "postgres"
        assert db_url.path == "/" + env_of(services["postgres"])["POSTGRES_DB"]
        api = urlsplit(env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"])
        assert api.hostname == "airflow-apiserver" and str(api.port) == api_port and api.path == "/execution/"
        dags = env["AIRFLOW__CORE__DAGS_FOLDER"]
        assert re.search(r"^COPY dags \./dags$", dockerfile, re.M) and dags == "/opt/sci-ingest/dags"
        assert "WORKDIR /opt/sci-ingest" in dockerfile
        for secret in ("AIRFLOW__CORE__FERNET_KEY", "AIRFLOW__API_AUTH__JWT_SECRET", "AIRFLOW__API__SECRET_KEY"):
            assert ENV_REF.fullmatch(env[secret]) and ":?" in env[secret], f"{secret} must come from docker/.env"
        if name != "airflow-init":
            assert deps(services[name]).get("airflow-init") == "service_completed_successfully", name
    # The scheduler runs the tasks (LocalExecutor): it needs the execution API up.
    assert deps(services["airflow-scheduler"]).get("airflow-apiserver") == "service_healthy"
    # Every variable the compose file requires is documented in .env.example.
    required = set(re.findall(r"\$\{(\w+):\?", COMPOSE_FILE.read_text()))
    example = (DOCKER_DIR / ".env.example").read_text()
    for var in required:
        assert re.search(rf"^{var}=", example, re.M), f"{var} missing from docker/.env.example"
