"""What a server can do that the pipeline needs, each asked with a real command (``sci-ingest check``).

Nothing is assumed from a server's kind, version or name (the kind may say *why* an answer is
what it is): every question is a command sent to the server, in a scratch collection of the
configured database named as :mod:`ingest.store.differences` names its probes' (so that one a
killed check left behind is dropped by the next probe), filled with :data:`SCRATCH_DOCUMENTS`
documents and dropped at the end:

* the user's rights: each action a command needs (:data:`ACTIONS`, as MongoDB's privileges name
  them) is *done* once in the scratch collection (insert, find, update, createIndex, dropIndex,
  remove, a rename in the database, a drop), and a refusal (``Unauthorized``) names the action;
  the roles come from ``connectionStatus`` (SecantusDB lists no privileges there, so they are not
  read off it);
* journaled writes: a ``j: true`` insert acknowledged (what the loader's ledger writes with,
  :func:`ingest.store.mongo.durable`);
* transactions: a transaction that reads (and writes, where the user may) and commits;
* hashed indexes: one created on the scratch collection (:func:`ingest.store.servers.ensure_hashed_indexes`
  says the same refusal for the data collections);
* sharding: ``hello`` says ``isdbgrid`` on a mongos, and ``listShards`` its shards where the user may ask;
* the embedded server's known differences: :func:`ingest.store.differences.probe` (kept per server process).

What each command needs is :data:`NEEDS` here (``ingest``'s own commands) and the plugins'
(:func:`ingest.plugins.needs`); a need is an action of :data:`ACTIONS` or a feature of
:data:`FEATURES`.  Each row of the answer is a dict: ``check``, ``status`` (:data:`OK`,
:data:`MISSING`: a command needs it and it is not there, :data:`WARN`: not needed, or needed only
by a command beside the pipeline, :data:`NA`: the question does not apply here), ``detail`` and
``needed_by``.
"""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ingest.errors import DatabaseError, ServerUnavailable
from ingest.store.differences import SCRATCH_PREFIX, probe
from ingest.store.mongo import db_errors, driver_reason, durable
from ingest.store.servers import ServerInfo

__all__ = ["OK", "MISSING", "WARN", "NA", "ACTIONS", "FEATURES", "NEEDS", "SCRATCH_DOCUMENTS", "SCRATCH_KEY", "SCRATCH_QUERY",
           "Scratch", "row", "scratch", "server_rows", "needed_by"]

OK, MISSING, WARN, NA = "ok", "missing", "warn", "n/a"
#: The actions tried, in the order they are done, as MongoDB's privilege actions name them.
ACTIONS = ("insert", "find", "update", "createIndex", "dropIndex", "remove", "renameCollectionSameDB",
           "dropCollection")
#: Needs that are features of the server, not rights: journaled writes and transactions.
FEATURES = ("journal", "transactions")
#: What ``ingest``'s own commands do on the server: ``load`` writes its documents and its ledger
#: (journaled), drops the analysts' indexes for a bulk load and builds them again; every step of a
#: run records its timings and makes its indexes (:func:`ingest.server.connection.prepare`), which
#: the plugins' steps list too; ``query`` and ``export`` read.
NEEDS = {"load": ("find", "insert", "update", "remove", "createIndex", "dropIndex", "journal"),
         "query/export": ("find",)}
#: Documents in the scratch collection (over 100: MongoDB then answers ``$sample`` from a random
#: cursor, as it would a data collection), each with an integer ``k`` (indexed) and a group ``g``;
#: :data:`SCRATCH_QUERY` selects them (and not the journaled and transaction's inserts, at k < 0).
SCRATCH_DOCUMENTS = 300
SCRATCH_KEY = "k"
SCRATCH_QUERY = {SCRATCH_KEY: {"$gte": 0}}
_UNAUTHORIZED = 13


def row(check: str, status: str, detail: str, needed_by: str = "-") -> dict:
    return {"check": check, "status": status, "detail": detail, "needed_by": needed_by}


def needed_by(needs: dict[str, tuple[str, ...]], need: str) -> list[str]:
    """The commands of ``needs`` that need ``need``."""
    return [command for command, wanted in needs.items() if need in wanted]


@dataclass
class Scratch:
    """The scratch collection and what was learnt making it: each action's refusal (None: done)."""

    name: str
    tried: dict[str, str | None] = field(default_factory=dict)
    journal: str | None = "not asked"  # None: a j:true insert was acknowledged; else why not
    hashed: str | None = "not asked"
    transaction: str | None = "not asked"
    concern: dict = field(default_factory=dict)  # the journaled insert's write concern

    @property
    def filled(self) -> bool:
        """Whether the collection holds its documents with ``k`` indexed (the readers' checks run there)."""
        return self.tried.get("insert") is None and self.tried.get("createIndex") is None

    def refused(self, action: str) -> bool:
        return self.tried.get(action) is not None


