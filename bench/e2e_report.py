"""bench/e2e_airflow.py's times: read from Airflow's logs and REST answers, then reported.

Every time is epoch seconds on the one wall clock of this machine. Columns are
differences of two of them; ``ours`` ends when our trigger yielded the event,
everything after is Airflow's (including how its processes hand it over).
"""

from __future__ import annotations

import re
import statistics
from datetime import datetime
from typing import Any

#: A "Trigger fired event" line of the triggerer's console log (the watcher's trigger logs there).
_FIRED = re.compile(
    r"^(\d{4}-\d\d-\d\dT[\d:.]+Z) \[info\s*\] Trigger fired event .*'eventId': (\d+)[,}]")


def epoch(iso: str | None) -> float | None:
    return None if iso is None else datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def log_time(lines: list[dict[str, Any]], needle: str, after: float = 0.0) -> float | None:
    """The first JSON log line whose message contains ``needle`` at or after ``after``."""
    for line in lines:
        t = epoch(line.get("timestamp"))
        if t is not None and t >= after and needle in str(line.get("event", "")):
            return t
    return None


def fired_times(airflow: Any, triggerer_log: str, event_id: int, run_id: str) -> dict[str, Any]:
    """When each of our triggers yielded set-done ``event_id``, and when the sensor's started."""
    trigger_lines = airflow.task_log(run_id, "ours", trigger=True)
    sensor = next((epoch(x["timestamp"]) for x in trigger_lines
                   if "Trigger fired event" in str(x.get("event"))
                   and f"'eventId': {event_id}," in str(x)), None)
    watcher = None
    for line in triggerer_log.splitlines():
        m = _FIRED.match(line)
        if m and int(m.group(2)) == event_id:
            watcher = epoch(m.group(1))
            break
    return {"sensor": sensor, "watcher": watcher,
            "sensor_started": log_time(trigger_lines, " starting")}


def _columns(r: dict[str, Any]) -> dict[str, dict[str, float]]:
    t0 = r["event"]["revision"] / 1000.0
    logged = r["event"]["timestampMs"] / 1000.0
    ours_ti, stock_ti = r["tis"]["ours"], r["tis"]["stock"]
    f_sensor, f_watch = r["fired"]["sensor"], r["fired"]["watcher"]
    sched, queued = epoch(ours_ti["scheduled_when"]), epoch(ours_ti["queued_when"])
    # start_date stays the first try's start across a deferral: the resumed run is dated by
    # the sensor's own "set-done ... of ..." line from execute_complete.
    resumed, end = r.get("resumed"), epoch(ours_ti["end_date"])
    run = r["watched"]["run"]
    mine = [e for e in r["watched"]["events"]
            if e["extra"]["payload"].get("eventId") == r["event"]["eventId"]]
    ae = epoch(mine[0]["timestamp"]) if mine else None
    run_q, run_s = epoch(run["queued_at"]), epoch(run["start_date"])
    stock_end = epoch(stock_ti["end_date"])
    detect = r.get("stock_detect")

    def d(a: float | None, b: float | None) -> float:
        return float("nan") if a is None or b is None else a - b

    return {
        "sensor": {"commit->logged": d(logged, t0), "logged->fired": d(f_sensor, logged),
                   "OURS": d(f_sensor, t0), "fired->stored": d(sched, f_sensor),
                   "->queued": d(queued, sched), "->resumed": d(resumed, queued),
                   "->success": d(end, resumed), "AIRFLOW": d(end, f_sensor),
                   "total": d(end, t0)},
        "watcher": {"OURS": d(f_watch, t0), "fired->asset event": d(ae, f_watch),
                    "->run queued": d(run_q, ae), "->run started": d(run_s, run_q),
                    "AIRFLOW": d(run_s, f_watch), "total": d(run_s, t0)},
        "stock": {"commit->seen by a poke": d(detect, t0), "->success": d(stock_end, detect),
                  "total": d(stock_end, t0)},
        "spark": {"commit->write returned": d(r["wrote"]["returned"], t0)},
    }


