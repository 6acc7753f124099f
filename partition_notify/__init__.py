"""partition-notify: event-driven partition-completion notifications for Spark pipelines.

Everything a user imports comes from here::

    from partition_notify import build_app, NotifyingWriter, WaitTimeout

    with build_app() as app:
        app.publisher.register_table("sales", "orders", ["datestamp"])
        with app.subscriber() as sub:
            sub.wait_for_set_done("sales", "orders", "datestamp=20110228", timeout=60)

Importing this package builds nothing (no engine, no settings) and loads
nothing heavy: the errors are plain classes, every other name is imported on
first use (PEP 562 module ``__getattr__``), so ``import partition_notify`` does
not pull in SQLAlchemy, a broker driver or PySpark. Wiring happens in
:func:`build_app`.
"""

from __future__ import annotations

import contextlib
import importlib
from typing import TYPE_CHECKING

from partition_notify.core.errors import (
    AbortedOverwriteError,
    AuthenticationError,
    CatalogChanged,
    CommitIncompleteError,
    ConfigurationError,
    ConflictError,
    ConnectError,
    ExpiredOverwriteOvertakenError,
    HistoryMergeError,
    HistoryTimeout,
    InvalidManifestError,
    InvalidNameError,
    InvalidSpecError,
    JobIdReusedError,
    MalformedMessageError,
    MessageRejected,
    NotFoundError,
    PartitionLateError,
    PartitionNotifyError,
    PlacedOverwriteAbortError,
    PublishError,
    PublishTimeout,
    PushError,
    PushRefused,
    SnapshotFilesRemovedError,
    SparkWriteError,
    StoreError,
    SubscribeError,
    SubscriptionOverflowError,
    TableReadTimeout,
    TransportError,
    UnknownTableError,
    ValidationError,
    WaitTimeout,
    WriteOvertakenError,
)

if TYPE_CHECKING:
    from partition_notify.app import App, build_app
    from partition_notify.contract import (
        AddPartitionMessage,
        CommitsMissedMessage,
        DropPartitionMessage,
        PartitionDoneRetractedMessage,
        PartitionLateMessage,
        PartitionLateRecoveredMessage,
        PartitionWithdrawnMessage,
        SetDoneMessage,
    )
    from partition_notify.publisher import Publisher
    from partition_notify.settings import Settings, load_settings
    from partition_notify.subscriber import Subscriber, Subscription
    from partition_notify.writers import NotifyingWriter, WriteResult

__version__ = "0.1.0"

#: Name -> module that defines it; imported on first attribute access.
_LAZY = {
    "App": "partition_notify.app",
    "build_app": "partition_notify.app",
    "Settings": "partition_notify.settings",
    "load_settings": "partition_notify.settings",
    "AddPartitionMessage": "partition_notify.contract",
    "SetDoneMessage": "partition_notify.contract",
    "DropPartitionMessage": "partition_notify.contract",
    "PartitionLateMessage": "partition_notify.contract",
    "PartitionLateRecoveredMessage": "partition_notify.contract",
    "CommitsMissedMessage": "partition_notify.contract",
    "PartitionWithdrawnMessage": "partition_notify.contract",
    "PartitionDoneRetractedMessage": "partition_notify.contract",
    "Publisher": "partition_notify.publisher",
    "Subscriber": "partition_notify.subscriber",
    "Subscription": "partition_notify.subscriber",
    # writers needs PySpark at run time only when a write happens.
    "NotifyingWriter": "partition_notify.writers",
    "WriteResult": "partition_notify.writers",
}

__all__ = [
    "AbortedOverwriteError",
    "AddPartitionMessage",
    "App",
    "AuthenticationError",
    "CatalogChanged",
    "CommitIncompleteError",
    "CommitsMissedMessage",
    "ConfigurationError",
    "ConflictError",
    "ConnectError",
    "DropPartitionMessage",
    "ExpiredOverwriteOvertakenError",
    "HistoryMergeError",
    "HistoryTimeout",
    "InvalidManifestError",
    "InvalidNameError",
    "InvalidSpecError",
    "JobIdReusedError",
    "MalformedMessageError",
    "MessageRejected",
    "NotFoundError",
    "NotifyingWriter",
    "PartitionDoneRetractedMessage",
    "PartitionLateError",
    "PartitionLateMessage",
    "PartitionLateRecoveredMessage",
    "PartitionNotifyError",
    "PartitionWithdrawnMessage",
    "PlacedOverwriteAbortError",
    "PublishError",
    "PublishTimeout",
    "Publisher",
    "PushError",
    "PushRefused",
    "SetDoneMessage",
    "Settings",
    "SnapshotFilesRemovedError",
    "SparkWriteError",
    "StoreError",
    "SubscribeError",
    "Subscriber",
    "Subscription",
    "SubscriptionOverflowError",
    "TableReadTimeout",
    "TransportError",
    "UnknownTableError",
    "ValidationError",
    "WaitTimeout",
    "WriteOvertakenError",
    "WriteResult",
    "build_app",
    "load_settings",
]


def _public(value: object) -> object:
    """Report this package as the home of a public name (httpx does the same).

    Where a class or function lives inside the package is ours to move; its
    repr, its documentation and a pickle of it say ``partition_notify.X``,
    which keeps resolving wherever X moves.
    """
    with contextlib.suppress(AttributeError, TypeError):  # a value without __module__
        value.__module__ = __name__
    return value


for _name in __all__:
    if _name in globals():  # the errors, imported above
        _public(globals()[_name])


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = _public(getattr(importlib.import_module(module), name))
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