def _attempt(what: str, operation: Callable[[], object], *, feature: str | None = None) -> str | None:
    """None when ``operation`` is done; else why not (the server's reason; ``refused: ...`` for the
    user's rights).  The server gone raises."""
    try:
        with db_errors(what, feature=feature):
            operation()
        return None
    except ServerUnavailable:
        raise
    except DatabaseError as exc:
        cause = exc.__cause__ or exc
        refused = "refused: " if getattr(cause, "code", None) == _UNAUTHORIZED else ""
        return f"{refused}{driver_reason(cause)}"


def _documents() -> list[dict]:
    return [{"_id": i, SCRATCH_KEY: i, "g": i // 10} for i in range(SCRATCH_DOCUMENTS)]


def _transaction(client, coll, write: bool) -> None:
    with client.start_session() as session:
        session.start_transaction()
        coll.find_one({}, session=session)
        if write:
            coll.insert_one({"_id": "transaction", SCRATCH_KEY: -1}, session=session)
        session.commit_transaction()


@contextmanager
def scratch(db) -> Iterator[Scratch]:
    """A scratch collection of ``db``, made with the actions of :data:`ACTIONS` done in turn (each
    refusal kept), the journal, hashed index and transaction asked there; the block runs with it,
    then it is renamed and dropped (the last actions).  A user who may not write gets a name
    nothing holds: the block's reads find nothing there."""
    name = f"{SCRATCH_PREFIX}{int(time.time())}_{uuid.uuid4().hex[:8]}_check"
    found = Scratch(name)
    coll = db[name]
    tried = found.tried
    try:
        tried["insert"] = _attempt(f"inserting into {name}", lambda: coll.insert_many(_documents()))
        tried["find"] = _attempt(f"reading {name}", lambda: coll.find_one({"_id": 0}))
        tried["update"] = _attempt(f"updating {name}", lambda: coll.update_one({"_id": 0}, {"$set": {"u": 1}}))
        tried["createIndex"] = _attempt(f"indexing {name}", lambda: coll.create_index([(SCRATCH_KEY, 1)]))
        if not found.refused("insert"):
            journaled = durable(coll)
            found.concern = dict(journaled.write_concern.document)
            found.journal = _attempt(f"a journaled insert into {name}",
                                     lambda: journaled.insert_one({"_id": "journaled", SCRATCH_KEY: -2}))
        if not found.refused("createIndex"):
            found.hashed = _attempt(f"a hashed index on {name}", lambda: coll.create_index([("g", "hashed")]),
                                    feature="hashed indexes")
        found.transaction = _attempt(f"a transaction on {name}",
                                     lambda: _transaction(db.client, coll, not found.refused("insert")),
                                     feature="transactions")
        yield found
        tried["dropIndex"] = _attempt(f"dropping an index of {name}", lambda: coll.drop_index(f"{SCRATCH_KEY}_1"))
        tried["remove"] = _attempt(f"removing from {name}", lambda: coll.delete_one({"_id": 0}))
        renamed = f"{name}_renamed"
        tried["renameCollectionSameDB"] = _attempt(
            f"renaming {name}", lambda: db.client.admin.command("renameCollection", f"{db.name}.{name}",
                                                                to=f"{db.name}.{renamed}", dropTarget=True))
        last = name if found.refused("renameCollectionSameDB") else renamed
        tried["dropCollection"] = _attempt(f"dropping {last}", lambda: db.drop_collection(last))
    finally:
        if not found.refused("dropCollection"):  # whatever a failure left (nothing when the drop was done)
            for left in (name, f"{name}_renamed"):
                _attempt(f"dropping {left}", functools.partial(db.drop_collection, left))


def server_rows(uri: str, client, db, info: ServerInfo, needs: dict[str, tuple[str, ...]],
                readers: list[Callable[[str, object, Scratch], list[dict]]], *, home: Path | None = None) -> list[dict]:
    """Every row about the server at ``uri`` (``client``'s) and the database ``db``: its kind, the user,
    the rights of each command of ``needs``, the features, then each of ``readers``' rows (a plugin's
    checks, called as ``reader(uri, db, scratch)`` while the scratch collection holds its documents),
    then the embedded server's known differences."""
    rows = [row("server", OK, info.label(), "every command"), _user(client)]
    features: list[dict] = []
    with scratch(db) as made:
        features += [_journal(made, needs), _transactions(made, info, needs), _hashed(made), _sharding(client, info)]
        for reader in readers:
            features += reader(uri, db, made)
    rows += [_rights(command, wanted, made, db.name) for command, wanted in needs.items()]
    rows += features
    rows.append(_differences(db, made, home))
    return rows


def _user(client) -> dict:
    status: dict = {}

    def ask() -> None:
        status.update(client.admin.command("connectionStatus"))

    refused = _attempt("asking connectionStatus", ask)
    if refused:
        return row("user", WARN, f"the server did not say who is logged in ({refused})")
    info = status.get("authInfo") or {}
    users = [f"{u.get('user')}@{u.get('db')}" for u in info.get("authenticatedUsers") or ()]
    if not users:
        return row("user", OK, "no user logged in (the rights below say whether the server needs one)")
    roles = ", ".join(f"{r.get('role')} on {r.get('db')}" for r in info.get("authenticatedUserRoles") or ()) or "none"
    return row("user", OK, f"{', '.join(users)}; roles: {roles}")


def _rights(command: str, wanted: tuple[str, ...], made: Scratch, db_name: str) -> dict:
    actions = [a for a in wanted if a in ACTIONS]
    refused = [a for a in actions if made.refused(a)]
    if not refused:
        return row(f"rights: {command}", OK, f"may {', '.join(actions)} in {db_name}", command)
    why = made.tried[refused[0]] or ""
    role = ("read" if set(refused) <= {"find"} else "readWrite")
    return row(f"rights: {command}", MISSING,
               f"may not {', '.join(refused)} in {db_name}: needs the {role} role there ({why})", command)


def _journal(made: Scratch, needs: dict[str, tuple[str, ...]]) -> dict:
    users = ", ".join(needed_by(needs, "journal"))
    if made.journal is None:
        shown = ", ".join(f"{k}: {str(v).lower()}" for k, v in made.concern.items())
        return row("journaled writes", OK, f"an insert with write concern {{{shown}}} was acknowledged", users)
    if made.refused("insert"):
        return row("journaled writes", NA, "not asked: the user may not insert", users)
    return row("journaled writes", MISSING, f"a j:true insert was not acknowledged ({made.journal})", users)


def _transactions(made: Scratch, info: ServerInfo, needs: dict[str, tuple[str, ...]]) -> dict:
    users = ", ".join(needed_by(needs, "transactions")) or "-"
    standalone = info.topology == "standalone"
    if made.transaction is None:
        how = "a read and a write" if not made.refused("insert") else "a read (the user may not write)"
        return row("transactions", OK, f"a transaction of {how} committed", users)
    if standalone:  # what the steps that use one do there: write without (they say so)
        return row("transactions", NA, f"a standalone server has none ({made.transaction}); the steps that "
                                        "use one write in batches there", users)
    return row("transactions", MISSING if users != "-" else WARN, f"not available on a {info.topology} "
                                                                  f"({made.transaction})", users)


def _hashed(made: Scratch) -> dict:
    if made.hashed is None:
        return row("hashed indexes", OK, "a hashed index was built", "shard")
    if made.hashed == "not asked":
        return row("hashed indexes", NA, "not asked: the user may not create indexes", "shard")
    return row("hashed indexes", WARN, f"not built ({made.hashed}): the collections work unsharded "
                                       "(`sci-ingest shard` needs a MongoDB with them)", "shard")


def _sharding(client, info: ServerInfo) -> dict:
    if not info.sharding:
        return row("sharding (mongos)", NA, f"not a mongos: {info.topology} (hello has no isdbgrid); the "
                                            "collections work unsharded", "shard")
    shards: list = []

    def ask() -> None:
        shards.extend(s.get("_id") for s in client.admin.command("listShards").get("shards") or ())

    refused = _attempt("asking listShards", ask)
    if refused:
        return row("sharding (mongos)", OK, f"a mongos (its shards not listed: {refused})", "shard")
    return row("sharding (mongos)", OK, f"a mongos with {len(shards)} shard(s): {', '.join(map(str, shards))}",
               "shard")


def _differences(db, made: Scratch, home: Path | None) -> dict:
    found = probe(db, home=home)
    if not found.probed:
        why = "its scratch collection needs a user who may insert" if made.refused("insert") else found.error
        return row("known differences", NA, f"not probed: {why}")
    kept = " (kept from an earlier probe of this server process)" if found.cached else ""
    if found.found:
        return row("known differences", WARN, f"{len(found.found)} of {len(found.checked)} forms answer differently "
                                              f"from MongoDB{kept}; sci-ingest avoids them (`sci-ingest server "
                                              "status` names each, with the form that works)")
    return row("known differences", OK, f"none of {len(found.checked)} forms answered differently from "
                                        f"MongoDB{kept}")
