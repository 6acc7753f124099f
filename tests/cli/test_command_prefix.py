"""A refusal names the whole command: ``partition-notify lakehouse skip: ...``.

A user running two-word commands from a script needs to know which one
refused; every command group's leaves carry their full path as ``command``
(cli/entry.py prints it before the error).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from partition_notify import build_app
from partition_notify.cli import main
from partition_notify.cli.entry import build_parser


def _leaves(p: argparse.ArgumentParser,
            path: tuple[str, ...] = ()) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield " ".join(path), p
        return
    for name, sp in subs[0].choices.items():
        yield from _leaves(sp, (*path, name))


def test_every_two_word_command_names_itself() -> None:
    wrong = {path: leaf._defaults.get("command") for path, leaf in _leaves(build_parser())
             if " " in path and leaf._defaults.get("command") != path}
    assert wrong == {}


def test_lakehouse_skip_refuses_under_its_own_name(
        capsys: pytest.CaptureFixture[str], sqlite_url: str) -> None:
    with build_app(store_url=sqlite_url, transport_url="embedded://"):
        pass
    code = main(["--store-url", sqlite_url, "--transport-url", "embedded://",
                 "lakehouse", "skip", "nope.missing", "--version", "3"])
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    assert err.startswith("partition-notify lakehouse skip: ") and "nope.missing" in err, err
