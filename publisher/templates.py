"""One validated message per table, copied per partition or set-done.

Why: announcing 10,000 partitions validated a pydantic message per partition,
built each twice (the size check with the widest ids, the append with the real
ones) and encoded each twice; outside the STOMP send that was most of the
CPU (bench/durable_profile.py profile --what announce), and a set-done publish
paid the same once. What differs between two messages of one table is made by
us (ids, times, the message id) or was validated before (specs by
publisher/validate.py, locations by limits.text), so:

- the message is validated once, with placeholders; each message is a copy
  with its fields replaced (``model_copy``: no validation);
- its body is the placeholder's JSON with each varying field spliced in, each
  serialised by pydantic_core as the model's own serializer does
  (tests/publisher/test_templates.py compares it byte for byte with
  ``encode_body``; a template also checks itself against it when made and
  leaves encoding to the model if they differ);
- the size check measures the widest body by the same splice, before logging.
"""

from __future__ import annotations

import operator
import time
import uuid
from collections.abc import Callable, Mapping
from functools import partial
from typing import cast

import pydantic_core
from partition_notify.store import EventDraft, TableInfo
from pydantic import BaseModel

from partition_notify.contract import (
    AddPartitionMessage,
    AnyMessage,
    Envelope,
    SetDoneMessage,
    to_envelope,
)
from partition_notify.contract.messages import PN_EVENT_ID, PN_MESSAGE_ID, PN_TABLE, encode_body

#: Stand-ins when sizing before the log hands out ids: no real id is longer.
WIDEST_ID = 2**63 - 1
_IDS = {"timestamp": 1, "message_id": "m" * 32, "event_id": 1, "topic_seq": 1,
        "timestamp_ms": 1000}
_REPLACE = b',"replace":true}'
#: Templates kept per publisher (set-dones: one per table and revision).
MAX_TEMPLATES = 1024


class _Template:
    """A validated message of ``model`` and its JSON cut at the ``probe`` fields' values."""

    def __init__(self, model: type[BaseModel], fixed: Mapping[str, object],
                 probe: Mapping[str, object]) -> None:
        self.message = cast(AnyMessage, model.model_validate({**fixed, **_IDS, **probe}))
        placeholder = encode_body(self.message)
        self._headers = to_envelope(self.message).headers
        cuts: list[tuple[int, int, str]] = []
        for name, value in {**_IDS, **probe}.items():
            alias = model.model_fields[name].alias or name
            token = b'"' + alias.encode() + b'":' + _json(value)
            at = placeholder.find(token)
            if at < 0 or placeholder.find(token, at + 1) >= 0:
                cuts = []
                break
            cuts.append((at + len(token) - len(_json(value)), at + len(token), name))
        cuts.sort()
        # One bytes %-format: a loop over the pieces cost more than the rest of a build.
        fmt, start = [], 0
        for begin, end, _ in cuts:
            fmt.append(placeholder[start:begin].replace(b"%", b"%%") + b"%s")
            start = end
        fmt.append(placeholder[start:].replace(b"%", b"%%"))
        self._fmt = b"".join(fmt)
        self._order = [name for _, _, name in cuts]
        self._in_order = operator.itemgetter(*self._order) if cuts else None
        #: The splice reproduces the model's encoding (checked on the placeholder).
        self.exact = bool(cuts) and self.body(
            {k: _json(v) for k, v in {**_IDS, **probe}.items()}) == placeholder

    def body(self, values: Mapping[str, bytes]) -> bytes:
        """The placeholder's JSON with each varying field's value (as JSON) put in."""
        if self._in_order is None:
            return self._fmt
        spliced: bytes = self._fmt % self._in_order(values)
        return spliced

    def widest_size(self, now: float, values: Mapping[str, bytes]) -> int:
        """Body size with the widest ids: the real body is never larger."""
        wide = str(WIDEST_ID).encode()
        return len(self.body({"timestamp": str(int(now)).encode(), "message_id": _json("0" * 32),
                              "event_id": wide, "topic_seq": wide,
                              "timestamp_ms": str(int(now * 1000)).encode(), **values}))

    def copy(self, event_id: int, seq: int, now: float, **fields: object) -> AnyMessage:
        """The message with its ids and ``fields`` (python names), not validated again."""
        return self.message.model_copy(update={
            "timestamp": int(now), "message_id": uuid.uuid4().hex, "event_id": event_id,
            "topic_seq": seq, "timestamp_ms": int(now * 1000), **fields})

    def envelope(self, values: Mapping[str, bytes], msg: AnyMessage,
                 tail: bytes | None = None) -> Envelope:
        """``msg``'s envelope; ``values``: its varying fields other than the ids, as JSON."""
        body = self.body({
            "timestamp": str(msg.timestamp).encode(), "message_id": _json(msg.message_id),
            "event_id": str(msg.event_id).encode(), "topic_seq": str(msg.topic_seq).encode(),
            "timestamp_ms": str(msg.timestamp_ms).encode(), **values})
        if tail is not None:
            body = body[:-1] + tail
        headers = {**self._headers, PN_EVENT_ID: str(msg.event_id),
                   PN_MESSAGE_ID: msg.message_id}
        return Envelope(topic=msg.topic, key=headers[PN_TABLE], headers=headers, body=body,
                        event_id=msg.event_id, message_id=msg.message_id)


