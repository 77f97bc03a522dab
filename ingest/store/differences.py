"""Where the server answers differently from MongoDB: found by asking it, said, and avoided.

:func:`probe` runs, in a scratch collection of its own (``_sci_ingest_probe_<time>_<random>``,
dropped at once), the forms analysts write whose answers a MongoDB-compatible server may get
wrong: an accumulator over a path through an array (in ``$group`` and in ``$project``),
``$arrayElemAt`` over a ``$lookup``'s joined array, ``$count`` in a ``$lookup`` sub-pipeline, a
positional path (``"$hsps.0.evalue"``) in an expression, a range through an index on floats
(:data:`CHECKS`).  Each answer is compared with MongoDB's (the right answer, known); where they
differ, the form that works on both is asked too and must give its right answer.  Nothing is
assumed from a server's name or version: a real MongoDB, or a SecantusDB that answers right,
reports no difference.

The result (:class:`Probe`) is kept per server process: in this process (per client), and in
``<home>/server-probes.json`` keyed by the server's identity from ``serverStatus`` (its address,
host, pid and start time), so that the next commands of the home read it instead of asking
again (the probe's cost, about 30 ms on the embedded server, is paid once per server process;
reading the identity costs about 2 ms).  A server that restarts (a new pid, a new start) is
probed again.  Where the probe cannot run (a read-only user), it says why and nothing is cached
on disk.
"""

from __future__ import annotations

import datetime
import json
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ingest.config import Settings
from ingest.errors import DatabaseError, ServerUnavailable
from ingest.store.mongo import db_errors

__all__ = ["Check", "CHECKS", "Found", "Probe", "probe", "cache_file", "SCRATCH_PREFIX", "FLOAT_INDEX"]

SCRATCH_PREFIX = "_sci_ingest_probe_"
#: A scratch collection older than this (its name holds its time) is a killed probe's: dropped.
STALE_S = 600
#: The check of ranges through an index on floats (what :func:`ingest.store.indexes.numeric_keys_exact` reads).
FLOAT_INDEX = "float_index_range"
_KEEP = 16  # servers remembered in the cache file
_UNAUTHORIZED = 13
_HITS = {"$match": {"g": {"$exists": True}}}
_SEARCHES = {"$match": {"program": {"$exists": True}}}
#: The scratch documents: three "hits" (g: their query, sid: their search, a: their HSPs), two
#: "searches", and two numbers either side of 1e-100 for the index.
_DOCS: list[dict[str, Any]] = [
    {"_id": 1, "g": "q1", "sid": "s1", "a": [{"v": 3.0}]},
    {"_id": 2, "g": "q1", "sid": "s2", "a": [{"v": 2.0}]},
    {"_id": 3, "g": "q2", "sid": "s1", "a": [{"v": 3.0}, {"v": 0.5}]},
    {"_id": "s1", "program": "ssearch36"},
    {"_id": "s2", "program": "fasta36"},
    {"_id": 10, "x": 1e-200},
    {"_id": 11, "x": 1.0},
]


def _agg(*stages: Callable[[str], dict] | dict) -> Callable:
    """An aggregation over the scratch collection (a stage may need the collection's name)."""
    def run(coll) -> list:
        return list(coll.aggregate([s(coll.name) if callable(s) else s for s in stages]))
    return run


def _join(name: str) -> dict:
    return {"$lookup": {"from": name, "localField": "sid", "foreignField": "_id", "as": "s"}}


def _counted(count_stages: list[dict]) -> Callable[[str], dict]:
    return lambda name: {"$lookup": {"from": name, "let": {"id": "$_id"}, "as": "h", "pipeline": [
        {"$match": {"$expr": {"$eq": ["$sid", "$$id"]}}}, *count_stages]}}


def _indexed_range(coll) -> list:
    coll.create_index([("x", 1)])
    return list(coll.find({"x": {"$lt": 1e-100}}, {"_id": 1}))