def fmt(x: float) -> str:
    return "     n/a" if x != x else (f"{x * 1000:7.0f}ms" if abs(x) < 10 else f"{x:7.2f}s ")


def per_round(cols: list[dict[str, dict[str, float]]], parts: tuple[str, ...]
              ) -> dict[str, Any]:
    """Print each part's figures round by round with their median and max; return those."""
    print("\n# per round (t0 = the Spark job's commitJob, committedAtMs; ms below 10 s, else s)")
    summary: dict[str, Any] = {}
    for part in parts:
        names = list(cols[0][part])
        print(f"\n{part:<8}" + "".join(f"{n:>22}" for n in names))
        for i, c in enumerate(cols, 1):
            print(f"round {i:<2}" + "".join(f"{fmt(c[part][n]):>22}" for n in names))
        meds = {n: statistics.median(c[part][n] for c in cols) for n in names}
        worst = {n: max(c[part][n] for c in cols) for n in names}
        print("median  " + "".join(f"{fmt(meds[n]):>22}" for n in names))
        print("max     " + "".join(f"{fmt(worst[n]):>22}" for n in names))
        summary[part] = {"median": meds, "max": worst}
    return summary


_BLOCKED = re.compile(r"^(\S+Z) .*async thread was blocked for ([\d.]+) seconds")


def loop_blocks(triggerer_log: str) -> list[tuple[float, float]]:
    """Airflow's own warnings that the triggerer's event loop was held (time, seconds)."""
    found = []
    for line in triggerer_log.splitlines():
        m = _BLOCKED.match(line)
        if m:
            found.append((epoch(m.group(1)) or 0.0, float(m.group(2))))
    return found


def report(rows: list[dict[str, Any]], poke: float, default_poke: bool) -> dict[str, Any]:
    cols = [_columns(r) for r in rows]
    summary = per_round(cols, ("sensor", "watcher", "stock", "spark"))
    s, w, b = summary["sensor"], summary["watcher"], summary["stock"]
    how = f"{'Airflow default ' if default_poke else ''}poke_interval={poke:g} s"
    print(f"\n# medians of {len(rows)} rounds (max = p99 at this n)")
    print(f"ours     commit -> our trigger fired: sensor {fmt(s['median']['OURS'])} "
          f"(max {fmt(s['max']['OURS'])}), watcher {fmt(w['median']['OURS'])} "
          f"(max {fmt(w['max']['OURS'])})")
    print(f"airflow  trigger fired -> sensor task success {fmt(s['median']['AIRFLOW'])}; "
          f"-> AssetWatcher DAG run started {fmt(w['median']['AIRFLOW'])}")
    print(f"total    commit -> sensor success {fmt(s['median']['total'])}, "
          f"commit -> watched DAG run started {fmt(w['median']['total'])}")
    print(f"baseline commit -> stock FileSensor success ({how}, poke mode): "
          f"{fmt(b['median']['total'])} (max {fmt(b['max']['total'])}); "
          f"ratio baseline/ours-sensor total: {b['median']['total'] / s['median']['total']:.1f}x")
    worst = max(s["max"]["OURS"], w["max"]["OURS"])
    print(f"goal     ours <= 50 ms p99: worst round {fmt(worst)} -> "
          f"{'met' if worst <= 0.050 else 'NOT met'} on this machine at this load")
    return summary


def ours_by_asking(rows: list[dict[str, Any]]) -> None:
    """``--compare-asking``: ours, median (max), for the rounds of each way of asking."""
    print("\n# --compare-asking: when the bench first asked Airflow's API after the write")
    for asked in ("at once", "after fired"):
        cols = [_columns(r) for r in rows if r.get("asked") == asked]
        if not cols:
            continue
        figs = []
        for part in ("sensor", "watcher"):
            ours = [c[part]["OURS"] for c in cols]
            figs.append(f"{part} {fmt(statistics.median(ours))} (max {fmt(max(ours))})")
        print(f"{asked:<12} {len(cols)} rounds: ours " + ", ".join(figs))
