"""publisher/message_ids.py: a batch of message ids from one os.urandom call must be,
id for id, what uuid.uuid4() makes of the same 16 random bytes."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from partition_notify.publisher.message_ids import message_ids, v4_hex


@settings(max_examples=300, deadline=None)
@given(random=st.binary(min_size=0, max_size=16 * 40).map(lambda b: b[:len(b) // 16 * 16]))
def test_each_id_is_uuid4_of_its_bytes(random: bytes) -> None:
    expected = [uuid.UUID(bytes=random[i:i + 16], version=4).hex
                for i in range(0, len(random), 16)]
    assert v4_hex(random) == expected


def test_a_batch_is_random_version_4_rfc_4122_hex() -> None:
    ids = message_ids(5000)
    assert len(ids) == len(set(ids)) == 5000
    for text in ids:
        u = uuid.UUID(hex=text)
        assert (u.version, u.variant, u.hex) == (4, uuid.RFC_4122, text)
    assert message_ids(0) == []


def test_bytes_that_are_not_whole_ids_are_refused() -> None:
    with pytest.raises(ValueError, match="not a whole number"):
        v4_hex(b"x" * 17)
