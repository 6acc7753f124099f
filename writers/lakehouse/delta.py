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
version cleaned before it was read is a gap. A table that cannot be loaded at the
cursor (a corrupt version or checkpoint) is no gap: it waits for a repair or a skip.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from partition_notify.writers.lakehouse.commits import (
    SET_DONE_PROPERTY,
    Commit,
    Gap,
    Spec,
    Unannounceable,
    Unloadable,
    canonical,
    named,
    user_metadata_properties,
)
from partition_notify.writers.lakehouse.schema import BEFORE_FIRST

from partition_notify.core.errors import ConfigurationError, InvalidSpecError
from partition_notify.core.limits import MAX_INT64

if TYPE_CHECKING:
    from pyarrow import NativeFile
    from pyarrow.fs import FileSystem

_COMMIT = re.compile(r"^(\d{20})\.json$")
#: A checkpoint (Delta protocol): classic, one file or one part of several, or a V2 one
#: named with a UUID, parquet or JSON (its adds in _delta_log/_sidecars/; its metaData,
#: which is all that is read here, in this top-level file).
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(?:\.\d{10}\.\d{10}\.parquet|\.parquet"
                         r"|\.[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}"
                         r"\.(?:parquet|json))$")
#: Files read at most (newest JSON versions, then the checkpoint's parts) to find the
#: table's id without replaying its log: a gap's resume point may be any version.
MAX_ID_FILES = 20
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