def _scanned_range(coll) -> list:
    return list(coll.find({"x": {"$lt": 1e-100}}, {"_id": 1}, hint=[("$natural", 1)]))


@dataclass(frozen=True)
class Check:
    """A form analysts write, what MongoDB answers, and the form that works on both."""

    key: str
    title: str  # a few words (the run's note)
    form: str  # as an analyst writes it
    right: str  # what MongoDB answers, in words
    instead: str  # the form that works on both, as an analyst writes it
    ask: Callable  # (scratch collection) -> the answer of the form
    want: Any  # MongoDB's answer to ``ask``
    ask_instead: Callable
    want_instead: Any
    wrong: dict = field(default_factory=dict)  # known wrong answers (JSON) -> words


CHECKS: tuple[Check, ...] = (
    Check("array_path_group_min", "$min over an array path in $group",
          '{$group: {_id: "$query_id", m: {$min: "$hsps.evalue"}}}',
          "the least of the documents' arrays (compared whole, not their elements)",
          '{$unwind: "$hsps"}, then {$group: {_id: "$query_id", m: {$min: "$hsps.evalue"}}} (the least E-value)',
          _agg(_HITS, {"$group": {"_id": "$g", "m": {"$min": "$a.v"}}}, {"$sort": {"_id": 1}}),
          [{"_id": "q1", "m": [2.0]}, {"_id": "q2", "m": [3.0, 0.5]}],
          _agg(_HITS, {"$unwind": "$a"}, {"$group": {"_id": "$g", "m": {"$min": "$a.v"}}}, {"$sort": {"_id": 1}}),
          [{"_id": "q1", "m": 2.0}, {"_id": "q2", "m": 0.5}]),
    Check("array_path_project_min", "$min over an array path in $project",
          '{$project: {m: {$min: "$hsps.evalue"}}}', "each document's least E-value",
          '{$project: {m: {$min: {$map: {input: "$hsps", in: "$$this.evalue"}}}}}',
          _agg({"$match": {"_id": 3}}, {"$project": {"_id": 0, "m": {"$min": "$a.v"}}}), [{"m": 0.5}],
          _agg({"$match": {"_id": 3}}, {"$project": {"_id": 0, "m": {"$min": {"$map": {"input": "$a",
                                                                                      "in": "$$this.v"}}}}}),
          [{"m": 0.5}]),
    Check("lookup_array_elem_at", "$arrayElemAt over a $lookup's joined field",
          '{$lookup: {from: "searches", localField: "search_id", foreignField: "_id", as: "s"}}, then '
          '{$arrayElemAt: ["$s.program", 0]}', "the joined search's program",
          '{$unwind: "$s"}, then "$s.program" (or {$arrayElemAt: ["$s", 0]} into a field, then its .program)',
          _agg(_HITS, _join, {"$project": {"p": {"$arrayElemAt": ["$s.program", 0]}}}, {"$sort": {"_id": 1}}),
          [{"_id": 1, "p": "ssearch36"}, {"_id": 2, "p": "fasta36"}, {"_id": 3, "p": "ssearch36"}],
          _agg(_HITS, _join, {"$unwind": "$s"}, {"$project": {"p": "$s.program"}}, {"$sort": {"_id": 1}}),
          [{"_id": 1, "p": "ssearch36"}, {"_id": 2, "p": "fasta36"}, {"_id": 3, "p": "ssearch36"}]),
    Check("lookup_count", "$count in a $lookup sub-pipeline",
          '{$lookup: {from: "hits", ..., pipeline: [..., {$count: "n"}], as: "h"}}', "[{n: the documents joined}]",
          'pipeline: [..., {$group: {_id: null, n: {$sum: 1}}}, {$project: {_id: 0}}] (or no pipeline, then '
          '{$size: "$h"})',
          _agg(_SEARCHES, _counted([{"$count": "n"}]), {"$project": {"h": 1}}, {"$sort": {"_id": 1}}),
          [{"_id": "s1", "h": [{"n": 2}]}, {"_id": "s2", "h": [{"n": 1}]}],
          _agg(_SEARCHES, _counted([{"$group": {"_id": None, "n": {"$sum": 1}}}, {"$project": {"_id": 0}}]),
               {"$project": {"h": 1}}, {"$sort": {"_id": 1}}),
          [{"_id": "s1", "h": [{"n": 2}]}, {"_id": "s2", "h": [{"n": 1}]}]),
    Check("positional_path", 'a positional path ("$hsps.0.evalue") in an expression',
          '{$project: {e: "$hsps.0.evalue"}}', '[] ("0" names a field in an expression, not a position)',
          '{$project: {e: {$let: {vars: {h: {$arrayElemAt: ["$hsps", 0]}}, in: "$$h.evalue"}}}} '
          '(or {$arrayElemAt: ["$hsps", 0]} into a field, then its .evalue)',
          _agg({"$match": {"_id": 3}}, {"$project": {"_id": 0, "m": "$a.0.v"}}), [{"m": []}],
          _agg({"$match": {"_id": 3}}, {"$project": {"_id": 0, "m": {
              "$let": {"vars": {"e": {"$arrayElemAt": ["$a", 0]}}, "in": "$$e.v"}}}}), [{"m": 3.0}],
          {'[{"m": 3.0}]': "the first element's field"}),
    Check(FLOAT_INDEX, "ranges through an index on a float field",
          'an index on a float field (hsps.0.evalue), then a range: {"hsps.0.evalue": {$lt: 1e-5}}',
          "every document below the bound",
          "no index on float fields (sci-ingest builds none there): a range over them is a collection scan "
          "(or give hint: {$natural: 1})",
          _indexed_range, [{"_id": 10}], _scanned_range, [{"_id": 10}],
          {"[]": "the numbers beyond 1e±128 are missed (1e-200 < 1e-100 not found)"}),
)
_BY_KEY = {c.key: c for c in CHECKS}


