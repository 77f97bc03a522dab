"""Settings: where MongoDB is, which database, where local state lives.

Resolution order for the MongoDB URI: explicit argument (``--mongo-uri``) >
``MONGODB_URI`` environment variable > (inside Airflow) the ``mongo_default``
connection > none, which means "start the embedded server" -- unless the
embedded server is forbidden (``--no-embedded``, ``SCI_INGEST_NO_EMBEDDED=1``; in Airflow
also the Variable ``sci_ingest_no_embedded``): then no URI is an error, at once.
"""

from __future__ import annotations

import math
import os
import re
import resource
import sysconfig
from dataclasses import dataclass, field, replace
from pathlib import Path

from ingest.errors import ConfigError

PROJECT_ROOT = Path(__file__).resolve().parent.parent
#: Whether the packages sit in a checkout (or a copy of one: ``schemas/`` beside them), as ``make
#: install``'s editable install has them, rather than in an installed wheel's site-packages.
IN_CHECKOUT = (PROJECT_ROOT / "schemas" / "expectations").is_dir()
DEFAULT_DB = "sci_ingest"
#: Documents up to which a step that would start worker processes only for itself runs in the
#: command's own process (docs/pipeline.md, "Small work"): below it, starting them costs more than they save.
DEFAULT_SMALL_WORK = 100_000
#: Set to 1 (true, yes): never start or use the embedded server; a command without a MongoDB URI fails.
NO_EMBEDDED_ENV = "SCI_INGEST_NO_EMBEDDED"


#: The name of the command a process runs (:func:`begin_command`), inherited by the processes it starts.
COMMAND_ENV = "SCI_INGEST_COMMAND_ID"


def begin_command() -> str:
    """Name the command this process runs now (a new name each call): ``sci-ingest cmd <pid>-<random>``,
    the app name its MongoDB clients tell the server (:mod:`ingest.store.mongo`), so that a stopped
    command finds its own operations.  Kept in the environment: the processes the command starts
    (a ``LocalCluster``'s workers) carry it too."""
    name = f"sci-ingest cmd {os.getpid()}-{os.urandom(4).hex()}"
    os.environ[COMMAND_ENV] = name
    return name


def command_name() -> str | None:
    """The name of the command this process runs or serves (:func:`begin_command`), or None."""
    return os.environ.get(COMMAND_ENV) or None


def _shared_data() -> Path:
    """Where an installed wheel put its data files (``<prefix>/share/sci-ingest``: pyproject.toml)."""
    user = f"{os.name}_user"
    prefixes = [sysconfig.get_path("data")] + ([sysconfig.get_path("data", user)] if user in sysconfig.get_scheme_names() else [])
    places = [Path(prefix) / "share" / "sci-ingest" for prefix in prefixes]
    return next((place for place in places if (place / "schemas").is_dir()), places[0])


#: The checkout's folders, or an install's: schemas and expectation suites, the DAG files.
DATA_DIR = PROJECT_ROOT if IN_CHECKOUT else _shared_data()
SCHEMAS_DIR = DATA_DIR / "schemas"
DAGS_DIR = DATA_DIR / "dags"
#: The bundled samples: a checkout's only (an installed wheel has none).
SAMPLES_DIR = PROJECT_ROOT / "samples"
#: The bundled materials samples are synthetic: made by ``samples/materials/generate.py``, physically
#: plausible but not real Materials Project records (their energies above hull are drawn at random).
#: Known by their sha256 wherever they are loaded from (the ledger keeps each file's), so that a run
#: and the report say "synthetic samples"; ``tests/test_report_truth.py`` holds these to the files.
SYNTHETIC_SAMPLES = {
    "cfa61701261ee7a06984844450435ccf78d7145115e257d22348b1de8ce6eff7": "samples/materials/materials.jsonl.gz",
    "8359fbbe4cd2bf85ec856cf842d2482ce2cb74f698c3fe52ceadff50c34d86fd": "samples/materials/tasks.jsonl.gz",
}


