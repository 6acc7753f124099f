"""Message ids for a batch: ``uuid.uuid4().hex`` each, from one ``os.urandom`` call.

Why: announcing 10,000 partitions called ``uuid.uuid4()`` per message, an
``os.urandom(16)`` system call and a UUID object each (~2 us apiece). Here the
random bytes of ``n`` ids come from one call and are cut in 16-byte pieces;
each piece gets the version (4) and variant (RFC 4122) bits exactly as
``uuid.UUID(bytes=..., version=4)`` sets them, so every id is what ``uuid4()``
would have returned for those bytes (tests/publisher/test_message_ids.py
compares the two). The randomness is the operating system's, as uuid4's is.

Ids are made for one call and used by it: a pool kept across calls would be
copied into a forked child, and parent and child would hand out the same ids.
"""

from __future__ import annotations

import os

#: The byte holding the version (high nibble): 0100 = version 4.
_VERSION_AT = 6
_VERSION = bytes((b & 0x0F) | 0x40 for b in range(256))
#: The byte holding the variant (two high bits): 10 = RFC 4122.
_VARIANT_AT = 8
_VARIANT = bytes((b & 0x3F) | 0x80 for b in range(256))


def message_ids(n: int) -> list[str]:
    """``n`` random version-4 UUIDs as 32 lower-case hex digits (``uuid4().hex``)."""
    return v4_hex(os.urandom(16 * n)) if n > 0 else []


def v4_hex(random: bytes) -> list[str]:
    """The version-4 UUIDs made of ``random``'s 16-byte pieces, as hex."""
    if len(random) % 16:
        raise ValueError(f"{len(random)} random bytes is not a whole number of UUIDs")
    raw = bytearray(random)
    # Every piece's version byte at once, then its variant byte (a translation table each).
    raw[_VERSION_AT::16] = raw[_VERSION_AT::16].translate(_VERSION)
    raw[_VARIANT_AT::16] = raw[_VARIANT_AT::16].translate(_VARIANT)
    text = raw.hex()
    return [text[i:i + 32] for i in range(0, len(text), 32)]
