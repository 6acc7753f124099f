"""What a Spark job committed, as the JVM commit protocol reports it, and announcing it.

The commit protocol (``writers/jvm``, ``io.partitionnotify.spark``) posts this
document to ``serve`` (``POST /v1/commits``) or, when ``serve`` cannot be
reached, leaves it in ``<output>/_partition_notify/<jobId>.json``. Both paths
end in :func:`apply_manifest`, which is idempotent by job id (the same id with
other content is refused, writers/commit_identity.py)::

    {"version": 1, "jobId": "…uuid…", "table": "db.t" | null,
     "outputPath": "file:/lake/sales/orders", "overwrite": false,
     "partitions": [{"path": "ds=20110228/region=us",
                     "location": "file:/lake/sales/orders/ds=20110228/region=us"},
                    {"path": null, "location": "file:/archive/us-copy",
                     "values": {"ds": "20110228", "region": "eu"}}],
     "deleted": ["file:/lake/sales/orders"],
     "markSetDone": "ds=20110228" | null, "committedAtMs": 1298851200000,
     "sparkAppId": "local-…"}

``path`` is the partition directory relative to ``outputPath`` as Spark
wrote it (Hive-escaped); it is null for a partition with a custom location,
whose ``values`` the JVM read from the command's plan (older jars sent none:
then its last directories are taken as the partition, as before). An empty
``partitions`` list with an ``outputPath`` that is one partition directory
of the table announces that partition (a write without ``partitionBy``).
``deleted``: what Spark deleted before writing (static-mode overwrite); each
announced partition there that the job did not write again is dropped
(``DROP_PARTITION``, reason ``overwrite``). ``dropped``: the (partial) specs of
an ``ALTER TABLE ... DROP PARTITION`` (no partitions; reason ``drop``).
Messages carry ``committedAtMs`` as their revision.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Annotated, Literal

from partition_notify.publisher import Publisher
from partition_notify.store import Store, TableInfo, UnitOfWork
from partition_notify.store.housekeeping import BetweenBatches, in_batches
from partition_notify.store.provider import InTxn
from partition_notify.writers.commit_drops import cleared_specs, dropped_partitions
from partition_notify.writers.commit_identity import content_fingerprint, seen_before
from partition_notify.writers.commit_locations import (
    SeenOnce,
    closest,
    normalise_location,
    resolve_table,
    staging_table,
    within,
)
from partition_notify.writers.commit_order import cleared_json, later_than
from partition_notify.writers.commit_repository import SparkCommitRepository
from partition_notify.writers.commit_schema import MAX_JOB_ID_CHARS
from partition_notify.writers.layout import parse_partition_path
from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticError

from partition_notify.contract import AnyMessage, spec
from partition_notify.core import json_keys
from partition_notify.core.errors import (
    ConflictError,
    InvalidManifestError,
    InvalidSpecError,
    PublishError,
    ValidationError,
)

log = logging.getLogger(__name__)

MANIFEST_VERSION = 1
#: Largest manifest accepted (about 40,000 partitions of typical path length).
MAX_MANIFEST_BYTES = 16 * 1024 * 1024
_JOB_ID = re.compile(r"^[A-Za-z0-9_.-]+$")
#: A partition spec has at most this many keys (the values of a custom location).
MAX_PARTITION_KEYS = 64
#: Directories a static overwrite deletes: its static prefix plus each custom location.
MAX_DELETED = 100_000


class ManifestPartition(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    path: str | None = Field(None, max_length=4096)
    location: str = Field(min_length=1, max_length=4096)
    values: dict[str, str] | None = Field(None, max_length=MAX_PARTITION_KEYS)


class CommitManifest(BaseModel):
    """One Spark write job's commit (field names as on the wire: camelCase)."""

    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)
    version: Literal[1]
    job_id: str = Field(alias="jobId", min_length=1, max_length=MAX_JOB_ID_CHARS,
                        pattern=_JOB_ID.pattern)
    table: str | None = Field(None, max_length=260)
    output_path: str = Field(alias="outputPath", min_length=1, max_length=4096)
    overwrite: bool = False
    partitions: list[ManifestPartition]
    deleted: list[Annotated[str, Field(min_length=1, max_length=4096)]] = Field(
        default_factory=list, max_length=MAX_DELETED)
    #: ALTER TABLE ... DROP PARTITION: the (possibly partial) specs it dropped.
    dropped: list[dict[str, str]] = Field(default_factory=list, max_length=MAX_DELETED)
    mark_set_done: str | None = Field(None, alias="markSetDone", max_length=4096)
    committed_at_ms: int | None = Field(None, alias="committedAtMs")
    spark_app_id: str | None = Field(None, alias="sparkAppId", max_length=256)


