"""The checker must catch the violations it claims to: fed broken histories."""

from __future__ import annotations

from typing import Any

from tests.revisions.history_checker import check


def begin(proc: int, rev: int, t0: int, t1: int, fams: tuple[str, ...] = ("a",)) -> dict[str, Any]:
    return {
        "op": "begin",
        "proc": proc,
        "table": "t",
        "rev": rev,
        "families": list(fams),
        "t0": t0,
        "t1": t1,
        "error": None,
    }


def end(op: str, proc: int, rev: int, t0: int, t1: int) -> dict[str, Any]:
    return {"op": op, "proc": proc, "table": "t", "rev": rev, "t0": t0, "t1": t1, "error": None}


def snap(
    proc: int, t0: int, t1: int, revs: dict[str, int], latest: int, aborted: tuple[int, ...] = ()
) -> dict[str, Any]:
    return {
        "op": "snapshot",
        "proc": proc,
        "table": "t",
        "revisions": revs,
        "latest": latest,
        "aborted": list(aborted),
        "t0": t0,
        "t1": t1,
        "error": None,
    }


def good_history() -> list[dict[str, Any]]:
    return [
        begin(0, 1, 0, 10),
        begin(1, 2, 11, 20),
        end("commit", 0, 1, 21, 30),
        snap(2, 31, 40, {"a": 1}, 2),  # 2 still open: held back to 1
        end("abort", 1, 2, 41, 50),
        snap(2, 51, 60, {"a": 2}, 2, aborted=(2,)),
    ]


def test_a_correct_history_passes() -> None:
    report = check(good_history())
    assert report.violations == []
    assert report.figures["held_back_family_values"] == 1
    assert report.figures["max_open_at_once"] == 2


def test_duplicate_revision_is_caught() -> None:
    h = [*good_history(), begin(3, 2, 70, 80)]
    assert any("handed out twice" in v for v in check(h).violations)


def test_decreasing_revision_is_caught() -> None:
    h = [
        begin(0, 5, 0, 10),
        begin(1, 4, 11, 20),
        end("commit", 0, 5, 21, 22),
        end("commit", 1, 4, 23, 24),
    ]
    assert any("started after a begin had returned 5" in v for v in check(h).violations)


def test_overlapping_begins_may_come_in_either_order() -> None:
    h = [
        begin(0, 2, 0, 10),
        begin(1, 1, 5, 15),
        end("commit", 0, 2, 21, 22),
        end("commit", 1, 1, 23, 24),
    ]
    assert check(h).violations == []


def test_snapshot_covering_an_open_transaction_is_caught() -> None:
    h = good_history()
    h[3] = snap(2, 31, 40, {"a": 2}, 2)  # the naive "latest" snapshot
    assert any("transaction 2 was still open" in v for v in check(h).violations)


def test_snapshot_covering_a_never_finished_transaction_is_caught() -> None:
    h = [begin(0, 1, 0, 10), snap(1, 20, 30, {"a": 1}, 1)]
    assert any("still open" in v for v in check(h).violations)


def test_unlisted_abort_is_caught() -> None:
    h = good_history()
    h[5] = snap(2, 51, 60, {"a": 2}, 2)
    assert any("without listing it" in v for v in check(h).violations)


def test_made_up_abort_is_caught() -> None:
    h = good_history()
    h[3] = snap(2, 31, 40, {"a": 1}, 2, aborted=(1,))
    assert any("before anyone aborted it" in v for v in check(h).violations)


def test_other_family_is_not_held_back() -> None:
    h = [
        begin(0, 1, 0, 10, ("a",)),
        begin(1, 2, 11, 20, ("b",)),
        end("commit", 1, 2, 21, 30),
        snap(2, 31, 40, {"a": 0, "b": 2}, 2),
        end("commit", 0, 1, 41, 50),
    ]
    assert check(h).violations == []


def test_failed_call_is_reported() -> None:
    h = good_history()
    h[2] = {**h[2], "error": "ConflictError: expired"}
    assert any("call failed" in v for v in check(h).violations)