def default_workers() -> int:
    """Worker processes by default (loading, a private Dask cluster): the cores this process may use."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


#: The most worker processes a private ``LocalCluster`` starts for each core this process may use:
#: past it they only wait for the cores, each holding its memory (about 100 MB).
MOST_WORKERS_PER_CORE = 4
#: Files (sockets, pipes) this process holds for each worker of its ``LocalCluster`` (9 measured with
#: Dask 2025: 31 open with 1 worker, 94 with 8), and those it keeps for itself (clients, inputs, logs).
FILES_PER_WORKER, FILES_KEPT = 10, 256


def most_workers() -> tuple[int, str]:
    """The most worker processes a private ``LocalCluster`` may have here, and which cap that is: the
    cores (:data:`MOST_WORKERS_PER_CORE` each) or the open-files limit (``ulimit -n``)."""
    cores = default_workers()
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    by_files = (soft - FILES_KEPT) // FILES_PER_WORKER if soft != resource.RLIM_INFINITY else None
    if by_files is not None and by_files < MOST_WORKERS_PER_CORE * cores:
        return max(1, by_files), (f"the open-files limit (ulimit -n {soft:,}) allows {max(1, by_files)}: "
                                  f"{FILES_PER_WORKER} files each and {FILES_KEPT} for the command")
    return MOST_WORKERS_PER_CORE * cores, f"{MOST_WORKERS_PER_CORE} per core, {cores} core(s) here"


def _state_dir() -> Path:
    """``$SCI_INGEST_HOME``, else ``.sci-ingest`` in the checkout, else (an installed wheel) in the home folder."""
    return setting("SCI_INGEST_HOME") or (PROJECT_ROOT / ".sci-ingest" if IN_CHECKOUT else Path.home() / ".sci-ingest")


@dataclass(frozen=True)
class Settings:
    mongo_uri: str | None = None
    db_name: str = DEFAULT_DB
    state_dir: Path = field(default_factory=_state_dir)
    dask_scheduler: str | None = None
    batch_size: int = 1000
    progress: bool = True
    landing: Path | None = None  # $SCI_INGEST_LANDING: where results land, one folder per day
    #: $SCI_INGEST_SMALL_WORK: a step that would start worker processes only for itself and reads
    #: at most this many documents runs in the command's own process instead (0: never).
    small_work: int = DEFAULT_SMALL_WORK
    #: False (``--no-embedded``, $SCI_INGEST_NO_EMBEDDED): without ``mongo_uri`` a command fails at
    #: once (:func:`require_uri`) instead of starting the home's embedded server: production, where
    #: a misconfigured host must not write to a private local database.
    embedded: bool = True

    @property
    def landing_dir(self) -> Path:
        """The landing folder of the scheduled ingestion (``<home>/landing`` unless set)."""
        return self.landing or self.state_dir / "landing"

    @property
    def db_dir(self) -> Path:
        return self.state_dir / "db"

    @property
    def out_dir(self) -> Path:
        return self.state_dir / "out"

    @classmethod
    def from_env(cls, **overrides) -> Settings:
        env = os.environ
        base = cls(
            mongo_uri=env.get("MONGODB_URI") or None,
            db_name=setting("SCI_INGEST_DB"),
            dask_scheduler=env.get("DASK_SCHEDULER_ADDRESS") or None,
            landing=setting("SCI_INGEST_LANDING"),
            small_work=setting("SCI_INGEST_SMALL_WORK"),
            embedded=not setting(NO_EMBEDDED_ENV),
        )
        clean = {k: v for k, v in overrides.items() if v is not None}
        return replace(base, **clean)


def parse_flag(value: str, what: str) -> bool:
    """``value`` read as a switch (:class:`Flag`; empty is off).  Anything else is a
    :class:`ConfigError` naming ``what`` (where it came from)."""
    if not str(value).strip():
        return False
    try:
        return Flag().parse(value)
    except ValueError as exc:
        raise ConfigError(f"{what} must be {exc}, not {value!r}") from None


#: What a command or task without a MongoDB says where the embedded server is forbidden.
NO_DATABASE = (f"no MongoDB configured and the embedded server is off ({NO_EMBEDDED_ENV}=1 or --no-embedded): "
               "set --mongo-uri or MONGODB_URI (in Airflow: the mongo_default connection)")


def require_uri(settings: Settings) -> None:
    """Raise :class:`ConfigError` (:data:`NO_DATABASE`, one line naming what to set) when ``settings``
    have no MongoDB URI and the embedded server is forbidden."""
    if not settings.mongo_uri and not settings.embedded:
        raise ConfigError(NO_DATABASE)


def parse_write_concern(spec: str) -> dict:
    """``"w=majority,j=true,wtimeout=5000"`` (or ``"majority"``, ``"2"``) -> write concern options.

    Raises ConfigError on anything else, naming what is accepted.
    """
    options: dict = {}
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        key, sep, value = part.partition("=")
        if not sep:
            key, value = "w", part
        key = key.strip().lower()
        value = value.strip()
        if key == "w":
            options["w"] = int(value) if value.isdigit() else value
        elif key in ("j", "journal"):
            if value.lower() not in ("true", "false", "1", "0"):
                raise ConfigError(f"write concern: j must be true or false, not {value!r}")
            options["j"] = value.lower() in ("true", "1")
        elif key in ("wtimeout", "wtimeoutms"):
            if not value.isdigit():
                raise ConfigError(f"write concern: wtimeout must be milliseconds, not {value!r}")
            options["wtimeout"] = int(value)
        else:
            raise ConfigError(f"write concern: unknown option {key!r} in {spec!r} "
                              "(expected w=1|majority|N, j=true|false, wtimeout=MS)")
    if not options:
        raise ConfigError(f"write concern {spec!r} is empty (expected e.g. w=majority,j=true)")
    return options


# ------------------------------------------------------------------ declared types and ranges
# Plain classes, not dataclasses: this module is read at every start (a dataclass costs about 0.5 ms).
def _shown(value: float) -> str:
    """A bound as the messages and the tables show it: ``1,048,576``, ``0.5``, ``65535``."""
    if not float(value).is_integer():
        return f"{value:g}"
    return f"{int(value):,}" if abs(value) >= 100_000 else str(int(value))


class Number:
    """A number's declared type and range: finite always; whole unless ``integer`` is off; from
    ``least`` (``above``: more than it) up to ``most``.  ``unit`` is what it counts (``noun``, when
    set, says the whole kind instead: "a TCP port")."""

    def __init__(self, unit: str = "", *, least: float = 0, most: float | None = None, integer: bool = True,
                 above: bool = False, noun: str = ""):
        self.unit, self.least, self.most, self.integer, self.above, self.noun = unit, least, most, integer, above, noun

    def range(self) -> str:
        """``0 or more``, ``at least 1``, ``more than 0``, ``1 to 65535``."""
        low = ("more than " if self.above else "") + _shown(self.least)
        if self.most is not None:
            return f"{low} to {_shown(self.most)}"
        return low if self.above else (f"{low} or more" if self.least == 0 else f"at least {low}")

    def describe(self) -> str:
        kind = self.noun or f"{'a whole number' if self.integer else 'a finite number'} of {self.unit}"
        return f"{kind}, {self.range()}"

    def parse(self, raw: str) -> int | float:
        """``raw`` as this number; ValueError (saying :meth:`describe`) for anything else."""
        text = str(raw).strip()
        try:
            value = int(text) if self.integer else float(text)
        except ValueError:
            raise ValueError(self.describe()) from None
        too_low = value <= self.least if self.above else value < self.least
        if not math.isfinite(value) or too_low or (self.most is not None and value > self.most):
            raise ValueError(self.describe())
        return value


class Flag:
    """A switch: 1, true, yes, on; or 0, false, no, off."""

    def describe(self) -> str:
        return "1 or 0 (true or false)"

    def range(self) -> str:
        return "1 or 0"

    def parse(self, raw: str) -> bool:
        value = str(raw).strip().lower()
        if value in ("0", "false", "no", "off"):
            return False
        if value in ("1", "true", "yes", "on"):
            return True
        raise ValueError(self.describe())


class Choice:
    """One of a few words (case and blanks around it ignored)."""

    def __init__(self, choices: tuple[str, ...]):
        self.choices = choices

    def describe(self) -> str:
        return "one of " + ", ".join(self.choices)

    def range(self) -> str:
        return " | ".join(self.choices)

    def parse(self, raw: str) -> str:
        value = str(raw).strip().lower()
        if value not in self.choices:
            raise ValueError(self.describe())
        return value


class Size:
    """A size in megabytes or gigabytes as the embedded server takes it (``256M``, ``1G``), at least ``least_mb``."""

    def __init__(self, least_mb: int = 1):
        self.least_mb = least_mb

    def describe(self) -> str:
        return f"a size in M or G of at least {self.least_mb}M (such as 256M or 1G)"

    def range(self) -> str:
        return f"at least {self.least_mb}M"

    def parse(self, raw: str) -> str:
        found = re.fullmatch(r"\s*([0-9]+)\s*([MG])B?\s*", str(raw), re.IGNORECASE)
        if not found or int(found.group(1)) * (1024 if found.group(2).upper() == "G" else 1) < self.least_mb:
            raise ValueError(self.describe())
        return f"{found.group(1)}{found.group(2).upper()}"


class Folder:
    """A path (a folder; made where it is needed); ``~`` is the home folder."""

    def describe(self) -> str:
        return "a path"

    def range(self) -> str:
        return "a path"

    def parse(self, raw: str) -> Path:
        return Path(raw).expanduser()


#: What MongoDB refuses in a database name (on any platform), and its longest name in bytes.
DB_NAME_FORBIDDEN = '/\\. "$*<>:|?\0'
DB_NAME_MAX_BYTES = 63


class DbName:
    """A MongoDB database name: not empty, at most 63 bytes (UTF-8), none of ``/\\. "$*<>:|?`` nor NUL."""

    def describe(self) -> str:
        return (f"a MongoDB database name: not empty, at most {DB_NAME_MAX_BYTES} bytes, "
                "without / \\ . space \" $ * < > : | ? or NUL")

    def range(self) -> str:
        return f"1 to {DB_NAME_MAX_BYTES} bytes, none of / \\ . space \" $ * < > : | ?"

    def parse(self, raw: str) -> str:
        name = str(raw)
        if not name or len(name.encode("utf-8", "surrogateescape")) > DB_NAME_MAX_BYTES \
                or any(c in DB_NAME_FORBIDDEN for c in name):
            raise ValueError(self.describe())
        return name


