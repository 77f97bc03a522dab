"""Recovery: finishing what a stopped loader left, for one entry, one claim, or a whole run.

A loader stopped between the steps of the protocol (:mod:`ingest.load.protocol`) leaves one of
three things, each finished here without loading anything again:

* a ledger entry it held (a file's load): :func:`recover_entry` commits the pending version when
  it passed the seal and is still the file's content (only the last ledger write was lost), and
  otherwise rolls it back; either way the contents it was dropping are deleted;
* a content claim of a batch: :func:`recover_claim` rolls the content back unless a ledger entry
  stands for it (the batch committed), so a batch is loaded whole or not at all;
* a barrier whose batch released its claims: removed (:func:`sweep_barriers`).

When: before a load, for loaders of other runs that stopped (:func:`recover_others`); after a load,
for this run's ghosts, claims a restarted server forgot were released (:func:`release_ghosts`);
after a stop, for what this run's own workers left (:func:`recover_run`).
"""

from __future__ import annotations

from pathlib import Path

from ingest.errors import SciIngestError
from ingest.load.claims import ClaimTimeout, is_dead
from ingest.load.protocol import Context, commit_entry, drop_contents, same_version
from ingest.store.catalog import BATCHES, CLAIMS, LEDGER

__all__ = ["recover_entry", "recover_claim", "recover_others", "release_ghosts", "recover_run", "sweep_barriers"]


# ------------------------------------------------------------------ one entry, one claim
def recover_entry(ctx: Context, key: str) -> bool:
    """Finish what an interrupted loader left of ``key``'s entry without loading the file again.

    A pending version that passed the seal and is still the file's content is committed; any other
    is rolled back, with the contents the entry was dropping; the entry says ``loaded`` again when
    it had a loaded version, else ``failed``.  False when a live loader holds it (that one finishes it).
    """
    try:
        entry = ctx.claims.claim_path(key)
    except ClaimTimeout:
        return False
    pending = entry.get("pending") or {}
    sha = pending.get("sha256")
    if entry.get("status") == "loading" and _sealed_and_current(key, pending):
        old = entry.get("sha256")  # its documents are durable; only the final ledger write was lost
        commit_entry(ctx, key, pending["written"], drop=[s for s in (*entry.get("drop", ()), old) if s and s != sha],
                     unset=("pending", "duplicate_of", "failed_sha256"))
        return True
    drop = [s for s in (sha, *entry.get("drop", ())) if s and s != entry.get("sha256")]
    if not entry.get("status") and not drop:
        ctx.ledger.remove(key, ctx.owner.id)  # claimed, then stopped before anything happened
        ctx.claims.forget(LEDGER, key)
        return True
    fields: dict = {}
    if entry.get("status") == "loading":
        fields = {"status": "loaded" if entry.get("sha256") else "failed",
                  "error": "an interrupted load was rolled back"}
    commit_entry(ctx, key, fields, drop=drop, unset=("pending",))
    return True


def _sealed_and_current(key: str, pending: dict) -> bool:
    """Whether the pending version passed the seal and is still the file's content."""
    final = pending.get("written")
    if not isinstance(final, dict):
        return False
    try:
        stat = Path(key).stat()
    except OSError:
        return False
    return same_version(final, stat.st_size, stat.st_mtime)


def recover_claim(ctx: Context, held: dict, *, stopped: bool = False) -> bool:
    """Finish a batch's claim whose owner stopped: its content is rolled back unless a ledger entry
    stands for it.  False when a live loader holds the claim now.

    ``stopped``: the caller knows the owner is done (a ghost of this run, say), so the claim is
    taken over at once; otherwise a live owner is waited for (it may finish its own)."""
    sha = held["_id"]
    takeover = (held.get("owner") or {}).get("id") if stopped else None
    try:
        with ctx.claims.content(sha, takeover=takeover):
            drop_contents(ctx, [sha], held={sha})
    except ClaimTimeout:
        return False
    ctx.retry("removing a stale barrier", ctx.db[BATCHES].delete_one, {"_id": held.get("batch")})
    return True


