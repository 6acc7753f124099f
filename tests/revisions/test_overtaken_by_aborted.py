"""A write "overtaken" by an overwrite that was then aborted on request (SQLite + PostgreSQL).

Defect (session 25): B (an append, revision b) began before A (an overwrite of the same
partition, revision a > b); A placed first, then an operator aborted A (``rev abort``,
the CLI's ``rev_commands.abort``). B's placement was still refused with
WriteOvertakenError, its data discarded, although no snapshot ever includes A: an
overwrite aborted on request (it stays aborted) replaced nothing B's rows could come
back into. Now such an overwrite does not overtake: B is placed, and rows A's
retirement wrongly set on B's unplaced files are cleared. An overwrite that only
*expired* may still be adopted into a committed revision (``settle``): it keeps
refusing, as does one whose retirement reached files B had already begun to merge.
"""

from __future__ import annotations

import pytest
from partition_notify.revisions import RevisionManager
from partition_notify.revisions.files import RevisionFiles

from partition_notify.cli import rev_commands
from partition_notify.core.errors import WriteOvertakenError
from tests.support.clock import FakeClock

T = "sales.orders"


def _a_overwrote_before_b_placed(rm: RevisionManager, files: RevisionFiles,
                                 b_records_first: bool, *,
                                 abort_a: bool = False) -> tuple[int, int]:
    """Revisions (r0, b, a): r0 committed d=1's first file, A (a > b) retired it.

    ``abort_a``: A is aborted on request before it places (once placed its abort is
    refused, test_abort_placed_overwrite.py) and its recovery places it anyway."""
    first = rm.begin_write_transaction(T, ["data"])
    files.record(T, first.revision, "w0", lambda: ["d=1/part-w0.parquet"])
    rm.commit_write_transaction(first)
    b = rm.begin_write_transaction(T, ["data"])
    a = rm.begin_write_transaction(T, ["data"])
    if b_records_first:
        files.record(T, b.revision, "wB", lambda: ["d=1/part-wB.parquet"])
    files.record(T, a.revision, "wA", lambda: ["d=1/part-wA.parquet"])
    if abort_a:
        rev_commands.abort(rm, T, a.revision)  # `partition-notify rev abort sales.orders <a>`
    with files.placing(T, a.revision, "wA", ["d=1"]) as place:
        assert place.retire(["d=1"], "_pn_retired/wA") == {"d=1/part-wA.parquet"}
    if not b_records_first:
        files.record(T, b.revision, "wB", lambda: ["d=1/part-wB.parquet"])
    return b.revision, a.revision


@pytest.mark.parametrize("b_records_first", [False, True],
                         ids=["b-records-after-a-placed", "b-records-before-a-placed"])
def test_an_overwrite_aborted_on_request_does_not_overtake(
        rm: RevisionManager, b_records_first: bool) -> None:
    files = RevisionFiles(rm)
    b, a = _a_overwrote_before_b_placed(rm, files, b_records_first, abort_a=True)

    with files.placing(T, b, "wB", ["d=1"]):
        pass                         # B's files land in d=1
    rm.commit_write_transaction(rm.running_transactions(T)[0])
    snap = rm.create_snapshot(T)
    assert a in snap.aborted and snap.includes(b, "data")
    assert files.visible(T, snap) == ["d=1/_pn_retired/wA/part-w0.parquet",
                                      "d=1/part-wB.parquet"], \
        "the first write's file where A moved it, B's where B placed it; none of A's"


def test_an_expired_overwrite_still_overtakes(rm: RevisionManager, clock: FakeClock) -> None:
    """settle() may still adopt an expired overwrite into a committed revision."""
    files = RevisionFiles(rm)
    b, a = _a_overwrote_before_b_placed(rm, files, b_records_first=False)
    clock.advance(3600)              # both keep-alives ran out: A (and B) expired
    with pytest.raises(WriteOvertakenError, match=f"revision {a} \\(write wA\\)"), \
            files.placing(T, b, "wB", ["d=1"]):
        pytest.fail("placed over an expired overwrite")


def test_files_an_aborted_overwrite_moved_after_their_merge_began_still_refuse(
        rm: RevisionManager) -> None:
    files = RevisionFiles(rm)
    b, _ = _a_overwrote_before_b_placed(rm, files, b_records_first=True, abort_a=True)
    with pytest.raises(WriteOvertakenError, match="moved its recorded file"), \
            files.placing(T, b, "wB", ["d=1"], merge_begun=True):
        pytest.fail("placed although its rows no longer say where its files are")
