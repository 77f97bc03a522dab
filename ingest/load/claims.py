"""Claims: one loader at a time per file (its ledger entry) and per content (its sha256).

A loader *claims* a file's ledger entry before it reads the file, and the file's
content (``ingest_claims``, ``_id`` = sha256) before it writes or deletes that
content's documents.  A claim names its owner (run id, host, process id and the
process's start time) and holds a lease that the owner renews while it works.
Another loader waits for a held claim and takes it over when

* the lease ran out (the owner stopped renewing: it died, or lost the server), or
* the owner is a process of this host that no longer runs (``kill -9``, a Dask
  worker that died): then at once, without waiting for the lease.

Times are the server's (its ``hello.localTime``, read once per process), so
loaders on machines whose clocks differ still agree on leases.

Waits are bounded (:data:`MAX_WAIT_S` by default): a claim held longer by a
live owner makes the file fail with a reason naming that owner; the next run
takes it up.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psutil

from ingest.config import setting
from ingest.errors import SciIngestError
from ingest.store.catalog import CLAIMS, LEDGER
from ingest.store.mongo import claim
from ingest.store.retry import Retry

#: Lease of a claim, renewed every quarter of it while the owner works.
LEASE_S = setting("SCI_INGEST_LEASE_SECONDS")
#: The longest a loader waits for a claim held by a live owner before it gives the file up.
MAX_WAIT_S = setting("SCI_INGEST_CLAIM_WAIT_SECONDS")


class ClaimLost(SciIngestError):
    """Another loader took over a claim this one held (its lease had run out)."""


class ClaimTimeout(SciIngestError):
    """A claim stayed with another live loader for longer than the wait allowed."""


@dataclass(frozen=True)
class Owner:
    """Who holds a claim: one process of one run."""

    run_id: str
    host: str
    pid: int
    started: float  # the process's start time: a reused pid is another process
    slot: int = 0  # which loader of the process (a Dask worker may run tasks on several threads)

    @property
    def id(self) -> str:
        return f"{self.run_id}@{self.host}:{self.pid}:{self.started:.0f}" + (f"/{self.slot}" if self.slot else "")

    @property
    def label(self) -> str:
        return f"{self.host}:{self.pid}"

    def doc(self) -> dict:
        return {"id": self.id, "run_id": self.run_id, "host": self.host, "pid": self.pid, "started": self.started}

    @classmethod
    def this_process(cls, run_id: str, slot: int = 0) -> Owner:
        return cls(run_id=run_id, host=socket.gethostname(), pid=os.getpid(),
                   started=psutil.Process().create_time(), slot=slot)


def is_dead(owner: dict | None) -> bool:
    """True when ``owner`` is a process of this host that no longer runs."""
    if not owner or owner.get("host") != socket.gethostname():
        return False
    try:
        process = psutil.Process(int(owner["pid"]))
        if abs(process.create_time() - float(owner["started"])) > 1.0:
            return True  # the pid belongs to another process now
        return process.status() == psutil.STATUS_ZOMBIE  # killed, not yet reaped by its new parent
    except (psutil.NoSuchProcess, KeyError, ValueError, TypeError):
        return True
    except psutil.Error:
        return False


class Claims:
    """Claiming, renewing and releasing ledger entries and contents for one owner."""

    def __init__(self, db, owner: Owner, retry: Retry, lease_s: float = LEASE_S, max_wait_s: float = MAX_WAIT_S):
        self.db = db
        self.owner = owner
        self.retry = retry
        self.lease_s = lease_s
        self.max_wait_s = max_wait_s
        self._offset: dt.timedelta | None = None
        self._held: dict[tuple[str, str], float] = {}  # claims held -> when last renewed

    # ---------------------------------------------------------------- time
    def now(self) -> dt.datetime:
        """The server's time (naive UTC, as BSON dates are read back)."""
        if self._offset is None:
            hello = self.retry("asking the server's time", self.db.client.admin.command, "hello")
            local = hello.get("localTime")
            mine = dt.datetime.now(dt.UTC).replace(tzinfo=None)
            self._offset = (local.replace(tzinfo=None) - mine) if isinstance(local, dt.datetime) else dt.timedelta()
        return dt.datetime.now(dt.UTC).replace(tzinfo=None) + self._offset

    # ---------------------------------------------------------------- claiming
    def claim(self, collection: str, key: str, fields: dict | None = None, takeover: str | None = None) -> dict:
        """Hold ``key`` of ``collection``, waiting for a live holder; the document as held.

        ``takeover``: the id of an owner known to have stopped (a ghost of this run, whose
        worker is alive but done): its claim is taken at once, not after its lease."""
        coll = self.db[collection]
        deadline = time.monotonic() + self.max_wait_s
        pause = 0.05
        while True:
            now = self.now()
            held = self.retry(f"claiming {key}", claim, coll, key, self.owner.doc(), now,
                              now + dt.timedelta(seconds=self.lease_s), takeover=takeover, fields=fields)
            if held is not None:
                self._held[(collection, key)] = time.monotonic()
                return held
            holder = (self.retry(f"reading {collection}", coll.find_one, {"_id": key}, {"owner": 1}) or {}).get("owner")
            if holder and is_dead(holder):
                takeover = holder["id"]  # its process is gone: no need to wait for the lease
                continue
            if time.monotonic() > deadline:
                who = holder.get("id") if holder else "another loader"
                raise ClaimTimeout(f"{key} is held by {who} for more than {self.max_wait_s:.0f} s")
            time.sleep(pause + random.uniform(0, pause))
            pause = min(pause * 2, 2.0)

    def claim_path(self, key: str) -> dict:
        """Hold the ledger entry of ``key`` (created when new)."""
        return self.claim(LEDGER, key, {"path": key})

    def renew(self, collection: str, key: str) -> None:
        """Extend the lease now; ClaimLost if another loader took the claim over."""
        now = self.now()
        result = self.retry(f"renewing the claim on {key}", self.db[collection].update_one,
                            {"_id": key, "owner.id": self.owner.id},
                            {"$set": {"lease_until": now + dt.timedelta(seconds=self.lease_s)}})
        if result.matched_count != 1:
            self._held.pop((collection, key), None)
            raise ClaimLost(f"{key}: another loader took the claim over (this one was too slow to renew it)")
        self._held[(collection, key)] = time.monotonic()

    def renew_due(self) -> None:
        """Renew every claim held whose last renewal is a quarter lease old."""
        due = time.monotonic() - self.lease_s / 4
        for (collection, key), last in list(self._held.items()):
            if last < due:
                self.renew(collection, key)

    def release(self, collection: str, key: str) -> None:
        """Let go of a content claim (ledger entries are released by the ledger's final update)."""
        self._held.pop((collection, key), None)
        self.retry(f"releasing the claim on {key}", self.db[collection].delete_one,
                   {"_id": key, "owner.id": self.owner.id})

    def forget(self, collection: str, key: str) -> None:
        """No longer renew ``key``: its claim was released by another write (the ledger's final one)."""
        self._held.pop((collection, key), None)

    @contextmanager
    def content(self, sha256: str, takeover: str | None = None) -> Iterator[None]:
        """Hold the content ``sha256`` for the block: nobody else writes or deletes its documents
        (``takeover``: see :meth:`claim`)."""
        self.claim(CLAIMS, sha256, takeover=takeover)
        try:
            yield
        finally:
            self.release(CLAIMS, sha256)
