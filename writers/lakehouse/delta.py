"""Delta versions as :class:`~.commits.Commit` s: the ``_delta_log`` JSON commits, read
with pyarrow's filesystems (local, ``s3://``/``s3a://``, ``gs://``, ``abfs://``), and
the table's partitions at a version through delta-rs (extra ``delta``).

Each version's ``add``/``remove`` actions with ``dataChange=true`` are the data
it changed; ``OPTIMIZE`` (``dataChange=false`` only) is a rewrite; the
``DELETE`` operation, or removes without adds, is a delete. The set-done
property is a ``commitInfo`` key (delta-rs ``CommitProperties(custom_metadata=
{"partition-notify.mark-set-done": spec})``) or ``commitInfo.userMetadata``
(Spark's ``.option("userMetadata", "partition-notify.mark-set-done=<spec>")``).
A checkpoint changes nothing: the JSON commits stay until log cleanup, and a
version cleaned before it was read is a gap.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from partition_notify.writers.lakehouse.commits import (
    SET_DONE_PROPERTY,
    Commit,
    Gap,
    Spec,
    canonical,
    named,
    unique,
    user_metadata_properties,
)
from partition_notify.writers.lakehouse.schema import BEFORE_FIRST

from partition_notify.core.errors import ConfigurationError

if TYPE_CHECKING:
    from pyarrow.fs import FileSystem

_COMMIT = re.compile(r"^(\d{20})\.json$")
#: Hadoop's scheme for S3 is pyarrow's s3.
_SCHEMES = {"s3a": "s3", "s3n": "s3"}


def filesystem_of(location: str) -> tuple[FileSystem, str]:
    """The filesystem holding ``location`` and the path in it: one filesystem object per
    scheme and bucket (an object store's client and connection pool), however many
    tables live in that bucket."""
    scheme, sep, rest = location.partition("://")
    if not sep or scheme == "file":
        return _filesystem("", "")[0], rest if sep else location
    authority, _, path = rest.partition("/")
    filesystem, base = _filesystem(_SCHEMES.get(scheme, scheme), authority)
    return filesystem, f"{base.rstrip('/')}/{path}".rstrip("/")


@functools.lru_cache(maxsize=64)
def _filesystem(scheme: str, authority: str) -> tuple[FileSystem, str]:
    """The filesystem of ``scheme://authority`` and the bucket's path in it (pyarrow's
    own parse: "bucket" for S3/GCS)."""
    try:
        from pyarrow import fs
    except ImportError:
        raise ConfigurationError("following Delta tables needs deltalake and pyarrow: "
                                 "pip install 'partition-notify[delta]'") from None
    if not scheme:
        return fs.LocalFileSystem(), ""
    filesystem, base = fs.FileSystem.from_uri(f"{scheme}://{authority}")
    return filesystem, base


def _uri(location: str) -> str:
    scheme, sep, rest = location.partition("://")
    return f"{_SCHEMES.get(scheme, scheme)}://{rest}" if sep else location


class DeltaReader:
    """The versions of one Delta table; one log listing per poll."""

    def __init__(self, location: str, keys: Sequence[str]) -> None:
        self.location = location
        self.keys = list(keys)
        self._fs, self._root = filesystem_of(location)
        self._log = f"{self._root}/_delta_log"
        self._versions = self._list()

    def _list(self) -> list[int]:
        from pyarrow import fs

        info = self._fs.get_file_info(self._log)
        if info.type != fs.FileType.Directory:
            return []
        found = self._fs.get_file_info(fs.FileSelector(self._log, allow_not_found=True))
        return sorted(int(m.group(1)) for f in found if (m := _COMMIT.match(f.base_name)))

    def head(self) -> int | None:
        return self._versions[-1] if self._versions else None

    def commits_after(self, cursor: int) -> Iterator[Commit]:
        """Versions after ``cursor``, oldest first; :class:`Gap` when one was cleaned."""
        todo = [v for v in self._versions if v > cursor]
        if not todo:
            return
        head = todo[-1]
        have = set(todo)
        missing = [v for v in range(cursor + 1, head + 1) if v not in have]
        if missing:
            raise Gap(f"{self.location}: log version(s) {missing[0]}..{missing[-1]} were "
                      "cleaned before they were read", head)
        live = self._partitions(cursor) if cursor != BEFORE_FIRST else set()
        for version in todo:
            commit = self._commit(version, live)
            yield commit
            live |= {canonical(p, self.keys) for p in commit.added}
            if commit.removed:
                live = self._partitions(version)

    def _partitions(self, version: int) -> set[tuple[str, ...]]:
        from deltalake import DeltaTable

        try:
            table = DeltaTable(_uri(self.location), version=version)
        except Exception as exc:  # delta-rs raises its own (and OSError) kinds
            raise Gap(f"{self.location}: version {version} cannot be loaded ({exc})",
                      self._versions[-1]) from exc
        return {canonical(named(p, self.keys, what=f"{self.location} v{version}"), self.keys)
                for p in table.partitions()}

    def _commit(self, version: int, live: set[tuple[str, ...]]) -> Commit:
        path = f"{self._log}/{version:020d}.json"
        try:
            with self._fs.open_input_stream(path) as f:
                text = f.read().decode()
        except FileNotFoundError as exc:
            raise Gap(f"{self.location}: log version {version} was cleaned before it was read",
                      self._versions[-1]) from exc
        actions = [json.loads(line) for line in text.splitlines() if line.strip()]
        info: dict[str, Any] = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
        props = user_metadata_properties(info.get("userMetadata"))
        if SET_DONE_PROPERTY in info:
            props[SET_DONE_PROPERTY] = str(info[SET_DONE_PROPERTY])
        added, removed, files = self._files(actions, version)
        op = str(info.get("operation", "WRITE"))
        return Commit(version, op, unique(added, self.keys), unique(removed, self.keys),
                      {canonical(p, self.keys) for p in added} & live,
                      rewrite_only=files and not added and not removed,
                      delete_only=op == "DELETE" or (bool(removed) and not added),
                      properties=props)

    def _files(self, actions: list[dict[str, Any]], version: int,
               ) -> tuple[list[Spec], list[Spec], bool]:
        added: list[Spec] = []
        removed: list[Spec] = []
        files = False
        what = f"{self.location} v{version}"
        for action in actions:
            for kind, out in (("add", added), ("remove", removed)):
                body = action.get(kind)
                if body is None:
                    continue
                files = True
                if body.get("dataChange", True):
                    values = {k: (v if v != "" else None)
                              for k, v in (body.get("partitionValues") or {}).items()}
                    out.append(named(values, self.keys, what=what))
        return added, removed, files