def _missing(todo: list[int], cursor: int) -> tuple[int, int] | None:
    """The first and last version missing between ``cursor`` and the newest of ``todo``
    (sorted, distinct, all after ``cursor``); None when none is. Found from the listed
    versions only: one far ahead (10**12) must not be counted up to one by one."""
    head = todo[-1]
    if len(todo) == head - cursor:
        return None
    first = next(cursor + 1 + i for i, v in enumerate(todo) if v != cursor + 1 + i)
    # From the newest down: the first listed version out of step names the last missing
    # one; all in step, the missing ones end just below the oldest listed.
    last = next((head - i for i, v in enumerate(reversed(todo)) if v != head - i),
                head - len(todo))
    return first, last


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
        #: checkpoint file paths, oldest version first
        self._checkpoints: list[tuple[int, str]] = []
        self._versions = self._list()

    def _list(self) -> list[int]:
        from pyarrow import fs

        info = self._fs.get_file_info(self._log)
        if info.type != fs.FileType.Directory:
            return []
        found = self._fs.get_file_info(fs.FileSelector(self._log, allow_not_found=True))
        self._checkpoints = sorted((int(m.group(1)), f.path) for f in found
                                   if (m := _CHECKPOINT.match(f.base_name)))
        # A Delta version is a long: a 20-digit name beyond it is no commit, whoever
        # put it there (it would also make every version up to it look cleaned).
        return sorted(v for f in found if (m := _COMMIT.match(f.base_name))
                      and (v := int(m.group(1))) <= MAX_INT64)

    def head(self) -> int | None:
        return self._versions[-1] if self._versions else None

    def check_keys(self) -> None:
        """At registration: the keys must be the table's partition columns (any order),
        or the follower stops at the table's next commit. No version yet: no columns."""
        if not self._versions:
            return
        from deltalake import DeltaTable

        columns = DeltaTable(_uri(self.location)).metadata().partition_columns
        if set(columns) != set(self.keys):
            raise InvalidSpecError(
                f"{self.location}: partition columns {sorted(columns)} are not the keys "
                f"{self.keys}: register the table with its partition columns")

    def table_uuid(self) -> str | None:
        """The table's ``metaData.id`` at its newest version; None while it has none."""
        return self.uuid_at(self._versions[-1]) if self._versions else None

    def uuid_at(self, version: int) -> str | None:
        """The table's ``metaData.id`` at ``version``; None when it cannot be loaded."""
        from deltalake import DeltaTable

        try:
            return str(DeltaTable(_uri(self.location), version=version).metadata().id)
        except Exception:  # delta-rs raises its own (and OSError) kinds: nothing to compare
            return None

    def commits_after(self, cursor: int, uuid: str | None = None) -> Iterator[Commit]:
        """Versions after ``cursor``, oldest first; :class:`Gap` when one was cleaned, or
        when the table at ``cursor`` is not the one of id ``uuid`` handled there."""
        todo = [v for v in self._versions if v > cursor]
        if not self._versions and cursor != BEFORE_FIRST:  # it was there: deleted
            raise Unloadable(f"{self.location}: the table no longer exists (no _delta_log "
                             "version there); followed again when one is written there "
                             "(a gap: another table)", cursor, None)
        if not todo:
            if self._versions and self._versions[-1] < cursor:
                # Log cleanup keeps the newest version: a log ending before the cursor
                # is a new table at this location (the directory deleted and written
                # again). Its versions up to the newest were never announced: say so.
                raise Gap(f"{self.location}: the log ends at version {self._versions[-1]}, "
                          f"before version {cursor} handled last: the table was deleted "
                          "and created again", self._versions[-1], self.newest_id())
            return
        head = todo[-1]
        missing = _missing(todo, cursor)
        if missing is not None:
            # With the id at the resume point: a table created again inside the gap is
            # reported by this gap, not by a second one at the next read.
            raise Gap(f"{self.location}: log version(s) {missing[0]}..{missing[1]} were "
                      "cleaned before they were read", head, self.newest_id())
        live: set[tuple[str, ...]] = set()
        known = None
        if cursor != BEFORE_FIRST:
            live, known = self._state(cursor)
            if uuid is not None and known != uuid:
                # Its new log passed the cursor: only the id tells the tables apart.
                raise Gap(f"{self.location}: the table at version {cursor} has id {known}, "
                          f"not {uuid} as when that version was handled: it was deleted "
                          "and created again; following the new one from its first "
                          "version", BEFORE_FIRST, known)
        for version in todo:
            try:
                commit = self._commit(version, live, known)
            except InvalidSpecError as exc:
                raise Unannounceable(version, exc) from exc
            known = commit.table_uuid
            yield commit
            live |= {canonical(p, self.keys) for p in commit.added}
            if commit.removed:
                live = self._state(version)[0]

    def newest_id(self) -> str | None:
        """The ``metaData.id`` of the newest version, found without replaying the log
        (delta-rs loading a version far past its checkpoint walks every number up to
        it): the newest ``metaData`` among the newest JSON versions down to the newest
        checkpoint, else that checkpoint's. At most MAX_ID_FILES files; None when not
        found in them, or when they cannot be read (nothing to compare then)."""
        top = self._versions[-1] if self._versions else -1
        floor = max((v for v, _ in self._checkpoints if v <= top), default=BEFORE_FIRST)
        budget = MAX_ID_FILES
        try:
            for version in reversed([v for v in self._versions if v >= floor][-budget:]):
                budget -= 1
                with self._fs.open_input_stream(f"{self._log}/{version:020d}.json") as f:
                    found = _meta_id(_actions(f, f"{self.location} version {version}"))
                if found is not None:
                    return found
            return _checkpoint_id(self._fs, [p for v, p in self._checkpoints
                                             if v == floor][:budget])
        except Exception:  # unreadable, or not Delta: no id rather than a wrong one
            return None

    def _state(self, version: int) -> tuple[set[tuple[str, ...]], str | None]:
        """The table's partitions and id at ``version``.

        Raises :class:`Gap` when its JSON was cleaned (no longer listed), else
        :class:`Unloadable` (a corrupt or unreadable log file or checkpoint: the table
        waits at ``version`` for a repair, not a gap over commits that are there)."""
        from deltalake import DeltaTable

        try:
            table = DeltaTable(_uri(self.location), version=version)
        except Exception as exc:  # delta-rs raises its own (and OSError) kinds
            # delta-rs appends a backtrace: its first line says what broke.
            why = f"{self.location}: version {version} cannot be loaded ({_first(exc)})"
            if version not in self._versions:
                raise Gap(why, self._versions[-1]) from exc
            raise Unloadable(why, version, self._versions[-1]) from exc
        what = f"{self.location} version {version}"
        return ({canonical(named(p, self.keys, what=what), self.keys)
                 for p in table.partitions()}, str(table.metadata().id))

    def _commit(self, version: int, live: set[tuple[str, ...]], known: str | None) -> Commit:
        path = f"{self._log}/{version:020d}.json"
        what = f"{self.location} version {version}"
        try:
            with self._fs.open_input_stream(path) as f:
                info, changes = self._read(_actions(f, what), what)
        except FileNotFoundError as exc:
            raise Gap(f"{self.location}: log version {version} was cleaned before it was read",
                      self._versions[-1]) from exc
        added, removed = list(changes.added.values()), list(changes.removed.values())
        props = user_metadata_properties(info.get("userMetadata"))
        if SET_DONE_PROPERTY in info:
            props[SET_DONE_PROPERTY] = str(info[SET_DONE_PROPERTY])
        op = str(info.get("operation", "WRITE"))[:100]  # only logged, and DELETE compared
        return Commit(version, op, added, removed, set(changes.added) & live,
                      rewrite_only=changes.files and not added and not removed,
                      delete_only=op == "DELETE" or (bool(removed) and not added),
                      properties=props, table_uuid=changes.table_uuid or known)

    def _read(self, actions: Iterator[dict[str, Any]], what: str,
              ) -> tuple[dict[str, Any], _Changes]:
        """The commitInfo and the partitions the data-changing adds and removes name, each
        once (a commit of 100,000 files of one partition holds one)."""
        info: dict[str, Any] = {}
        changes = _Changes()
        for action in actions:
            if "commitInfo" in action and not info:
                info = _object(action["commitInfo"], f"{what}: commitInfo")
            if action.get("metaData") is not None:  # the table's id: at its creation
                meta = _object(action["metaData"], f"{what}: metaData")
                if isinstance(meta.get("id"), str):
                    changes.table_uuid = meta["id"]
            for kind, out in (("add", changes.added), ("remove", changes.removed)):
                if action.get(kind) is None:
                    continue
                body = _object(action[kind], f"{what}: {kind}")
                changes.files = True
                change = body.get("dataChange", True)
                if not isinstance(change, bool):  # "false" is truthy: no guessing
                    raise InvalidSpecError(f"{what}: {kind}.dataChange is a "
                                           f"{type(change).__name__}, not a boolean{_STOP}")
                if change:
                    spec = named(_values(body, f"{what}: {kind}"), self.keys, what=what)
                    out.setdefault(canonical(spec, self.keys), spec)
        return info, changes


