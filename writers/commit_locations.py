"""Which registered table a Spark job wrote: location spellings made comparable.

Spark reports fully qualified paths (``hdfs://nn:8020/warehouse/t``,
``file:/lake/t``); people register what they type (``/warehouse/t``,
``hdfs://nn/warehouse/t``). Both sides go through :func:`normalise_location`:
a scheme-less path is taken against the default filesystem
(``PN_DEFAULT_FS``, Hadoop's ``fs.defaultFS``; ``file:`` when unset), a
scheme's default port is made explicit (``hdfs`` 8020), host names are
lower-cased and ``s3a:``/``s3n:`` are ``s3:``.
"""

from __future__ import annotations

import difflib
import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

from partition_notify.store import TableInfo
from partition_notify.writers.layout import STAGING

from partition_notify.core.errors import ConfigurationError

log = logging.getLogger(__name__)

#: Ports Hadoop filesystems use when a URI names none.
DEFAULT_PORTS = {"hdfs": 8020, "webhdfs": 9870, "swebhdfs": 9871}
#: At most this many "already warned" unmatched locations are remembered.
MAX_UNMATCHED_REMEMBERED = 1024
#: Registered locations named in an "ignored" warning.
CLOSEST = 3


def normalise_location(location: str, default_fs: str | None = None) -> str:
    """One spelling per directory: ``/x``, ``file:///x``, ``file:/x/`` -> ``file:/x``;
    ``hdfs://NN/x`` -> ``hdfs://nn:8020/x``; ``/x`` with default FS ``hdfs://nn`` ->
    ``hdfs://nn:8020/x``."""
    loc = location.strip()
    if loc.startswith("/"):
        fs = (default_fs or "file:").strip().rstrip("/")
        loc = fs + loc
    scheme, sep, rest = loc.partition(":")
    if not sep:
        return loc.rstrip("/")
    scheme = scheme.lower()
    if scheme == "file":
        return "file:" + ("/" + rest.lstrip("/")).rstrip("/") if rest.strip("/") else "file:/"
    if scheme in ("s3a", "s3n"):
        scheme = "s3"
    if rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        authority = _authority(scheme, authority)
        rest = f"//{authority}/{path}" if slash else f"//{authority}"
    elif default_fs and default_fs.lower().startswith(scheme + "://"):
        # hdfs:/x: the default filesystem's authority
        return normalise_location(default_fs.rstrip("/") + "/" + rest.lstrip("/"))
    rest = rest.rstrip("/") or "/"
    return f"{scheme}:{rest}"


def _authority(scheme: str, authority: str) -> str:
    userinfo, at, hostport = authority.rpartition("@")
    host, colon, port = hostport.rpartition(":") if hostport.count(":") == 1 else (
        hostport, "", "")
    if not colon and scheme in DEFAULT_PORTS and host:
        port, colon = str(DEFAULT_PORTS[scheme]), ":"
    return f"{userinfo}{at}{host.lower()}{colon}{port}"


def within(out: str, loc: str) -> str | None:
    """``out`` relative to ``loc`` (both normalised) when it is inside it, else None."""
    if out == loc:
        return ""
    base = loc.rstrip("/") + "/"
    return out[len(base):] if out.startswith(base) else None


def hidden(rel: str) -> bool:
    """A directory Spark and Hive readers skip (``_x``, ``.x``) on the way down."""
    return any(seg[:1] in ("_", ".") for seg in rel.split("/") if seg)


def is_staging(rel: str) -> bool:
    """A NotifyingWriter staging write (``<table>/_pn_staging/...``): it announces itself."""
    return rel.split("/", 1)[0] == STAGING


