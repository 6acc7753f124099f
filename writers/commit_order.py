"""A Spark job's manifest applied after a newer job of its table: nothing undone.

The spool pick-up applies a directory's manifests in commit order and a
posted manifest waits for the older ones in its table's spool
(:mod:`partition_notify.writers.commit_spool`), but a manifest can still reach
serve after a newer one: another driver's spool, one its driver left after the
newer job was posted, one past a scan's window. Applied as it stands, an older
append would announce again partitions a newer static overwrite removed (the
catalog says present, the data is gone) and an older overwrite would drop
partitions a newer job wrote.

So every recorded job keeps its ``committedAtMs`` and the partition specs it
cleared (``pn_spark_commits``, migration 0016), and a job older than a recorded
job of its table:

* announces no partition a newer job cleared or wrote (its catalog row carries a
  newer revision: a Spark commit's revision is its ``committedAtMs``);
* drops no partition a newer job wrote;
* sends no set-done for a set a newer job cleared.

It is still recorded (a replay stays a duplicate), and what it skipped is logged.
An equal commit time is not newer: such jobs take effect in the order they arrive.
A manifest without ``committedAtMs`` (no order known) is applied as it stands.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from partition_notify.publisher.drops import Dropped
from partition_notify.store import Store, TableInfo

from partition_notify.contract import spec

log = logging.getLogger(__name__)

#: Newer recorded jobs of a table read for one late manifest (the oldest first).
MAX_LATER_JOBS = 10_000
_LATER = ("SELECT cleared FROM pn_spark_commits WHERE table_id = {p} AND committed_at_ms > {p} "
          f"ORDER BY committed_at_ms LIMIT {MAX_LATER_JOBS}")


def cleared_json(cleared: Sequence[Mapping[str, str]]) -> str | None:
    """What ``pn_spark_commits.cleared`` keeps of a job's cleared specs."""
    return json.dumps([dict(c) for c in cleared], sort_keys=True) if cleared else None


def _matches(prefix: Mapping[str, str], values: Mapping[str, str]) -> bool:
    return all(values.get(k) == v for k, v in prefix.items())


@dataclass(frozen=True)
class Later:
    """What newer recorded jobs of a table did, as far as an older one must respect."""

    #: the (partial) specs newer jobs cleared (``{}``: the whole table)
    cleared: list[dict[str, str]]
    #: canonical specs of partitions announced with a newer revision
    rewritten: set[str]

    def removed(self, values: Mapping[str, str]) -> bool:
        return (spec.canonical(values) in self.rewritten
                or any(_matches(c, values) for c in self.cleared))

    def keep(
        self, job_id: str, specs: Sequence[dict[str, str]], locations: Sequence[str | None],
        dropped: Sequence[Dropped], set_done: str | None,
    ) -> tuple[list[dict[str, str]], list[str | None], list[Dropped], str | None]:
        """The job's adds, drops and set-done a newer job has not overtaken."""
        kept = [(s, loc) for s, loc in zip(specs, locations, strict=True) if not self.removed(s)]
        drops = [d for d in dropped
                 if spec.canonical(spec.coerce(d.partition)) not in self.rewritten]
        done = set_done
        if done is not None and any(_matches(c, spec.coerce(done)) for c in self.cleared):
            done = None
        skipped = len(specs) - len(kept), len(dropped) - len(drops), done != set_done
        if any(skipped):
            log.warning(
                "spark job %s was applied after a newer job of its table: %d add(s), %d "
                "drop(s)%s a newer job overtook not announced", job_id, skipped[0],
                skipped[1], " and its set-done" if skipped[2] else "",
                extra={"pn_event": "spark_commit.out_of_order"})
        return [s for s, _ in kept], [loc for _, loc in kept], drops, done


def later_than(store: Store, info: TableInfo, committed_at_ms: int | None) -> Later | None:
    """What recorded jobs of ``info`` newer than ``committed_at_ms`` did; None when there
    are none (the usual case: one indexed read)."""
    if committed_at_ms is None:
        return None
    rows = store.read(_LATER, (info.id, committed_at_ms))
    if not rows:
        return None
    cleared = [dict(c) for (raw,) in rows if raw for c in json.loads(raw)]
    rewritten = {p.spec for p in store.catalog.partitions(info)
                 if p.revision is not None and p.revision > committed_at_ms}
    return Later(cleared, rewritten)
