"""Every ``--help`` is plain text: no reST roles or double-backquote literals (issue 24)."""

from __future__ import annotations

import argparse
import re

from partition_notify.cli.entry import build_parser

MARKUP = re.compile(r":[a-z]+:`|``")


def _parsers(p: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    found = [(p.prog, p)]
    for action in p._actions:  # argparse keeps sub-commands only here
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += _parsers(sub)
    return found


def test_no_help_shows_sphinx_markup() -> None:
    marked = {prog: MARKUP.findall(p.format_help())
              for prog, p in _parsers(build_parser()) if MARKUP.search(p.format_help())}
    assert marked == {}


def test_metrics_port_out_of_range_is_one_line(
    capsys: object, monkeypatch: object, tmp_path: object
) -> None:
    import pytest

    from partition_notify.cli import main
    from partition_notify.cli.entry import EXIT_ERROR

    assert isinstance(monkeypatch, pytest.MonkeyPatch)
    monkeypatch.setenv("PN_METRICS_PORT", "99999")
    code = main(["--store-url", f"sqlite:///{tmp_path}/s.db", "tables"])
    err = capsys.readouterr().err.splitlines()  # type: ignore[attr-defined]
    assert code == EXIT_ERROR and len(err) == 1 and "PN_METRICS_PORT" in err[0], err


def test_serve_help_names_what_serve_runs_as_the_readme_does() -> None:
    """README: "relay, purges, Spark pick-up, health, rules, deadlines ...; --once: each
    job once, exit 1 if a run failed"; the help said only relay, purge and health."""
    serve = dict(_parsers(build_parser()))["partition-notify serve"]
    text = " ".join(serve.format_help().split())
    for part in ("completeness rules", "deadlines", "Iceberg/Delta", "PN_HTTP_BIND",
                 "1 if a run failed"):
        assert part in text, (part, text)
