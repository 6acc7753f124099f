"""Housekeeping's ``adopt_placed`` is not starved by the overwrites it keeps
(SQLite + PostgreSQL, the injected clock).

Defect: each pass read the oldest ``ADOPT_PER_PASS`` expired placed overwrites
(by ``ended_at``) and committed those it could. One a later write placed over is
kept (ERROR each pass) and never leaves, so once that many were kept the window
held only them: every adoptable overwrite behind them stayed expired for ever,
and the pass returned how many it had read, not how many it committed. Now a
pass pages past the kept ones, committing at most ``per_pass``, and reports
both counts. The bound is the test's (3), not 1000.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from partition_notify.revisions.files import RevisionFiles
from partition_notify.revisions.retention import Adoptions, adopt_placed

from partition_notify.app import App
from tests.revisions.test_purge_placed_overwrite import _table
from tests.support.clock import FakeClock, app_on_clock

T = "sales.orders"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1_800_000_000.0)


app = pytest.fixture(name="app")(app_on_clock)


def _placed(files: RevisionFiles, root: Path, write: str, partition: str) -> int:
    """Overwrite ``write`` of ``partition`` places its file; its writer dies (no commit)."""
    tx = files.manager.begin_write_transaction(T, ["data"], keep_alive=30)
    files.record(T, tx.revision, write, lambda: [f"{partition}/part-{write}.parquet"])
    with files.placing(T, tx.revision, write, [partition], retiring=True) as place:
        place.retire([partition], f"_pn_retired/{write}")
        (root / partition).mkdir(parents=True, exist_ok=True)
        (root / partition / f"part-{write}.parquet").write_text(f"{write} rows")
    return tx.revision


def _expire(files: RevisionFiles, clock: FakeClock) -> None:
    """The keep-alives run out; the table's next transaction records them expired."""
    clock.advance(120)
    rm = files.manager
    rm.abort_write_transaction(rm.begin_write_transaction(T, ["data"]))


def _latest(app: App, files: RevisionFiles) -> list[str]:
    return files.visible(T, app.revisions.create_snapshot(T))


def test_kept_overwrites_do_not_starve_an_adoptable_one(
        app: App, clock: FakeClock, tmp_path: Path) -> None:
    root = tmp_path / "orders"
    files = _table(app, root)
    kept = [_placed(files, root, f"wK{i}", f"d={i}") for i in (1, 2, 3)]
    _expire(files, clock)  # ended first: the oldest three
    x = _placed(files, root, "wX", "d=4")
    _expire(files, clock)
    # A later append into d=1..3: committed above it, each wK would hide its rows.
    b = app.revisions.begin_write_transaction(T, ["data"])
    files.record(T, b.revision, "wB", lambda: [f"d={i}/part-wB.parquet" for i in (1, 2, 3)])
    with files.placing(T, b.revision, "wB", ["d=1", "d=2", "d=3"]):
        pass
    app.revisions.commit_write_transaction(b)
    before = clock() + 1
    clock.advance(10)

    first = adopt_placed(files, before, per_pass=3)
    assert "d=4/part-wX.parquet" in _latest(app, files), \
        "wX never committed: the three kept overwrites filled the pass"
    assert files.transaction(T, x)[0] == "expired"  # its rows belong to the new revision
    assert [files.transaction(T, k)[0] for k in kept] == ["expired"] * 3
    assert first == Adoptions(adopted=1, kept=3)
    # The next pass finds the kept ones again, and nothing more to commit.
    assert adopt_placed(files, before, per_pass=3) == Adoptions(adopted=0, kept=3)


def test_one_placed_over_by_a_later_adoptable_one_in_another_page_is_committed_below_it(
        app: App, clock: FakeClock, tmp_path: Path) -> None:
    """wK's only later write is wX, itself adoptable but past the page: both are
    committed, wK first, so wX's overwrite of d=5 stays on top."""
    root = tmp_path / "orders"
    files = _table(app, root)
    _placed(files, root, "wK", "d=5")
    _expire(files, clock)
    _placed(files, root, "wX", "d=5")
    _expire(files, clock)
    before = clock() + 1
    clock.advance(10)

    assert adopt_placed(files, before, per_pass=1) == Adoptions(adopted=2, kept=0)
    assert [p for p in _latest(app, files) if p.startswith("d=5/")] == ["d=5/part-wX.parquet"]
    assert adopt_placed(files, before, per_pass=1) == Adoptions(adopted=0, kept=0)
