"""The exactly-once key of a set-done: what schedulers use as idempotency key / ``run_key``.

``<db>.<table>:<eventId>:<revision or 0>:<messageId>``, e.g.
``sales.orders:42:0:9f1c…``. Event id and message id are given once, when the
message is logged (the outbox), and every later delivery carries the logged
body unchanged: the relay's resend, a replay from history or from the log
after a restart, the same event through two brokers, two ``serve`` processes
racing to derive a set-done (only one logs it: one firing per rule and spec).
So every delivery of one set-done has one key, and a new set-done (the writer
marks the set done again, a restatement at a new revision, a derived set-done
after a withdrawal) has a new one. Table, event id and revision make the key
readable and ordered; the message id (a UUID) makes it unique across stores,
whose event ids repeat.
"""

from __future__ import annotations

from partition_notify.contract.messages import SetDoneMessage


def delivery_key(msg: SetDoneMessage) -> str:
    """The key every delivery of ``msg`` shares."""
    return f"{msg.db}.{msg.table}:{msg.event_id}:{msg.revision or 0}:{msg.message_id}"
