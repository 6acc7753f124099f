"""Helpers the routers share: table references, message rendering."""

from __future__ import annotations

import json

from partition_notify.contract import AnyMessage, names, spec
from partition_notify.core.errors import InvalidNameError
from partition_notify.http.context import HttpContext
from partition_notify.http.problems import about
from partition_notify.store import TableInfo


def table_ref(ref: str, field: str = "path.table") -> tuple[str, str]:
    """``db.table`` (from the path, or ``field``), validated by the CLI's name rules."""
    with about(field):
        db, sep, name = ref.partition(".")
        if not sep or not db or not name:
            raise InvalidNameError(f"table {ref!r} must be written db.table")
        return names.db_name(db), names.table_name(name)


def table_info(ctx: HttpContext, ref: str) -> TableInfo:
    db, name = table_ref(ref)
    with about("path.table"):
        return ctx.app.publisher.table(db, name)


def wanted_spec(info: TableInfo, raw: str, *, full: bool, field: str) -> spec.Spec:
    """Parse and check a spec exactly as the subscriber does."""
    with about(field):
        s = spec.coerce(raw)
        spec.check_against(s, info.partition_keys, full=full, table=info.qualified)
        return s


def message_json(msg: AnyMessage) -> dict[str, object]:
    out: dict[str, object] = json.loads(msg.model_dump_json(by_alias=True, exclude_none=True))
    return out


def table_json(t: TableInfo) -> dict[str, object]:
    return {
        "db": t.db,
        "table": t.name,
        "name": t.qualified,
        "partitionKeys": list(t.partition_keys),
        "topic": t.topic,
        "retentionSeconds": t.retention_seconds,
        "location": t.location,
    }
