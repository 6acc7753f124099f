"""Transports chosen by URL scheme, imported only when used (kombu style)."""

from __future__ import annotations

import difflib
import importlib
from typing import TYPE_CHECKING, Unpack
from urllib.parse import urlsplit

from partition_notify.core.errors import ConfigurationError, PartitionNotifyError
from partition_notify.core.redact import redact_url

if TYPE_CHECKING:
    from partition_notify.transports.base import Transport, TransportOptions

#: scheme -> "module:Class". Heavy drivers load only when their scheme is used.
TRANSPORTS: dict[str, str] = {
    "embedded": "partition_notify.transports.embedded:EmbeddedTransport",
    "stomp": "partition_notify.transports.stomp.transport:StompTransport",
    "stomp+ssl": "partition_notify.transports.stomp.transport:StompTransport",
    "kafka": "partition_notify.transports.kafka.transport:KafkaTransport",
}


def resolve(url: str) -> type[Transport]:
    """The transport class for ``url``; a typo gets a did-you-mean."""
    scheme = urlsplit(url).scheme.lower() if "://" in url else ""
    if scheme not in TRANSPORTS:
        close = difflib.get_close_matches(scheme, list(TRANSPORTS), n=1)
        hint = f"; did you mean {close[0]}://?" if close else ""
        known = ", ".join(f"{s}://" for s in TRANSPORTS)
        raise ConfigurationError(
            f"transport URL {redact_url(url)!r}: unknown scheme {scheme!r}{hint} (known: {known})"
        )
    module_name, _, cls_name = TRANSPORTS[scheme].partition(":")
    module = importlib.import_module(module_name)
    cls: type[Transport] = getattr(module, cls_name)
    return cls


def create_transport(url: str, **options: Unpack[TransportOptions]) -> Transport:
    """Build the transport for ``url``; each class takes the options it needs."""
    try:
        cls = resolve(url)
        return cls.from_url(url, **options)
    except ValueError as exc:
        if isinstance(exc, PartitionNotifyError):
            raise
        # urllib's "Invalid IPv6 URL", a port that is not a number, ...
        raise ConfigurationError(
            f"transport URL {redact_url(url)!r} does not parse: {exc} (expected e.g. "
            "stomp://host:61613, kafka://host:9092 or embedded://)"
        ) from exc
