"""``wait``, ``tail`` and ``wait_for_set_done`` on a table not registered yet wait
for it within their timeout, as an Airflow sensor does (issue 24)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from partition_notify import build_app
from partition_notify.cli import main
from partition_notify.cli.entry import EXIT_TIMEOUT
from partition_notify.core.errors import WaitTimeout

CLI = str(Path(sys.executable).with_name("partition-notify"))


def test_wait_command_waits_for_registration(store_url: str) -> None:
    build_app(store_url=store_url).close()  # the store exists; the table does not
    proc = subprocess.Popen(
        [CLI, "--store-url", store_url, "wait", "later.orders", "ds=1", "--timeout", "120"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()  # the event: it is waiting, not failing
        assert "later.orders not registered yet; waiting up to 120 s" in first, first
        with build_app(store_url=store_url) as app:
            app.publisher.register_table("later", "orders", ["ds"])
            app.publisher.send_mark_set_done("later", "orders", "ds=1")
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, (first, err)
        done = json.loads(out)
        assert (done["eventType"], done["eventId"]) == ("PARTITION_DONE", 1), done
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


@pytest.mark.parametrize("command", [("wait", "never.t", "ds=1"), ("tail", "never.t")])
def test_unregistered_until_the_timeout_is_a_timeout(
    capsys: pytest.CaptureFixture[str], sqlite_url: str, command: tuple[str, ...]
) -> None:
    build_app(store_url=sqlite_url).close()  # the store exists; the table does not
    capsys.readouterr()
    code = main(["--store-url", sqlite_url, *command, "--timeout", "0.3"])
    err = capsys.readouterr().err.splitlines()
    assert code == EXIT_TIMEOUT, err
    assert "never.t not registered yet" in err[0]
    assert "not registered" in err[-1] and "waited 0.3 s" in err[-1], err


def test_python_wait_for_set_done_times_out_on_an_unregistered_table(store_url: str) -> None:
    """The waiting itself is the CLI test above (`wait` is this call in a process)."""
    with build_app(store_url=store_url) as app, app.subscriber() as sub:
        with pytest.raises(WaitTimeout, match=r"never\.t is not registered.*waited 0\.2 s"):
            sub.wait_for_set_done("never", "t", "ds=1", timeout=0.2)
        app.publisher.register_table("never", "t", ["ds"])
        app.publisher.send_mark_set_done("never", "t", "ds=1")
        assert sub.wait_for_set_done("never", "t", "ds=1", timeout=0).event_id == 1
