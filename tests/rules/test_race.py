"""Two evaluators on one store (SQLite, PostgreSQL): one derived set-done per (rule, spec).

Each evaluator has its own App (its own engine and connections), as two
``serve`` processes would; they run at once from a barrier. The second test
makes the interleaving certain: an evaluator whose batch was read before the
other moved the cursor finds its batch void and writes nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from partition_notify.app import App, build_app
from partition_notify.rules.evaluator import RunReport, definition
from tests.rules.test_evaluator import derived, regions


@pytest.fixture
def apps(store_url: str) -> Iterator[list[App]]:
    opened = [build_app(store_url=store_url, transport_url="embedded://") for _ in range(2)]
    yield opened
    for a in opened:
        a.close()


def announce_all(app: App, days: int) -> None:
    for d in range(days):
        for r in ("us", "eu", "apac"):
            ds = f"202601{d + 1:02d}"
            app.publisher.announce_partitions("sales", "orders", [{"datestamp": ds, "region": r}])


def test_two_evaluators_racing_publish_one_derived_set_done_per_spec(apps: list[App]) -> None:
    regions(apps[0])
    announce_all(apps[0], 5)
    evaluators = [a.rules.evaluator() for a in apps]
    barrier = threading.Barrier(len(evaluators))
    reports: list[RunReport] = []
    errors: list[BaseException] = []

    def race(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            for _ in range(3):
                reports.append(evaluators[i].run_once())
        except BaseException as exc:  # surfaced below, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=race, args=(i,)) for i in range(len(evaluators))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors and not any(t.is_alive() for t in threads)
    specs = [m.spec for m in derived(apps[0])]
    assert sorted(specs) == [f"datestamp=202601{d:02d}" for d in range(1, 6)]
    assert sum(len(r.derived) for r in reports) == 5


def test_a_batch_read_before_the_other_moved_the_cursor_is_void(apps: list[App]) -> None:
    regions(apps[0])
    announce_all(apps[0], 1)
    first, second = (a.rules.evaluator() for a in apps)
    rule = second.store.rules()[0]  # read now: cursor 0
    assert len(first.run_once().derived) == 1
    info = apps[1].publisher.table("sales", "orders")
    tables = {t.qualified: t for t in apps[1].store.catalog.tables()}
    report = RunReport()
    second._follow(rule, definition(rule, tables, info), info, report)  # as if it raced
    assert report.lost_races == 1 and report.derived == []
    assert len(derived(apps[0])) == 1