@dataclass(frozen=True)
class Found:
    """A difference found: the check's key, what the server answered (in words), whether the form
    that works on both gave its right answer here."""

    key: str
    answered: str
    instead_works: bool

    @property
    def check(self) -> Check:
        return _BY_KEY[self.key]

    def line(self) -> str:
        """One line: the form, what the server answers and MongoDB's, and the form that works."""
        c = self.check
        works = "" if self.instead_works else " (it failed here too: no form that works was found)"
        return f"{c.form} -> here {self.answered}, on MongoDB {c.right}; works on both: {c.instead}{works}"


@dataclass
class Probe:
    """What the probe found on one server: the checks asked, the differences, or why it could not ask."""

    checked: tuple[str, ...] = ()
    found: tuple[Found, ...] = ()
    error: str | None = None  # why the server was not probed (then ``found`` says nothing)
    seconds: float | None = None
    at: str | None = None  # when it was probed (UTC)
    cached: bool = False  # read from an earlier command's probe of the same server process

    @property
    def probed(self) -> bool:
        return self.error is None

    def has(self, key: str) -> bool:
        return any(f.key == key for f in self.found)

    def keys(self) -> tuple[str, ...]:
        return tuple(f.key for f in self.found)

    def note(self) -> str | None:
        """The run's note: how many differences, their names, where the forms that work are."""
        if not self.found:
            return None
        names = "; ".join(f.check.title for f in self.found)
        many = f"{len(self.found)} known differences" if len(self.found) > 1 else "1 known difference"
        return (f"{many} from MongoDB (probed): {names}; `sci-ingest server status` names the form that works "
                "for each (docs/embedded-server.md)")

    def as_dict(self) -> dict:
        return {"probed": self.probed, "error": self.error, "checked": list(self.checked), "at": self.at,
                "seconds": self.seconds, "cached": self.cached,
                "differences": [{**asdict(f), "form": f.check.form, "mongodb": f.check.right,
                                 "instead": f.check.instead} for f in self.found]}


