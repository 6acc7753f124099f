"""Spark commit manifests serve's pick-up set aside, and why (the ``/ui/ops`` page).

``writers/commit_spool.py`` renames a manifest ``<job>.json.ignored`` when no
registered table matched (kept for ``commits scan --retry-ignored``) and
``<job>.json.rejected`` when it cannot be valid; the reason went to the log
only. This page checks each file again, read-only, with the pick-up's own
steps (read without following links, verify the signature, parse, bind to
the spool's table) and shows the first that fails: the reason the pick-up
had, unless a token or a table changed since. Nothing is renamed or deleted
here. The listing is bounded (``limit`` files) and stops at its deadline.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from partition_notify.core.errors import InvalidManifestError, PartitionNotifyError
from partition_notify.publisher import Publisher
from partition_notify.writers.commit_locations import resolve_table
from partition_notify.writers.commit_manifest import (
    Outcome,
    Target,
    candidates,
    check_binding,
    parse_manifest,
)
from partition_notify.writers.commit_spool import (
    IGNORED_SUFFIX,
    REJECTED_SUFFIX,
    SpoolDir,
    read_manifest_file,
    ready,
    spool_dirs,
)
from partition_notify.writers.spool_signature import verify

#: Files listed at most, and the listing's time budget (a spool on a slow disk).
LIMIT = 200
DEADLINE_SECONDS = 2.0


@dataclass(frozen=True, slots=True)
class SetAside:
    status: str  # "ignored" or "rejected"
    job_id: str
    #: the table whose spool holds it; None for an extra spool directory
    spool_of: str | None
    path: str
    at: float
    reason: str


@dataclass(frozen=True, slots=True)
class Listing:
    files: list[SetAside]
    #: stopped at ``limit`` files or the deadline: more may be there
    cut_short: bool


def set_aside(publisher: Publisher, extra_dirs: list[str], default_fs: str | None,
              keys: list[bytes], *, limit: int = LIMIT,
              deadline_seconds: float = DEADLINE_SECONDS) -> Listing:
    """Ignored and rejected manifests of every spool, newest first, with their reasons."""
    end = time.monotonic() + deadline_seconds
    found: list[tuple[SpoolDir, str, str]] = []
    for d in spool_dirs(publisher, extra_dirs, default_fs):
        for status, suffix in (("ignored", IGNORED_SUFFIX), ("rejected", REJECTED_SUFFIX)):
            found.extend((d, status, name) for name in ready(d.path, ".json" + suffix))
        if len(found) >= limit or time.monotonic() >= end:
            return Listing(_explain(publisher, found[:limit], default_fs, keys, end), True)
    return Listing(_explain(publisher, found, default_fs, keys, end), False)


def _explain(publisher: Publisher, found: list[tuple[SpoolDir, str, str]],
             default_fs: str | None, keys: list[bytes], end: float) -> list[SetAside]:
    out: list[SetAside] = []
    for d, status, name in found:
        path = d.path / name
        try:
            at = os.lstat(path).st_mtime
        except OSError:
            continue  # taken (a retry applied it, the sweep removed it) since the listing
        in_time = time.monotonic() < end
        why = _reason(publisher, path, d, status, default_fs, keys) if in_time else \
            "not checked (the listing reached its time budget)"
        out.append(SetAside(status, name.split(".json", 1)[0],
                            d.table.qualified if d.table else None, str(path), at, why))
    return sorted(out, key=lambda s: s.at, reverse=True)


def _reason(publisher: Publisher, path: Path, d: SpoolDir, status: str,
            default_fs: str | None, keys: list[bytes]) -> str:
    try:
        manifest = parse_manifest(verify(read_manifest_file(path), keys))
        # The pick-up's plan() without its side effects (its once-per-location warning).
        tables = candidates(publisher, manifest.table)
        info, prefix = resolve_table(tables, manifest.table, manifest.output_path, default_fs)
        target: Outcome | Target = Target(info, prefix) if info is not None else \
            Outcome("ignored", manifest.job_id, manifest.table, reason="unmatched")
        if d.table is not None:
            check_binding(manifest, target, d.table, default_fs)
    except InvalidManifestError as exc:
        return str(exc)
    except (OSError, PartitionNotifyError) as exc:
        return f"cannot be checked now: {exc}"
    if isinstance(target, Outcome) and target.status == "ignored":
        where = manifest.table or manifest.output_path
        return (f"no registered table matches {where} "
                "(register it, then: partition-notify commits scan --retry-ignored)")
    if status == "ignored":
        return ("a registered table matches it now: partition-notify commits scan "
                "--retry-ignored applies it")
    return "valid now (a token or a table changed since it was rejected); see serve's log"
