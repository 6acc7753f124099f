"""Exceptions raised by partition-notify.

Every error the library raises derives from :class:`PartitionNotifyError`;
driver exceptions (SQLAlchemy, stomp.py, kafka-python) are mapped at the
boundary with ``raise ... from exc`` so callers never need to import a driver::

    PartitionNotifyError
    ├── ConfigurationError          bad settings, unknown transport scheme
    ├── ValidationError             bad input; nothing was stored
    │   ├── InvalidNameError        db / table / key / topic name
    │   ├── InvalidSpecError        partition spec (unknown key, empty value, ...)
    │   ├── MalformedMessageError   a message on the wire or in the log
    │   └── InvalidManifestError    a Spark commit manifest (writers/commit_manifest.py)
    │       └── JobIdReusedError    its job id was announced with other content
    ├── NotFoundError
    │   ├── UnknownTableError       table not registered
    │   └── SnapshotFilesRemovedError  a pinned snapshot's files were deleted after
    │                               PN_RETIRED_FILE_RETENTION_SECONDS
    ├── ConflictError               e.g. re-registering a table differently
    │   ├── WriteOvertakenError     an overwrite of a later revision replaced the
    │   │   │                       write's partition first: refused, revision aborted
    │   │   └── AbortedOverwriteError  an overwrite aborted before it placed: never is
    │   ├── PlacedOverwriteAbortError  abort of an overwrite whose files are (being)
    │   │                           placed: refused, it is left to commit
    │   └── ExpiredOverwriteOvertakenError  an expired placed overwrite a later
    │                               write placed into: not committed above it
    ├── StoreError                  the database failed or is unreachable
    │   └── CatalogChanged          a table's registration kept changing under a
    │                               publish (retried 3 times; nothing was logged)
    ├── TransportError              the message bus failed
    │   ├── ConnectError            could not connect in time
    │   │   └── AuthenticationError the broker refused our credentials or mechanism
    │   ├── PublishError            the broker refused or did not confirm (retriable)
    │   │   ├── PublishTimeout      no receipt/ack before the deadline
    │   │   └── MessageRejected     refused for good (too large, not authorized,
    │   │                           invalid destination); names the event(s)
    │   └── SubscribeError          could not subscribe / confirm subscription
    ├── WaitTimeout                 wait_for_set_done ran out of time
    ├── HistoryTimeout              subscribe's history was not merged in time; the
    │                               subscription stays open (``.subscription``)
    ├── HistoryMergeError           the dispatcher failed to merge a subscription's
    │                               history: it closed (subscribe again)
    ├── SubscriptionOverflowError   a subscription without a callback fell
    │                               max_queued messages behind and closed
    ├── PartitionLateError          a wait with fail-on-late saw PARTITION_LATE
    ├── CommitIncompleteError       Spark committed a write, the notification step
    │                               failed part-way (NotifyingWriter.recover finishes it)
    ├── SparkWriteError             Spark's job failed a writer's write: nothing was
    │                               published (Spark's exception is the __cause__)
    ├── TableReadTimeout            an Iceberg catalog or Delta log did not answer in time
    └── PushError                   Airflow refused or did not answer a pushed event
        └── PushRefused             refused for good (400, 403, 404, 409, 413, 422):
                                    the event is dead-lettered, not retried

Everything above is importable from :mod:`partition_notify` itself, and this
tree is checked against the classes below by tests/core/test_error_tree.py.
"""

from __future__ import annotations

from typing import Any


class PartitionNotifyError(Exception):
    """Base class of every partition-notify error."""


class ConfigurationError(PartitionNotifyError):
    """Settings are invalid or name something that does not exist."""


class ValidationError(PartitionNotifyError, ValueError):
    """Input was rejected before anything was stored."""


class InvalidNameError(ValidationError):
    """A database, table, partition-key or topic name is not acceptable."""


class InvalidSpecError(ValidationError):
    """A partition spec does not fit the table's partition keys."""


class MalformedMessageError(ValidationError):
    """A message body or header set could not be decoded."""


class InvalidManifestError(ValidationError):
    """A Spark commit manifest is malformed or does not fit its table. ``field`` is the
    manifest field at fault (``partitions.0``) when there is one: HTTP names it."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


class JobIdReusedError(InvalidManifestError):
    """A manifest's job id was already announced for other content (one id, one commit)."""


class NotFoundError(PartitionNotifyError, LookupError):
    """Something looked up does not exist."""


class UnknownTableError(NotFoundError):
    """The table has not been registered."""


class SnapshotFilesRemovedError(NotFoundError):
    """Data files a snapshot covers were deleted after their retention: reading it
    would silently return fewer rows."""


class ConflictError(PartitionNotifyError):
    """The request contradicts what is already stored."""


class WriteOvertakenError(ConflictError):
    """A transactional write's data would land in a partition that an overwrite of a
    later revision already replaced: nothing of it was placed, its revision is
    aborted (revisions/files.py ``RevisionFiles.placing``)."""


