"""One job id, one commit: a recorded Spark job's content fingerprint.

A manifest whose job id is recorded is a replay (an HTTP retry, a spool file a
crash left behind, both at once) only when it announces the same thing. Another
commit under a recorded id (a writer that reuses a fixed id, a copied manifest)
was answered ``duplicate`` and its partitions were never announced; it is now
refused (:class:`JobIdReusedError`), loudly, and kept as a refusal.
"""

from __future__ import annotations

import hashlib
import json

from partition_notify.store import Store
from pydantic import BaseModel

from partition_notify.core.errors import JobIdReusedError

_RECORDED = "SELECT fingerprint FROM pn_spark_commits WHERE job_id = {p}"
#: Not what the job announces: a retry may carry another commit time or application
#: id (the JVM stamps them per attempt) and is still the same commit.
_NOT_CONTENT = {"version", "job_id", "committed_at_ms", "spark_app_id"}


def content_fingerprint(manifest: BaseModel) -> str:
    """SHA-256 of a CommitManifest's table, paths, partitions, deletions and set-done in
    canonical JSON (fields a newer jar adds are not parsed, so not in it). Typed as a
    model: writers/commit_manifest.py imports this module."""
    doc = manifest.model_dump(mode="json", exclude=_NOT_CONTENT)
    raw = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(raw.encode("ascii")).hexdigest()


def seen_before(store: Store, job_id: str, manifest: BaseModel) -> bool:
    """True when this job is recorded with the same content, or was recorded before
    fingerprints existed (migration 0014: nothing to compare, answered as before).

    Raises :class:`JobIdReusedError` when the id is recorded for other content."""
    rows = store.read(_RECORDED, (job_id,))
    if not rows:
        return False
    recorded = rows[0][0]
    if recorded is None or recorded == content_fingerprint(manifest):
        return True
    raise JobIdReusedError(
        f"manifest field 'jobId': job {job_id} was already announced with other "
        "content (table, output path, partitions, deletions or set-done differ); a job id "
        "names one commit: give this commit a new id")
