"""Every CLI read command given an unknown or a malformed name says so.

One line on stderr naming the value, nothing on stdout, exit 1 or 2 (3 for
``wait`` and ``tail``, which wait for a table to be registered: at the timeout
they say it is not registered, README "The late-subscriber protocol"). Never
an empty answer with exit 0: a user with a typo would believe there is nothing.

The commands come from the real parser: a new command must be listed in
READS (and is then checked here) or in NOT_READS, or
``test_every_command_is_classified`` fails.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from partition_notify import build_app
from partition_notify.cli import main
from partition_notify.cli.entry import build_parser

#: How each read command is called; ``{t}`` is a table, ``{n}`` another name
#: (expectation, rule, dataset), the other arguments valid for ``sales.orders``.
READS: dict[str, list[list[str]]] = {
    "history": [["history", "{t}"]],
    "wait": [["wait", "{t}", "datestamp=1", "--timeout", "0"],
             ["wait", "{t}", "datestamp=1", "--timeout", "0", "--fail-on-late"]],
    "tail": [["tail", "{t}", "--timeout", "0"]],
    "rev snapshot": [["rev", "snapshot", "{t}"]],
    "rev status": [["rev", "status", "{t}"]],
    "dataset describe": [["dataset", "describe", "{n}"]],
    "dataset versions": [["dataset", "versions", "{n}"]],
    "dead-letters list": [["dead-letters", "list", "--table", "{t}"],
                          ["dead-letters", "list", "--table", "{t}", "--source", "relay"],
                          ["dead-letters", "list", "--table", "{t}", "--source", "airflow-push"]],
    "expect list": [["expect", "list", "{t}"]],
    "expect status": [["expect", "status", "{t}", "daily"],
                      ["expect", "status", "sales.orders", "{n}"]],
    "rule list": [["rule", "list", "{t}"]],
    "rule dry-run": [["rule", "dry-run", "{t}", "hourly"],
                     ["rule", "dry-run", "sales.orders", "{n}"]],
}
#: Commands that write, take no name, or take files or event ids, not names.
NOT_READS = {
    "register", "announce", "mark-done", "withdraw", "alter", "unregister", "purge", "serve",
    "schema", "demo", "tables", "rev begin", "rev commit", "rev abort", "rev keep-alive",
    "rev tables", "dataset define", "dataset list", "dataset expire", "dead-letters redrive",
    "dead-letters damaged",
    "dead-letters discard", "token create", "token list", "token revoke", "expect add",
    "expect remove", "expect check", "rule add", "rule remove", "spark-conf",
    "commits apply", "commits scan", "commits ignored", "lakehouse skip",
}
#: (kind, table, other name, what the one line must contain).
NAMES = [
    ("unknown", "nope.missing", "missing", ("nope.missing", "missing")),
    ("malformed", "bad db.orders", "bad name/..", ("bad db", "bad name/..")),
    ("malformed", "nodot", "x" * 300, ("nodot", "x" * 40)),
]


def _leaves(p: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[str]:
    subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield " ".join(path)
        return
    for name, sp in subs[0].choices.items():
        yield from _leaves(sp, (*path, name))


def test_every_command_is_classified() -> None:
    commands = set(_leaves(build_parser()))
    assert commands - set(READS) - NOT_READS == set(), "new command: add it to READS or NOT_READS"
    assert set(READS) | NOT_READS <= commands, "a listed command no longer exists"


@pytest.fixture
def store(sqlite_url: str) -> list[str]:
    with build_app(store_url=sqlite_url, transport_url="embedded://") as app:
        app.publisher.register_table("sales", "orders", ["datestamp"])
    return ["--store-url", sqlite_url, "--transport-url", "embedded://"]


@pytest.mark.parametrize("argv", [a for calls in READS.values() for a in calls],
                         ids=lambda a: " ".join(a))
@pytest.mark.parametrize(("kind", "table", "name", "named"), NAMES, ids=lambda v: str(v))
def test_a_read_of_an_unknown_or_malformed_name_says_so(
    capsys: pytest.CaptureFixture[str], store: list[str], argv: list[str], kind: str,
    table: str, name: str, named: tuple[str, str],
) -> None:
    args = [a.replace("{t}", table).replace("{n}", name) for a in argv]
    capsys.readouterr()
    try:
        code = main([*store, *args])
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    lines = err.splitlines()
    waits = args[0] in ("wait", "tail") and kind == "unknown"
    assert code in ((3,) if waits else (1, 2)), (code, out, err)
    # A waiter first says it waits for the registration (one line), then times out.
    assert out == "" and len(lines) == 1 + waits and "Traceback" not in err, (out, err)
    assert any(n in lines[-1] for n in named), lines[-1]
    if kind == "unknown":
        assert any(w in lines[-1] for w in ("not registered", "not defined", "no expectation",
                                            "no rule", "no snapshot")), lines[-1]


def test_dead_letters_of_a_table_no_longer_registered_are_still_listed(
    capsys: pytest.CaptureFixture[str], store: list[str], sqlite_url: str
) -> None:
    """Only a name with no dead letters at all is unknown: the Airflow push sink keeps
    the table's name with its letters, and the table may have been unregistered since."""
    from partition_notify.store.push_letters import PushLetters

    with build_app(store_url=sqlite_url, transport_url="embedded://") as app:
        PushLetters(app.store).record("airflow", 7, "gone.orders", "asset gone")
    for argv in (["dead-letters", "list", "--table", "gone.orders"],
                 ["dead-letters", "list", "--table", "sales.orders"]):
        capsys.readouterr()
        assert main([*store, *argv]) == 0
        out, err = capsys.readouterr()
        assert err == "", err
        assert [line.count('"event_id": 7') for line in out.splitlines()] == (
            [1] if "gone" in argv[-1] else []), out


@pytest.mark.parametrize("argv", [["history", "sales.orders.x"],
                                  ["wait", "sales.orders.x", "datestamp=1", "--timeout", "0"],
                                  ["tail", "sales.orders.x", "--timeout", "0"],
                                  ["announce", "sales.orders.x", "datestamp=1"]],
                         ids=lambda a: a[0])
def test_a_three_part_table_name_is_refused_naming_the_part(
    capsys: pytest.CaptureFixture[str], store: list[str], argv: list[str],
) -> None:
    """``wait``/``history`` said ``table reference ('sales', 'orders.x') in [('sales',
    'orders.x')] is not one of: ...`` where the other commands name the table name."""
    capsys.readouterr()
    assert main([*store, *argv]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [
        f"partition-notify {argv[0]}: error: table name 'orders.x': illegal character(s) '.'; "
        "expected letters, digits and '_'"], err