class PlacedOverwriteAbortError(ConflictError):
    """An abort of an overwrite whose files are placed (or being placed) in the table:
    nothing rolls an aborted revision's data back, so plain reads would lose the
    partitions' old rows for good; the write is left to commit (revisions/placement.py)."""


class ExpiredOverwriteOvertakenError(ConflictError):
    """An overwrite that placed its files and expired is not committed as a new
    revision (``settle``, recovery) when a write of a later revision put files into,
    or replaced, one of its partitions: above that write it would hide its rows
    (revisions/adoption.py). It stays expired, its files and rows kept."""


class AbortedOverwriteError(WriteOvertakenError):
    """An overwrite whose revision was aborted on request before it placed: it is never
    placed (it would retire the partitions for a revision no snapshot includes);
    handled like an overtaken write, its staged data deleted (revisions/files.py)."""


class StoreError(PartitionNotifyError):
    """The store (database) failed; the operation did not take effect."""


class CatalogChanged(StoreError):
    """A table's registration changed between the publish's read of it and its append
    (store/catalog.py's cache); nothing was logged, and a publisher retries."""


class TransportError(PartitionNotifyError):
    """The message transport failed."""


class ConnectError(TransportError):
    """Could not connect to the broker before the deadline."""


class AuthenticationError(ConnectError):
    """The broker refused the credentials or does not offer the authentication mechanism."""


class PublishError(TransportError):
    """The broker refused a message or the connection was lost before it confirmed.

    ``logged`` holds the event ids the store had committed before the broker
    failed (a publisher's write: saved, the relay delivers them); empty when
    nothing was saved.
    """

    logged: tuple[int, ...] = ()


class PublishTimeout(PublishError):
    """No receipt or acknowledgement arrived before the deadline."""


class MessageRejected(PublishError):
    """The broker (or the driver) refused these messages for good: retrying will not help.

    ``rejected`` maps each refused event id to the reason; ``confirmed`` holds
    the event ids of the same call the broker did confirm. Anything in the
    call that is in neither was not confirmed and may be retried.
    """

    def __init__(
        self, message: str, rejected: dict[int, str], confirmed: frozenset[int] = frozenset()
    ) -> None:
        super().__init__(message)
        self.rejected = rejected
        self.confirmed = confirmed


class SubscribeError(TransportError):
    """A subscription could not be made or confirmed."""


class WaitTimeout(PartitionNotifyError, TimeoutError):
    """The awaited set-done message did not arrive before the deadline."""


class HistoryTimeout(PartitionNotifyError, TimeoutError):
    """``subscribe`` confirmed the subscription but its history (retained set-dones, then
    the event log since it subscribed) was not merged within the subscriber's timeout,
    e.g. the dispatcher thread was busy in another subscription's callback. Nothing is
    lost: ``subscription`` stays open and delivers the history, then what came live,
    once merged; close it if you do not want it."""

    def __init__(self, message: str, subscription: object, topics: tuple[str, ...],
                 timeout: float) -> None:
        super().__init__(message)
        self.subscription: Any = subscription
        self.topics = topics
        self.timeout = timeout


class HistoryMergeError(PartitionNotifyError):
    """The subscriber's dispatcher failed to merge a subscription's history (the cause is
    the ``__cause__``): the subscription closed, so that nothing waits for a merge that
    will not come; the event log still holds every message: subscribe again."""

    def __init__(self, message: str, tables: tuple[str, ...]) -> None:
        super().__init__(message)
        self.tables = tables


class SubscriptionOverflowError(PartitionNotifyError):
    """A subscription without a callback held ``max_queued`` unread messages for the
    subscriber's timeout: it closed; the event log still holds what was not delivered."""


class PartitionLateError(PartitionNotifyError):
    """The awaited spec was declared late (``PARTITION_LATE``) before it was done."""

    def __init__(self, message: str, late: object = None) -> None:
        super().__init__(message)
        self.late = late


class TableReadTimeout(PartitionNotifyError, TimeoutError):
    """Reading an Iceberg or Delta table's commits (pyiceberg, delta-rs) ran past its
    deadline (``PN_LAKEHOUSE_READ_TIMEOUT_SECONDS``)."""


class CommitIncompleteError(PartitionNotifyError):
    """Spark committed the data but the notification step failed part-way.

    The manifest stays in the staging directory: ``NotifyingWriter.recover``
    (or any later write to the table once the lease lapsed) finishes the job.
    Do not re-run the write: its data may already be in the table.
    """

    def __init__(self, message: str, write_id: str) -> None:
        super().__init__(message)
        self.write_id = write_id


class SparkWriteError(PartitionNotifyError):
    """Spark failed or refused a write of ``NotifyingWriter`` or ``SnapshotDataset``.

    Nothing was published and the write's files are gone; the message carries
    Spark's one-line reason, the Spark (py4j) exception is ``__cause__``.
    """


class PushError(PartitionNotifyError):
    """Airflow refused or did not answer a pushed asset event; the event will be retried."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        #: The HTTP status Airflow answered, None when it did not answer.
        self.status = status


class PushRefused(PushError):
    """Airflow refused a pushed asset event for good; the sink dead-letters it."""