def parse_manifest(raw: bytes | str) -> CommitManifest:
    """Decode and validate; a specific :class:`InvalidManifestError` otherwise."""
    if len(raw) > MAX_MANIFEST_BYTES:
        raise InvalidManifestError(
            f"manifest is {len(raw)} bytes, expected at most {MAX_MANIFEST_BYTES}"
        )
    try:
        obj, repeated = json_keys.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidManifestError(f"manifest is not JSON: {exc}") from None
    if repeated is not None:  # json.loads would keep the last value, silently
        where = f" field {repeated.where('')[1:]!r}" if repeated.path else ""
        raise InvalidManifestError(f"manifest{where}: {repeated.what}")
    return manifest_from_obj(obj)


def manifest_from_obj(obj: object) -> CommitManifest:
    if not isinstance(obj, dict):
        raise InvalidManifestError(f"manifest must be a JSON object, got {type(obj).__name__}")
    try:
        return CommitManifest.model_validate(obj)
    except PydanticError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "manifest"
        raise InvalidManifestError(
            f"manifest field {where!r}: {err['msg']} (got {err.get('input')!r:.120})",
            field=".".join(str(p) for p in err["loc"]),
        ) from None


# -- table identity ---------------------------------------------------------------
def partition_specs(
    info: TableInfo, manifest: CommitManifest, prefix: str, default_fs: str | None = None
) -> list[dict[str, str]]:
    """Each partition's values, from its directory relative to the table location
    (``prefix``: the job's output path relative to it)."""
    if not manifest.partitions:
        return _written_directory(info, manifest, prefix)
    specs = []
    for i, p in enumerate(manifest.partitions):
        if p.values is not None:  # the JVM knows them: no guess from the path
            specs.append(_checked(info, manifest, i, p.values))
            continue
        if p.path is not None:
            rel = f"{prefix}/{p.path}" if prefix else p.path
        else:  # custom location: its last directories name the partition
            loc = normalise_location(p.location, default_fs)
            rel = "/".join(loc.split("/")[-len(info.partition_keys):])
        try:
            specs.append(parse_partition_path(rel, info.partition_keys))
        except InvalidSpecError as exc:
            raise InvalidManifestError(
                f"manifest partitions[{i}] of job {manifest.job_id} for {info.qualified}: {exc}"
            ) from None
    return specs


def _checked(info: TableInfo, manifest: CommitManifest, i: int,
             values: dict[str, str]) -> dict[str, str]:
    try:
        s = spec.coerce(values)
        spec.check_against(s, info.partition_keys, full=True, table=info.qualified)
    except InvalidSpecError as exc:
        raise InvalidManifestError(
            f"manifest partitions[{i}].values of job {manifest.job_id}: {exc}") from None
    return dict(s)


def _written_directory(info: TableInfo, manifest: CommitManifest,
                       prefix: str) -> list[dict[str, str]]:
    """A job without partition directories wrote into ``prefix``: one partition,
    if that is a partition directory of the table (``df.write.parquet(".../ds=1")``)."""
    if not prefix:
        return []
    try:
        return [parse_partition_path(prefix, info.partition_keys)]
    except InvalidSpecError:
        log.info("spark job %s wrote into %s of %s, which is no partition directory; "
                 "nothing to announce", manifest.job_id, prefix, info.qualified)
        return []


