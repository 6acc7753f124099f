"""Reads bench/e2e_dagster.py's Dagster instance (DAGSTER_HOME) read-only; ``.venv-sched``.

One request per stdin line, one JSON line back:

* ``init``: open (create and stamp) the instance's run, event log and
  schedule storage; ``{"ok": true}``;
* ``ticks``: finished ticks so far per sensor name;
* ``find <eventId> <day>``: for our sensor (the materialization whose
  metadata ``eventId`` is the set-done's) and the stock one (metadata
  ``spec`` = ``datestamp=<day>``): ``stored`` (the materialization's event
  log timestamp), ``tick`` / ``tick_end`` (the sensor tick that reported it:
  the newest one started at or before ``stored``) and ``prev_tick`` (the tick
  before it, which did not see it); ``null`` while not materialized yet.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import dagster as dg
from dagster._core.definitions.run_request import InstigatorType
from dagster._core.scheduler.instigation import TickStatus

#: Newest records looked at per request: a round's are among the last few.
SCAN_LIMIT = 50
FINISHED = (TickStatus.SUCCESS, TickStatus.SKIPPED, TickStatus.FAILURE)


def _states(inst: dg.DagsterInstance) -> dict[str, Any]:
    return {s.instigator_name: s
            for s in inst.all_instigator_state(instigator_type=InstigatorType.SENSOR)}


def ticks(inst: dg.DagsterInstance) -> dict[str, int]:
    return {name: len(inst.get_ticks(s.instigator_origin_id, s.selector_id, limit=SCAN_LIMIT,
                                     statuses=list(FINISHED)))
            for name, s in _states(inst).items()}


def _found(inst: dg.DagsterInstance, asset: str, sensor: str, key: str,
           value: object) -> dict[str, Any] | None:
    records = inst.fetch_materializations(dg.AssetKey(asset), limit=SCAN_LIMIT).records
    stored = None
    for rec in records:  # newest first
        mat = rec.asset_materialization
        meta = mat.metadata.get(key) if mat is not None else None
        if meta is not None and str(meta.value) == str(value):
            stored = rec.timestamp
            break
    if stored is None:
        return None
    s = _states(inst)[sensor]
    all_ticks = inst.get_ticks(s.instigator_origin_id, s.selector_id, limit=SCAN_LIMIT)
    earlier = [t for t in all_ticks if t.timestamp <= stored]  # newest first
    tick = earlier[0] if earlier else None
    prev = earlier[1] if len(earlier) > 1 else None
    return {"stored": stored, "tick": tick.timestamp if tick else None,
            "tick_end": tick.end_timestamp if tick else None,
            "tick_status": tick.status.value if tick else None,
            "prev_tick": prev.timestamp if prev else None}


def main() -> int:
    inst = dg.DagsterInstance.get()  # DAGSTER_HOME from the environment
    for line in sys.stdin:
        words = line.split()
        try:
            if words == ["init"]:
                inst.get_runs_count()
                inst.fetch_materializations(dg.AssetKey("pn_e2e_orders"), limit=1)
                answer = {"ok": bool(ticks(inst) is not None)}
            elif words == ["ticks"]:
                answer: Any = ticks(inst)
            elif len(words) == 3 and words[0] == "find":
                event_id, day = int(words[1]), words[2]
                answer = {"ours": _found(inst, "pn_e2e_orders", "pn_e2e_ours", "eventId",
                                         event_id),
                          "stock": _found(inst, "pn_e2e_orders_stock", "pn_e2e_stock", "spec",
                                          f"datestamp={day}")}
            else:
                answer = {"error": f"request {line.strip()!r}: expected 'init', 'ticks' or "
                                   "'find <eventId> <day>'"}
        except Exception as exc:  # the bench shows it and stops
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(answer), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
