"""A store URL's query parameters: the driver gets them, or they are refused by name.

Left alone, SQLAlchemy's SQLite dialect drops what its driver does not take
(with a Python warning nobody sees), so ``?mode=ro`` opened the file read-write;
and :func:`make_engine`'s connect arguments override the URL's (``timeout``,
``connect_timeout``, ``options``). A parameter that would not take effect is
refused here, before anything is opened; the error names the URL without its
query, which may hold a password (``?password=``, ``?sslpassword=``).
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping

from sqlalchemy.engine import URL

from partition_notify.core.errors import ConfigurationError

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
