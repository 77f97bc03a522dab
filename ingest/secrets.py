"""Keeping secrets out of everything sci-ingest prints or stores.

One rule, applied in two places:

* :func:`redact_uri` is a MongoDB URI as it may be shown: the password of its
  user info and the value of every secret-bearing option (a name holding
  ``password``, ``secret``, ``token`` or ``credential``, and
  ``authMechanismProperties``, which carries e.g. an AWS session token) become
  ``***``.  It never raises, whatever the string: a URI too malformed for the
  driver is exactly the one an error message must show safely.
* :func:`scrub` removes from any text the secrets of every URI this process was
  given (:func:`remember`, called by :func:`ingest.store.mongo.client` before the
  driver sees the URI), raw and percent-decoded: a driver message that quotes an
  option, a path or the URI itself cannot leak them.  Every
  :class:`~ingest.errors.SciIngestError` message passes through it, and so does
  everything derived from those messages: the command's stderr, its JSON report,
  the ledger's errors and the ``error`` of ``stage_timings``.
"""

from __future__ import annotations

import re
import threading
from urllib.parse import unquote

__all__ = ["redact_uri", "remember", "scrub", "MASK"]

MASK = "***"
_SECRET_OPTION = re.compile(r"password|secret|token|credential|^authmechanismproperties$", re.IGNORECASE)
_MIN_SECRET = 3  # shorter values would mask ordinary words
_SECRETS: set[str] = set()
_LOCK = threading.Lock()


def _split(uri: str) -> tuple[str, str | None, str, str | None]:
    """(scheme://, user info or None, hosts/path, options or None), without validating anything."""
    scheme, sep, rest = uri.partition("://")
    if not sep:
        scheme, rest = "", uri
    else:
        scheme += sep
    head, qsep, query = rest.partition("?")
    creds = None
    if "@" in head:
        creds, head = head.rsplit("@", 1)
    return scheme, creds, head, (query if qsep else None)


def _secrets_of(uri: str) -> list[str]:
    _, creds, _, query = _split(uri)
    found = []
    if creds and ":" in creds:
        found.append(creds.split(":", 1)[1])
    for part in re.split(r"[&;]", query or ""):
        name, eq, value = part.partition("=")
        if eq and value and _SECRET_OPTION.search(name.strip()):
            found.append(value)
    return found


def redact_uri(uri: str) -> str:
    """``uri`` with its password and secret-bearing option values replaced by ``***``."""
    uri = str(uri)
    scheme, creds, head, query = _split(uri)
    out = scheme
    if creds is not None:
        user = creds.split(":", 1)[0]
        out += f"{user}:{MASK}@" if ":" in creds else f"{creds}@"
    out += head
    if query is not None:
        parts = []
        for part in re.split(r"([&;])", query):
            name, eq, value = part.partition("=")
            parts.append(f"{name}={MASK}" if eq and value and _SECRET_OPTION.search(name.strip()) else part)
        out += "?" + "".join(parts)
    return out


def remember(uri: str | None) -> None:
    """Note the secrets of ``uri`` so that :func:`scrub` removes them from any text."""
    if not uri:
        return
    values = set()
    for secret in _secrets_of(str(uri)):
        for form in (secret, unquote(secret), unquote(secret.replace("+", " "))):
            if len(form) >= _MIN_SECRET:
                values.add(form)
    if values:
        with _LOCK:
            _SECRETS.update(values)


_URI_IN_TEXT = re.compile(r"mongodb(?:\+srv)?://[^\s'\"<>]+")


def _redact_match(match: re.Match) -> str:
    uri = match.group()
    core = uri.rstrip(":,.;)]")  # punctuation of the sentence around it
    return redact_uri(core) + uri[len(core):]


def scrub(text: str) -> str:
    """``text`` without any secret of a remembered URI, and with any URI in it redacted."""
    text = str(text)
    if "://" in text:
        text = _URI_IN_TEXT.sub(_redact_match, text)
    with _LOCK:
        secrets = sorted(_SECRETS, key=len, reverse=True)
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    return text
