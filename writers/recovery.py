"""Finishing writes whose driver died, and clearing the ones that never committed.

Every staging directory under ``<table>/_pn_staging/`` whose lease has lapsed
is taken over. With a manifest, Spark's job had committed: the write is
completed exactly as its own driver would have (data moved, partitions
announced from the log position the manifest recorded). Without one, the job
never finished: its staged files are deleted and nothing is announced.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from publisher import Publisher
from writers.commit import WriteResult, complete
from writers.hadoop import HadoopFs
from writers.layout import LOCK, MANIFEST, STAGING, Manifest, staging_dir
from writers.lease import Lease

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def recover(publisher: Publisher, fs: HadoopFs, spark: SparkSession, location: str, *,
            stale_after_seconds: float, lease_seconds: float) -> list[WriteResult]:
    """Complete or discard the writes under ``location`` whose lease was not renewed for
    ``stale_after_seconds``; returns the completed ones."""
    done: list[WriteResult] = []
    for write_id in fs.glob(f"{location}/{STAGING}", "*"):
        staging = staging_dir(location, write_id)
        lease = Lease.claim(fs, f"{staging}/{LOCK}", lease_seconds,
                            stale_after=stale_after_seconds)
        if lease is None:
            continue
        try:
            raw = fs.read(f"{staging}/{MANIFEST}")
            if raw is None:
                log.warning("write %s under %s never committed; deleting its staged files",
                            write_id, location)
                lease.stop()
                fs.delete(staging)
                continue
            try:
                manifest = Manifest.from_json(raw)
            except (ValueError, TypeError) as exc:
                log.error("write %s: unreadable manifest %s/%s (%s); left for an operator",
                          write_id, staging, MANIFEST, exc)
                continue
            log.warning("write %s under %s committed but did not finish; completing it",
                        write_id, location)
            done.append(complete(publisher, fs, spark, manifest, lease=lease,
                                 resumed=True))
        finally:
            lease.stop()
    return done
