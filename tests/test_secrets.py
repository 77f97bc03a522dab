"""Secrets in MongoDB URIs never reach stdout, stderr, logs or stored documents."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

import ingest.secrets as secrets_module
from ingest.errors import DatabaseError
from ingest.secrets import redact_uri, remember

BIN = Path(sys.executable).parent / "sci-ingest"
SAMPLES = Path(__file__).resolve().parent.parent / "samples"


@pytest.mark.parametrize("uri, shown", [
    ("mongodb://u:pw@h:1/", "mongodb://u:***@h:1/"),
    ("mongodb://h:1/", "mongodb://h:1/"),
    ("mongodb://u@h:1/?authMechanism=MONGODB-X509", "mongodb://u@h:1/?authMechanism=MONGODB-X509"),
    ("mongodb://u:p@ss@h1,h2/db?tls=true&tlsCertificateKeyFilePassword=k3y&w=1",
     "mongodb://u:***@h1,h2/db?tls=true&tlsCertificateKeyFilePassword=***&w=1"),
    ("mongodb+srv://u:pw@c.example.net/?authMechanismProperties=AWS_SESSION_TOKEN:t0k",
     "mongodb+srv://u:***@c.example.net/?authMechanismProperties=***"),
    ("mongodb://h/?sslPEMKeyPassword=x1y;proxyPassword=z2w", "mongodb://h/?sslPEMKeyPassword=***;proxyPassword=***"),
    ("mongodb://user:pw@host:notaport/", "mongodb://user:***@host:notaport/"),
    ("not a uri at all", "not a uri at all"),
])
def test_redact_uri(uri, shown):
    assert redact_uri(uri) == shown


@settings(max_examples=300, deadline=None)
@given(user=st.text(min_size=1, max_size=8).filter(lambda s: not set(s) & set(":@/?")),
       password=st.text(min_size=3, max_size=20).filter(lambda s: s.strip() and not set(s) & set("?&;*")),
       option=st.sampled_from(["tlsCertificateKeyFilePassword", "authMechanismProperties", "clientSecret",
                               "proxyPassword", "apiToken"]),
       value=st.text(min_size=3, max_size=20).filter(lambda s: s.strip() and not set(s) & set("&;#*")),
       junk=st.text(max_size=10))
def test_no_secret_survives_redaction_or_scrubbing(user, password, option, value, junk):
    uri = f"mongodb://{user}:{password}@host:27017/db?w=1&{option}={value}"
    shown = redact_uri(uri + junk)
    assert shown.startswith(f"mongodb://{user}:***@host:27017/db?w=1&{option}=***")
    before = set(secrets_module._SECRETS)
    try:
        remember(uri)
        message = str(DatabaseError(f"connecting {uri}: the driver said {password!r} and {value!r}"))
        assert password not in message and value not in message
    finally:  # random three-letter "secrets" left behind would mask words in later tests' messages
        secrets_module._SECRETS.clear()
        secrets_module._SECRETS.update(before)


def _scan_everything(mongo_client, db: str, home: Path) -> bytes:
    """Every stored byte: each collection's documents as the server sends them (raw BSON, whose
    strings are their UTF-8 bytes), and every file of the home."""
    found = b""
    for name in mongo_client[db].list_collection_names():
        found += b"".join(mongo_client[db][name].find_raw_batches())
    for path in home.rglob("*"):
        if path.is_file():
            found += path.read_bytes()
    return found


def test_a_secret_option_in_the_uri_is_nowhere_after_a_run(mongo_uri, mongo_client, tmp_path):
    secret = f"S3CR3T-{uuid.uuid4().hex[:8]}"
    sep = "&" if "?" in mongo_uri else "/?"
    uri = f"{mongo_uri}{sep}authMechanismProperties=AWS_SESSION_TOKEN:{secret}"  # connects unchanged
    db = f"secrets_{uuid.uuid4().hex[:8]}"
    home = tmp_path / "home"
    env = {**os.environ, "SCI_INGEST_HOME": str(home), "MONGODB_URI": uri}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    try:
        bad = tmp_path / "in"
        bad.mkdir()
        (bad / "broken.m10").write_bytes((SAMPLES / "pasta" / "fasta36_prot.m10").read_bytes()[:3000])
        proc = subprocess.run([str(BIN), "load", "--json", "--workers", "1", "--db", db,
                               str(SAMPLES / "materials"), str(bad)],
                              capture_output=True, text=True, env=env, timeout=300)
        assert proc.returncode == 2, proc.stderr[-2000:]  # the broken file failed; the rest loaded
        report = json.loads(proc.stdout)
        assert report["files"]["files_loaded"] > 0
        assert secret not in proc.stdout and secret not in proc.stderr
        assert secret.encode() not in _scan_everything(mongo_client, db, home)
    finally:
        mongo_client.drop_database(db)


@pytest.mark.parametrize("uri", [
    "mongodb://analyst:{s}@127.0.0.1:1/?serverSelectionTimeoutMS=300",
    "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=300&authMechanismProperties=AWS_SESSION_TOKEN:{s}",
    "mongodb://analyst:{s}@127.0.0.1:notaport/",
    "mongodb://analyst:{s}@127.0.0.1:1/?tlsCertificateKeyFilePassword={s}&unknownOption=1",
])
def test_errors_about_a_uri_hide_its_secrets(uri, tmp_path):
    secret = f"pw{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "SCI_INGEST_HOME": str(tmp_path / "home"), "MONGODB_URI": uri.format(s=secret)}
    proc = subprocess.run([str(BIN), "load", "--workers", "1", str(SAMPLES / "materials")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 1
    assert "error:" in proc.stderr and "Traceback" not in proc.stderr
    assert secret not in proc.stdout + proc.stderr