def written_locations(manifest: CommitManifest, specs: list[dict[str, str]]) -> list[str | None]:
    """Each announced partition's location (the output path for a one-directory write)."""
    if manifest.partitions:
        return [p.location for p in manifest.partitions]
    return [manifest.output_path] * len(specs)


# -- announcing -------------------------------------------------------------------
Status = Literal["announced", "spooled", "duplicate", "ignored", "rejected"]


@dataclass(frozen=True, slots=True)
class Outcome:
    status: Status
    job_id: str
    table: str | None
    messages: int = 0
    partitions: int = 0
    #: why a job was ignored: "unmatched", or "staging" (a NotifyingWriter write)
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Target:
    """The table a job is announced into and the job's output path relative to it."""

    info: TableInfo
    prefix: str


_unmatched = SeenOnce()


def candidates(publisher: Publisher, table: str | None) -> list[TableInfo]:
    """The tables a commit can belong to: the one it names, and those with a location
    (matched by path). Not the whole catalog: with 10,000 tables that read was most
    of a pick-up."""
    catalog = publisher.store.catalog
    named: list[TableInfo] = []
    if table:
        db, _, name = table.lower().rpartition(".")
        named = list(catalog.find_tables([(db, name)]).values())
    return [*named, *catalog.tables_with_location()]


def _ignored(publisher: Publisher, manifest: CommitManifest, default_fs: str | None) -> Outcome:
    tables = publisher.store.catalog.tables_with_location()
    staged = staging_table(tables, manifest.output_path, default_fs)
    if staged is not None:
        # NotifyingWriter's own staging commit: it announces the write itself.
        log.debug("spark job %s is a NotifyingWriter staging write of %s; not announced here",
                  manifest.job_id, staged.qualified)
        return Outcome("ignored", manifest.job_id, staged.qualified, reason="staging")
    key = manifest.table or normalise_location(manifest.output_path, default_fs)
    if _unmatched.first_time(key):
        near = closest(tables, manifest.output_path, default_fs)
        log.warning(
            "spark commit of %s (job %s) matches no registered table; ignored. Closest "
            "registered locations: %s (warned once per location per process)",
            key, manifest.job_id, ", ".join(near) or "none",
            extra={"pn_event": "spark_commit.unmatched"},
        )
    return Outcome("ignored", manifest.job_id, manifest.table, reason="unmatched")


def already_processed(publisher: Publisher, manifest: CommitManifest) -> bool:
    """A pre-check (the write's own insert of the job id is the guard), as a hot read;
    :class:`JobIdReusedError` when the id is recorded for other content."""
    return seen_before(publisher.store, manifest.job_id, manifest)


def purge_spark_commits(store: Store, before: float, *, batch_size: int,
                        between_batches: BetweenBatches | None = None) -> int:
    """Forget Spark job ids processed before ``before`` (``PN_SPARK_COMMIT_RETENTION_SECONDS``),
    oldest first in batches: a manifest replayed later than that announces again."""
    return in_batches(
        lambda: UnitOfWork(store.engine, write=True),
        lambda uow, n: SparkCommitRepository(uow.session).purge_batch(before, n),
        batch_size=batch_size, between_batches=between_batches)


def plan(
    publisher: Publisher, manifest: CommitManifest, default_fs: str | None = None
) -> Outcome | Target:
    """The table to announce into, or the outcome when there is nothing to do."""
    if already_processed(publisher, manifest):
        return Outcome("duplicate", manifest.job_id, manifest.table)
    info, prefix = resolve_table(
        candidates(publisher, manifest.table), manifest.table, manifest.output_path, default_fs)
    if info is None:
        return _ignored(publisher, manifest, default_fs)
    return Target(info, prefix)


