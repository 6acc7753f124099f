"""An independent checker of a recorded revision-manager history.

It knows nothing of the implementation: only the calls each process made,
when (monotonic ns, invocation ``t0`` and response ``t1``), and what they
returned. It reports a violation only where real-time order makes it
certain:

* two ``begin`` calls returned the same revision of a table;
* a ``begin`` that started after another had returned got a smaller or
  equal revision (revisions must strictly increase per table);
* a snapshot includes (``rev <= snapshot[family]``, not listed aborted) a
  revision whose transaction was still open: its commit/abort was only
  invoked after the snapshot had returned, or never;
* a snapshot omits from ``aborted`` a revision it covers whose abort had
  returned before the snapshot was invoked;
* a snapshot lists as aborted a revision nobody had tried to abort.
"""

from __future__ import annotations

import bisect
import json
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Report:
    violations: list[str] = field(default_factory=list)
    figures: dict[str, int] = field(default_factory=dict)

    def add(self, message: str) -> None:
        if len(self.violations) < 50:
            self.violations.append(message)
        self.figures["violations"] = self.figures.get("violations", 0) + 1


def load(paths: Iterable[Path]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in paths:
        with open(p, encoding="utf-8") as fh:
            out.extend(json.loads(line) for line in fh if line.strip())
    return out


def check(records: list[dict[str, Any]]) -> Report:
    report = Report()
    report.figures["violations"] = 0
    begins: dict[tuple[str, int], dict[str, Any]] = {}
    ends: dict[tuple[str, int], dict[str, Any]] = {}
    snapshots: list[dict[str, Any]] = []
    for rec in records:
        if rec.get("error"):
            report.add(f"call failed: {rec}")
            continue
        key = (rec["table"], rec.get("rev", -1))
        if rec["op"] == "begin":
            if key in begins:
                report.add(
                    f"revision {key[1]} of {key[0]} handed out twice: {begins[key]} and {rec}"
                )
            begins[key] = rec
        elif rec["op"] in ("commit", "abort"):
            ends[key] = rec
        elif rec["op"] == "snapshot":
            snapshots.append(rec)
    _check_increasing(begins, report)
    _check_snapshots(begins, ends, snapshots, report)
    f = report.figures
    f["transactions"] = len(begins)
    f["committed"] = sum(1 for e in ends.values() if e["op"] == "commit")
    f["aborted"] = sum(1 for e in ends.values() if e["op"] == "abort")
    f["snapshots"] = len(snapshots)
    f["processes"] = len({r["proc"] for r in records})
    f["max_open_at_once"] = _max_open(begins, ends)
    return report


def _check_increasing(begins: dict[tuple[str, int], dict[str, Any]], report: Report) -> None:
    by_table: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for rec in begins.values():
        by_table[rec["table"]].append(rec)
    for table, recs in by_table.items():
        by_return = sorted(recs, key=lambda r: r["t1"])
        returned_t1 = [r["t1"] for r in by_return]
        prefix_max: list[tuple[int, dict[str, Any]]] = []
        best: tuple[int, dict[str, Any]] | None = None
        for r in by_return:
            if best is None or r["rev"] > best[0]:
                best = (r["rev"], r)
            prefix_max.append(best)
        for b in recs:
            n = bisect.bisect_left(returned_t1, b["t0"])  # begins that returned before b started
            if n and prefix_max[n - 1][0] >= b["rev"]:
                a = prefix_max[n - 1][1]
                report.add(
                    f"{table}: begin returning {b['rev']} started after a begin had "
                    f"returned {a['rev']} (proc {a['proc']} then proc {b['proc']})"
                )


def _check_snapshots(
    begins: dict[tuple[str, int], dict[str, Any]],
    ends: dict[tuple[str, int], dict[str, Any]],
    snapshots: list[dict[str, Any]],
    report: Report,
) -> None:
    # Per (table, family): revisions in order with the time their end was invoked.
    txns: dict[tuple[str, str], list[tuple[int, float]]] = defaultdict(list)
    aborts: dict[str, list[tuple[int, int, int]]] = defaultdict(list)  # (end t1, rev, end t0)
    for (table, rev), b in begins.items():
        end = ends.get((table, rev))
        closed_at = end["t0"] if end is not None else math.inf
        for fam in b["families"]:
            txns[(table, fam)].append((rev, closed_at))
        if end is not None and end["op"] == "abort":
            aborts[table].append((end["t1"], rev, end["t0"]))
    prefix: dict[tuple[str, str], tuple[list[int], list[float]]] = {}
    for key, items in txns.items():
        items.sort()
        running_max: list[float] = []
        m = -math.inf
        for _, closed in items:
            m = max(m, closed)
            running_max.append(m)
        prefix[key] = ([r for r, _ in items], running_max)
    for table in aborts:
        aborts[table].sort()
    abort_t0 = {(t, rev): t0 for t, lst in aborts.items() for _, rev, t0 in lst}
    held_back = 0
    families_of: dict[str, set[str]] = defaultdict(set)
    for table, fam in txns:
        families_of[table].add(fam)
    for s in snapshots:
        table, revs, latest = s["table"], s["revisions"], s["latest"]
        listed = set(s["aborted"])
        for fam in families_of[table] | set(revs):
            limit = revs.get(fam, latest)
            held_back += limit < latest
            if (table, fam) not in prefix:
                continue
            rev_list, running_max = prefix[(table, fam)]
            n = bisect.bisect_right(rev_list, limit)
            if n and running_max[n - 1] > s["t1"]:
                for rev, closed in txns[(table, fam)][:n]:
                    if closed > s["t1"] and rev not in listed:
                        report.add(
                            f"{table}: snapshot by proc {s['proc']} covers {fam}@{limit} "
                            f"but transaction {rev} was still open"
                        )
        # Aborts that had returned before the snapshot started must be listed.
        cutoff = bisect.bisect_left(aborts[table], (s["t0"], -1, -1))
        for _, rev, _ in aborts[table][:cutoff]:
            fams = begins[(table, rev)]["families"]
            if any(rev <= revs.get(f, latest) for f in fams) and rev not in listed:
                report.add(
                    f"{table}: snapshot by proc {s['proc']} includes aborted revision "
                    f"{rev} without listing it"
                )
        for rev in listed:
            t0 = abort_t0.get((table, rev))
            if t0 is None or t0 > s["t1"]:
                report.add(
                    f"{table}: snapshot by proc {s['proc']} lists {rev} as aborted "
                    "before anyone aborted it"
                )
    report.figures["held_back_family_values"] = held_back


def _max_open(
    begins: dict[tuple[str, int], dict[str, Any]], ends: dict[tuple[str, int], dict[str, Any]]
) -> int:
    events = []
    for key, b in begins.items():
        events.append((b["t1"], 1))
        end = ends.get(key)
        events.append((end["t0"] if end else math.inf, -1))
    events.sort()
    cur = best = 0
    for _, d in events:
        cur += d
        best = max(best, cur)
    return best
