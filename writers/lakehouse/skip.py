"""Past a commit the follower cannot announce: the operator's explicit, audited skip.

A commit the follower cannot announce (a partition value over the limit, partition
fields that are not the registered keys, a malformed log entry) stops its table: the
follower records the commit with the cursor (``stopped_at``) and says so at every run.
:func:`skip` moves the cursor past exactly that commit, in one transaction with a
``COMMITS_MISSED`` on the table's topic (subscribers learn that commit's partitions were
not announced) and an audit row — who, which commit, why it stopped, when — among the
commit refusals the ``/ui`` operations page lists (``writers/commit_refusals.py``:
bounded, purged by ``serve``). The follower goes on with the next commit at its next run.

A table that cannot be loaded at its cursor is stopped on the commit the follower would
resume at (a Delta table's newest version): skipping it moves the cursor there, one
``COMMITS_MISSED`` for the commits in between. Stopped at the cursor itself, nothing of
the table could be read: there is nothing to skip to, and the skip is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from partition_notify.publisher import Publisher
from partition_notify.store import EventDraft, TableInfo
from partition_notify.store.provider import InTxn
from partition_notify.store.uow import UnitOfWork
from partition_notify.writers.commit_refusals import CommitRefusals
from partition_notify.writers.lakehouse.schema import BEFORE_FIRST
from partition_notify.writers.lakehouse.store import LakehouseRepository, LakehouseTables

from partition_notify.contract import AnyMessage
from partition_notify.contract.messages import MAX_REASON_CHARS, CommitsMissedMessage
from partition_notify.core.errors import ConflictError, ValidationError

#: The audit row's status among the commit refusals (``/ui/ops``).
SKIPPED = "skipped"


def missed_draft(
    publisher: Publisher, info: TableInfo, fmt: str, before: int, resume_at: int, reason: str
) -> EventDraft:
    """A ``COMMITS_MISSED`` of ``info``: the commits after ``before`` up to ``resume_at``
    (BEFORE_FIRST: the table's first, not yet handled) were not announced."""

    def build(event_id: int, seq: int, now: float) -> CommitsMissedMessage:
        revision = None if resume_at == BEFORE_FIRST else resume_at
        return CommitsMissedMessage.model_validate(
            {
                **publisher.common_fields(info, event_id, seq, now, revision),
                "format": fmt,
                "afterRevision": None if before == BEFORE_FIRST else before,
                "reason": reason[:MAX_REASON_CHARS],
            }
        )

    return EventDraft(info, build)


def one_line(text: str | None) -> str:
    return " ".join((text or "?").split())


@dataclass(frozen=True)
class Skipped:
    table: str
    format: str
    revision: int
    #: The commit handled before it (None: none yet).
    after: int | None
    #: The oldest commit skipped: Delta versions from the one after the cursor up to
    #: ``revision`` (a stop where the table resumes skips all of them); ``revision``
    #: for an Iceberg snapshot (stopped on the cursor's child: one snapshot).
    first: int
    #: Why the follower had stopped on it.
    reason: str
    message: CommitsMissedMessage

    @property
    def commits(self) -> str:
        """What was skipped: ``delta commit 7``, ``delta commits 5..7``."""
        return skipped_commits(self.format, self.first, self.revision)


def first_skipped(fmt: str, after: int | None, revision: int) -> int:
    """The oldest commit a skip to ``revision`` after commit ``after`` covers: Delta
    versions are numbered one by one; Iceberg snapshot ids are in no order, and its
    stops are on the cursor's child (one snapshot)."""
    if fmt != "delta":
        return revision
    return 0 if after is None or after == BEFORE_FIRST else after + 1


def skipped_commits(fmt: str, first: int, revision: int) -> str:
    if first == revision:
        return f"{fmt} commit {revision}"
    return f"{fmt} commits {first}..{revision}"


def skip(
    publisher: Publisher,
    info: TableInfo,
    revision: int,
    *,
    principal: str,
    in_txn: InTxn | None = None,
) -> Skipped:
    """Skip commit ``revision`` of ``info``, the one its follower is stopped on.

    Raises ValidationError when the table is not followed, ConflictError naming the
    stopped commit when it is stopped on another one (or on none). ``in_txn`` runs in
    the same transaction (the HTTP API's idempotency record)."""
    tables = LakehouseTables(publisher.store)
    f = tables.get(info.id)
    if f is None:
        raise ValidationError(
            f"{info.qualified} is not followed as an Iceberg or Delta table (register --format)"
        )
    if f.stopped_at is None or f.cursor is None:
        raise ConflictError(
            f"{info.qualified} is not stopped on a commit (cursor: after "
            f"commit {f.cursor}); commit {revision} is not skipped"
        )
    if f.stopped_at == f.cursor:
        raise ConflictError(
            f"{info.qualified} cannot be loaded at commit {f.cursor} and no commit of it "
            f"can be read to skip to ({one_line(f.stopped_reason)}): repair the table; "
            "the follower goes on by itself once it loads"
        )
    if f.stopped_at != revision:
        raise ConflictError(
            f"{info.qualified} is stopped on commit {f.stopped_at}, not "
            f"{revision}: only that commit can be skipped"
        )
    before, why = f.cursor, f.stopped_reason or "?"
    first = first_skipped(f.format, before, revision)
    reason = f"{skipped_commits(f.format, first, revision)} skipped by {principal}: {why}"

    def record(uow: UnitOfWork, messages: list[AnyMessage]) -> None:
        if not LakehouseRepository(uow.session).skip(
            info.id, before, revision, publisher.store.clock()
        ):
            raise ConflictError(
                f"{info.qualified}: its follower moved on meanwhile; "
                f"commit {revision} is not skipped"
            )
        CommitRefusals(publisher.store).record_in(
            uow, SKIPPED, None, info.qualified, f"{reason} (after commit {before})", principal
        )
        if in_txn is not None:
            in_txn(uow, messages)

    (msg,) = publisher.append_and_deliver(
        [missed_draft(publisher, info, f.format, before, revision, reason)], in_txn=record
    )
    assert isinstance(msg, CommitsMissedMessage)
    return Skipped(
        info.qualified, f.format, revision, None if before == BEFORE_FIRST else before,
        first, why, msg
    )
