"""The partitions a Spark job's static overwrite removed: deleted, not written again.

In static mode, Spark deletes the overwrite's static prefix (the whole
output path when the statement names no partition value) and each matching
custom location before it writes (``deleteWithJob``, recorded by the JVM as
the manifest's ``deleted``). Every announced partition in there that the job
did not write again is gone: it is dropped (``DROP_PARTITION``, reason
``overwrite``) in the transaction that announces the job's writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from partition_notify.publisher.drops import Dropped
from partition_notify.store import Store, TableInfo
from partition_notify.writers.commit_locations import normalise_location, within
from partition_notify.writers.layout import parse_partition_path

from partition_notify.contract import spec
from partition_notify.core.errors import InvalidManifestError, InvalidSpecError


class Job(Protocol):
    """What of a commit manifest says what it removed (``CommitManifest``)."""

    @property
    def job_id(self) -> str: ...
    @property
    def deleted(self) -> list[str]: ...
    @property
    def dropped(self) -> list[dict[str, str]]: ...


def dropped_partitions(
    store: Store, info: TableInfo, job: Job, written: Sequence[dict[str, str]],
    default_fs: str | None,
) -> list[Dropped]:
    """Each partition of ``info`` the job removed: deleted by a static overwrite and not
    written again (reason ``overwrite``), or matching a spec an ``ALTER TABLE ... DROP
    PARTITION`` dropped (``dropped``; reason ``drop``)."""
    if job.dropped:
        return _by_spec(store, info, job)
    deleted = job.deleted
    if not deleted:
        return []
    table_loc = normalise_location(info.location, default_fs) if info.location else None
    dirs = [normalise_location(d, default_fs) for d in deleted]
    if table_loc is not None:
        _none_above(job, info, table_loc, dirs)
    prefixes = [p for p in (_prefix(d, table_loc, info.partition_keys) for d in dirs)
                if p is not None]
    again = {spec.canonical(s) for s in written}
    out: list[Dropped] = []
    for p in store.catalog.partitions(info):
        if p.spec in again:
            continue
        loc = normalise_location(p.location, default_fs) if p.location else None
        # A partition with a custom location is only deleted where it is (Spark lists those).
        in_tree = loc is None or table_loc is None or within(loc, table_loc) is not None
        under_prefix = in_tree and any(
            all(p.values.get(k) == v for k, v in pre.items()) for pre in prefixes)
        # Inside the tree only a prefix deletes; by location: custom locations, and every
        # location when the table has none registered (no prefix can be computed).
        by_location = table_loc is None or not in_tree
        if under_prefix or (loc is not None and by_location
                            and any(within(loc, d) is not None for d in dirs)):
            out.append(Dropped(p.values, p.location, "overwrite"))
    return out


def cleared_specs(info: TableInfo, job: Job, default_fs: str | None) -> list[dict[str, str]]:
    """The (partial) specs the job removed wholesale, kept for commit order
    (writers/commit_order.py): its dropped specs, or the partition prefixes its static
    overwrite deleted (``{}``: the whole table). Custom locations outside the table's
    tree are not prefixes: a late older job is judged by its partitions' revisions there."""
    if job.dropped:
        return [dict(spec.coerce(raw)) for raw in job.dropped]
    if not job.deleted or not info.location:
        return []
    table_loc = normalise_location(info.location, default_fs)
    found = (_prefix(normalise_location(d, default_fs), table_loc, info.partition_keys)
             for d in job.deleted)
    return [p for p in found if p is not None]


def _none_above(job: Job, info: TableInfo, table_loc: str, dirs: Sequence[str]) -> None:
    """Spark deletes inside the output path or a partition's own location; an entry
    holding the table's location would drop every partition of it (a forged or broken
    manifest): refused, naming the entry."""
    for i, d in enumerate(dirs):
        if within(table_loc, d) not in (None, ""):
            raise InvalidManifestError(
                f"manifest deleted[{i}] of job {job.job_id}: {job.deleted[i]!r:.200} contains "
                f"the location of {info.qualified} ({table_loc}); expected a directory inside "
                "the output path or a partition's own location")


def _by_spec(store: Store, info: TableInfo, job: Job) -> list[Dropped]:
    wanted = []
    for i, raw in enumerate(job.dropped):
        try:
            s = spec.coerce(raw)
            spec.check_against(s, info.partition_keys, full=False, table=info.qualified)
        except InvalidSpecError as exc:
            raise InvalidManifestError(
                f"manifest dropped[{i}] of job {job.job_id}: {exc}") from None
        wanted.append(s)
    return [Dropped(p.values, p.location, "drop") for p in store.catalog.partitions(info)
            if any(all(p.values.get(k) == v for k, v in w.items()) for w in wanted)]


def _prefix(deleted: str, table_loc: str | None, keys: Sequence[str]) -> dict[str, str] | None:
    """The partial spec a deleted directory of the table tree stands for (``{}``: all),
    or None for a directory outside it or not on a partition boundary."""
    rel = within(deleted, table_loc) if table_loc is not None else None
    if rel is None:
        return None
    if rel == "":
        return {}
    depth = len(rel.split("/"))
    if depth > len(keys):
        return None
    try:
        return parse_partition_path(rel, keys[:depth])
    except InvalidSpecError:
        return None
