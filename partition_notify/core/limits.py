"""Bounds on numbers and strings that come from users, checked before anything is stored.

One place, so the CLI, the Python API and settings agree; help texts and
docs name these constants rather than repeat the numbers.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sized

from partition_notify.core.errors import ValidationError

#: How long a table's set-done rows are kept when registered without its own
#: retention (PN_DEFAULT_RETENTION_SECONDS; register --retention-seconds).
DEFAULT_RETENTION_SECONDS = 7 * 86400
#: Both backends store counts and ids as signed 64-bit integers.
MAX_INT64 = 2**63 - 1
#: A century: far beyond any sensible retention, and ``now + retention`` stays
#: an exact float and a valid BIGINT on both backends.
MAX_RETENTION_SECONDS = 100 * 365 * 86400
#: How long an idempotency key (HTTP ``Idempotency-Key``, CLI/Python
#: ``idempotency_key``) is remembered by default (PN_HTTP_IDEMPOTENCY_TTL_SECONDS).
IDEMPOTENCY_TTL_SECONDS = 86400
#: How long the data files an overwrite moved aside stay after it committed, by
#: default (PN_RETIRED_FILE_RETENTION_SECONDS; Delta's VACUUM keeps 7 days too).
RETIRED_FILE_RETENTION_SECONDS = 7 * 86400
#: The longest wait, timeout or interval a caller may ask for (ten years): a
#: deadline must be one ``time.monotonic()`` and the OS's timers can hold.
MAX_SECONDS = 10 * 365 * 86400
#: PN_STORE_REPLY_TIMEOUT_SECONDS' default (store/pg_deadlines.py): longer than any one
#: statement the store runs (a purge batch, a page of a log read), yet a caller
#: whose PostgreSQL stopped answering is not held for minutes.
STORE_REPLY_TIMEOUT_SECONDS = 60.0
#: PN_CONNECT_TIMEOUT_SECONDS' default, and the connect deadline of the store and the
#: transports when a caller gives none: a broker or database that has not answered
#: in 10 s is down or unreachable, not slow.
CONNECT_TIMEOUT_SECONDS = 10.0
#: The most characters of one input an error message quotes: a rule's list of
#: 20,000 values, quoted whole, made a 170 KB error line or problem body.
MAX_QUOTED_CHARS = 120
#: A URI's scheme (RFC 3986), e.g. ``file:``, ``hdfs:``, ``s3a:``.
URI_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
#: Unicode's control characters (C0, DEL, C1): in a path a writer reports, a message
#: field, a STOMP header (a newline starts a header of the value's choosing), a log line
#: (a forged entry) or a terminal (an escape sequence) they do harm.
CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def excerpt(value: object, *, shown: str | None = None, limit: int = MAX_QUOTED_CHARS) -> str:
    """``shown`` (default ``repr(value)``) for an error message; past ``limit``
    characters, its start, an ellipsis and the size of ``value``."""
    text = repr(value) if shown is None else shown
    if len(text) <= limit:
        return text
    if isinstance(value, str | bytes):
        size = f"{len(value)} characters"
    elif isinstance(value, Sized):
        size = f"{len(value)} items"
    else:
        size = f"{len(text)} characters"
    return f"{text[:limit - 1]}… ({size})"


def retention_seconds(value: object, *, what: str) -> int:
    """A retention period: an integer from 1 to :data:`MAX_RETENTION_SECONDS`."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(
            f"retention_seconds for {what} must be an integer, got {type(value).__name__} "
            f"{value!r}"
        )
    if not 0 < value <= MAX_RETENTION_SECONDS:
        raise ValidationError(
            f"retention_seconds for {what} must be a positive integer of at most "
            f"{MAX_RETENTION_SECONDS}, got {value}"
        )
    return value


def text(value: object, *, field: str) -> str:
    """A free-form string both backends store alike: UTF-8 encodable, no NUL."""
    if not isinstance(value, str):
        raise ValidationError(f"{field} must be a str, got {type(value).__name__} {value!r}")
    if "\x00" in value:
        # SQLite stores it, PostgreSQL text refuses it: refuse on both.
        raise ValidationError(
            f"{field} {value!r} contains a NUL character at position {value.index(chr(0))}"
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError(
            f"{field} {value!r} cannot be encoded as UTF-8 ({exc.reason} at position "
            f"{exc.start})"
        ) from exc
    return value


def relative_path(value: str) -> bool:
    """Whether ``value`` is a relative path: not empty, not absolute, not a URI."""
    return bool(value) and not value.startswith("/") and not URI_SCHEME.match(value)


def location(value: object, *, field: str) -> str:
    """A table location: an absolute path or a URI (``file:``, ``s3://``, ``hdfs://``...);
    ``""`` (no location) passes. A relative path would be resolved against each
    process's own working directory: two processes would mean two places."""
    value = text(value, field=field)
    # A line break pasted along (a script's JSON, a CRLF file) matched no Spark commit's
    # output path, so every commit was ignored; in log lines it would forge entries.
    if found := CONTROL_CHARS.search(value):
        raise ValidationError(
            f"{field} {excerpt(value)} contains the control character {found.group()!r} at "
            f"position {found.start()}; expected an absolute path or a URI")
    if relative_path(value):
        raise ValidationError(
            f"{field} must be an absolute path or a URI (file:, hdfs://, s3a://...), "
            f"got the relative path {excerpt(value)}")
    return value


def revision(value: object) -> int | None:
    """An optional revision number: a non-negative 64-bit integer."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(
            f"revision must be an integer or None, got {type(value).__name__} {value!r}"
        )
    if not 0 <= value <= MAX_INT64:
        raise ValidationError(f"revision must be from 0 to {MAX_INT64}, got {value}")
    return value


def seconds(value: object, *, field: str) -> float:
    """A duration from a caller (a timeout, an interval): a finite number of
    seconds from 0 to :data:`MAX_SECONDS`. NaN or infinity would make a
    deadline that never comes (or an error deep inside a timer)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError(
            f"{field} must be a number of seconds, got {type(value).__name__} {value!r:.80}")
    # A huge int is compared as an int: converting it to a float would overflow.
    if (isinstance(value, float) and not math.isfinite(value)) or not 0 <= value <= MAX_SECONDS:
        raise ValidationError(
            f"{field} must be a finite number of seconds from 0 to {MAX_SECONDS}, "
            f"got {value!r:.80}")
    return float(value)


def epoch_seconds(value: object, *, field: str) -> float:
    """A point in time as epoch seconds (``since``): a finite number, 0 or more."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError(
            f"{field} must be epoch seconds (a number), got {type(value).__name__} "
            f"{value!r:.80}")
    if (isinstance(value, float) and not math.isfinite(value)) or value < 0:
        raise ValidationError(f"{field} must be finite epoch seconds, 0 or more, "
                              f"got {value!r:.80}")
    return float(value)


def callable_or_none(value: object, *, field: str) -> None:
    """A callback argument: refused now, not as a traceback per message later."""
    if value is not None and not callable(value):
        raise ValidationError(f"{field} must be callable or None, got "
                              f"{type(value).__name__} {value!r:.80}")


def flag(value: object, *, field: str) -> bool:
    """A yes/no argument: ``True`` or ``False`` only (any non-empty string is truthy)."""
    if not isinstance(value, bool):
        raise ValidationError(f"{field} must be True or False, got {type(value).__name__} "
                              f"{value!r:.80}")
    return value
