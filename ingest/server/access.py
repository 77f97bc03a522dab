"""Who may use the embedded server: SCRAM users and their credential files.

Without ``--auth`` the embedded server answers anyone who can reach its
loopback port (other users of the machine included); its files are its owner's
only either way (see :mod:`ingest.server.embedded`).  ``sci-ingest server start --auth``
turns authentication on for good for a sci-ingest home:

1. the first time, the server is started briefly without authentication on a
   loopback port (SecantusDB has no localhost exception), an administrator
   ``sci-ingest`` with a generated password is created, and the server stops;
2. the password goes to ``<home>/credentials.json``, readable by its owner only;
3. from then on every server of that home (the shared one, and the private one a
   command starts) runs with ``--auth``, and every command of that home connects
   with the stored credentials; they never appear in output (the URI is redacted,
   :mod:`ingest.secrets`).

``sci-ingest server add-user NAME --read-only`` adds an analyst who can read
the database and nothing else; the password goes to ``<home>/users/NAME.json``
(0600), to be handed over by whoever owns the home.  For a real MongoDB docs/embedded-server.md
lists least-privilege roles for the loader, the analyses and the analysts.
"""

from __future__ import annotations

import json
import re
import secrets
from pathlib import Path
from urllib.parse import quote_plus

from ingest.errors import ConfigError, ServerError
from ingest.server.state import private_file

__all__ = ["ADMIN_USER", "credentials_path", "load_credentials", "with_credentials", "enable_auth", "add_user"]

ADMIN_USER = "sci-ingest"
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def credentials_path(state_dir: Path) -> Path:
    return Path(state_dir) / "credentials.json"


def load_credentials(state_dir: Path) -> dict | None:
    """The administrator credentials of a home with authentication on, else None."""
    try:
        creds = json.loads(credentials_path(state_dir).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {credentials_path(state_dir)}: {exc}") from exc
    if not isinstance(creds, dict) or not creds.get("user") or not creds.get("password"):
        raise ConfigError(f"{credentials_path(state_dir)} does not hold a user and a password")
    return creds


def with_credentials(uri: str, creds: dict | None) -> str:
    """``uri`` (a loopback URI without user info) logging in as ``creds`` (unchanged when None)."""
    if not creds:
        return uri
    scheme, _, rest = uri.partition("://")
    user = f"{quote_plus(creds['user'])}:{quote_plus(creds['password'])}@"
    sep = "&" if "?" in rest else ("?" if rest.endswith("/") else "/?")
    return f"{scheme}://{user}{rest}{sep}authSource={creds.get('auth_source', 'admin')}"


def _write_private(path: Path, data: dict) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    private_file(path, json.dumps(data, indent=2))


def enable_auth(state_dir: Path, server) -> dict:
    """Create the administrator once (see the module doc); returns the credentials.

    ``server``: the home's embedded server, not started and without authentication (an
    :class:`ingest.server.embedded.EmbeddedServer` of its data directory), started here only
    to create the administrator and stopped again; unused when the credentials exist.
    """
    creds = load_credentials(state_dir)
    if creds:
        return creds
    from ingest.store.mongo import connect, db_errors  # noqa: PLC0415 - lazy: server status reads this module; pymongo costs 0.12 s

    creds = {"user": ADMIN_USER, "password": secrets.token_urlsafe(24), "auth_source": "admin"}
    uri = server.start()
    try:
        client = connect(uri)
        try:
            with db_errors("creating the administrator"):
                client.admin.command("createUser", creds["user"], pwd=creds["password"],
                                     roles=[{"role": "root", "db": "admin"}])
        finally:
            client.close()
    finally:
        server.stop()
    _write_private(credentials_path(state_dir), creds)
    return creds


def add_user(admin_uri: str, state_dir: Path, name: str, db_name: str, read_only: bool = True) -> Path:
    """Create user ``name`` (``read`` on ``db_name``, or ``readWrite``); returns its credential file."""
    if not _NAME.fullmatch(name) or name == ADMIN_USER:
        raise ConfigError(f"a user name is 1-64 letters, digits, '.', '_' or '-' (and not {ADMIN_USER!r}), "
                          f"not {name!r}")
    from ingest.store.mongo import connect, db_errors  # noqa: PLC0415 - lazy: server status reads this module; pymongo costs 0.12 s

    password = secrets.token_urlsafe(18)
    role = "read" if read_only else "readWrite"
    client = connect(admin_uri)
    try:
        with db_errors(f"creating the user {name}"):
            if client.admin.command("usersInfo", name).get("users"):
                raise ServerError(f"the user {name!r} exists already")
            client.admin.command("createUser", name, pwd=password, roles=[{"role": role, "db": db_name}])
    finally:
        client.close()
    path = Path(state_dir) / "users" / f"{name}.json"
    _write_private(path, {"user": name, "password": password, "auth_source": "admin", "role": role,
                          "db": db_name})
    return path
