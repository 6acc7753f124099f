"""Checks of settings that are text, for :mod:`partition_notify.settings`.

A module of their own so that settings.py stays its list of fields. Each check
raises ``ValueError`` with what is expected; settings.py names the variable and
the value (truncated, a secret's never) around it.
"""

from __future__ import annotations

import re

from pydantic import SecretStr

from partition_notify.contract.topics import validate_prefix

#: Unicode's control characters (C0, DEL, C1): in a message field, a STOMP header
#: (a newline ends the header and starts one of the value's choosing), a log
#: line (a forged entry) or a terminal (an escape sequence) they do harm.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(value: object) -> object:
    """``value``, if it is no text or text without control characters."""
    text = value.get_secret_value() if isinstance(value, SecretStr) else value
    if isinstance(text, str) and (found := _CONTROL.search(text)):
        raise ValueError(
            f"contains the control character {found.group()!r} at position {found.start()}; "
            "expected printable text (no line break, tab, NUL or escape)")
    return value


def topic_prefix(value: str) -> str:
    """``PN_TOPIC_PREFIX``: the rule topic naming applies (contract/topics.py)."""
    return validate_prefix(value)  # its InvalidNameError is a ValueError


def filesystem(value: object) -> object:
    """``PN_DEFAULT_FS``: a filesystem URI (``hdfs://nn:8020``, ``file:///``), no path."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*:(//[^/?#]*)?/?",
                                                      value.strip()):
        raise ValueError("expected a filesystem URI without a path, e.g. hdfs://namenode:8020")
    return value.strip()
