"""Transports chosen by URL scheme, imported only when used (kombu style).

Built-in schemes are the table below; another distribution adds one through the
``partition_notify.transports`` entry-point group, e.g. in its pyproject.toml::

    [project.entry-points."partition_notify.transports"]
    memo = "memo_transport:MemoTransport"

Entry points are read only for a scheme the table does not have (a built-in
scheme cannot be taken over), and their module is imported only when used.
"""

from __future__ import annotations

import difflib
import importlib
from importlib.metadata import entry_points
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

#: Third-party transports: entry points of this group, name = scheme, value = "module:Class".
ENTRY_POINT_GROUP = "partition_notify.transports"

#: Broker driver (top-level module) -> the extra that installs it.
DRIVER_EXTRAS = {"stomp": "stomp", "kafka": "kafka"}


def plugins() -> dict[str, str]:
    """scheme -> "module:Class" of every installed third-party transport."""
    return {ep.name.lower(): ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)
            if ep.name.lower() not in TRANSPORTS}


def resolve(url: str) -> type[Transport]:
    """The transport class for ``url``; a typo gets a did-you-mean."""
    scheme = urlsplit(url).scheme.lower() if "://" in url else ""
    target = TRANSPORTS.get(scheme)
    if target is None:
        known = {**TRANSPORTS, **plugins()}
        target = known.get(scheme)
        if target is None:
            close = difflib.get_close_matches(scheme, list(known), n=1)
            hint = f"; did you mean {close[0]}://?" if close else ""
            names = ", ".join(f"{s}://" for s in known)
            raise ConfigurationError(
                f"transport URL {redact_url(url)!r}: unknown scheme {scheme!r}{hint} "
                f"(known: {names})"
            )
    return _load(url, target)


def _load(url: str, target: str) -> type[Transport]:
    from partition_notify.transports.base import Transport

    module_name, _, cls_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        extra = DRIVER_EXTRAS.get((exc.name or "").partition(".")[0])
        if extra is not None:
            raise ConfigurationError(
                f"transport URL {redact_url(url)!r} needs the {extra!r} extra, which is not "
                f"installed (no module {exc.name!r}): pip install 'partition-notify[{extra}]'"
            ) from exc
        if target in TRANSPORTS.values():
            raise  # ours: a bug, not configuration
        raise ConfigurationError(
            f"transport URL {redact_url(url)!r}: the transport {target!r} (entry point of "
            f"{ENTRY_POINT_GROUP!r}) does not import: {exc}"
        ) from exc
    cls = getattr(module, cls_name, None)
    if not (isinstance(cls, type) and issubclass(cls, Transport)):
        raise ConfigurationError(
            f"transport URL {redact_url(url)!r}: {target!r} is not a Transport subclass "
            f"(expected \"module:Class\", the class deriving from {Transport.__module__}."
            "Transport)"
        )
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
