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
from typing import Protocol

from partition_notify.store import EventDraft, TableInfo

from partition_notify.contract import AnyMessage, DropPartitionMessage, spec
from partition_notify.core import limits
from partition_notify.core.errors import ValidationError

SpecLike = str | Mapping[str, object]


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


def drop_drafts(
    publisher: Publisher, info: TableInfo, partitions: Sequence[SpecLike], *,
    locations: Sequence[str | None] | None = None, revision: int | None = None,
    reason: str | None = None,
) -> list[EventDraft]:
    """Validated drop drafts of ``partitions`` (full specs of ``info``)."""
    specs = publisher.validate_partitions(info, partitions)
    locs = list(locations) if locations is not None else [None] * len(specs)
    if len(locs) != len(specs):
        raise ValidationError(
            f"{len(specs)} dropped partitions but {len(locs)} locations for {info.qualified}")
    if reason is not None:
        reason = limits.text(reason, field=f"drop reason of {info.qualified}")[:MAX_REASON_CHARS]
    return [_draft(publisher, info, s, loc, revision, reason) for s, loc in zip(specs, locs,
                                                                                 strict=True)]


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
    drafts = drop_drafts(publisher, info, partitions, revision=limits.revision(revision),
                         reason=reason)
    logged = publisher.append_and_deliver(drafts)
    return [m for m in logged if isinstance(m, DropPartitionMessage)]