class PartitionTemplate(_Template):
    """Add-partition messages of one table and call: ``fixed`` holds the server, db,
    table, topic, revision and partition keys."""

    def __init__(self, info: TableInfo, fixed: Mapping[str, object]) -> None:
        super().__init__(AddPartitionMessage, fixed,
                         {"partitions": [{"k": "v"}], "locations": [None]})
        self.info = info
        replaced = self.message.model_copy(update={"replace": True})
        self.exact = self.exact and encode_body(replaced) == (
            encode_body(self.message)[:-1] + _REPLACE)

    def draft(self, spec: str, ordered: dict[str, str],
              location: str | None) -> tuple[EventDraft, int]:
        """The draft of one partition (``ordered``: its values in the table's key order)
        and its body size with the widest ids."""
        values = {"partitions": _json([ordered]), "locations": _json([location])}
        build = partial(self.copy_partition, ordered, location)
        draft = EventDraft(self.info, build, partition_spec=spec, partition_values=ordered,
                           location=location, revision=self.message.revision,
                           encode=partial(self._encode, values) if self.exact else None)
        now = time.time()
        if not self.exact:
            return draft, len(encode_body(build(WIDEST_ID, WIDEST_ID, now)))
        return draft, self.widest_size(now, values)

    def copy_partition(self, ordered: dict[str, str], location: str | None, event_id: int,
                       seq: int, now: float) -> AnyMessage:
        # Its own key list, as a validated message has: the template's stays unshared.
        keys = cast(AddPartitionMessage, self.message).partition_keys
        return self.copy(event_id, seq, now, partitions=[ordered], locations=[location],
                         partition_keys=list(keys))

    def _encode(self, values: Mapping[str, bytes], msg: AnyMessage) -> Envelope:
        assert isinstance(msg, AddPartitionMessage), "a template encodes its own messages"
        return self.envelope(values, msg, _REPLACE if msg.replace else None)


class SetDoneTemplate(_Template):
    """Set-done messages of one table and revision: ``fixed`` as for partitions."""

    def __init__(self, info: TableInfo, fixed: Mapping[str, object]) -> None:
        super().__init__(SetDoneMessage, fixed, {"partition_spec": {"k": "v"},
                                                 "spec": "k=v", "expires_at": 1})
        self.info = info

    def draft(self, s: dict[str, str], canon: str) -> tuple[EventDraft, int]:
        """The draft of one set-done (``s`` normalised, ``canon`` its canonical string) and
        its body size with the widest ids."""
        values = {"partition_spec": _json(s), "spec": _json(canon)}
        build: Callable[[int, int, float], AnyMessage] = partial(self._copy_done, s, canon)
        draft = EventDraft(self.info, build, revision=self.message.revision,
                           encode=partial(self._encode, values) if self.exact else None)
        now = time.time()
        if not self.exact:
            return draft, len(encode_body(build(WIDEST_ID, WIDEST_ID, now)))
        expires = str(int(now + self.info.retention_seconds)).encode()
        return draft, self.widest_size(now, {**values, "expires_at": expires})

    def _copy_done(self, s: dict[str, str], canon: str, event_id: int, seq: int,
                   now: float) -> AnyMessage:
        return self.copy(event_id, seq, now, partition_spec=s, spec=canon,
                         expires_at=int(now + self.info.retention_seconds))

    def _encode(self, values: Mapping[str, bytes], msg: AnyMessage) -> Envelope:
        assert isinstance(msg, SetDoneMessage), "a template encodes its own messages"
        return self.envelope({**values, "expires_at": str(msg.expires_at).encode()}, msg)


def _json(value: object) -> bytes:
    """A field's value as the model's serializer writes it (serde_json, compact)."""
    return pydantic_core.to_json(value)