def _release_stale(ctx: Context, held: dict) -> None:
    """A claim whose owner stopped: a batch's content is recovered (:func:`recover_claim`); any other
    claim protects nothing any more.

    Its owner stopped (dead, lease over, or a ghost of this run: a claim whose release a
    restarted server lost, while the worker that held it lives on), so it is taken over at
    once: waiting for the lease kept a finished load running another minute."""
    if held.get("batch"):
        recover_claim(ctx, held, stopped=True)
    else:
        ctx.retry("releasing a stale claim", ctx.db[CLAIMS].delete_one,
                  {"_id": held["_id"], "owner.id": (held.get("owner") or {}).get("id")})


def sweep_barriers(ctx: Context) -> None:
    """A batch holds its claims for as long as its barrier exists: a barrier without is a leftover."""
    for barrier in ctx.retry("reading barriers", lambda: list(ctx.db[BATCHES].find({}, {"_id": 1}))):
        if not ctx.retry("reading claims", ctx.db[CLAIMS].find_one, {"batch": barrier["_id"]}):
            ctx.retry("removing a stale barrier", ctx.db[BATCHES].delete_one, {"_id": barrier["_id"]})


# ------------------------------------------------------------------ a run
def recover_others(ctx: Context, loading_now: set[str]) -> list[str]:
    """Before a load: finish what stopped loaders of other runs left on paths this load will not
    touch (the paths it loads are recovered by their claims); the keys recovered."""
    done = []
    for entry in ctx.ledger.held({}) + ctx.ledger.dropping():
        key = entry["_id"]
        if key in loading_now or _alive(ctx, entry):
            continue
        if recover_entry(ctx, key):
            done.append(key)
    for held in ctx.retry("reading claims", lambda: list(ctx.db[CLAIMS].find())):
        if not _alive(ctx, held):  # its owner stopped
            _release_stale(ctx, held)
    sweep_barriers(ctx)
    return done


def release_ghosts(ctx: Context) -> None:
    """After a finished load: claims of this run still on record are ghosts (a server that
    restarted lost their release); let them go, and finish any entry they still hold."""
    run_id = ctx.run_id
    for held in ctx.retry("reading claims", lambda: list(ctx.db[CLAIMS].find({"owner.run_id": run_id}))):
        _release_stale(ctx, held)
    for entry in ctx.ledger.held({"owner.run_id": run_id}):
        recover_entry(ctx, entry["_id"])
    sweep_barriers(ctx)


def recover_run(ctx: Context) -> list[str]:
    """After a stop: roll back what this run's workers left half-written (if the server answers);
    the keys (a batch's claim: its path) recovered."""
    run_id = ctx.run_id
    ctx.retry.budget_s = min(ctx.retry.budget_s, 10.0)
    ctx.claims.max_wait_s = min(ctx.claims.max_wait_s, 10.0)  # a worker still alive finishes its own
    try:
        done = [e["_id"] for e in ctx.ledger.held({"owner.run_id": run_id}) if recover_entry(ctx, e["_id"])]
        for claim in ctx.retry("reading claims", lambda: list(ctx.db[CLAIMS].find(
                {"owner.run_id": run_id, "batch": {"$exists": True}}))):
            if recover_claim(ctx, claim):
                done.append(claim.get("path", claim["_id"]))
        return done
    except SciIngestError:
        return []  # the server is gone too: the next run finishes the rollback


def _alive(ctx: Context, held: dict) -> bool:
    """Whether the owner of ``held`` (an entry or a claim) may still be working on it: not a dead
    process, not of this run (its own are recovered by :func:`release_ghosts`), its lease not over."""
    owner = held.get("owner")
    if not owner or is_dead(owner) or owner.get("run_id") == ctx.run_id:
        return False
    lease = held.get("lease_until")
    return lease is not None and lease >= ctx.claims.now()
