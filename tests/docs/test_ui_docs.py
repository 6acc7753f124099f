"""The /ui numbers in README and docs/http-api.md are the code's constants."""

from __future__ import annotations

from pathlib import Path

from partition_notify.writers import commit_refusals

from partition_notify.http.ui import board, ops, pages, spool

ROOT = Path(__file__).resolve().parents[2]


def test_ui_numbers_in_docs_match_the_code() -> None:
    doc = (ROOT / "docs" / "http-api.md").read_text()
    readme = (ROOT / "README.md").read_text()
    assert f"{pages.PAGE_SIZE} a page" in doc and f"{pages.PAGE_SIZE} a\npage" in readme
    assert f"the {board.ROWS} latest values" in doc and f"the {board.ROWS} most recent" in readme
    assert f"up to {board.COLUMNS} values" in doc
    assert f"the latest {pages.EVENTS_PAGE} events" in doc
    assert f"within the {board.ROWS} x {board.COLUMNS} bounds" in doc
    assert f"the latest {ops.SHOWN} applied" in doc
    assert f"at most {spool.LIMIT} files in {spool.DEADLINE_SECONDS:g} s" in doc
    assert f"at most {commit_refusals.MAX_ROWS:,}, for" in doc
    assert f"newest {board.READ_LIMIT:,} partitions, those\nof the {board.ROWS} greatest" in doc
    assert (ROOT / "docs" / "ui-board.png").stat().st_size > 10_000
