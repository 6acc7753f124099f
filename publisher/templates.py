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

A copy is made as ``model_copy`` makes it (a new ``__dict__`` with the fields
replaced, the fields-set extended), without its generic per-call work; the
log row's JSON (headers, partition values) is spliced as the body is, checked
against ``json.dumps`` when the template is made (store/records.py JsonDict).
Add-partition message ids of one call come from one ``os.urandom`` call
(publisher/message_ids.py).
"""

from __future__ import annotations

import json
import operator
import re
import time
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from typing import cast

import pydantic_core
from partition_notify.publisher.message_ids import message_id, message_ids
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
#: Ids written with ``%d`` into a body: serde_json writes an int as ``str`` does, and a
#: str() and an encode per id and message cost more than the rest of the splice.
_INT_IDS = frozenset({"timestamp", "event_id", "topic_seq", "timestamp_ms"})
_REPLACE = b',"replace":true}'
#: What the replace flag adds to a body (``_REPLACE`` takes the place of its closing brace).
REPLACE_EXTRA = len(_REPLACE) - 1
_NO_LOCATION = b"[null]"
_NO_LOCATION_SIZE = len(_NO_LOCATION)
#: Templates kept per publisher (set-dones: one per table and revision).
MAX_TEMPLATES = 1024
#: Text ``json.dumps`` writes as it is (printable ASCII but the quote and backslash).
_PLAIN = re.compile(r"[ !#-\[\]-~]*")
_set = object.__setattr__
#: A message id's JSON (quoted) and two ids of WIDEST_ID's digits.
_WIDE_IDS = 34 + 2 * len(str(WIDEST_ID))


class _Template:
    """A validated message of ``model`` and its JSON cut at the ``probe`` fields' values."""

    def __init__(self, model: type[BaseModel], fixed: Mapping[str, object],
                 probe: Mapping[str, object]) -> None:
        self.message = cast(AnyMessage, model.model_validate({**fixed, **_IDS, **probe}))
        placeholder = encode_body(self.message)
        self._headers = to_envelope(self.message).headers
        self._key = self._headers[PN_TABLE]
        cuts: list[tuple[int, int, str]] = []
        #: A body's values in this order: the ids (as _IDS), then the probe fields.
        names = [*_IDS, *probe]
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
        for begin, end, name in cuts:
            spec = b"%d" if name in _INT_IDS else b"%s"
            fmt.append(placeholder[start:begin].replace(b"%", b"%%") + spec)
            start = end
        fmt.append(placeholder[start:].replace(b"%", b"%%"))
        self._fmt = b"".join(fmt)
        order = [name for _, _, name in cuts]
        # Picks the values (in ``names`` order) in the body's order: one C call.
        self._in_order = (operator.itemgetter(*[names.index(n) for n in order])
                          if len(cuts) > 1 else None)
        #: A body's length is its literal pieces' and its spliced values' (the size check).
        self._literal = len(placeholder) - sum(end - begin for begin, end, _ in cuts)
        #: The splice reproduces the model's encoding (checked on the placeholder).
        self.exact = len(cuts) == len(names) and self.body(
            (*[v if k in _INT_IDS else _json(v) for k, v in _IDS.items()],
             *[_json(v) for v in probe.values()])) == placeholder
        self._headers_fmt = _headers_format(self._headers)
        # model_copy's own steps apply (no extra fields, no private attributes to copy).
        self._plain = (self.message.__pydantic_extra__ is None
                       and getattr(self.message, "__pydantic_private__", None) is None)
        self._ids: Iterator[str] = iter(())
        self._cls = type(self.message)
        self._new = self._cls.__new__
        # Bound once: each ``self.method`` is a new object, and a draft keeps it alive.
        self._headers_json = self.headers_json

    def reserve_ids(self, n: int) -> None:
        """Message ids for the next ``n`` copies, made at once (then one each again)."""
        self._ids = iter(message_ids(n))

    def body(self, values: tuple[object, ...]) -> bytes:
        """The placeholder's JSON with each varying field's value put in: ``values`` in
        ``_IDS`` order (ints as they are, the message id as JSON), then the probe
        fields' as JSON (exact templates only)."""
        assert self._in_order is not None, "an exact template splices"
        spliced: bytes = self._fmt % self._in_order(values)
        return spliced

    def widest_size(self, now: float, sized: int) -> int:
        """Body size with the widest ids (``sized``: the probe fields' JSON lengths): the
        real body is never larger. Counted, not spliced: the pieces' lengths add up to
        the body's (exact templates only)."""
        return (self._literal + _WIDE_IDS + len(str(int(now))) + len(str(int(now * 1000)))
                + sized)

    def headers_json(self, env: Envelope) -> str | None:
        """``json.dumps(env.headers)`` spliced (ids are digits and hex: written as they
        are); None when the template cannot splice them."""
        event_id, message_id = env.headers[PN_EVENT_ID], env.headers[PN_MESSAGE_ID]
        if (self._headers_fmt is None or not event_id.isdigit() or not message_id.isascii()
                or not message_id.isalnum()):
            return None
        text: str = self._headers_fmt % (event_id, message_id)
        return text

    def copy(self, event_id: int, seq: int, now: float, **fields: object) -> AnyMessage:
        """The message with its ids and ``fields`` (python names), not validated again."""
        return self.copy_with({
            "timestamp": int(now), "message_id": next(self._ids, None) or message_id(),
            "event_id": event_id, "topic_seq": seq, "timestamp_ms": int(now * 1000), **fields})

    def copy_with(self, update: dict[str, object]) -> AnyMessage:
        """The message with ``update`` (python names: the ids and the varying fields)."""
        if not self._plain:
            return self.message.model_copy(update=update)
        # What model_copy does for such a model (tests/publisher/test_templates.py).
        msg = self._new(self._cls)
        _set(msg, "__dict__", {**self.message.__dict__, **update})
        _set(msg, "__pydantic_extra__", None)
        _set(msg, "__pydantic_fields_set__", self.message.__pydantic_fields_set__.union(update))
        _set(msg, "__pydantic_private__", None)
        return msg

    def envelope(self, msg: AnyMessage, *values: bytes, tail: bytes | None = None) -> Envelope:
        """``msg``'s envelope; ``values``: its probe fields' JSON, in the probe's order."""
        message_id = msg.message_id
        body = self.body((msg.timestamp, _json(message_id), msg.event_id, msg.topic_seq,
                          msg.timestamp_ms, *values))
        if tail is not None:
            body = body[:-1] + tail
        headers = {**self._headers, PN_EVENT_ID: str(msg.event_id), PN_MESSAGE_ID: message_id}
        return Envelope(msg.topic, self._key, headers, body, msg.event_id, message_id)


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
        self._keys = tuple(info.partition_keys)
        self._sorted_keys = list(self._keys) == sorted(self._keys)
        #: json.dumps of a partition's values (in key order) as a %-format of the values.
        fmt = "{" + ", ".join(json.dumps(k).replace("%", "%%") + ': "%s"'
                              for k in self._keys) + "}"
        sample = {k: "v" for k in self._keys}
        self._values_fmt = fmt if fmt % tuple(sample.values()) == json.dumps(sample) else None
        #: What json.dumps' separators (": ", ", ") add over the body's compact JSON of a
        #: partition in its list: with plain values both write them as they are, so one
        #: length gives the other (checked on the sample; None: encode to measure).
        spaces = 2 * len(self._keys) - 1 - 2
        self._spaces = (spaces if len(json.dumps(sample)) - spaces == len(_json([sample]))
                        else None)
        self._encode_one = self._encode  # bound once, shared by every draft
        self._key_list = list(cast(AddPartitionMessage, self.message).partition_keys)

    def draft(self, spec: str, ordered: dict[str, str], location: str | None,
              replace: bool = False) -> tuple[EventDraft, int]:
        """The draft of one partition (``ordered``: its values, all keys, normalised or in
        the table's key order) and its body size with the widest ids; with ``replace``,
        with the replace flag too (which partitions get it is known only in the logging
        transaction)."""
        # A normalised spec is key-sorted: in the table's order already when its keys
        # are sorted (then no copy: one dict fewer per partition, kept for the whole call).
        if not self._sorted_keys:
            ordered = {k: ordered[k] for k in self._keys if k in ordered}
        values_json = self.values_json(ordered)
        draft = _PartitionDraft(self.info, None, partition_spec=spec, partition_values=ordered,
                                location=location, revision=self.message.revision,
                                encode=self._encode_one if self.exact else None,
                                values_json=values_json,
                                headers_json=self._headers_json if self.exact else None)
        draft.template = self
        now, flag = time.time(), REPLACE_EXTRA if replace else 0
        if not self.exact:
            return draft, len(encode_body(draft.message(WIDEST_ID, WIDEST_ID, now))) + flag
        sized = _NO_LOCATION_SIZE if location is None else len(_json([location]))
        if values_json is not None and self._spaces is not None:
            sized += len(values_json) - self._spaces
        else:
            sized += len(_json([ordered]))
        return draft, self.widest_size(now, sized) + flag

    def values_json(self, ordered: dict[str, str]) -> str | None:
        """``json.dumps(ordered)`` spliced, when that writes the same: every key in the
        table's order, no value with a character JSON escapes; else None."""
        plain = tuple(ordered.values())
        if (self._values_fmt is None or tuple(ordered) != self._keys
                or _PLAIN.fullmatch("".join(plain)) is None):
            return None
        text: str = self._values_fmt % plain
        return text

    def copy_partition(self, ordered: dict[str, str], location: str | None, event_id: int,
                       seq: int, now: float) -> AnyMessage:
        # One dict of the ids and fields (copy's keyword arguments were a second), its own
        # key list, as a validated message has: the template's stays unshared.
        return self.copy_with({
            "timestamp": int(now), "message_id": next(self._ids, None) or message_id(),
            "event_id": event_id, "topic_seq": seq, "timestamp_ms": int(now * 1000),
            "partitions": [ordered], "locations": [location],
            "partition_keys": self._key_list.copy()})

    def _encode(self, msg: AnyMessage) -> Envelope:
        assert isinstance(msg, AddPartitionMessage), "a template encodes its own messages"
        # Its values as JSON again (not kept from the draft: one object fewer per partition).
        return self.envelope(
            msg, _json(msg.partitions),
            _NO_LOCATION if msg.locations[0] is None else _json(msg.locations),
            tail=_REPLACE if msg.replace else None)


