"""Proof that a spooled commit manifest was written by a holder of a write token.

A file in ``<location>/_partition_notify/`` is only as trustworthy as the
filesystem's permissions, which are not ours: anyone who can write a file
there could otherwise announce partitions. So the JVM signs what it spools
(``io.partitionnotify.spark.SpoolSignature``) and ``serve`` checks it:

* key: the lower-case hex SHA-256 of the writer's token, as ASCII bytes — the
  very digest the store keeps of every token (``pn_api_tokens.token_sha256``),
  so ``serve`` can verify without ever holding a token, and a revoked token's
  manifests stop verifying;
* signature: HMAC-SHA256 over the manifest body exactly as serialised;
* on disk: the body with ``,"signature":"hmac-sha256:<64 hex>"`` inserted
  before its closing brace, so the file stays a JSON object.

Any live token with role ``write`` or ``admin`` verifies. Binding to a table
(a manifest found in one table's spool may only announce that table) is the
pick-up's check (:mod:`partition_notify.writers.commit_spool`).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable

from partition_notify.core.errors import InvalidManifestError

PREFIX = "hmac-sha256:"
_TRAILER = re.compile(rb',"signature":"hmac-sha256:([0-9a-f]{64})"\}\s*\Z')


def key_of(token: str) -> bytes:
    """The signing key a token holder derives (and the store already keeps)."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest().encode("ascii")


def sign(body: bytes, key: bytes) -> bytes:
    """``body`` (a JSON object ending in ``}``) with its signature as the last field."""
    if not body.rstrip().endswith(b"}"):
        raise ValueError("a manifest body must be a JSON object")
    mac = hmac.new(key, body, hashlib.sha256).hexdigest()
    return body.rstrip()[:-1] + f',"signature":"{PREFIX}{mac}"}}'.encode("ascii")


def verify(raw: bytes, keys: Iterable[bytes]) -> bytes:
    """The signed body of ``raw``, if one of ``keys`` signed it; else InvalidManifestError."""
    m = _TRAILER.search(raw)
    if m is None:
        raise InvalidManifestError(
            "manifest has no valid signature (expected a last field "
            '"signature":"hmac-sha256:<64 hex>"; set spark.partitionnotify.token or '
            "PN_WRITER_TOKEN on the driver so the JVM signs what it spools)"
        )
    body = raw[: m.start()] + b"}"
    wanted = m.group(1).decode("ascii")
    for key in keys:
        if hmac.compare_digest(hmac.new(key, body, hashlib.sha256).hexdigest(), wanted):
            return body
    raise InvalidManifestError(
        "manifest has no valid signature: no live write token signed it "
        "(forged, or signed with a revoked or read-only token)"
    )
