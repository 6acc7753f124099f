"""``serve``'s pick-up of commit manifests the Spark side could not post.

The commit protocol writes ``<jobId>.json`` (write, then rename) into
``_partition_notify/`` under the job's output path when ``serve`` is
unreachable, signed with the writer's token (:mod:`.spool_signature`). This
job looks there under every registered table location (and in extra spool
directories) and announces each manifest once
(:func:`partition_notify.writers.commit_manifest.apply_manifest` is
idempotent by job id), then deletes it; a directory's manifests in commit
order (``committedAtMs``, then job id), and a table's older ones before a
manifest posted for it (:func:`apply_older`; docs/writers.md "Commit order").
What it finds is untrusted:

* a manifest in a table's spool announces that table or nothing, and only if
  a live write token signed it (extra spool directories: the signature only);
* only regular files are read: opened without following links and without
  blocking, checked by ``fstat`` before a byte is read, at most
  ``MAX_MANIFEST_BYTES``; one file's failure is logged and set aside, never
  stops the others;
* the scan stops at its deadline (or when ``serve`` stops) and goes on at
  the next run.

A file that cannot be valid is renamed ``<name>.rejected`` (looked at by a
person, not retried forever); a valid manifest no registered table matches is
renamed ``<name>.ignored`` and kept (``commits ignored`` lists them,
``commits scan --retry-ignored`` applies them once the table is registered).

Local filesystems (``file:`` or plain paths) only: for object stores and
HDFS, use the HTTP route (the normal path) or point
``spark.partitionnotify.spoolDir`` at a shared local directory.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from partition_notify.publisher import Publisher
from partition_notify.store import TableInfo
from partition_notify.writers.commit_locations import normalise_location
from partition_notify.writers.commit_manifest import (
    MAX_MANIFEST_BYTES,
    Outcome,
    apply_manifest,
    parse_manifest,
)
from partition_notify.writers.spool_signature import verify

from partition_notify.core.errors import InvalidManifestError, PartitionNotifyError

log = logging.getLogger(__name__)

SPOOL = "_partition_notify"
REJECTED_SUFFIX = ".rejected"
IGNORED_SUFFIX = ".ignored"
#: Ignored manifests (no table matched) are kept this long for a re-apply, then deleted.
IGNORED_RETENTION_SECONDS = 30 * 86400
#: Most manifests one scan reads from one directory (the rest: next scan).
MAX_FILES_PER_DIR = 10_000
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass
class SpoolStats:
    announced: int = 0
    duplicates: int = 0
    ignored: int = 0
    rejected: int = 0
    failed: int = 0
    #: the scan stopped at its deadline (or serve stopping) before the end
    cut_short: bool = False
    jobs: list[str] = field(default_factory=list)

    def count(self, outcome: Outcome) -> None:
        if outcome.status == "duplicate":
            self.duplicates += 1
        elif outcome.status == "ignored":
            self.ignored += 1
        else:
            self.announced += 1
        self.jobs.append(outcome.job_id)


@dataclass(frozen=True, slots=True)
class SpoolDir:
    path: Path
    #: the table whose location holds it; None for an extra spool directory
    table: TableInfo | None


@dataclass
class ScanContext:
    publisher: Publisher
    keys: list[bytes]
    default_fs: str | None
    deadline: float
    should_stop: Callable[[], bool]

    def over(self) -> bool:
        return time.monotonic() >= self.deadline or self.should_stop()


def local_dir(location: str, default_fs: str | None = None) -> Path | None:
    """A location as a local path, or None when it is not on the local filesystem."""
    loc = normalise_location(location, default_fs)
    return Path(loc[len("file:"):]) if loc.startswith("file:/") else None


def spool_dirs(
    publisher: Publisher, extra: Iterable[str] = (), default_fs: str | None = None
) -> list[SpoolDir]:
    out: list[SpoolDir] = []
    for t in publisher.store.catalog.tables_with_location():
        d = local_dir(t.location, default_fs) if t.location else None
        if d is not None:
            out.append(SpoolDir(d / SPOOL, t))
    out.extend(SpoolDir(p, None) for p in (local_dir(e) for e in extra) if p is not None)
    return out


def scan(
    publisher: Publisher, extra_dirs: Iterable[str] = (), *, keys: Iterable[bytes],
    default_fs: str | None = None, deadline_seconds: float = 60.0,
    should_stop: Callable[[], bool] = lambda: False, retry_ignored: bool = False,
) -> SpoolStats:
    """Process ready manifests once; a store failure leaves the file for next time.

    ``keys``: the live write tokens' signing keys, read by the caller for this
    scan (the tokens are the HTTP feature's table, not the writers')."""
    stats = SpoolStats()
    ctx = ScanContext(publisher, list(keys), default_fs,
                      time.monotonic() + deadline_seconds, should_stop)
    suffix = ".json" + IGNORED_SUFFIX if retry_ignored else ".json"
    for d in spool_dirs(publisher, extra_dirs, default_fs):
        if not scan_dir(ctx, d, suffix, stats):
            stats.cut_short = True
            log.warning("spark commit pick-up stopped at its deadline; the rest next time")
            return stats
        expire_ignored(d.path)
    return stats


def apply_older(
    publisher: Publisher, info: TableInfo, committed_at_ms: int | None, *,
    keys: Callable[[], Iterable[bytes]], default_fs: str | None = None,
    deadline_seconds: float = 10.0,
) -> SpoolStats:
    """Apply the manifests in ``info``'s spool committed no later than
    ``committed_at_ms``, in commit order: a manifest posted for the table (serve is
    back) takes effect after them, not before (an overwrite's drops first, then an
    older append's adds, would leave its partitions announced, their data gone).
    ``keys`` is only called (a store read) when the spool holds manifests."""
    stats = SpoolStats()
    d = local_dir(info.location, default_fs) if info.location else None
    names = ready(d / SPOOL) if d is not None else []
    if d is None or not names:   # the usual case: one listing
        return stats
    ctx = ScanContext(publisher, list(keys()), default_fs,
                      time.monotonic() + deadline_seconds, lambda: False)
    stats.cut_short = not scan_dir(ctx, SpoolDir(d / SPOOL, info), ".json", stats,
                                   until_ms=committed_at_ms, names=names)
    return stats


def scan_dir(ctx: ScanContext, d: SpoolDir, suffix: str, stats: SpoolStats,
             until_ms: int | None = None, names: list[str] | None = None) -> bool:
    """Apply ``d``'s manifests (``names``, listed by the caller, or else listed here)
    in commit order (those committed after ``until_ms`` stay); False when the
    deadline came first."""
    ordered = in_commit_order(ctx, d.path, ready(d.path, suffix) if names is None else names)
    if ordered is None:
        return False
    for (committed, _, _), name in ordered:
        if until_ms is not None and committed > until_ms:
            break
        if ctx.over():
            return False
        process_file(ctx, d, name, stats)
    return True


#: The order key of a file that cannot be read as a manifest: first (it is set aside).
_UNREADABLE = (-1, "", "")


def in_commit_order(
    ctx: ScanContext, d: Path, names: Iterable[str]
) -> list[tuple[tuple[int, str, str], str]] | None:
    """``names`` by commit time, then job id (a tie: a stable, arbitrary order), each
    with its key; None when the deadline came first. The file names are job ids (random):
    their order would apply an overwrite before the older write it replaced. Each file is
    read twice (here for its time only, then to apply it): at most MAX_FILES_PER_DIR
    keys are held, never the manifests."""
    keyed = []
    for name in names:
        if ctx.over():
            return None
        keyed.append((_commit_key(d / name, name), name))
    keyed.sort()
    return keyed


def _commit_key(path: Path, name: str) -> tuple[int, str, str]:
    """(committedAtMs, jobId, file name) as the file says: untrusted, only an order; the
    apply verifies it (without a time: first, as the oldest)."""
    try:
        obj = json.loads(read_manifest_file(path))
    except (OSError, InvalidManifestError, ValueError):
        return _UNREADABLE
    if not isinstance(obj, dict):
        return _UNREADABLE
    at, job = obj.get("committedAtMs"), obj.get("jobId")
    at = at if isinstance(at, int) and not isinstance(at, bool) else -1
    return at, job if isinstance(job, str) else "", name


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
                # A link's own time: a set-aside link is never followed, nor aged
                # by what it points at (an old /dev/zero would go at once).
                if entry.stat(follow_symlinks=False).st_mtime < older_than:
                    os.unlink(entry.path)
                    out.removed += 1
                    continue
            except FileNotFoundError:
                continue  # another serve took it
            setattr(out, kind, getattr(out, kind) + 1)
    return out



def expire_ignored(d: Path, now: float | None = None) -> int:
    """Delete ignored manifests older than IGNORED_RETENTION_SECONDS; how many."""
    cutoff = (time.time() if now is None else now) - IGNORED_RETENTION_SECONDS
    removed = 0
    for name in ready(d, ".json" + IGNORED_SUFFIX):
        try:
            if os.lstat(d / name).st_mtime < cutoff:
                os.unlink(d / name)
                removed += 1
                log.warning("ignored spark commit manifest %s expired (kept %d days)",
                            d / name, IGNORED_RETENTION_SECONDS // 86400)
        except OSError:
            continue
    return removed


def ready(d: Path, suffix: str = ".json") -> list[str]:
    """Names of manifests ready in ``d`` (``.<job>.json.tmp`` is still being written);
    beyond MAX_FILES_PER_DIR, the earliest spooled (the rest: next scan)."""
    try:
        names = [n for n in os.listdir(d) if n.endswith(suffix) and not n.startswith(".")]
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
            log.warning("spool directory %s cannot be listed: %s", d, exc.strerror)
        return []
    if len(names) > MAX_FILES_PER_DIR:
        # The oldest files hold the oldest commits: applied first, they keep commit order.
        names = sorted(names, key=lambda n: (_mtime(d / n), n))[:MAX_FILES_PER_DIR]
    return sorted(names)


def _mtime(path: Path) -> float:
    try:
        return os.lstat(path).st_mtime
    except OSError:
        return float("inf")


def read_manifest_file(path: Path) -> bytes:
    """A regular file's bytes, at most MAX_MANIFEST_BYTES; never follows a link or blocks."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise
        why = "it is a symbolic link" if exc.errno == errno.ELOOP else exc.strerror
        raise InvalidManifestError(f"cannot open: {why}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InvalidManifestError(f"not a regular file ({_kind(st.st_mode)})")
        if st.st_size > MAX_MANIFEST_BYTES:
            raise InvalidManifestError(
                f"{st.st_size} bytes, expected at most {MAX_MANIFEST_BYTES}")
        chunks, size = [], 0
        while chunk := os.read(fd, min(1 << 20, MAX_MANIFEST_BYTES + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_MANIFEST_BYTES:
                break
        data = b"".join(chunks)
    except OSError as exc:
        raise InvalidManifestError(f"cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > MAX_MANIFEST_BYTES:  # grew while we read
        raise InvalidManifestError(f"more than {MAX_MANIFEST_BYTES} bytes")
    return data


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return f"mode {mode:o}"


def process_file(ctx: ScanContext, d: SpoolDir, name: str, stats: SpoolStats) -> None:
    path = d.path / name
    try:
        raw = read_manifest_file(path)
        body = verify(raw, ctx.keys)
        outcome = apply_manifest(ctx.publisher, parse_manifest(body),
                                 default_fs=ctx.default_fs, bound_to=d.table, status="spooled")
    except FileNotFoundError:
        return  # another serve took it
    except InvalidManifestError as exc:
        stats.rejected += 1
        log.error("spark commit manifest %s rejected: %s", path, exc,
                  extra={"pn_event": "spark_commit.rejected"})
        _set_aside(path, REJECTED_SUFFIX)
        return
    except PartitionNotifyError as exc:
        stats.failed += 1
        log.warning("spark commit manifest %s: %s; retried on the next scan", path, exc)
        return
    stats.count(outcome)
    if outcome.status == "ignored" and outcome.reason == "unmatched":
        if not name.endswith(IGNORED_SUFFIX):
            _set_aside(path, IGNORED_SUFFIX)   # kept: registering the table later recovers it
        return
    path.unlink(missing_ok=True)
    # Hadoop's LocalFileSystem writes a checksum file next to it.
    path.with_name(f".{path.name}.crc").unlink(missing_ok=True)


def _set_aside(path: Path, suffix: str) -> None:
    base = path.name.removesuffix(IGNORED_SUFFIX)
    try:
        # rename never follows a link: a symlink is set aside, not its target.
        os.rename(path, path.with_name(base + suffix))
    except OSError as exc:
        log.warning("spark commit manifest %s could not be renamed: %s", path, exc.strerror)


def set_aside(dirs: Iterable[SpoolDir], suffix: str = IGNORED_SUFFIX) -> Iterator[Path]:
    """The manifests set aside with ``suffix`` in ``dirs``."""
    for d in dirs:
        for name in ready(d.path, ".json" + suffix):
            yield d.path / name
