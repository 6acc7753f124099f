"""PARTITION_WITHDRAWN: a writer or admin takes a partition or a set back.

Why a type of its own and not DROP_PARTITION with ``reason="withdrawn"``: a drop
says "this partition no longer exists" and leaves retained set-dones alone
(docs/writers.md, "Dropped partitions"), so consumers that only know HCatalog
events keep treating it as housekeeping. A withdrawal says "do not trust what
was said done": it names a (possibly partial) spec, also takes back the
set-dones that share a partition with it, and completeness rules retract what
they derived from it (``PARTITION_DONE_RETRACTED``). A consumer that ignores
unknown types must not mistake that for a harmless drop. Underneath it shares
the drops' mechanism: the partitions it matches are removed in the same
transaction (store/withdrawals.py), so a restatement is today's re-announce at
a new revision, then a set-done again.
"""

from __future__ import annotations

from partition_notify.publisher.drops import Publisher
from partition_notify.store import EventDraft, TableInfo

from partition_notify.contract import AnyMessage, PartitionWithdrawnMessage, spec
from partition_notify.contract.messages import MAX_REASON_CHARS
from partition_notify.core import limits
from partition_notify.core.errors import ValidationError


def reason_text(reason: object, what: str) -> str:
    """The caller's reason: required, 1 to MAX_REASON_CHARS characters."""
    text = limits.text(reason, field=f"withdrawal reason of {what}").strip()
    if not 0 < len(text) <= MAX_REASON_CHARS:
        raise ValidationError(f"withdrawal reason of {what} must be 1 to {MAX_REASON_CHARS} "
                              f"characters, got {text!r:.80}")
    return text


def draft(publisher: Publisher, info: TableInfo, s: spec.Spec, reason: str,
          revision: int | None) -> EventDraft:
    canon = spec.canonical(s)

    def build(event_id: int, seq: int, now: float) -> AnyMessage:
        found = d.withdrawn
        return PartitionWithdrawnMessage.model_validate({
            **publisher.common_fields(info, event_id, seq, now, revision),
            "partitionSpec": dict(s), "partitionSpecString": canon,
            "partitions": [] if found is None else found.partitions,
            "partitionKeys": list(info.partition_keys),
            "setDones": [] if found is None else [
                {"spec": sd, "eventId": e} for sd, e in found.set_dones],
            "reason": reason,
        })

    d = EventDraft(info, build, revision=revision, withdraw=dict(s))
    return d
