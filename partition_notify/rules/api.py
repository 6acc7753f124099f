"""The Python API of completeness rules: ``app.rules.add(...)`` (CLI and HTTP call it too)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from partition_notify.contract import decode, names, spec
from partition_notify.contract.messages import PN_TABLE
from partition_notify.core.errors import MalformedMessageError, ValidationError
from partition_notify.core.limits import excerpt
from partition_notify.publisher import Publisher
from partition_notify.rules.evaluator import BATCH_EVENTS, Evaluator, contributions, definition
from partition_notify.rules.kinds import Kind, Quiet, build, check_params
from partition_notify.rules.store import FiringInfo, RuleInfo, RuleStore
from partition_notify.store import Store, TableInfo

_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,127}")
#: A dry run reads at most this many events of the retained log (newest history
#: beyond it is reported as not read: ``truncated``).
DRY_RUN_MAX_EVENTS = 1_000_000
#: Open specs a dry run lists (the most recently touched), with their missing labels.
DRY_RUN_MAX_PENDING = 20


@dataclass(frozen=True, slots=True)
class RuleView:
    table: str
    name: str
    kind: str
    params: dict[str, object]
    cursor_event_id: int

    def to_json(self) -> dict[str, object]:
        return {"table": self.table, "name": self.name, "kind": self.kind,
                "params": self.params, "cursorEventId": self.cursor_event_id}


def check_name(name: object) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValidationError(
            f"rule name {excerpt(name)}: expected 1 to 128 of lower-case letters, digits "
            "and '_.-', starting with a letter or digit")
    return name


class Rules:
    """Add, list and remove completeness rules; dry-run them; build the evaluator."""

    def __init__(self, store: Store, publisher: Publisher) -> None:
        self.log_store = store
        self.publisher = publisher
        self.store = RuleStore(store)

    def _table(self, ref: str) -> TableInfo:
        db, sep, table = ref.partition(".")
        if not sep:
            raise ValidationError(f"table {excerpt(ref)}: expected db.table")
        return self.publisher.table(names.db_name(db), names.table_name(table))

    def _kind(self, target: TableInfo, kind: str, params: dict[str, object]) -> Kind:
        inputs = params.get("inputs") or [target.qualified]
        if not isinstance(inputs, list | tuple) or not all(isinstance(t, str) for t in inputs):
            raise ValidationError(
                f"rule inputs {excerpt(inputs)}: expected a list of db.table names")
        tables = {target.qualified: target}
        for ref in inputs:
            info = self._table(ref)  # NotFoundError names an unregistered table
            tables[info.qualified] = info
        check_params(kind, params)
        canon = {**params, "inputs": [self._table(t).qualified for t in inputs]}
        return build(kind, target.qualified, canon, {n: t.partition_keys
                                                     for n, t in tables.items()})

    def add(self, table: str, *, name: str, kind: str, params: dict[str, object],
            from_now: bool = False) -> RuleView:
        """Validate everything (nothing is stored on bad input), then store the rule.

        A new rule reads the retained history on its first run (so it fires for
        specs already complete), unless ``from_now``.
        """
        target = self._table(table)
        check_name(name)
        k = self._kind(target, kind, params)
        info = self.store.add(target, name, kind, k.to_json(), from_now=from_now)
        return _view(target, info)

    def rules(self, table: str | None = None) -> list[RuleView]:
        if table is not None:  # the board asks on every render: not the whole catalog
            target = self._table(table)
            return [_view(target, r) for r in self.store.rules([target.id])]
        tables = {t.id: t for t in self.log_store.catalog.tables()}
        return [_view(tables[r.table_id], r) for r in self.store.rules(None)]

    def remove(self, table: str, name: str) -> RuleView:
        target = self._table(table)
        return _view(target, self.store.remove(target, name))

    def firings(self, table: str, name: str, limit: int = 50) -> list[FiringInfo]:
        rule = self.store.get(self._table(table), name)
        return self.store.firings(rule.id, limit)

    def dry_run(self, table: str, *, name: str | None = None, kind: str | None = None,
                params: dict[str, object] | None = None,
                max_events: int = DRY_RUN_MAX_EVENTS) -> dict[str, object]:
        """What a rule (stored, by ``name``, or a definition) would have derived over the
        retained log; nothing is written."""
        target = self._table(table)
        if name is not None and kind is None:
            stored = self.store.get(target, name)
            tables = {t.qualified: t for t in self.log_store.catalog.tables()}
            k = definition(stored, tables, target)
        elif kind is not None:
            k = self._kind(target, kind, params or {})
        else:
            raise ValidationError("dry run: expected a rule name or a kind with parameters")
        return _simulate(self.log_store, target, k, max_events)

    def evaluator(self) -> Evaluator:
        return Evaluator(self.log_store, self.publisher)


def _simulate(store: Store, target: TableInfo, kind: Kind, max_events: int) -> dict[str, object]:
    if isinstance(kind, Quiet):
        return _simulate_quiet(store, target, kind, max_events)
    counted: dict[str, dict[str, int]] = {}
    derived: dict[str, dict[str, object]] = {}
    cursor = read = 0
    while read < max_events:
        events = store.log.events_after(cursor, min(BATCH_EVENTS, max_events - read))
        if not events:
            break
        read += len(events)
        for ev in events:  # one at a time: the event that completed a spec is reported
            for s, origins in contributions(kind, [ev]).items():
                if s in derived:
                    continue
                labels = counted.setdefault(s, {})
                labels.update({k: e for k, (_, e) in origins.items() if k not in labels})
                if kind.required(s) <= labels.keys():
                    covered = bool(store.retention.set_done_covering(
                        target, spec.covering_specs(spec.parse(s))))
                    derived[s] = {"spec": s, "completedByEventId": ev.event_id,
                                  "inputs": len(kind.required(s)), "coveredNow": covered}
                    del counted[s]
        cursor = events[-1].event_id
    more = bool(store.log.events_after(cursor, 1))
    pending = [{"spec": s, "missing": sorted(kind.required(s) - labels.keys())[:10]}
               for s, labels in list(counted.items())[-DRY_RUN_MAX_PENDING:]]
    return {"table": target.qualified, "kind": kind.kind, "eventsRead": read,
            "truncated": more, "wouldDerive": list(derived.values()), "pending": pending}


def _simulate_quiet(store: Store, target: TableInfo, kind: Quiet,
                    max_events: int) -> dict[str, object]:
    """A quiet rule over the retained log, by the messages' commit times: a spec falls
    quiet when the next partition of it came N s or more after the previous one, or
    when its last one is N s old now."""
    last: dict[str, tuple[float, int]] = {}  # open spec -> (commit time, event id)
    derived: dict[str, dict[str, object]] = {}
    cursor = read = 0

    def quiet(s: str, at: float, event_id: int) -> None:
        covered = bool(store.retention.set_done_covering(
            target, spec.covering_specs(spec.parse(s))))
        derived[s] = {"spec": s, "completedByEventId": event_id, "quietAt": at,
                      "coveredNow": covered}
        del last[s]

    while read < max_events:
        events = store.log.events_after(cursor, min(BATCH_EVENTS, max_events - read))
        if not events:
            break
        read += len(events)
        for ev in events:
            table = str(ev.headers.get(PN_TABLE, ""))
            if table not in kind.inputs:
                continue
            try:
                msg = decode(ev.body)
            except MalformedMessageError:  # not ours to judge here; the relay logs it
                continue
            at = (msg.timestamp_ms / 1000) if msg.timestamp_ms else float(msg.timestamp)
            for s, _ in kind.contributions(table, msg):
                if s in last and last[s][0] + kind.seconds <= at:
                    quiet(s, last[s][0] + kind.seconds, last[s][1])
                if s not in derived:
                    last[s] = (at, ev.event_id)
        cursor = events[-1].event_id
    now = store.clock()
    for s, (at, event_id) in list(last.items()):
        if at + kind.seconds <= now:
            quiet(s, at + kind.seconds, event_id)
    more = bool(store.log.events_after(cursor, 1))
    pending = [{"spec": s, "quietAt": at + kind.seconds}
               for s, (at, _) in list(last.items())[-DRY_RUN_MAX_PENDING:]]
    return {"table": target.qualified, "kind": kind.kind, "eventsRead": read,
            "truncated": more, "wouldDerive": list(derived.values()), "pending": pending}


def _view(target: TableInfo, r: RuleInfo) -> RuleView:
    return RuleView(target.qualified, r.name, r.kind, r.params, r.cursor_event_id)