# ------------------------------------------------------------------ every setting, declared once
class Setting:
    """An ``SCI_INGEST_*`` environment variable: its declared type and range, its default (what an
    unset or empty variable gives), what it sets, and the default as the docs say it."""

    def __init__(self, name: str, type_: Number | Flag | Choice | Size | Folder | DbName, default, meaning: str,
                 default_text: str = ""):
        self.name, self.type, self.default, self.meaning, self.default_text = name, type_, default, meaning, default_text

    def read(self, env=None):
        """Its value in ``env`` (default: this process's environment); ConfigError, one line naming it."""
        raw = (os.environ if env is None else env).get(self.name, "")
        if not raw.strip():
            return self.default
        try:
            return self.type.parse(raw)
        except ValueError as exc:
            raise ConfigError(f"{self.name} must be {exc}, not {raw!r}") from None  # repr: control characters escaped

    def shown_default(self) -> str:
        """The default as the table of settings shows it."""
        if self.default_text:
            return self.default_text
        if isinstance(self.default, bool):
            return "1" if self.default else "0"
        if isinstance(self.default, (int, float)):
            return f"{self.default:,g}" if isinstance(self.default, float) else f"{self.default:,}"
        return "none" if self.default is None else f"`{self.default}`"


_SECONDS = Number("seconds", integer=False)
#: The types of two settings whose range others read: the embedded server's smallest cache
#: (``ingest.server.embedded.MIN_CACHE_MB``) and the analyses' read modes (``analytics.reading.planning``).
SERVER_CACHE_SIZE = Size(128)
READ_MODE_CHOICE = Choice(("auto", "ranges", "stream"))
#: Every ``SCI_INGEST_*`` setting (docs/configuration.md shows this table; tests/test_bad_options.py
#: tries a bad value of each).  Read only through :func:`setting`; checked all at once, before any
#: work, by :func:`bad_settings` (``sci-ingest`` exits 64 on a bad one).
SETTINGS: dict[str, Setting] = {s.name: s for s in (
    Setting("SCI_INGEST_HOME", Folder(), None, "local state: the embedded server's data, Parquet outputs, logs",
            "`.sci-ingest/` in the checkout, else `~/.sci-ingest`"),
    Setting("SCI_INGEST_DB", DbName(), DEFAULT_DB, "the database (`--db` wins)"),
    Setting(NO_EMBEDDED_ENV, Flag(), False,
            "production: never start or use the embedded server; without a URI a command fails at once"),
    Setting("SCI_INGEST_LANDING", Folder(), None, "the day folders the scheduled ingestion loads",
            "`<home>/landing`"),
    Setting("SCI_INGEST_DASK_TLS", Folder(), None, "a folder made by `sci-ingest certs`: the client certificate "
            "shown a `tls://` Dask scheduler"),
    Setting("SCI_INGEST_SERVER_IDLE", _SECONDS, 600.0, "how long the embedded server a command started stays up "
            "without a client (0: a private server for each command, stopped at its end)"),
    Setting("SCI_INGEST_SERVER_CACHE", SERVER_CACHE_SIZE, "512M", "the embedded server's WiredTiger cache"),
    Setting("SCI_INGEST_TIMEOUT_MS", Number("milliseconds", least=1), 10_000,
            "how long an operation waits for a server on another host (the URI's serverSelectionTimeoutMS wins)"),
    Setting("SCI_INGEST_LOCAL_TIMEOUT_MS", Number("milliseconds", least=1), 3_000,
            "how long an operation waits for a server on this machine (the URI's serverSelectionTimeoutMS wins)"),
    Setting("SCI_INGEST_LEASE_SECONDS", Number("seconds", least=1, integer=False), 60.0,
            "a loader's claim on a file lasts this long unless renewed (every quarter of it)"),
    Setting("SCI_INGEST_CLAIM_WAIT_SECONDS", _SECONDS, 900.0,
            "the longest a loader waits for a file another live loader holds"),
    Setting("SCI_INGEST_MAX_RECORD_BYTES", Number("bytes", least=1 << 20, most=16 << 20), 16 << 20,
            "the largest JSON record read (its text)", "16 MiB (16,777,216)"),
    Setting("SCI_INGEST_SMALL_FILE_BYTES", Number("bytes", most=64 << 20), 1 << 20,
            "files up to this size are read whole and may share a batch", "1 MiB (1,048,576)"),
    Setting("SCI_INGEST_KEEP_DOCUMENTS", Number("documents", least=1, most=1_000_000), 20_000,
            "documents a record file keeps checked in memory for its write"),
    Setting("SCI_INGEST_SMALL_WORK", Number("documents"), DEFAULT_SMALL_WORK,
            "documents up to which `analyze` or `validate`, run alone, works in its own process "
            "(0: always start worker processes)"),
    Setting("SCI_INGEST_SCAN_WARN", Number("documents"), 100_000,
            "a query no index serves warns on a collection of at least this many documents"),
    Setting("SCI_INGEST_READ_MODE", READ_MODE_CHOICE, "auto",
            "how analyses read their source: `auto` (the server's query plans decide), `ranges`, `stream`"),
    Setting("SCI_INGEST_FRESH_WITHIN_HOURS", Number("hours", integer=False, above=True), None,
            "validation: the newest load must be this recent"),
    Setting("SCI_INGEST_KEEP", Flag(), True, "commands start in a kept process that has imported their code "
            "(0: each in a process of its own)"),
    Setting("SCI_INGEST_KEEP_IDLE", Number("seconds", integer=False, above=True), 600.0,
            "how long a kept command process waits for the next command"),
    Setting("SCI_INGEST_BENCH_CACHE", Size(1), None, "`bench cache`: the server's cache instead of the size's own"),
)}


def setting(name: str, env=None):
    """The value of the setting ``name`` (:data:`SETTINGS`) in ``env`` (default: the environment):
    its default when unset or empty; ConfigError, one line naming it, when its value is not of its type."""
    return SETTINGS[name].read(env)


def bad_settings(env=None) -> list[str]:
    """One line for each setting in ``env`` (default: the environment) whose value is not of its
    declared type and range, naming it and what it must be; empty when all are good."""
    bad = []
    for entry in SETTINGS.values():
        try:
            entry.read(env)
        except ConfigError as exc:
            bad.append(str(exc))
    return bad


def db_name(raw: str, what: str = "--db") -> str:
    """``raw`` checked as a MongoDB database name; ConfigError naming ``what`` otherwise."""
    try:
        return DbName().parse(raw)
    except ValueError as exc:
        raise ConfigError(f"{what} must be {exc}, not {raw!r}") from None