def _first(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _meta_id(actions: Iterator[dict[str, Any]]) -> str | None:
    found = None
    for action in actions:
        meta = action.get("metaData")
        if isinstance(meta, dict) and isinstance(meta.get("id"), str):
            found = meta["id"]
    return found


def _checkpoint_id(filesystem: FileSystem, paths: list[str]) -> str | None:
    """The ``metaData.id`` in a checkpoint's files (a parquet one's ``metaData`` column
    only; a V2 checkpoint's JSON top-level file read as a log version is)."""
    import pyarrow.parquet as pq

    for path in paths:
        if path.endswith(".json"):
            # A checkpoint holds one metaData: the first found ends the read (a file
            # without sidecars holds every add of the table after it).
            with filesystem.open_input_stream(path) as f:
                found = next((a["metaData"]["id"] for a in _actions(f, path)
                              if isinstance(a.get("metaData"), dict)
                              and isinstance(a["metaData"].get("id"), str)), None)
            if found is not None:
                return str(found)
            continue
        column = pq.read_table(path, columns=["metaData"], filesystem=filesystem)["metaData"]
        for meta in column.drop_null().to_pylist():  # one row of many holds it
            if meta and isinstance(meta.get("id"), str):
                return str(meta["id"])
    return None


@dataclass
class _Changes:
    added: dict[tuple[str, ...], Spec] = field(default_factory=dict)
    removed: dict[tuple[str, ...], Spec] = field(default_factory=dict)
    #: any add or remove at all (an OPTIMIZE has only dataChange=false ones)
    files: bool = False
    #: ``metaData.id``, when the version carries a metaData action
    table_uuid: str | None = None


#: The end of every refusal of a log entry: the follower stops before that commit and
#: says so at every run (as for a commit the registered keys do not fit).
_STOP = ": not a Delta commit partition-notify can announce; stopped before it"


#: Longest line of a Delta commit read: one action, the add or remove of one file (about
#: a kilobyte; a few with column statistics). A commit is read a line at a time, so its
#: memory is the partitions it names, not its size; a line beyond this stops the table.
MAX_ACTION_BYTES = 16 * 1024 * 1024
_CHUNK_BYTES = 1024 * 1024


def _actions(stream: NativeFile, what: str) -> Iterator[dict[str, Any]]:
    """A log version's actions, one JSON object a line. The log is written by whoever
    can write the table's directory: its shape is checked, not assumed."""
    for line in _lines(stream, what):
        if not line.strip():
            continue
        try:
            parsed = json.loads(line)
        except ValueError as exc:
            raise InvalidSpecError(f"{what}: not JSON ({exc}){_STOP}") from None
        yield _object(parsed, f"{what}: an action")


def _lines(stream: NativeFile, what: str) -> Iterator[bytes]:
    rest = b""
    while chunk := stream.read(_CHUNK_BYTES):
        *lines, rest = (rest + chunk).split(b"\n")
        for line in (*lines, rest):  # rest: a line still growing
            if len(line) > MAX_ACTION_BYTES:
                raise InvalidSpecError(f"{what}: a line longer than {MAX_ACTION_BYTES} "
                                       f"bytes, no Delta action{_STOP}")
        yield from lines
    if rest:
        yield rest


def _object(value: object, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidSpecError(f"{what} is a {type(value).__name__}, not a JSON object{_STOP}")
    return value


def _values(body: dict[str, Any], what: str) -> dict[str, str | None]:
    """An action's ``partitionValues``: Delta writes strings, and a null as null or "".
    Anything else is refused, not turned into a string ("['us']" is no partition)."""
    raw = _object(body.get("partitionValues") or {}, f"{what}.partitionValues")
    for k, v in raw.items():
        if v is not None and not isinstance(v, str):
            raise InvalidSpecError(f"{what}.partitionValues[{str(k)[:100]!r}] is a "
                                   f"{type(v).__name__}, not a string{_STOP}")
    return {k: (v if v != "" else None) for k, v in raw.items()}
