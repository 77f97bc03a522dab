"""What a user lacks when the server refuses it (``Unauthorized``, code 13), said first.

A refusal names the operation that met it ("recording the timing of stage start-up: not
authorized on sci_ingest to execute command (action: update)"): the first write of a run, which
tells a user nothing of what to ask for.  :func:`lacking` says who is refused, which role on which
database the refused action needs, and how to get it, then names the operation::

    user alice (roles: read on sci_ingest) may not update in database sci_ingest: this command writes
    there and needs the readWrite role on sci_ingest; ask the server's administrator for it (the
    embedded server's owner: `sci-ingest server add-user NAME --db sci_ingest`, without --read-only)
    (refused: recording the timing of stage start-up)

A client that is not logged in is told so, with the form of a URI that logs in.  The user's roles
come from ``connectionStatus`` (``aside_client``, :mod:`ingest.store.mongo`, the one module that
builds clients); a server that will not say leaves them out.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["lacking", "READS", "WRITES"]

#: "not authorized on DB to execute command (action: X)" (SecantusDB) or "... command { X: ..." (MongoDB).
_REFUSED = re.compile(r"not authorized on (\S+) to execute command\s*(?:\(action: (\w+)\)|\{\s*(\w+))?")
#: Actions of the ``read`` role, and those ``readWrite`` adds (MongoDB's built-in roles).
READS = frozenset({"find", "count", "aggregate", "distinct", "getMore", "listCollections", "listIndexes",
                   "collStats", "dbStats", "dbHash", "explain", "killCursors", "changeStream"})
WRITES = frozenset({"insert", "update", "delete", "findAndModify", "createIndexes", "dropIndexes", "drop",
                    "create", "createCollection", "renameCollection", "collMod", "bulkWrite", "dropDatabase",
                    "convertToCapped", "renameCollectionSameDB"})


def lacking(reason: str, what: str, uri: str | None, client_of: Callable) -> str:
    """The refusal ``reason`` of the operation ``what`` as what the user lacks (one line).

    ``uri``: the server's (its user is asked for its roles through ``client_of(uri, ...)``), or None."""
    refused = _REFUSED.search(reason)
    if refused is None and "requires authentication" in reason:  # no user logged in
        return (f"not logged in: the server requires a user ({reason}): give the URI a user and its password "
                "(`user:password@` before the host, and authSource=admin; --mongo-uri or MONGODB_URI; the embedded "
                "server's owner makes one with `sci-ingest server add-user NAME`) "
                f"(refused: {what})")
    if refused is None:  # the login itself (AuthenticationFailed)
        return f"the server refused the URI's user and password ({reason}) (refused: {what})"
    db, action = refused.group(1), refused.group(2) or refused.group(3) or "do that"
    role = "read" if action in READS else "readWrite" if action in WRITES else None
    needs = (f"this command reads there and needs the read role on {db}" if role == "read" else
             f"this command writes there and needs the readWrite role on {db}" if role == "readWrite" else
             f"it needs a role granting '{action}' on {db}")
    hint = (f"; ask the server's administrator for it (the embedded server's owner: `sci-ingest server add-user "
            f"NAME --db {db}`" + (", without --read-only)" if role == "readWrite" else ")") if role else
            "; ask the server's administrator for it")
    return f"{_who(uri, client_of)} may not {action} in database {db}: {needs}{hint} (refused: {what})"


def _who(uri: str | None, client_of: Callable) -> str:
    """"user alice (roles: read on sci_ingest)", as the server says; "the URI's user" when it will not."""
    if uri is None:
        return "the URI's user"
    try:
        probe = client_of(uri, timeout_ms=2000)
    except Exception:  # noqa: BLE001 - only a better message was at stake
        return "the URI's user"
    try:
        info = probe.admin.command("connectionStatus").get("authInfo") or {}
    except Exception:  # noqa: BLE001 - a server that will not say: the refusal still names the role needed
        return "the URI's user"
    finally:
        probe.close()
    users = [u.get("user") for u in info.get("authenticatedUsers") or () if u.get("user")]
    if not users:
        return "the URI's user"
    roles = ", ".join(f"{r.get('role')} on {r.get('db')}" for r in info.get("authenticatedUserRoles") or ()) or "none"
    return f"user {', '.join(users)} (roles: {roles})"
