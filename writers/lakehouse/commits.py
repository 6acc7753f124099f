"""What one table commit announces, whatever the format wrote it.

A reader (:mod:`.iceberg`, :mod:`.delta`) turns an Iceberg snapshot or a
Delta version into a :class:`Commit`: the partitions that received data
files, those that lost some, and which partitions held data before. From
that, :func:`plan` decides:

* a partition that received data and held none before: announced (new);
* one that received data and lost some in the same commit: announced again
  at the commit's revision (overwritten or replaced);
* data appended into a partition that held data: nothing;
* a commit that only rewrites files (compaction, OPTIMIZE,
  ``rewrite_data_files``: Iceberg ``replace``, Delta ``dataChange=false``) or
  only deletes (Iceberg ``delete``, Delta ``DELETE``): nothing, and its
  set-done property is ignored (a pyiceberg overwrite is a delete snapshot
  followed by an append snapshot carrying the same properties: the set-done
  goes out once, after the append's add-partitions).

Deletes get no event of their own: a consumer cannot un-run a job, and the
next overwrite of a partition is announced.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from partition_notify.core.errors import InvalidSpecError, PartitionNotifyError

#: The commit property that marks a set done: an Iceberg snapshot summary property,
#: a Delta ``commitInfo`` key or ``userMetadata`` (``KEY=<spec>`` or a JSON object).
SET_DONE_PROPERTY = "partition-notify.mark-set-done"
#: Partition value of a null (Hive's and Spark's own marker for it).
NULL_VALUE = "__HIVE_DEFAULT_PARTITION__"

Spec = dict[str, str]


def canonical(spec: Mapping[str, str], keys: Sequence[str]) -> tuple[str, ...]:
    return tuple(spec[k] for k in keys)


class Gap(Exception):
    """Commits after the cursor can no longer be read; resume at ``resume_at``.

    ``table_uuid``: the table is another one than the cursor's (deleted and created
    again): its identity, recorded with the cursor's move to ``resume_at``."""

    def __init__(self, reason: str, resume_at: int, table_uuid: str | None = None) -> None:
        super().__init__(reason)
        self.resume_at = resume_at
        self.table_uuid = table_uuid


class Unannounceable(Exception):
    """Commit ``revision`` cannot be announced (``error`` says why): the follower stops
    before it, records the stop, and ``lakehouse skip`` is the way past it."""

    def __init__(self, revision: int, error: PartitionNotifyError) -> None:
        super().__init__(str(error))
        self.revision = revision
        self.error = error


class Unloadable(Exception):
    """The table's state at ``cursor`` cannot be loaded (a corrupt or unreadable log
    version, checkpoint or metadata file): the follower stops at the cursor, records
    why, and goes on by itself once the table loads again. ``resume_at``: the commit a
    ``lakehouse skip`` moves the cursor to (the table's head when the failure was
    seen); None when nothing of the table can be read (nothing to skip to)."""

    def __init__(self, reason: str, cursor: int, resume_at: int | None) -> None:
        super().__init__(reason)
        self.cursor = cursor
        self.resume_at = resume_at


@dataclass(frozen=True)
class Commit:
    """One commit of a followed table, in the table's registered key order."""

    revision: int
    operation: str
    #: Partitions that received data files (dataChange), in commit order, no repeats.
    added: list[Spec]
    #: Partitions that lost data files (dataChange).
    removed: list[Spec]
    #: Which of ``added`` held data before this commit.
    existed: set[tuple[str, ...]]
    rewrite_only: bool = False
    delete_only: bool = False
    properties: dict[str, str] = field(default_factory=dict)
    #: The table's identity (Delta ``metaData.id``, Iceberg ``table-uuid``), when known.
    table_uuid: str | None = None


@dataclass(frozen=True)
class Plan:
    revision: int
    new: list[Spec]
    replaced: list[Spec]
    set_done: str | None

    @property
    def partitions(self) -> list[Spec]:
        return [*self.new, *self.replaced]


def plan(commit: Commit, keys: Sequence[str]) -> Plan:
    """What ``commit`` announces (module docstring)."""
    if commit.delete_only or commit.rewrite_only:
        # A compaction changes no data: a set-done property it carries was copied along
        # (Spark's session-wide userMetadata, a job passing its properties to OPTIMIZE)
        # and was sent with the write that said it.
        return Plan(commit.revision, [], [], None)
    set_done = commit.properties.get(SET_DONE_PROPERTY)
    removed = {canonical(p, keys) for p in commit.removed}
    new: list[Spec] = []
    replaced: list[Spec] = []
    for p in commit.added:
        key = canonical(p, keys)
        if key not in commit.existed:
            new.append(p)
        elif key in removed:
            replaced.append(p)
    return Plan(commit.revision, new, replaced, set_done)


def named(values: Mapping[str, str | None], keys: Sequence[str], *, what: str) -> Spec:
    """A partition in the table's key order; the names must be the registered keys."""
    if set(values) != set(keys):
        raise InvalidSpecError(
            f"{what}: partition fields {sorted(values)} are not the registered keys "
            f"{list(keys)}: unregister and register it with --keys "
            f"{','.join(sorted(values))} to follow its partitioning now")
    return {k: NULL_VALUE if values[k] is None else str(values[k]) for k in keys}


def unique(specs: Iterable[Spec], keys: Sequence[str]) -> list[Spec]:
    seen: set[tuple[str, ...]] = set()
    out: list[Spec] = []
    for s in specs:
        key = canonical(s, keys)
        if key not in seen:
            seen.add(key)
            out.append(s)
    return out


def user_metadata_properties(raw: object) -> dict[str, str]:
    """Delta ``commitInfo.userMetadata``: ``KEY=<spec>`` or a JSON object of properties."""
    import json

    if not isinstance(raw, str) or not raw.strip():
        return {}
    text = raw.strip()
    if text.startswith("{"):
        try:
            parsed = json.loads(text)
        except ValueError:
            return {}
        return {str(k): str(v) for k, v in parsed.items()} if isinstance(parsed, dict) else {}
    key, sep, value = text.partition("=")
    return {key.strip(): value.strip()} if sep else {}