# ------------------------------------------------------------------ asking
@dataclass(frozen=True)
class _Failed:
    code: int | None
    name: str | None
    message: str

    def words(self) -> str:
        return f"error {self.code} ({self.name}: {self.message})" if self.name else f"error {self.code}: {self.message}"


def _answer(coll, ask: Callable, what: str):
    """The answer of ``ask``, or the server's refusal (:class:`_Failed`); the server gone raises."""
    try:
        with db_errors(what):
            return ask(coll)
    except ServerUnavailable:
        raise
    except DatabaseError as exc:
        cause = exc.__cause__
        if getattr(cause, "code", None) == _UNAUTHORIZED:  # the user's rights, not the server's answer
            raise
        details = getattr(cause, "details", None) or {}
        return _Failed(getattr(cause, "code", None), details.get("codeName"),
                       str(details.get("errmsg") or exc).splitlines()[0][:120])


def _words(check: Check, answer) -> str:
    if isinstance(answer, _Failed):
        return answer.words()
    shown = json.dumps(answer, default=str, sort_keys=True)
    if shown in check.wrong:
        return check.wrong[shown]
    values = [v for row in answer if isinstance(row, dict) for k, v in row.items() if k != "_id"]
    if answer and values and all(v is None for v in values):
        return "null"
    if answer and not values:
        return "nothing (the field is missing)"
    return shown if len(shown) <= 80 else shown[:77] + "..."


def _ask(db) -> Probe:
    """Every check in a scratch collection of ``db`` (dropped after, as are killed probes' left behind)."""
    started = time.perf_counter()
    name = f"{SCRATCH_PREFIX}{int(time.time())}_{uuid.uuid4().hex[:8]}"
    coll = db[name]
    found = []
    with db_errors("probing the server's answers (a scratch collection)"):
        _drop_stale(db)
    done = False
    try:
        with db_errors("probing the server's answers (a scratch collection)"):
            coll.insert_many([dict(d) for d in _DOCS])
        for check in CHECKS:
            answer = _answer(coll, check.ask, f"probing {check.title}")
            if answer == check.want:
                continue
            works = _answer(coll, check.ask_instead, f"probing the form that works for {check.title}")
            found.append(Found(check.key, _words(check, answer), works == check.want_instead))
        done = True
    finally:
        try:
            with db_errors(f"dropping the probe's scratch collection {name}"):
                coll.drop()
        except DatabaseError:
            if done:  # else the error that stopped the probe is the one to tell
                raise
    return Probe(checked=tuple(c.key for c in CHECKS), found=tuple(found),
                 seconds=round(time.perf_counter() - started, 3), at=_utc_now())


def _drop_stale(db) -> None:
    """Drop the scratch collections of probes killed before they dropped theirs (older than STALE_S)."""
    now = time.time()
    for name in db.list_collection_names(filter={"name": {"$regex": f"^{SCRATCH_PREFIX}"}}):
        stamp = name[len(SCRATCH_PREFIX):].split("_", 1)[0]
        if name.startswith(SCRATCH_PREFIX) and stamp.isdigit() and now - int(stamp) > STALE_S:
            db.drop_collection(name)


def _utc_now() -> str:
    """ISO 8601 in UTC to the millisecond, as sci-ingest prints times."""
    now = datetime.datetime.now(datetime.UTC)
    return now.isoformat(timespec="milliseconds").replace("+00:00", "Z")


# ------------------------------------------------------------------ kept per server process
_IN_PROCESS: dict[tuple, Probe] = {}


