"""ISO 8601 date/time strings as UTC datetimes: one reading for stored documents and queries.

:func:`parse_iso` reads what Materials Project documents write (``2024-04-12 04:58:56.734259``,
``2022-07-26T14:23:04.840+00:00``, ``2018-07-19T18:49:53.596+0000``, ``2013-06-23T16:27:42.000Z``)
and what an analyst types in a ``--where`` expression (``"2024-01-01"``):

* ``YYYY-MM-DD``, optionally followed by ``T`` (or ``t``, or one space) and ``HH:MM``,
  ``HH:MM:SS`` or ``HH:MM:SS.f...`` (any number of fractional digits, ``.`` or ``,``);
* then optionally ``Z``/``z`` or an offset ``+HH:MM``, ``+HHMM``, ``+HH`` (or ``-``), only
  after a time.

A date alone is midnight.  A **naive** value (no ``Z``, no offset) is read **as UTC**: the
Materials Project writes its timestamps in UTC without saying so (emmet's ``utcnow()``).  A
value with an offset is converted to UTC.  The result is a timezone-aware UTC ``datetime``
truncated to the millisecond, the precision of a BSON date (MongoDB and pymongo truncate
too).  Anything else (leading or trailing blanks, ``24:00``, a leap second ``:60``, a
month 13, a year outside 1..9999 once in UTC) raises ``ValueError`` with a short reason.
"""

from __future__ import annotations

import os
import re
import time
from datetime import UTC, datetime, timedelta

__all__ = ["parse_iso", "format_iso", "FORMS"]

_ISO = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})"
    r"(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?"
    r"([Zz]|[+-]\d{2}(?::?\d{2})?)?)?\Z", re.ASCII)

#: The accepted forms, for messages.
FORMS = '"2024-01-31", "2024-01-31T12:00:00", "2024-01-31 12:00:00.123456", "2024-01-31T12:00:00Z" or "...+02:00"'


def parse_iso(text: str) -> datetime:
    """``text`` as a UTC-aware datetime truncated to the millisecond; ValueError (with a reason) if it is not one."""
    m = _ISO.match(text) if isinstance(text, str) else None
    if m is None:
        raise ValueError("is not an ISO 8601 date or date-time")
    year, month, day, hour, minute, second, fraction, zone = m.groups()
    micro = int((fraction or "")[:6].ljust(6, "0"))
    try:
        value = datetime(int(year), int(month), int(day), int(hour or 0), int(minute or 0), int(second or 0),
                         micro // 1000 * 1000, tzinfo=UTC)
    except ValueError as exc:  # month 13, day 31 in April, hour 24, second 60, year 0
        raise ValueError(f"is not a valid date-time ({exc})") from None
    if zone and zone not in "Zz":
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        hours, minutes = int(digits[:2]), int(digits[2:] or 0)
        if hours > 23 or minutes > 59:
            raise ValueError(f"has an impossible UTC offset {zone}")
        try:
            value = value - sign * timedelta(hours=hours, minutes=minutes)
        except OverflowError:
            raise ValueError("is out of range once converted to UTC") from None
    return value


def format_iso(value: datetime) -> str:
    """A datetime as ISO 8601 in UTC to the millisecond with ``Z`` (a naive one is UTC): ``2024-01-31T12:00:00.000Z``."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    value = value.astimezone(UTC)
    return (f"{value.year:04d}-{value.month:02d}-{value.day:02d}T{value.hour:02d}:{value.minute:02d}:"
            f"{value.second:02d}.{value.microsecond // 1000:03d}Z")


def process_started() -> float:
    """When this process started (epoch seconds, to the kernel's clock tick): Linux's ``/proc``
    records it in ticks since boot, which the boot-time clock relates to now (``btime`` would be
    whole seconds); elsewhere psutil's reading.  Light on purpose: the ``sci-ingest`` console
    script reads it at every start (psutil's import costs 8 ms)."""
    try:
        with open("/proc/self/stat", "rb") as f:
            ticks = int(f.read().rsplit(b")", 1)[1].split()[19])
        since_boot = time.clock_gettime(time.CLOCK_BOOTTIME)
        return time.time() - (since_boot - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        import psutil  # noqa: PLC0415 - lazy: only where /proc does not say it (psutil: 8 ms)

        return psutil.Process().create_time()


#: When the command this process runs began, and whether a kept process runs it: set by the
#: ``sci-ingest`` console script (:func:`ingest.cli.main.run`), or in the child a kept process
#: forks (:mod:`ingest.cli.kept`: the command began when its caller started, not at the fork).
_COMMAND: dict = {}


def command_began(epoch: float, kept: bool = False) -> None:
    _COMMAND.update(began=epoch, kept=kept)


def command_began_at() -> tuple[float | None, bool]:
    """(epoch seconds, kept) of :func:`command_began`; (None, False) when no command said it."""
    return _COMMAND.get("began"), bool(_COMMAND.get("kept"))
