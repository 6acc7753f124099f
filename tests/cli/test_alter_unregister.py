"""A registered table can be fixed: ``alter`` and ``unregister`` (issue 24).

CLI and Python, on SQLite and PostgreSQL, with the embedded transport (the
store is the bus, so a subscriber really receives on the new topic).
"""

from __future__ import annotations

import json

import pytest

from partition_notify import build_app
from partition_notify.cli import main
from partition_notify.core.errors import ConflictError, UnknownTableError, ValidationError


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, list[str]]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err.splitlines()


def test_alter_topic_moves_new_messages_and_says_so(
    capsys: pytest.CaptureFixture[str], store_url: str
) -> None:
    cli = ("--store-url", store_url, "--transport-url", "embedded://")
    assert _run(capsys, *cli, "register", "fix.orders", "--keys", "ds",
                "--topic", "typo.topic")[0] == 0
    code, out, err = _run(capsys, *cli, "alter", "fix.orders", "--topic", "good.topic",
                          "--retention-seconds", "60", "--location", "/data/orders")
    assert code == 0, err
    assert "topic=good.topic" in out and "retention_seconds=60" in out, out
    assert "location=/data/orders" in out
    assert len(err) == 1 and "'typo.topic'" in err[0] and "nothing more" in err[0], err
    code, out, _ = _run(capsys, *cli, "mark-done", "fix.orders", "ds=1")
    assert code == 0 and json.loads(out)["eventId"] == 1
    with build_app(store_url=store_url) as app:
        events = app.store.log.events_after(0, limit=10)
        assert [e.topic for e in events] == ["good.topic"]
        assert app.publisher.table("fix", "orders").retention_seconds == 60
    code, out, _ = _run(capsys, *cli, "alter", "fix.orders", "--location", "")
    assert code == 0 and out.rstrip().endswith("location="), out


def test_alter_keys_only_before_the_first_announce(
    capsys: pytest.CaptureFixture[str], store_url: str
) -> None:
    cli = ("--store-url", store_url)
    assert _run(capsys, *cli, "register", "fix.keys", "--keys", "ds")[0] == 0
    code, out, err = _run(capsys, *cli, "alter", "fix.keys", "--keys", "ds,region")
    assert code == 0 and "keys=ds,region" in out, err
    assert _run(capsys, *cli, "announce", "fix.keys", "ds=1/region=us")[0] == 0
    code, _, err = _run(capsys, *cli, "alter", "fix.keys", "--keys", "ds")
    assert code == 1 and len(err) == 1, err
    assert "['ds', 'region'] to ['ds']" in err[0] and "1 announced partition" in err[0], err


@pytest.mark.parametrize(("argv", "fragment"), [
    (("alter", "fix.none"), "nothing to change"),
    (("alter", "fix.bad", "--retention-seconds", "0"), "retention_seconds for fix.bad must be"),
    (("alter", "fix.bad", "--topic", "bad topic!"), "bad topic!"),
    (("alter", "fix.bad", "--keys", "ds,ds"), "ds"),
    (("alter", "fix.missing", "--topic", "x"), "fix.missing is not registered"),
    (("unregister", "fix.missing"), "fix.missing is not registered"),
])
def test_bad_input_is_one_line_naming_field_and_value(
    capsys: pytest.CaptureFixture[str], sqlite_url: str, argv: tuple[str, ...], fragment: str
) -> None:
    assert _run(capsys, "--store-url", sqlite_url, "register", "fix.bad", "--keys", "ds")[0] == 0
    code, _, err = _run(capsys, "--store-url", sqlite_url, *argv)
    assert code == 1 and len(err) == 1 and fragment in err[0], (code, err)
    command = argv[0]
    # Named once, by the CLI's own prefix ("partition-notify alter: error: ..."), not again.
    assert err[0].count(f"{command}:") == 1, err


def test_unregister_removes_rows_and_a_new_registration_starts_clean(
    capsys: pytest.CaptureFixture[str], store_url: str
) -> None:
    cli = ("--store-url", store_url)
    assert _run(capsys, *cli, "register", "fix.gone", "--keys", "ds")[0] == 0
    assert _run(capsys, *cli, "announce", "fix.gone", "ds=1", "ds=2")[0] == 0
    assert _run(capsys, *cli, "mark-done", "fix.gone", "ds=1")[0] == 0
    code, out, err = _run(capsys, *cli, "unregister", "fix.gone")
    assert code == 0, err
    assert "removed 2 partition(s) and 1 retained set-done row(s)" in out, out
    code, _, err = _run(capsys, *cli, "history", "fix.gone")
    assert code == 1 and "not registered" in err[0], err
    assert _run(capsys, *cli, "register", "fix.gone", "--keys", "day")[0] == 0
    code, out, _ = _run(capsys, *cli, "history", "fix.gone")
    assert code == 0 and out == "", out
    with build_app(store_url=store_url) as app:
        assert app.store.log.max_event_id() == 3, "logged events stay for the relay"


def test_python_api_alter_and_unregister(store_url: str) -> None:
    with build_app(store_url=store_url) as app:
        app.publisher.register_table("py", "t", ["ds"])
        info = app.publisher.alter_table("py", "t", topic="py.fixed", retention_seconds=5)
        assert (info.topic, info.retention_seconds) == ("py.fixed", 5)
        with pytest.raises(ValidationError, match=r"retention_seconds for py\.t"):
            app.publisher.alter_table("py", "t", retention_seconds=-1)
        app.publisher.send_mark_set_done("py", "t", "ds=1")
        with pytest.raises(ConflictError, match="1 retained set-done"):
            app.publisher.alter_table("py", "t", partition_keys=["day"])
        table, partitions, set_done = app.unregister_table("py", "t")
        assert (table.qualified, partitions, set_done) == ("py.t", 0, 1)
        with pytest.raises(UnknownTableError):
            app.unregister_table("py", "t")


def test_unregister_refuses_a_table_another_tables_rule_reads(
    capsys: pytest.CaptureFixture[str], store_url: str
) -> None:
    # Unregistering an input left the rule failing at every rules run of serve
    # (a WARNING every PN_RULES_INTERVAL_SECONDS, for ever) and never firing.
    cli = ("--store-url", store_url)
    for table in ("rin.a", "rin.b", "rout.t"):
        assert _run(capsys, *cli, "register", table, "--keys", "ds")[0] == 0
    assert _run(capsys, *cli, "rule", "add", "rout.t", "--name", "both", "--kind", "cross-table",
                "--input", "rin.a", "--input", "rin.b", "--by", "ds")[0] == 0
    code, _, err = _run(capsys, *cli, "unregister", "rin.a")
    assert code == 1 and len(err) == 1, err
    assert "rout.t:both" in err[0] and "rule remove" in err[0], err
    code, out, _ = _run(capsys, *cli, "tables")
    assert "rin.a" in out
    # A table's own rules go with it.
    assert _run(capsys, *cli, "unregister", "rout.t")[0] == 0
    assert _run(capsys, *cli, "rule", "list")[1] == ""
    assert _run(capsys, *cli, "unregister", "rin.a")[0] == 0