def resolve_table(
    tables: Sequence[TableInfo], table: str | None, output_path: str, default_fs: str | None
) -> tuple[TableInfo | None, str]:
    """The registered table a job wrote, by catalog name, else by longest location prefix;
    and the job's output path relative to it (``""`` at its root)."""
    out = normalise_location(output_path, default_fs)
    if table:
        db, _, name = table.lower().rpartition(".")
        for t in tables:
            if t.db == db and t.name == name:
                rel = within(out, normalise_location(t.location, default_fs)) \
                    if t.location else None
                return t, rel or ""
    best: tuple[TableInfo | None, str, int] = (None, "", -1)
    for t in tables:
        if not t.location:
            continue
        loc = normalise_location(t.location, default_fs)
        rel = within(out, loc)
        if rel is None or hidden(rel):
            continue  # e.g. NotifyingWriter's _pn_staging/: readers skip it, so do we
        if len(loc) > best[2]:
            best = (t, rel, len(loc))
    return best[0], best[1]


def staging_table(
    tables: Sequence[TableInfo], output_path: str, default_fs: str | None
) -> TableInfo | None:
    """The table whose NotifyingWriter staged this write, if it is one."""
    out = normalise_location(output_path, default_fs)
    for t in tables:
        rel = within(out, normalise_location(t.location, default_fs)) if t.location else None
        if rel and is_staging(rel):
            return t
    return None


def closest(tables: Sequence[TableInfo], output_path: str, default_fs: str | None) -> list[str]:
    """The registered locations most like ``output_path`` (for the "ignored" warning)."""
    out = normalise_location(output_path, default_fs)
    locs = {normalise_location(t.location, default_fs): t.location for t in tables if t.location}
    return [locs[c] for c in difflib.get_close_matches(out, list(locs), CLOSEST, 0.3)]


def never_matches(location: str, default_fs: str | None) -> str | None:
    """Why Spark's reports will never match ``location``, or None if they can."""
    loc = location.strip()
    if loc != location:
        return "it has leading or trailing white space"
    if not loc.startswith("/") and ":" not in loc:
        return "it is a relative path; Spark reports absolute, qualified paths"
    if "?" in loc or "#" in loc:
        return "it has a query or fragment; Spark's paths have none"
    return None


def may_not_match(location: str, default_fs: str | None) -> str | None:
    """Why Spark's reports match ``location`` only on a condition, or None.

    A scheme-less path is on the local filesystem here; a local Spark reports
    exactly that, a cluster's Spark (fs.defaultFS hdfs://...) does not.
    """
    if location.startswith("/") and not default_fs:
        return (f"it has no scheme and PN_DEFAULT_FS is unset, so it is taken as file:{location}: "
                "it matches only if Spark's fs.defaultFS is the local filesystem, "
                "else set PN_DEFAULT_FS")
    return None


class SeenOnce:
    """Keys already reported, bounded: the oldest is forgotten past ``limit``."""

    def __init__(self, limit: int = MAX_UNMATCHED_REMEMBERED) -> None:
        self.limit = limit
        self._keys: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def first_time(self, key: str) -> bool:
        with self._lock:
            if key in self._keys:
                self._keys.move_to_end(key)
                return False
            self._keys[key] = None
            while len(self._keys) > self.limit:
                self._keys.popitem(last=False)
            return True

    def __len__(self) -> int:
        return len(self._keys)


def check_spool_dirs(entries: Sequence[str]) -> None:
    """``PN_SPARK_SPOOL_DIRS`` at startup (the settings already refused relative and
    non-local entries). One that exists but is no directory can never hold a manifest:
    refused. A missing one is a WARNING, neither refused nor created: the Spark jar
    creates it on its first spooled commit, and creating it here could hide a missing
    mount (manifests written there would never reach us)."""
    for entry in (e.strip() for e in entries if e.strip()):
        path = Path(normalise_location(entry)[len("file:"):])
        if path.exists() and not path.is_dir():
            raise ConfigurationError(f"invalid settings: PN_SPARK_SPOOL_DIRS: {str(path)!r} "
                                     "is not a directory; expected a directory Spark spools "
                                     "commit manifests into")
        if not path.exists():
            log.warning("PN_SPARK_SPOOL_DIRS: %s does not exist (yet): nothing is picked up "
                        "from it until the Spark jar creates it on its first spooled commit",
                        path, extra={"pn_event": "spark_spool.missing_dir"})
