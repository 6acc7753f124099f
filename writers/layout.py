"""Where a write keeps its files, and the commit manifest that makes it recoverable.

A write lives in ``<table>/_pn_staging/<write_id>/`` until it is complete::

    _pn_commit.lock    lease: created first, touched while the writer lives
    data/              Spark's output (k1=v1/k2=v2/part-*), invisible to readers
    _pn_commit.json    the manifest: written once Spark's job committed
    _pn_replaced       overwrite only: the old partitions have been moved aside
    _pn_adopted.<rev>  recovery moved the write to revision <rev> (its own had expired)

An overwrite moves the data files of each partition it replaces into
``<partition>/_pn_retired/<write_id>/`` (transactional writes: older
snapshots still read those files, until ``serve`` deletes them
PN_RETIRED_FILE_RETENTION_SECONDS after the overwrite committed:
revisions/vacuum.py) or deletes the partitions (writes without a revision).

Readers (Spark, Hive) skip names starting with ``_``, and the directory is on
the table's own filesystem, so moving data into place is a rename.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from partition_notify.revisions.vacuum import RETIRED_DIR

from partition_notify.contract import spec
from partition_notify.core.errors import InvalidSpecError

STAGING = "_pn_staging"
DATA = "data"
MANIFEST = "_pn_commit.json"
LOCK = "_pn_commit.lock"
REPLACED = "_pn_replaced"
ADOPTED = "_pn_adopted."
#: Where housekeeping expects them, and deletes only there.
RETIRED = RETIRED_DIR
MANIFEST_VERSION = 1

Mode = Literal["append", "overwrite"]
MODES: tuple[Mode, ...] = ("append", "overwrite")


def new_write_id() -> str:
    """Sortable by start time, unique across drivers."""
    return f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{secrets.token_hex(6)}"


def attempt_for(write_id: str) -> int:
    """The job-attempt number the merge uses; distinct writes get distinct numbers."""
    return int(write_id.rsplit("-", 1)[1], 16) % (2**31 - 1) + 1


def staging_dir(location: str, write_id: str) -> str:
    return f"{location}/{STAGING}/{write_id}"


def partition_pattern(keys: Sequence[str]) -> str:
    """Glob matching the partition directories of a Hive-style layout."""
    return "/".join(f"{k}=*" for k in keys)


def parse_partition_path(rel: str, keys: Sequence[str]) -> dict[str, str]:
    """``k1=v1/k2=v%2F2`` (as Spark wrote it) -> ``{"k1": "v1", "k2": "v/2"}`` in key order.

    Spark escapes path values exactly as Hive does and writes a null (or
    empty string) as ``__HIVE_DEFAULT_PARTITION__``, which stays that literal.
    """
    parts = rel.split("/")
    if len(parts) != len(keys):
        raise InvalidSpecError(f"partition directory {rel!r} does not have the keys {list(keys)}")
    values: dict[str, str] = {}
    for part, key in zip(parts, keys, strict=True):
        name, eq, raw = part.partition("=")
        if not eq or name != key:
            raise InvalidSpecError(
                f"partition directory {rel!r}: expected {key}=<value>, got {part!r}"
            )
        values[key] = spec.unescape_value(raw, key=key)
    spec.normalize(values)
    return values


@dataclass
class Manifest:
    """What a committed write must still do; enough to finish it from another process."""

    write_id: str
    db: str
    table: str
    location: str
    keys: list[str]
    mode: Mode
    partitions: list[str]
    set_done: str | None
    revision: int | None
    store_mark: int
    catalog_table: str | None
    #: The writer began (and so settles) the revision's transaction; False when
    #: the caller passed ``revision=`` and commits its own transaction.
    owns_revision: bool = False
    created_at: float = field(default_factory=time.time)
    version: int = MANIFEST_VERSION

    @property
    def attempt(self) -> int:
        return attempt_for(self.write_id)

    @property
    def revision_table(self) -> str:
        """The table name of the write's revisions (``db.table``)."""
        return f"{self.db}.{self.table}"

    @property
    def retired(self) -> str:
        """Where an overwrite moves the files it replaces, relative to their partition."""
        return f"{RETIRED}/{self.write_id}"

    @property
    def staging(self) -> str:
        return staging_dir(self.location, self.write_id)

    def specs(self) -> list[dict[str, str]]:
        return [parse_partition_path(p, self.keys) for p in self.partitions]

    def locations(self) -> list[str]:
        return [f"{self.location}/{p}" for p in self.partitions]

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> Manifest:
        obj: dict[str, Any] = json.loads(raw.decode())
        if obj.get("version") != MANIFEST_VERSION:
            raise ValueError(f"manifest version {obj.get('version')!r}, expected "
                             f"{MANIFEST_VERSION}")
        return cls(**obj)
