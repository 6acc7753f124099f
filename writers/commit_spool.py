"""``serve``'s pick-up of commit manifests the Spark side could not post.

The commit protocol writes ``<jobId>.json`` (write, then rename) into
``_partition_notify/`` under the job's output path when ``serve`` is
unreachable. This job looks there under every registered table location
(and in extra spool directories), announces each manifest once
(:func:`partition_notify.writers.commit_manifest.apply_manifest` is idempotent by job id) and
only then deletes it. A manifest that cannot be valid is renamed
``<jobId>.json.rejected`` and logged, so it is looked at by a person, not
retried forever.

Local filesystems (``file:`` or plain paths) only: for object stores and
HDFS, use the HTTP route (the normal path) or point
``spark.partitionnotify.spoolDir`` at a shared local directory.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from partition_notify.publisher import Publisher
from partition_notify.writers.commit_manifest import apply_manifest, parse_manifest

from partition_notify.core.errors import InvalidManifestError, PartitionNotifyError

log = logging.getLogger(__name__)

SPOOL = "_partition_notify"
REJECTED_SUFFIX = ".rejected"


@dataclass
class SpoolStats:
    announced: int = 0
    duplicates: int = 0
    ignored: int = 0
    rejected: int = 0
    failed: int = 0
    jobs: list[str] = field(default_factory=list)


def local_dir(location: str) -> Path | None:
    """A location as a local path, or None when it is not on the local filesystem."""
    if location.startswith("file:"):
        return Path("/" + location[len("file:"):].lstrip("/"))
    if location.startswith("/"):
        return Path(location)
    return None


def spool_dirs(publisher: Publisher, extra: Iterable[str] = ()) -> list[Path]:
    out: list[Path] = []
    for t in publisher.store.catalog.tables():
        d = local_dir(t.location) if t.location else None
        if d is not None:
            out.append(d / SPOOL)
    out.extend(p for p in (local_dir(e) for e in extra) if p is not None)
    return out


def scan(publisher: Publisher, extra_dirs: Iterable[str] = ()) -> SpoolStats:
    """Process every ready manifest once; a store failure leaves the file for next time."""
    stats = SpoolStats()
    for d in spool_dirs(publisher, extra_dirs):
        try:
            names = sorted(os.listdir(d))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for name in names:
            if name.startswith(".") or not name.endswith(".json"):
                continue  # ".<job>.json.tmp" is still being written
            process_file(publisher, d / name, stats)
    return stats


@dataclass
class SpoolSweep:
    """What the spool holds after a sweep, and what the sweep removed."""

    rejected: int = 0
    partial: int = 0
    removed: int = 0


def _leftover(name: str) -> str | None:
    """"rejected" for a manifest set aside, "partial" for a write or checksum left behind."""
    if name.endswith(".json" + REJECTED_SUFFIX):
        return "rejected"
    if name.startswith(".") and name.endswith((".json.tmp", ".crc")):
        return "partial"
    return None


def sweep(dirs: Iterable[Path], older_than: float) -> SpoolSweep:
    """Delete rejected manifests and abandoned partial writes last changed before
    ``older_than`` (epoch seconds); count what stays (``pn_spool_files``)."""
    out = SpoolSweep()
    for d in dirs:
        try:
            entries = list(os.scandir(d))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            kind = _leftover(entry.name)
            if kind is None:
                continue
            try:
                if entry.stat().st_mtime < older_than:
                    os.unlink(entry.path)
                    out.removed += 1
                    continue
            except FileNotFoundError:
                continue  # another serve took it
            setattr(out, kind, getattr(out, kind) + 1)
    return out


def process_file(publisher: Publisher, path: Path, stats: SpoolStats) -> None:
    try:
        outcome = apply_manifest(publisher, parse_manifest(path.read_bytes()))
    except FileNotFoundError:
        return  # another serve took it
    except InvalidManifestError as exc:
        stats.rejected += 1
        log.error("spark commit manifest %s rejected: %s", path, exc,
                  extra={"pn_event": "spark_commit.rejected"})
        path.replace(path.with_name(path.name + REJECTED_SUFFIX))
        return
    except PartitionNotifyError as exc:
        stats.failed += 1
        log.warning("spark commit manifest %s: %s; retried on the next scan", path, exc)
        return
    if outcome.status == "announced":
        stats.announced += 1
    elif outcome.status == "duplicate":
        stats.duplicates += 1
    else:
        stats.ignored += 1
    stats.jobs.append(outcome.job_id)
    path.unlink(missing_ok=True)
    # Hadoop's LocalFileSystem writes a checksum file next to it.
    path.with_name(f".{path.name}.crc").unlink(missing_ok=True)
