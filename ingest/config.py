"""Settings: where MongoDB is, which database, where local state lives.

Resolution order for the MongoDB URI: explicit argument (``--mongo-uri``) >
``MONGODB_URI`` environment variable > (inside Airflow) the ``mongo_default``
connection > none, which means "start the embedded SecantusDB server" -- unless the
embedded server is forbidden (``--no-embedded``, ``SCI_INGEST_NO_EMBEDDED=1``; in Airflow
also the Variable ``sci_ingest_no_embedded``): then no URI is an error, at once.
"""

from __future__ import annotations

import math
import os
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


def _state_dir() -> Path:
    """``$SCI_INGEST_HOME``, else ``.sci-ingest`` in the checkout, else (an installed wheel) in the home folder."""
    default = PROJECT_ROOT / ".sci-ingest" if IN_CHECKOUT else Path.home() / ".sci-ingest"
    return Path(os.environ.get("SCI_INGEST_HOME", default))


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
    def from_env(cls, **overrides) -> "Settings":
        env = os.environ
        base = cls(
            mongo_uri=env.get("MONGODB_URI") or None,
            db_name=env.get("SCI_INGEST_DB", DEFAULT_DB),
            dask_scheduler=env.get("DASK_SCHEDULER_ADDRESS") or None,
            landing=Path(env["SCI_INGEST_LANDING"]) if env.get("SCI_INGEST_LANDING") else None,
            small_work=_small_work(env.get("SCI_INGEST_SMALL_WORK")),
            embedded=not env_flag(NO_EMBEDDED_ENV),
        )
        clean = {k: v for k, v in overrides.items() if v is not None}
        return replace(base, **clean)


def env_flag(name: str) -> bool:
    """Whether the environment variable ``name`` is on (1, true, yes, on); unset or empty is off."""
    return parse_flag(os.environ.get(name, ""), name)


def parse_flag(value: str, what: str) -> bool:
    """``value`` read as a switch: 1, true, yes, on; or 0, false, no, off, empty.  Anything else is
    a :class:`ConfigError` naming ``what`` (the variable it came from)."""
    value = str(value).strip().lower()
    if value in ("", "0", "false", "no", "off"):
        return False
    if value in ("1", "true", "yes", "on"):
        return True
    raise ConfigError(f"{what} must be 1 or 0 (true or false), not {value!r}")


def env_number(name: str, default: float | None, *, positive: bool, meaning: str) -> float | None:
    """The environment variable ``name`` read as a finite number, ``> 0`` (``positive``) or ``>= 0``;
    ``default`` when unset or empty.  Anything else is a one-line :class:`ConfigError`: ``<name> must be
    <meaning>, not '<value>'``."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise ConfigError(f"{name} must be {meaning}, not {raw!r}")
    return value


#: What a command or task without a MongoDB says where the embedded server is forbidden.
NO_DATABASE = (f"no MongoDB configured and the embedded server is off ({NO_EMBEDDED_ENV}=1 or --no-embedded): "
               "set --mongo-uri or MONGODB_URI (in Airflow: the mongo_default connection)")


def require_uri(settings: "Settings") -> None:
    """Raise :class:`ConfigError` (:data:`NO_DATABASE`, one line naming what to set) when ``settings``
    have no MongoDB URI and the embedded server is forbidden."""
    if not settings.mongo_uri and not settings.embedded:
        raise ConfigError(NO_DATABASE)


def _small_work(value: str | None) -> int:
    if value is None or not value.strip():
        return DEFAULT_SMALL_WORK
    try:
        n = int(value)
    except ValueError:
        n = -1
    if n < 0:
        raise ConfigError(f"SCI_INGEST_SMALL_WORK must be a number of documents (0 or more), not {value!r}")
    return n


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