def identity(db) -> dict | None:
    """The server process behind ``db``: its address, host, pid and start (ms), from ``serverStatus``
    (None where the user may not ask it)."""
    try:
        with db_errors("asking the server serverStatus"):
            status = db.client.admin.command({"serverStatus": 1, "repl": 0, "metrics": 0, "locks": 0,
                                              "wiredTiger": 0, "tcmalloc": 0})
    except ServerUnavailable:
        raise
    except DatabaseError:
        return None
    address = _address(db.client)
    local, uptime = status.get("localTime"), status.get("uptimeMillis")
    if not hasattr(local, "timestamp") or not isinstance(uptime, (int, float)) or status.get("pid") is None:
        return None
    if local.tzinfo is None:  # BSON dates are UTC
        local = local.replace(tzinfo=datetime.UTC)
    return {"address": f"{address[0]}:{address[1]}" if address else None, "host": status.get("host"),
            "pid": int(status["pid"]), "start_ms": int(local.timestamp() * 1000 - uptime)}


def _address(client) -> tuple | None:
    """(host, port) of the server the client talks to; None for several mongos (no one address)."""
    try:
        with db_errors("asking the client its server's address"):
            return client.address
    except ServerUnavailable:
        raise
    except DatabaseError:
        return None


def _same(a: dict, b: dict) -> bool:
    return (a.get("address"), a.get("host"), a.get("pid")) == (b.get("address"), b.get("host"), b.get("pid")) \
        and abs(int(a.get("start_ms", 0)) - int(b.get("start_ms", 0))) <= 2000


def cache_file(home: Path | None = None) -> Path:
    return Path(home if home is not None else Settings().state_dir) / "server-probes.json"


def _read_cache(path: Path) -> list[dict]:
    try:
        entries = json.loads(path.read_text()).get("servers")
    except (OSError, ValueError, AttributeError):
        return []
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


def _from_cache(path: Path, ident: dict) -> Probe | None:
    checked = [c.key for c in CHECKS]
    for entry in _read_cache(path):
        if isinstance(entry.get("identity"), dict) and _same(entry["identity"], ident) and entry.get("checked") == checked:
            try:
                found = tuple(Found(f["key"], f["answered"], bool(f["instead_works"])) for f in entry["found"]
                              if f.get("key") in _BY_KEY)
            except (KeyError, TypeError):
                return None
            return Probe(checked=tuple(checked), found=found, seconds=entry.get("seconds"), at=entry.get("at"),
                         cached=True)
    return None


def _write_cache(path: Path, ident: dict, result: Probe) -> None:
    """Remember ``result`` for the server ``ident`` (newest first; a cache that cannot be written is skipped)."""
    entry = {"identity": ident, "checked": list(result.checked), "at": result.at, "seconds": result.seconds,
             "found": [asdict(f) for f in result.found]}
    entries = [entry] + [e for e in _read_cache(path) if not (isinstance(e.get("identity"), dict)
                                                                and _same(e["identity"], ident))]
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_text(json.dumps({"servers": entries[:_KEEP]}, indent=1))
        os.replace(partial, path)
    except OSError:
        pass


def probe(db, *, home: Path | None = None, fresh: bool = False) -> Probe:
    """What the server behind ``db`` answers differently from MongoDB (:data:`CHECKS`), asked once per
    server process (``fresh``: ask again).  Never raises for a server that refuses the probe (then
    :attr:`Probe.error` says why); raises :class:`ServerUnavailable` when the server cannot be reached."""
    local_key = (id(db.client), _address(db.client))
    if not fresh and local_key in _IN_PROCESS:
        return _IN_PROCESS[local_key]
    ident = identity(db)
    path = cache_file(home)
    result = None if fresh or ident is None else _from_cache(path, ident)
    if result is None:
        try:
            result = _ask(db)
        except ServerUnavailable:
            raise
        except DatabaseError as exc:  # e.g. a read-only user: it cannot make the scratch collection
            result = Probe(error=str(exc))
        if result.probed and ident is not None:
            _write_cache(path, ident, result)
    _IN_PROCESS[local_key] = result
    return result
