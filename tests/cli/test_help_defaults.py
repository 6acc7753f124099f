"""Help texts and documented defaults agree with the code (issue 10, item 16).

Every number in a ``(default ...)`` of a help text must be the argument's
real default (or a named setting's); the README's settings table must list
the defaults ``Settings`` has.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

import pytest
from partition_notify.publisher import relay as relay_module
from partition_notify.publisher.relay import Relay
from partition_notify.revisions import DEFAULT_KEEP_ALIVE_SECONDS

from partition_notify import settings
from partition_notify.cli.entry import build_parser
from partition_notify.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
NUMBER = re.compile(r"(?<![\w.=])\d[\d,_]*(?:\.\d+)?(?![\w.])")


def _actions(parser: argparse.ArgumentParser, path: str = "") -> list[tuple[str, Any]]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += _actions(sub, f"{path} {name}".strip())
        else:
            out.append((path, action))
    return out


def _numbers(text: str) -> list[float]:
    return [float(n.replace(",", "").replace("_", "")) for n in NUMBER.findall(text)]


def _rendered(action: argparse.Action) -> str:
    """The help text as --help prints it (``%(default)s`` expanded)."""
    return str(action.help) % {**vars(action), "prog": "partition-notify"}


DEFAULT_PART = re.compile(r"\(default[^)]*\)|default \S+")


def _stated_defaults(action: argparse.Action) -> str:
    """The parts of the help that state a default: other numbers (exit codes,
    examples such as a cron line or 06:00) are not defaults."""
    return " ".join(DEFAULT_PART.findall(_rendered(action)))


ACTIONS = [
    (p, a) for p, a in _actions(build_parser()) if a.help and NUMBER.search(_stated_defaults(a))
]


@pytest.mark.parametrize(("path", "action"), ACTIONS,
                         ids=[f"{p} {a.option_strings or a.dest}" for p, a in ACTIONS])
def test_every_number_in_a_help_text_is_a_real_default(path: str, action: argparse.Action):
    """A number in help is the default of that option (argparse's or the code's)."""
    allowed = set()
    if isinstance(action.default, int | float) and not isinstance(action.default, bool):
        allowed.add(float(action.default))
    if action.dest == "keep_alive_seconds" and path == "rev begin":
        allowed.add(DEFAULT_KEEP_ALIVE_SECONDS)
    for number in _numbers(_stated_defaults(action)):
        assert number in allowed, f"{path} {action.option_strings}: {action.help!r}"


def test_rev_begin_names_the_real_keep_alive_default(capsys):
    parser = build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["rev", "begin", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"(default {DEFAULT_KEEP_ALIVE_SECONDS:g})" in text


def test_relay_lease_description_matches_the_relay():
    described = Settings.model_fields["relay_lease_seconds"].description or ""
    assert f"max({settings.RELAY_MIN_LEASE_SECONDS} s, 3 x publish_timeout_seconds)" in described
    grace = Settings.model_fields["relay_writer_grace_seconds"].description or ""
    assert f"publish_timeout_seconds + {settings.RELAY_WRITER_GRACE_MARGIN_SECONDS} s" in grace
    assert settings.RELAY_WRITER_GRACE_MARGIN_SECONDS == relay_module.WRITER_GRACE_MARGIN_SECONDS
    for timeout in (1.0, 10.0, 30.0):
        # The formula the description states is what the relay computes.
        relay = Relay(None, None, publish_timeout=timeout)  # type: ignore[arg-type]
        assert relay.lease_seconds == max(settings.RELAY_MIN_LEASE_SECONDS, 3 * timeout)
        assert relay.writer_grace == timeout + settings.RELAY_WRITER_GRACE_MARGIN_SECONDS


def _readme_table() -> dict[str, str]:
    rows = {}
    text = (ROOT / "README.md").read_text()
    for line in text.splitlines():
        if line.startswith("| `PN_"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[cells[0]] = cells[1]
    return rows


def _figure(text: str) -> float:
    number, _, unit = text.replace(",", "").partition(" ")
    return float(number) * {"": 1, "KiB": 1 << 10, "MiB": 1 << 20}[unit]


def test_readme_settings_table_defaults_match_settings():
    rows = _readme_table()
    assert rows, "README settings table not found"
    fields = Settings.model_fields
    checked = 0
    for names_cell, default_cell in rows.items():
        env_names = re.findall(r"`(PN_[A-Z_]+)`", names_cell)
        defaults = [d.strip(" `") for d in re.split(r",|/", default_cell)]
        if len(defaults) != len(env_names):
            defaults = [default_cell.strip(" `")] * len(env_names)
        for env, documented in zip(env_names, defaults, strict=True):
            field = env.removeprefix("PN_").lower()
            assert field in fields, f"README documents {env}, which Settings does not have"
            real = fields[field].default
            if real is None or documented in ("—", "-"):
                assert real is None or documented not in ("—", "-"), (env, real)
                continue
            value = getattr(real, "value", real)
            # "5 (`DEFAULT_MAX_ATTEMPTS`)": the figure, then the constant it comes from.
            documented = re.sub(r"\s*\(.*\)$", "", documented)
            if isinstance(value, bool):  # written as an environment value: true / false
                assert documented == str(value).lower(), (env, documented, value)
            elif isinstance(value, int | float):
                assert _figure(documented) == float(value), (env, documented)
            else:
                assert documented == str(value), (env, documented, value)
            checked += 1
    assert checked >= 10


def test_readme_states_the_partition_key_limit_the_code_has():
    from partition_notify.contract.names import MAX_PARTITION_KEYS

    text = " ".join((ROOT / "README.md").read_text().split())
    assert f"at most {MAX_PARTITION_KEYS} partition keys per table" in text


def test_every_text_default_is_named_in_its_help():
    """`--help` says what an option does when left out (README: "default `demo-run`")."""
    silent = []
    for path, a in _actions(build_parser()):
        if a.option_strings and isinstance(a.default, str) and a.default != argparse.SUPPRESS:
            text = a.help or ""
            shown = text % {"default": a.default} if "%(" in text else text
            if a.default not in shown:
                silent.append(f"{path} {a.option_strings[0]} (default {a.default!r})")
    assert silent == []


def test_a_seconds_refusal_states_the_bound_readably():
    # It said "expected a number of seconds from 0 to 3.1536e+08".
    from partition_notify.cli.common import seconds
    from partition_notify.core.limits import MAX_SECONDS

    with pytest.raises(argparse.ArgumentTypeError) as info:
        seconds("-5")
    assert str(info.value) == (f"'-5': expected a number of seconds from 0 to {MAX_SECONDS:,} "
                               f"({MAX_SECONDS // (365 * 86400)} years)")
    assert "e+" not in str(info.value)


def test_register_names_where_the_retention_default_comes_from(capsys):
    """``register --retention-seconds`` said only "how long set-done is kept": not in
    what unit, nor what a table registered without it gets."""
    with pytest.raises(SystemExit):
        build_parser().parse_args(["register", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "seconds (default PN_DEFAULT_RETENTION_SECONDS)" in text, text
    assert "PN_DEFAULT_RETENTION_SECONDS" in _readme_table()["`PN_DEFAULT_RETENTION_SECONDS`"] \
        or "`PN_DEFAULT_RETENTION_SECONDS`" in _readme_table()


def test_the_publishers_retention_default_is_the_settings():
    from partition_notify.publisher.publisher import PublisherConfig

    assert PublisherConfig().default_retention_seconds \
        == Settings.model_fields["default_retention_seconds"].default
