"""A store URL's query parameters: the driver gets them, or they are refused by name.

Left alone, SQLAlchemy's SQLite dialect drops what its driver does not take
(with a Python warning nobody sees), so ``?mode=ro`` opened the file read-write;
and :func:`make_engine`'s connect arguments override the URL's (``timeout``,
``connect_timeout``, ``options``). A parameter that would not take effect is
refused here, before anything is opened, and so is a value libpq checks only
when it connects (:data:`LIBPQ_VALUES`); the error names the URL without its
query, which may hold a password (``?password=``, ``?sslpassword=``).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Mapping

from sqlalchemy.engine import URL

from partition_notify.core.errors import ConfigurationError
from partition_notify.core.limits import excerpt

#: The pysqlite driver's parameters the store leaves to the URL.
SQLITE_DRIVER = ("cached_statements", "uri")
#: SQLite's own URI parameters (https://sqlite.org/uri.html), which it reads only
#: from a ``file:`` URI opened with ``uri=true``; it ignores names it does not know.
SQLITE_URI = ("cache", "immutable", "mode", "modeof", "nolock", "psow", "vfs")
#: Driver parameters the store sets itself: a URL's value would be overridden.
SQLITE_OURS = {
    "timeout": "the busy timeout is 3 x PN_CONNECT_TIMEOUT_SECONDS",
    "check_same_thread": "the store shares connections between its threads",
    "isolation_level": "the store issues BEGIN itself (IMMEDIATE for writes)",
    "detect_types": "the store's column types convert values themselves",
}
POSTGRES_OURS = {"connect_timeout": "set PN_CONNECT_TIMEOUT_SECONDS instead"}
#: libpq parameters whose values libpq checks only when it connects, as (least,
#: most) integer or the accepted words. libpq said so at the first connection, in
#: its own words ('invalid integer value "abc" for connection option ...'), or the
#: kernel did ("setsockopt(TCP_KEEPIDLE) failed: Invalid argument": Linux takes
#: keepalive idle and interval of 1-32767 s, a count of 1-127).
LIBPQ_VALUES: dict[str, tuple[int, int] | tuple[str, ...]] = {
    "port": (1, 65535),
    "keepalives": ("0", "1"),
    "keepalives_idle": (1, 32767),
    "keepalives_interval": (1, 32767),
    "keepalives_count": (1, 127),
    "tcp_user_timeout": (0, 2**31 - 1),
    "sslmode": ("disable", "allow", "prefer", "require", "verify-ca", "verify-full"),
    "gssencmode": ("disable", "prefer", "require"),
    "channel_binding": ("disable", "prefer", "require"),
    "target_session_attrs": ("any", "read-write", "read-only", "primary", "standby",
                             "prefer-standby"),
    "load_balance_hosts": ("disable", "random"),
    "sslnegotiation": ("postgres", "direct"),
    "sslcertmode": ("disable", "allow", "require"),
    "ssl_min_protocol_version": ("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"),
    "ssl_max_protocol_version": ("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"),
}
#: An integer as libpq reads one: blanks around, an optional sign, digits.
_LIBPQ_INT = re.compile(r"\s*[+-]?[0-9]+\s*")
LIBPQ_DOCS = "https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-PARAMKEYWORDS"


def check_sqlite_query(url: URL) -> None:
    """Refuse a query parameter of a SQLite URL that would not take effect."""
    query = url.query
    uri = str(query.get("uri", "")).lower() in ("true", "1", "yes", "on")
    if uri and not str(url.database or "").startswith("file:"):
        raise _refused(url, "uri", "uri=true needs a file: path, e.g. "
                       "sqlite:///file:/srv/pn/store.db?mode=ro&uri=true")
    accepted = SQLITE_DRIVER + (SQLITE_URI if uri else ())
    for name in query:
        if name in SQLITE_OURS:
            raise _refused(url, name, f"the store sets it ({SQLITE_OURS[name]})")
        if name in SQLITE_URI and not uri:
            raise _refused(url, name, "a SQLite URI parameter, read only from a file: URI with "
                           f"uri=true, e.g. sqlite:///file:/srv/pn/store.db?{name}=...&uri=true")
        if name not in accepted:
            raise _unknown(url, name, accepted, "accepted: " + ", ".join(SQLITE_DRIVER)
                           + "; with uri=true and a file: path also " + ", ".join(SQLITE_URI))


def check_postgres_query(url: URL, keywords: Collection[str]) -> None:
    """Refuse a query parameter of a PostgreSQL URL that libpq does not know
    (``keywords``: the installed libpq's) or the store sets itself."""
    for name in url.query:
        if name in POSTGRES_OURS:
            raise _refused(url, name, f"the store sets it ({POSTGRES_OURS[name]})")
        if name not in keywords:
            usable = sorted(set(keywords) - set(POSTGRES_OURS))
            raise _unknown(url, name, usable, f"accepted: libpq's parameters ({LIBPQ_DOCS}): "
                           + ", ".join(usable))
        for value in _values(url.query[name]):
            if (expected := _libpq_value_problem(name, value)):
                raise _refused(url, name, f"value {excerpt(value)} is not {expected}")


def _values(given: str | tuple[str, ...]) -> tuple[str, ...]:
    return (given,) if isinstance(given, str) else given


def _libpq_value_problem(name: str, value: str) -> str:
    """What ``name`` expects if ``value`` is not it ("" if it is, or not checked)."""
    accepted = LIBPQ_VALUES.get(name)
    if accepted is None:
        return ""
    if isinstance(accepted[0], str):
        words = [str(word) for word in accepted]
        return "" if value in words else (
            "one of " + ", ".join(words) if len(words) > 2 else " or ".join(words))
    least, most = int(accepted[0]), int(accepted[1])
    if _LIBPQ_INT.fullmatch(value) and least <= int(value) <= most:
        return ""
    return f"an integer from {least} to {most}"


def libpq_keywords() -> list[str]:
    """The connection parameters the installed libpq knows (psycopg's ``pq``)."""
    from psycopg import pq  # the [postgres] extra; make_engine names it if missing

    return [option.keyword.decode() for option in pq.Conninfo.get_defaults()]


def merged_options(query: Mapping[str, str | tuple[str, ...]], ours: str) -> str:
    """libpq ``options``: the store's, then the URL's (the later ``-c`` wins)."""
    given = query.get("options", ())
    return " ".join([ours, *([given] if isinstance(given, str) else given)])


def _unknown(url: URL, name: str, accepted: Collection[str], listed: str) -> ConfigurationError:
    close = difflib.get_close_matches(name, list(accepted), n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    return _refused(url, name, f"not understood; {hint}{listed}")


def _refused(url: URL, name: str, why: str) -> ConfigurationError:
    shown = url.set(query={}).render_as_string(hide_password=True)
    return ConfigurationError(f"store URL {shown!r}: query parameter {name!r} is refused: {why}")
