"""TLS for the Dask cluster: a private certificate authority, and the client's side of it.

A Dask scheduler on plain ``tcp://`` runs whatever pickled function anyone who reaches it
sends, so a cluster beyond one machine runs on ``tls://`` with certificates signed by an
authority of its own: the scheduler and the workers accept only peers that show one.

* :func:`make_certificates` writes that authority and a certificate with its key for each
  role (``scheduler``, ``worker``, ``client``) into a folder (``sci-ingest certs DIR``): for a
  test or a small deployment; an organisation with its own authority issues its own.
* :func:`client_security` is what ``sci-ingest`` shows the scheduler: the ``client``
  certificate of such a folder (``SCI_INGEST_DASK_TLS``), else ``None``: Dask's own
  configuration then applies (``distributed.comm.tls.*``, e.g.
  ``DASK_DISTRIBUTED__COMM__TLS__CA_FILE``), as it does for ``dask scheduler`` and ``dask worker``.
* :func:`plain_tcp_risk` names the risk of a scheduler address on plain TCP off this host.

``cryptography`` (a dependency of Airflow's) and ``distributed`` are imported when a
certificate is made or a security object built, never by ``sci-ingest --help``.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from pathlib import Path
from urllib.parse import urlsplit

from ingest.errors import ConfigError

__all__ = ["ROLES", "TLS_ENV", "make_certificates", "client_security", "plain_tcp_risk", "files_of"]

#: The folder of a certificate authority made by :func:`make_certificates` whose ``client``
#: certificate ``sci-ingest`` shows a ``tls://`` scheduler.
TLS_ENV = "SCI_INGEST_DASK_TLS"
#: The roles that get a certificate: every one is signed by the folder's authority.
ROLES = ("scheduler", "worker", "client")
_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


def files_of(folder: Path, role: str) -> tuple[Path, Path]:
    """(certificate, key) of ``role`` in ``folder``: ``<role>.pem`` and ``<role>-key.pem``."""
    return Path(folder) / f"{role}.pem", Path(folder) / f"{role}-key.pem"


def make_certificates(folder: Path, hosts: list[str] | tuple[str, ...] = (), days: int = 365) -> dict[str, Path]:
    """Write a private authority (``ca.pem``, ``ca-key.pem``) and, signed by it, a certificate and
    key per role (``scheduler.pem``, ``scheduler-key.pem``, ...) into ``folder``; the keys readable
    by their owner only.  The certificates name ``hosts`` (names or addresses) and this host's
    loopback names.  Refuses a folder that holds an authority already (its certificates would no
    longer verify).  Returns the paths by name (``ca``, ``ca-key``, ``scheduler``, ...)."""
    from cryptography import x509  # noqa: PLC0415 - lazy: only `sci-ingest certs` makes certificates; cryptography costs 0.1 s
    from cryptography.hazmat.primitives import hashes, serialization  # noqa: PLC0415 - lazy: as above
    from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415 - lazy: as above
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID  # noqa: PLC0415 - lazy: as above

    if days < 1:
        raise ConfigError(f"certificates must be valid for at least one day, not {days}")
    folder = Path(folder)
    if (folder / "ca.pem").exists():
        raise ConfigError(f"{folder / 'ca.pem'} exists: certificates are made once per folder (remove it to start over)")
    folder.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)
    until = now + dt.timedelta(days=days)
    names = [*dict.fromkeys([*hosts, "localhost", "127.0.0.1", "::1"])]

    def name(common: str):
        return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "sci-ingest"),
                          x509.NameAttribute(NameOID.COMMON_NAME, common)])

    def pem_key(key) -> bytes:
        return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(name("sci-ingest private CA")).issuer_name(name("sci-ingest private CA"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(until)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
          .sign(ca_key, hashes.SHA256()))  # fmt: skip
    written = {"ca": folder / "ca.pem", "ca-key": folder / "ca-key.pem"}
    _write(written["ca-key"], pem_key(ca_key), private=True)
    _write(written["ca"], ca.public_bytes(serialization.Encoding.PEM))
    alt = x509.SubjectAlternativeName([_general_name(x509, host) for host in names])
    usage = x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH])
    for role in ROLES:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (x509.CertificateBuilder().subject_name(name(f"dask {role}")).issuer_name(ca.subject)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(until)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(alt, critical=False).add_extension(usage, critical=False)
                .sign(ca_key, hashes.SHA256()))  # fmt: skip
        cert_path, key_path = files_of(folder, role)
        _write(key_path, pem_key(key), private=True)
        _write(cert_path, cert.public_bytes(serialization.Encoding.PEM))
        written[role], written[f"{role}-key"] = cert_path, key_path
    return written


def _general_name(x509, host: str):
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _write(path: Path, data: bytes, private: bool = False) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def client_security(folder: str | Path | None):
    """A ``distributed.Security`` showing the ``client`` certificate of ``folder`` (encryption
    required), or None without a folder (Dask's configuration decides).  Names a missing file."""
    if not folder:
        return None
    folder = Path(folder)
    cert, key = files_of(folder, "client")
    missing = [str(p) for p in (folder / "ca.pem", cert, key) if not p.is_file()]
    if missing:
        raise ConfigError(f"{TLS_ENV}={folder}: missing {', '.join(missing)} (`sci-ingest certs {folder}` makes them)")
    from distributed import Security  # noqa: PLC0415 - lazy: analytics.runner reads ingest.cluster, which reads this; distributed costs 0.5 s

    return Security(require_encryption=True, tls_ca_file=str(folder / "ca.pem"), tls_client_cert=str(cert),
                    tls_client_key=str(key))


def plain_tcp_risk(address: str) -> str | None:
    """A warning for a scheduler address on plain TCP that is not this host's loopback, else None."""
    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    if parts.scheme not in ("tcp", ""):
        return None
    host = (parts.hostname or "").lower()
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host in _LOOPBACK_NAMES
    if loopback:
        return None
    return (f"the Dask scheduler {address} is reached over plain TCP: anyone who can reach it can run code on its "
            f"workers; use tls:// with certificates (sci-ingest certs, {TLS_ENV}; docs/cluster.md)")
