"""DROP_PARTITION: a partition announced before no longer exists.

One mechanism for every "this partition is gone" event: a static overwrite
that deleted it (the Spark commit protocol, ``reason="overwrite"``), ``ALTER
TABLE ... DROP PARTITION`` (``"drop"``), and the withdrawals that
completeness rules will need (their own reason). The store logs a drop only
for a partition that is present, removes it in the same transaction (so
``is_partition_present`` says False and a later write announces it again),
and leaves retained set-dones alone: see docs/writers.md, "Dropped partitions".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple, Protocol

from partition_notify.store import EventDraft, TableInfo

from partition_notify.contract import AnyMessage, DropPartitionMessage, spec
from partition_notify.core import limits
from partition_notify.core.errors import ValidationError

SpecLike = str | Mapping[str, object]


class Dropped(NamedTuple):
    """One partition to drop: its full spec, last location and why."""

    partition: SpecLike
    location: str | None
    reason: str


class Publisher(Protocol):
    """What a drop needs of :class:`~partition_notify.publisher.Publisher` (which
    imports this module, so it is named here by shape)."""

    def table(self, db: str, table: str) -> TableInfo: ...

    def validate_partitions(self, info: TableInfo, partitions: Iterable[SpecLike],
                            ) -> list[spec.Spec]: ...

    def common_fields(self, info: TableInfo, event_id: int, seq: int, now: float,
                      revision: int | None = None) -> dict[str, object]: ...

    def append_and_deliver(self, drafts: Sequence[EventDraft]) -> list[AnyMessage]: ...

#: ``reason`` is free text for consumers; bounded like every stored text.
MAX_REASON_CHARS = 64


def drop_drafts(publisher: Publisher, info: TableInfo, dropped: Sequence[Dropped], *,
                revision: int | None = None) -> list[EventDraft]:
    """Validated drop drafts (full specs of ``info``)."""
    specs = publisher.validate_partitions(info, [d.partition for d in dropped])
    drafts = []
    for s, d in zip(specs, dropped, strict=True):
        loc = None if d.location is None else limits.text(
            d.location, field=f"location of a dropped partition of {info.qualified}")
        reason = limits.text(d.reason, field=f"drop reason of {info.qualified}")
        if not 0 < len(reason) <= MAX_REASON_CHARS:
            raise ValidationError(f"drop reason of {info.qualified} must be 1 to "
                                  f"{MAX_REASON_CHARS} characters, got {reason!r:.80}")
        drafts.append(_draft(publisher, info, s, loc, revision, reason))
    return drafts


def _draft(publisher: Publisher, info: TableInfo, s: spec.Spec, location: str | None,
           revision: int | None, reason: str | None) -> EventDraft:
    ordered = spec.in_key_order(s, info.partition_keys)

    def build(event_id: int, seq: int, now: float) -> AnyMessage:
        return DropPartitionMessage.model_validate({
            **publisher.common_fields(info, event_id, seq, now, revision),
            "partitions": [ordered], "partitionKeys": list(info.partition_keys),
            "locations": [location], "reason": reason,
        })

    return EventDraft(info, build, partition_spec=spec.canonical(s), partition_values=ordered,
                      location=location, revision=revision, drop=True)


def drop_partitions(
    publisher: Publisher, db: str, table: str, partitions: Sequence[SpecLike], *,
    reason: str, revision: int | None = None,
) -> list[DropPartitionMessage]:
    """Announce that ``partitions`` are gone; returns the drops logged (present ones)."""
    info = publisher.table(db, table)
    drafts = drop_drafts(publisher, info, [Dropped(p, None, reason) for p in partitions],
                         revision=limits.revision(revision))
    logged = publisher.append_and_deliver(drafts)
    return [m for m in logged if isinstance(m, DropPartitionMessage)]