def announce(
    publisher: Publisher, manifest: CommitManifest, target: Target,
    in_txn: InTxn | None = None, default_fs: str | None = None,
) -> list[AnyMessage]:
    """Log the job's messages and its idempotency record in one transaction.

    Raises :class:`ConflictError` when another processor recorded the job first
    (nothing of ours was logged then).
    """
    info = target.info
    specs = partition_specs(info, manifest, target.prefix, default_fs)
    locations = written_locations(manifest, specs)
    dropped = dropped_partitions(publisher.store, info, manifest, specs, default_fs)
    set_done = manifest.mark_set_done
    later = later_than(publisher.store, info, manifest.committed_at_ms)
    if later is not None:  # applied after a newer job: nothing it overtook is undone
        specs, locations, dropped, set_done = later.keep(
            manifest.job_id, specs, locations, dropped, set_done)
    cleared = cleared_json(cleared_specs(info, manifest, default_fs))
    clock = publisher.store.clock
    # A re-announce must not look like a duplicate: the job's commit time tells writes apart.
    revision = manifest.committed_at_ms or int(clock() * 1000)
    fingerprint = content_fingerprint(manifest)

    def record(uow: UnitOfWork, messages: list[AnyMessage]) -> None:
        SparkCommitRepository(uow.session).add(
            manifest.job_id, info.id, len(specs), clock(), fingerprint,
            manifest.committed_at_ms, cleared)
        if in_txn is not None:
            in_txn(uow, messages)

    try:
        logged = publisher.announce_commit(
            info.db, info.name, specs, locations=locations, replace=manifest.overwrite,
            set_done=set_done, in_txn=record, revision=revision,
            dropped=dropped,
        )
    except ValidationError as exc:
        # One validation path: what announce_partitions refuses, a manifest cannot carry.
        raise InvalidManifestError(f"manifest of job {manifest.job_id}: {exc}") from None
    log.info(
        "spark job %s: %d message(s) for %s", manifest.job_id, len(logged), info.qualified,
        extra={"pn_event": "spark_commit.announced"},
    )
    return logged


def apply_manifest(
    publisher: Publisher, manifest: CommitManifest, *, default_fs: str | None = None,
    bound_to: TableInfo | None = None, status: Status = "announced",
) -> Outcome:
    """Announce a committed Spark job once: add-partitions, then its set-done.

    Idempotent by job id: the job is recorded in the transaction that logs its
    messages. A job whose table is not registered is ignored (warned once).
    ``bound_to``: the only table it may announce (a manifest found in that
    table's spool); another one is rejected.
    """
    target = plan(publisher, manifest, default_fs)
    if bound_to is not None:
        check_binding(manifest, target, bound_to, default_fs)
    if isinstance(target, Outcome):
        return target
    qualified, n = target.info.qualified, len(manifest.partitions)
    try:
        logged = announce(publisher, manifest, target, default_fs=default_fs)
    except PublishError as exc:
        # Logged and recorded; the relay (serve) delivers it. Nothing to retry here.
        log.warning("spark job %s: %s", manifest.job_id, exc)
        return Outcome(status, manifest.job_id, qualified, 0, n)
    except ConflictError:
        # Another processor recorded this job first; its transaction logged the messages.
        if already_processed(publisher, manifest):
            return Outcome("duplicate", manifest.job_id, qualified)
        raise
    return Outcome(status, manifest.job_id, qualified, len(logged), n)


def check_binding(
    manifest: CommitManifest, target: Outcome | Target, bound: TableInfo, default_fs: str | None
) -> None:
    """A manifest from ``bound``'s spool announces ``bound`` or nothing."""
    if isinstance(target, Target):
        if target.info.id == bound.id:
            return
        other = target.info.qualified
    else:
        if target.status == "duplicate":
            return  # nothing happens to it
        out = normalise_location(manifest.output_path, default_fs)
        loc = normalise_location(bound.location or "", default_fs)
        if within(out, loc) is not None and manifest.table in (None, bound.qualified):
            return  # ignored (e.g. a staging write): kept for a later re-apply
        other = manifest.table or manifest.output_path
    raise InvalidManifestError(
        f"manifest of job {manifest.job_id} found in the spool of {bound.qualified} "
        f"announces {other}; a spool only announces its own table"
    )
