"""A bad ``--idempotency-key`` is refused naming the flag the user typed, not the HTTP
header (which a CLI user never wrote), in one line, before anything is saved."""

from __future__ import annotations

import pytest

from partition_notify import build_app
from partition_notify.cli import main

CALLS = [
    ["announce", "sales.orders", "datestamp=1"],
    ["mark-done", "sales.orders", "datestamp=1"],
    ["withdraw", "sales.orders", "datestamp=1", "--reason", "bad data"],
]


@pytest.mark.parametrize("call", CALLS, ids=lambda c: c[0])
def test_a_bad_key_names_the_flag(capsys: pytest.CaptureFixture[str], sqlite_url: str,
                                  call: list[str]) -> None:
    with build_app(store_url=sqlite_url, transport_url="embedded://") as app:
        app.publisher.register_table("sales", "orders", ["datestamp"])
    try:
        code = main(["--store-url", sqlite_url, "--transport-url", "embedded://", *call,
                     "--idempotency-key", "job 42"])
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    assert code in (1, 2) and out == "" and len(err.splitlines()) == 1, (code, out, err)
    assert "--idempotency-key" in err and "'job 42'" in err and "without spaces" in err, err
    assert "Idempotency-Key" not in err, err
    with build_app(store_url=sqlite_url, transport_url="embedded://") as app:
        assert app.store.log.max_event_id() == 0, "nothing was saved"
