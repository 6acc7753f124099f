"""Message ids: time-ordered UUIDs (RFC 9562 version 7) as 32 lower-case hex digits.

Why version 7 and not 4: ``pn_events.message_id`` carries a unique index (on
SQLite and PostgreSQL). Random ids land on random pages of it, so an announce
of 10,000 partitions dirtied and wrote pages all over an index that grows with
the log; an id that starts with the time lands at the index's right-hand edge
(bench/brokers_stomp.py ``--only-batch``, docs/benchmarks.md "Seventh pass").
A version-7 id is still an RFC 4122/9562 UUID with 74 random bits, from the
operating system, so ids stay unique across processes and machines.

Layout (RFC 9562 section 5.7): 48 bits of Unix time in milliseconds, the version
(0111), 12 random bits, the variant (10), 62 random bits. A batch shares one
reading of the clock and is sorted, so its ids are also in order among
themselves. Consumers must still treat an id as an opaque unique string: the
clock can step back, and ids of different processes interleave.

The random bytes of ``n`` ids come from one ``os.urandom`` call (one system
call per batch, not per id). Ids are made for one call and used by it: a pool
kept across calls would be copied into a forked child, and parent and child
would hand out the same ids.
"""

from __future__ import annotations

import os
import time

#: Random bytes per id: 12 + 62 random bits, plus the 6 version and variant bits they carry.
RANDOM_BYTES = 10
#: In each 10-byte piece, the byte holding the version (high nibble: 0111 = version 7).
_VERSION_AT = 0
_VERSION = bytes((b & 0x0F) | 0x70 for b in range(256))
#: The byte holding the variant (two high bits: 10 = RFC 4122/9562).
_VARIANT_AT = 2
_VARIANT = bytes((b & 0x3F) | 0x80 for b in range(256))
#: Unix milliseconds fit 48 bits until the year 10889.
_MS_LIMIT = 1 << 48


def message_ids(n: int) -> list[str]:
    """``n`` version-7 UUIDs of the current millisecond, as hex, in ascending order."""
    if n <= 0:
        return []
    return v7_hex(time.time_ns() // 1_000_000, os.urandom(RANDOM_BYTES * n))


def message_id() -> str:
    """One version-7 UUID of the current millisecond, as hex."""
    return v7_one(time.time_ns() // 1_000_000, os.urandom(RANDOM_BYTES))


#: v7_one's masks over the 80 bits after the time: the version nibble (bits 76-79) and
#: the variant's two bits (62-63) cleared, then set to 0111 and 10.
_KEEP = ~((0xF << 76) | (0b11 << 62)) & ((1 << 80) - 1)
_SET = (0x7 << 76) | (0b10 << 62)


def v7_one(unix_ms: int, piece: bytes) -> str:
    """``v7_hex(unix_ms, piece)[0]`` for one 10-byte piece, in integer arithmetic: every
    set-done publish takes one id, and the batch path's bytearray, translations and
    sort cost it ~7 us where this costs ~2 (docs/benchmarks.md, Twelfth pass)."""
    if len(piece) != RANDOM_BYTES:
        raise ValueError(f"{len(piece)} random bytes is not a whole number of ids "
                         f"({RANDOM_BYTES} bytes each)")
    if not 0 <= unix_ms < _MS_LIMIT:
        raise ValueError(f"unix_ms {unix_ms} is outside 0..2**48-1")
    return f"{unix_ms:012x}{int.from_bytes(piece, 'big') & _KEEP | _SET:020x}"


def v7_hex(unix_ms: int, random: bytes) -> list[str]:
    """The version-7 UUIDs of ``unix_ms`` made of ``random``'s 10-byte pieces, as
    hex, sorted."""
    if len(random) % RANDOM_BYTES:
        raise ValueError(f"{len(random)} random bytes is not a whole number of ids "
                         f"({RANDOM_BYTES} bytes each)")
    if not 0 <= unix_ms < _MS_LIMIT:
        raise ValueError(f"unix_ms {unix_ms} is outside 0..2**48-1")
    raw = bytearray(random)
    # Every piece's version byte at once, then its variant byte (a translation table each).
    raw[_VERSION_AT::RANDOM_BYTES] = raw[_VERSION_AT::RANDOM_BYTES].translate(_VERSION)
    raw[_VARIANT_AT::RANDOM_BYTES] = raw[_VARIANT_AT::RANDOM_BYTES].translate(_VARIANT)
    prefix = f"{unix_ms:012x}"
    text = raw.hex()
    step = 2 * RANDOM_BYTES
    ids = [prefix + text[i:i + step] for i in range(0, len(text), step)]
    ids.sort()
    return ids