class _PartitionDraft(EventDraft):
    """One partition's draft, its message copied by its template from the draft's own
    values. Why not a ``build`` callable: it was an object per partition (a
    ``functools.partial`` of a bound method three) kept alive for the whole append,
    and every full garbage collection during it walks them all: with 10,000
    partitions, a large share of an announce's CPU."""

    __slots__ = ("template",)
    template: PartitionTemplate

    def message(self, event_id: int, seq: int, now: float) -> AnyMessage:
        return self.template.copy_partition(self.partition_values, self.location, event_id,
                                            seq, now)


class SetDoneTemplate(_Template):
    """Set-done messages of one table and revision: ``fixed`` as for partitions."""

    def __init__(self, info: TableInfo, fixed: Mapping[str, object]) -> None:
        super().__init__(SetDoneMessage, fixed, {"partition_spec": {"k": "v"},
                                                 "spec": "k=v", "expires_at": 1})
        self.info = info

    def draft(self, s: dict[str, str], canon: str) -> tuple[EventDraft, int]:
        """The draft of one set-done (``s`` normalised, ``canon`` its canonical string) and
        its body size with the widest ids."""
        values = (_json(s), _json(canon))
        build: Callable[[int, int, float], AnyMessage] = partial(self._copy_done, s, canon)
        draft = EventDraft(self.info, build, revision=self.message.revision,
                           encode=partial(self._encode, values) if self.exact else None,
                           headers_json=self._headers_json if self.exact else None)
        now = time.time()
        if not self.exact:
            return draft, len(encode_body(build(WIDEST_ID, WIDEST_ID, now)))
        expires = str(int(now + self.info.retention_seconds)).encode()
        return draft, self.widest_size(now, len(values[0]) + len(values[1]) + len(expires))

    def _copy_done(self, s: dict[str, str], canon: str, event_id: int, seq: int,
                   now: float) -> AnyMessage:
        return self.copy(event_id, seq, now, partition_spec=s, spec=canon,
                         expires_at=int(now + self.info.retention_seconds))

    def _encode(self, values: tuple[bytes, bytes], msg: AnyMessage) -> Envelope:
        assert isinstance(msg, SetDoneMessage), "a template encodes its own messages"
        return self.envelope(msg, *values, str(msg.expires_at).encode())


def _headers_format(headers: Mapping[str, str]) -> str | None:
    """``json.dumps`` of ``headers`` as a %-format of the event id and message id (in
    that order), or None when the two cannot be told apart in its text."""
    marked = json.dumps({**headers, PN_EVENT_ID: "\x01", PN_MESSAGE_ID: "\x02"})
    first, second = marked.find('"\\u0001"'), marked.find('"\\u0002"')
    if not 0 <= first < second or marked.count("\\u000") != 2:
        return None
    return (marked.replace("%", "%%").replace('"\\u0001"', '"%s"')
            .replace('"\\u0002"', '"%s"'))


def _json(value: object) -> bytes:
    """A field's value as the model's serializer writes it (serde_json, compact)."""
    return pydantic_core.to_json(value)
