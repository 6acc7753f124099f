"""Topic naming: the one function publishers and subscribers both call.

Default (HCatalog convention): one topic per table, ``hcat.<db>.<table>``.
A deployment may choose one topic per database or a single topic; a table may
carry an explicit override, which the store keeps. Names are checked against
the strictest broker we support (Kafka: at most 249 characters of
``[a-zA-Z0-9._-]``), which also keeps them free of ActiveMQ wildcards.
"""

from __future__ import annotations

import enum
import re

from partition_notify.core.errors import InvalidNameError

MAX_TOPIC_LENGTH = 249
_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
#: A prefix is joined to the database and table with '.': an empty part (an empty
#: prefix, a leading or trailing dot) would make topics like ``.db.table``.
_PREFIX = re.compile(r"[a-zA-Z0-9_-]+(\.[a-zA-Z0-9_-]+)*")


class TopicPolicy(enum.StrEnum):
    PER_TABLE = "per-table"
    PER_DATABASE = "per-database"
    SINGLE = "single"


def validate_topic(name: str) -> str:
    """Return ``name`` if every supported broker accepts it, else raise."""
    if not isinstance(name, str) or not name:
        raise InvalidNameError("topic name is empty")
    if len(name) > MAX_TOPIC_LENGTH:
        raise InvalidNameError(
            f"topic {name[:40]!r}... is {len(name)} characters; Kafka allows at most "
            f"{MAX_TOPIC_LENGTH}"
        )
    if name in {".", ".."}:
        raise InvalidNameError(f"topic name {name!r} is reserved by Kafka")
    if not _TOPIC.fullmatch(name):
        bad = sorted({c for c in name if not _TOPIC.fullmatch(c)})
        raise InvalidNameError(
            f"topic {name!r} has illegal character(s) {''.join(bad)!r}; "
            "expected letters, digits, '.', '_' and '-'"
        )
    return name


def validate_prefix(prefix: str) -> str:
    """Return ``prefix`` if it can be the first part of topic names, else raise."""
    if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
        raise InvalidNameError(
            f"topic prefix {prefix!r:.60} is not a name part; expected letters, digits, "
            "'_' and '-' in parts joined by single dots (e.g. hcat): topics are "
            "<prefix>.<db>.<table>"
        )
    return validate_topic(prefix)  # its length


def topic_for(
    db: str,
    table: str,
    *,
    prefix: str = "hcat",
    policy: TopicPolicy = TopicPolicy.PER_TABLE,
    override: str | None = None,
) -> str:
    """The topic a table's messages go to. ``db`` and ``table`` are already normalised."""
    if override:
        return validate_topic(override)
    validate_prefix(prefix)
    if policy is TopicPolicy.PER_TABLE:
        name = f"{prefix}.{db}.{table}"
    elif policy is TopicPolicy.PER_DATABASE:
        name = f"{prefix}.{db}"
    else:
        name = prefix
    return validate_topic(name.lower())
