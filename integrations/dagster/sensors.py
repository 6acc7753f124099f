"""A Dagster sensor that records set-dones as materializations of an external asset.

The sensor reads the event log forward from its cursor (our event id), so
every set-done is reported once, including ones for old ("late" or
backfilled) partitions; an ``AutomationCondition`` on downstream assets then
decides what to run (see docs/schedulers.md for one that runs late partitions
too, which ``eager()`` alone does not: it only looks at the latest time window).

A withdrawal (``PARTITION_WITHDRAWN``) or a retracted derived set-done
(``PARTITION_DONE_RETRACTED``) of the table is recorded as an
``AssetObservation`` of the partitions it covers (metadata
``partition_notify/withdrawn`` and the reason; no run, no materialization),
and a set-done taken back later in the same tick is not materialized
(:mod:`.observations`).

A set-done maps onto the asset's partitions by dimension name = partition
key: ``datestamp=20110228/region=us`` is ``MultiPartitionKey({"datestamp":
"20110228", "region": "us"})``; a coarser ``datestamp=20110228`` stands for
every region partition of that day (one materialization each). A key the
asset's ``PartitionsDefinition`` does not have (a day before its start date,
another date format, a value outside a static set) is never written into
Dagster's history: the tick skips it and logs one WARNING line with the count
and the keys.

The sensor is named ``partition_notify_<db>_<table>`` unless ``name`` is
given, ticks at most every ``minimum_interval_seconds`` (default
:data:`DEFAULT_INTERVAL_SECONDS`) and is created STOPPED, as every Dagster
sensor is, unless ``default_status=dg.DefaultSensorStatus.RUNNING``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

import dagster as dg
from partition_notify.integrations import shared
from partition_notify.integrations.dagster.observations import observations
from partition_notify.integrations.withdrawn import taken_back
from partition_notify.store import LoggedEvent, Store, TableInfo

from partition_notify.contract import (
    PartitionDoneRetractedMessage,
    PartitionWithdrawnMessage,
    SetDoneMessage,
    decode,
)
from partition_notify.contract.messages import HCAT_EVENT, PARTITION_DONE, PN_TABLE
from partition_notify.core.errors import (
    ConfigurationError,
    InvalidSpecError,
    MalformedMessageError,
    UnknownTableError,
    ValidationError,
)
from partition_notify.settings import Settings, load_settings

#: Events read per tick; the cursor carries on from there at the next tick.
MAX_EVENTS_PER_TICK = 1000
#: Dagster's own default sensor interval.
DEFAULT_INTERVAL_SECONDS = 30


#: Event ids are SQL BIGINT: a larger cursor cannot come from any store.
MAX_EVENT_ID = 2**63 - 1
#: Largest ``max_events_per_tick``: a tick holds its events and their materializations.
MAX_EVENTS_PER_TICK_LIMIT = 100_000
#: Largest ``minimum_interval_seconds``: a day; a sensor ticking more rarely is a typo.
MAX_INTERVAL_SECONDS = 86_400


def _whole(value: object, field: str, low: int, high: int) -> int:
    # 0 events a tick never moved the cursor and -1 became an unlimited SQL LIMIT.
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValidationError(f"{field} {value!r}: expected an integer from {low} to {high}")
    return value


def _cursor(value: str | None, start: int) -> int:
    if value is None:
        return start
    # ASCII only: isdigit() also takes "²" (int() refuses it) and fullwidth digits.
    if not (value.isascii() and value.isdigit()) or int(value) > MAX_EVENT_ID:
        raise ConfigurationError(f"sensor cursor {value!r}: expected an event id (digits)")
    return int(value)


def _check_not_ahead(store: Store, after: int) -> None:
    """A tick that read nothing: its cursor must not be past the log's last event id.

    That id never goes down (the purge keeps each topic's last event), so a cursor
    above it is another store's (or a store's that was recreated): ticking on would
    report nothing until the log got there, losing every set-done in between.
    """
    top = store.log.max_event_id()
    if after > top:
        raise ConfigurationError(
            f"sensor cursor {after} is ahead of the event log (last event id {top}): a cursor "
            "of another store? Reset the sensor's cursor (dagster sensor cursor --delete)"
        )


def partition_keys_for(
    msg: SetDoneMessage | PartitionWithdrawnMessage | PartitionDoneRetractedMessage,
    table_keys: Sequence[str],
    partitions_def: dg.PartitionsDefinition | None,
    dynamic_store: dg.DagsterInstance | None = None,
) -> list[str | dg.MultiPartitionKey | None]:
    """The asset partition keys a set-done stands for (``[None]`` for an unpartitioned asset)."""
    if partitions_def is None:
        return [None]
    done = msg.partition_spec
    if isinstance(partitions_def, dg.MultiPartitionsDefinition):
        dims = partitions_def.partitions_defs
        names = {d.name for d in dims}
        if names != set(table_keys):
            raise InvalidSpecError(
                f"asset dimensions {sorted(names)} must be the partition keys "
                f"{list(table_keys)} of {msg.db}.{msg.table}"
            )
        choices = [
            [done[d.name]] if d.name in done
            else d.partitions_def.get_partition_keys(dynamic_partitions_store=dynamic_store)
            for d in dims
        ]
        return [
            dg.MultiPartitionKey(dict(zip((d.name for d in dims), combo, strict=True)))
            for combo in itertools.product(*choices)
        ]
    if len(table_keys) != 1:
        raise InvalidSpecError(
            f"{msg.db}.{msg.table} has partition keys {list(table_keys)}: "
            "use a MultiPartitionsDefinition with one dimension per key"
        )
    return [done[table_keys[0]]]


def partition_set_done_sensor(
    asset_key: str | Sequence[str] | dg.AssetKey,
    table: str,
    *,
    partitions_def: dg.PartitionsDefinition | None = None,
    settings: Settings | None = None,
    name: str | None = None,
    start_event_id: int = 0,
    minimum_interval_seconds: int = DEFAULT_INTERVAL_SECONDS,
    max_events_per_tick: int = MAX_EVENTS_PER_TICK,
    default_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.STOPPED,
) -> dg.SensorDefinition:
    """A ``SensorDefinition`` reporting each set-done of ``table`` on ``asset_key``.

    ``settings`` default to the ``PN_*`` environment of the sensor's process.
    The first tick starts after ``start_event_id`` (0: everything in the log).
    ``minimum_interval_seconds``: 1 to 86400; ``max_events_per_tick``: 1 to 100000;
    anything else is a :class:`ValidationError` here, not a sensor that never moves.
    """
    db, tname = shared.split_table(table)
    key = dg.AssetKey.from_coercible(asset_key)
    start_event_id = _whole(start_event_id, "start_event_id", 0, MAX_EVENT_ID)
    minimum_interval_seconds = _whole(minimum_interval_seconds, "minimum_interval_seconds", 1,
                                      MAX_INTERVAL_SECONDS)
    max_events_per_tick = _whole(max_events_per_tick, "max_events_per_tick", 1,
                                 MAX_EVENTS_PER_TICK_LIMIT)

    def evaluate(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        store = shared.entry(settings or load_settings()).app.store
        try:
            info = store.catalog.get_table(db, tname)
        except UnknownTableError:  # deployed before the producer's first run registers it
            return dg.SensorResult(skip_reason=f"table {db}.{tname} is not registered yet",
                                   cursor=context.cursor)
        after = _cursor(context.cursor, start_event_id)
        events = store.log.events_after(after, max_events_per_tick)
        if not events and context.cursor is not None:
            _check_not_ahead(store, after)
        undone = taken_back(events)  # withdrawn later in this tick: not materialized
        wanted = [
            (msg, pk)
            for msg in _set_dones(events, info, context.log) if msg.event_id not in undone
            for pk in partition_keys_for(msg, info.partition_keys, partitions_def,
                                         context.instance)
        ]
        valid = _not_reported(_valid(wanted, partitions_def, context), key, context)
        asset_events: list[dg.AssetMaterialization | dg.AssetObservation] = [
            dg.AssetMaterialization(asset_key=key, partition=pk, metadata=_metadata(msg, info))
            for msg, pk in valid
        ]
        asset_events += observations(key, events, info, lambda m: partition_keys_for(
            m, info.partition_keys, partitions_def, context.instance), context.log)
        cursor = str(events[-1].event_id) if events else str(after)
        return dg.SensorResult(asset_events=asset_events, cursor=cursor)

    make = dg.sensor(
        name=name or f"partition_notify_{db}_{tname}",
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
        description=f"set-done of {db}.{tname} -> materializations of {key.to_user_string()}",
    )
    definition: dg.SensorDefinition = make(evaluate)
    return definition


def _valid(
    wanted: list[tuple[SetDoneMessage, str | dg.MultiPartitionKey | None]],
    partitions_def: dg.PartitionsDefinition | None,
    context: dg.SensorEvaluationContext,
) -> list[tuple[SetDoneMessage, str | dg.MultiPartitionKey | None]]:
    """``wanted`` less the keys ``partitions_def`` does not have (one log line for them)."""
    if partitions_def is None:
        return wanted
    with dg.partition_loading_context(dynamic_partitions_store=context.instance):
        ok = [partitions_def.has_partition_key(str(pk)) for _, pk in wanted]
    keep = [w for w, good in zip(wanted, ok, strict=True) if good]
    if len(keep) < len(wanted):
        bad = [f"{pk} (event {m.event_id})"
               for (m, pk), good in zip(wanted, ok, strict=True) if not good]
        shown = ", ".join(bad[:20]) + (f" and {len(bad) - 20} more" if len(bad) > 20 else "")
        context.log.warning(f"skipped {len(bad)} partition key(s) not in the asset's "
                            f"PartitionsDefinition: {shown}")
    return keep


def _not_reported(
    wanted: list[tuple[SetDoneMessage, str | dg.MultiPartitionKey | None]],
    key: dg.AssetKey,
    context: dg.SensorEvaluationContext,
) -> list[tuple[SetDoneMessage, str | dg.MultiPartitionKey | None]]:
    """``wanted`` less what an earlier tick reported already: a redelivery.

    The cursor is Dagster's; a tick replayed from an older cursor (reset, a
    cursor lost with a restored instance, two code locations with one sensor)
    reads set-dones again. Each partition's latest materialization carries the
    delivery key's parts (``key``, ``eventId``): one for the same table at this
    event or a later one means this set-done was reported (event ids grow with
    commit order in the one store the sensor reads), and a second one would
    make ``AutomationCondition`` run the downstream partition again.
    """
    latest: dict[str, tuple[str, int] | None] = {}
    out = []
    for msg, pk in wanted:
        name = str(pk) if pk is not None else ""
        if name not in latest:
            latest[name] = _latest_reported(key, pk, context.instance)
        seen = latest[name]
        if seen is not None and seen[0] == f"{msg.db}.{msg.table}" and seen[1] >= msg.event_id:
            continue
        out.append((msg, pk))
    if len(out) < len(wanted):
        context.log.info(f"skipped {len(wanted) - len(out)} set-done(s) already reported "
                         "(redelivered from an older cursor)")
    return out


def _latest_reported(key: dg.AssetKey, pk: str | dg.MultiPartitionKey | None,
                     instance: dg.DagsterInstance) -> tuple[str, int] | None:
    """(db.table, event id) of the partition's latest materialization we reported, if any."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=None if pk is None else [str(pk)]),
        limit=1).records
    mat = records[0].asset_materialization if records else None
    if mat is None:
        return None
    meta = mat.metadata
    db, table, event_id = meta.get("db"), meta.get("table"), meta.get("eventId")
    if db is None or table is None or event_id is None:
        return None  # not ours: someone else materialized it
    return f"{db.value}.{table.value}", int(str(event_id.value))


def _set_dones(events: Sequence[LoggedEvent], info: TableInfo,
               log: dg.DagsterLogManager) -> Iterator[SetDoneMessage]:
    """The set-done messages of ``info`` among ``events``; malformed ones are logged, skipped."""
    for ev in events:
        if ev.headers.get(HCAT_EVENT) != PARTITION_DONE or ev.headers.get(PN_TABLE) != (
            info.qualified
        ):
            continue
        try:
            msg = decode(ev.body)
        except MalformedMessageError as exc:
            log.warning(f"skipping malformed logged event {ev.event_id}: {exc}")
            continue
        if isinstance(msg, SetDoneMessage):
            yield msg


def _metadata(msg: SetDoneMessage, info: TableInfo) -> dict[str, object]:
    """The materialization's metadata: the set-done's payload, less the partition itself."""
    meta = shared.payload(msg, info.partition_keys)
    return {k: v for k, v in meta.items() if v is not None and k != "partition"}
