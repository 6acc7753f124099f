"""publisher/message_ids.py: message ids are RFC 9562 version-7 UUIDs (time first, then
74 random bits), built from one os.urandom call per batch, sorted within a batch."""

from __future__ import annotations

import time
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from partition_notify.publisher.message_ids import (
    RANDOM_BYTES,
    message_id,
    message_ids,
    v7_hex,
    v7_one,
)

MS = st.integers(0, 2**48 - 1)
PIECES = st.binary(min_size=0, max_size=RANDOM_BYTES * 40).map(
    lambda b: b[:len(b) // RANDOM_BYTES * RANDOM_BYTES])


def _by_the_rfc(unix_ms: int, piece: bytes) -> str:
    """RFC 9562 5.7, bit by bit: unix_ts_ms(48) ver(4) rand_a(12) var(2) rand_b(62)."""
    rand = int.from_bytes(piece, "big")  # 80 bits; the 6 overwritten ones are dropped
    rand_a = (rand >> 64) & 0xFFF
    rand_b = rand & (2**62 - 1)
    value = (unix_ms << 80) | (0x7 << 76) | (rand_a << 64) | (0b10 << 62) | rand_b
    return uuid.UUID(int=value).hex


@settings(max_examples=300, deadline=None)
@given(unix_ms=MS, random=PIECES)
def test_each_id_is_the_rfc_layout_of_its_time_and_bytes(unix_ms: int, random: bytes) -> None:
    expected = sorted(_by_the_rfc(unix_ms, random[i:i + RANDOM_BYTES])
                      for i in range(0, len(random), RANDOM_BYTES))
    assert v7_hex(unix_ms, random) == expected


@settings(max_examples=300, deadline=None)
@given(unix_ms=MS, piece=st.binary(min_size=RANDOM_BYTES, max_size=RANDOM_BYTES))
def test_one_id_is_the_batch_path_of_one(unix_ms: int, piece: bytes) -> None:
    # message_id()'s own path (one id per publish) must give the batch path's id.
    assert v7_one(unix_ms, piece) == v7_hex(unix_ms, piece)[0] == _by_the_rfc(unix_ms, piece)


def test_one_id_refuses_what_the_batch_path_refuses() -> None:
    with pytest.raises(ValueError, match="outside"):
        v7_one(2**48, bytes(RANDOM_BYTES))
    with pytest.raises(ValueError, match="whole number"):
        v7_one(0, bytes(RANDOM_BYTES - 1))


def test_a_batch_is_unique_sorted_version_7_of_now() -> None:
    before = time.time_ns() // 1_000_000
    ids = message_ids(5000)
    after = time.time_ns() // 1_000_000
    assert len(ids) == len(set(ids)) == 5000
    assert ids == sorted(ids)
    for text in ids:
        u = uuid.UUID(hex=text)
        assert (u.version, u.variant, u.hex) == (7, uuid.RFC_4122, text)
        assert before <= u.int >> 80 <= after
    assert message_ids(0) == []
    one = uuid.UUID(hex=message_id())
    assert one.version == 7 and after <= one.int >> 80 <= time.time_ns() // 1_000_000


def test_later_batches_sort_after_earlier_ones() -> None:
    # What keeps the unique index's inserts at its right-hand edge.
    first = message_ids(100)
    deadline = time.monotonic() + 5
    while time.time_ns() // 1_000_000 <= int(first[-1][:12], 16):
        assert time.monotonic() < deadline, "the clock did not advance"
    assert message_ids(100)[0] > first[-1]


def test_bytes_that_are_not_whole_ids_or_times_out_of_range_are_refused() -> None:
    with pytest.raises(ValueError, match="not a whole number of ids"):
        v7_hex(0, b"x" * 17)
    with pytest.raises(ValueError, match=r"outside 0\.\.2\*\*48-1"):
        v7_hex(2**48, b"x" * RANDOM_BYTES)
    with pytest.raises(ValueError, match=r"outside 0\.\.2\*\*48-1"):
        v7_hex(-1, b"x" * RANDOM_BYTES)
