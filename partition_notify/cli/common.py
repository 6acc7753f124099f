"""What every ``partition-notify`` command group shares: open the App, dump a
message, argument types and argv checks.

Bounds come from :mod:`partition_notify.core.limits`, so a number the store could
not hold is refused by argparse (exit 2, one line) instead of failing deep
inside a driver.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from partition_notify.core import limits
from partition_notify.core.limits import MAX_INT64

if TYPE_CHECKING:
    from pydantic import BaseModel

    from partition_notify.app import App

    #: The sub-command list of a parser, as ``add_subparsers`` returns it (typeshed's
    #: generic; not subscriptable at run time, hence type-checking only).
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]

#: What a sub-command runs: parsed arguments in, exit code out.
Handler = Callable[[argparse.Namespace], int]
#: Ten years; larger timeouts overflow the platform's wait primitives.
MAX_SECONDS = limits.MAX_SECONDS


def table_arg(value: str) -> tuple[str, str]:
    db, sep, table = value.partition(".")
    if not sep or not db or not table:
        raise argparse.ArgumentTypeError(f"table {value!r} must be written db.table")
    return db, table


def idempotency_key(value: str) -> str:
    """``--idempotency-key``: refused naming the flag (the store's check names the HTTP
    header, the name HTTP clients use)."""
    from partition_notify.store.idempotency import check_idempotency_key

    try:
        return check_idempotency_key(value)
    except ValueError as exc:
        detail = str(exc).partition(": ")[2] or str(exc)
        raise argparse.ArgumentTypeError(f"{value[:40]!r}: {detail}") from None


def seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from None
    if not math.isfinite(seconds) or not 0 <= seconds <= MAX_SECONDS:
        raise argparse.ArgumentTypeError(
            f"{value!r}: expected a number of seconds from 0 to {MAX_SECONDS:,} "
            f"({MAX_SECONDS // (365 * 86400)} years)"
        )
    return seconds


def keys_arg(value: str) -> list[str]:
    return value.split(",")


def dump(msg: BaseModel) -> str:
    return msg.model_dump_json(by_alias=True, exclude_none=True)


def open_app(args: argparse.Namespace, *, existing: bool = False) -> App:
    """The App of a command; ``existing``: a read command, which never creates a store."""
    from partition_notify.app import build_app
    from partition_notify.settings import load_settings

    overrides = {
        k: v for k, v in (("store_url", args.store_url), ("transport_url", args.transport_url)) if v
    }
    settings = load_settings(**overrides)  # a bad variable first, then the store
    refuse_in_memory(settings.store_url)
    if existing:
        require_store(settings.store_url)
    return build_app(settings)


def refuse_in_memory(url: str) -> None:
    """Each command is a process of its own: what one saves in an in-memory database,
    the next can never read (``register`` would succeed and ``announce`` not find it)."""
    from partition_notify.core.errors import ConfigurationError
    from partition_notify.core.redact import redact_url
    from partition_notify.store.engine import sqlite_in_memory

    if sqlite_in_memory(url):
        raise ConfigurationError(
            f"store URL {redact_url(url)!r} is an in-memory database, which ends with the "
            "command: use a file, e.g. sqlite:///./partition-notify.db")


def store_in_use(url: str | None) -> str:
    """The store a command uses, as shown to the user: redacted URL and, for SQLite, its file."""
    from partition_notify.core.redact import redact_url
    from partition_notify.settings import load_settings
    from partition_notify.store.engine import sqlite_file

    url = url or load_settings().store_url
    path = sqlite_file(url)
    return redact_url(url) + ("" if path is None else f" (file {path})")


def require_store(url: str | None) -> None:
    """A missing SQLite file is an error naming it: the store ``serve`` uses lives elsewhere."""
    from partition_notify.core.errors import ConfigurationError
    from partition_notify.settings import load_settings
    from partition_notify.store.engine import sqlite_file

    url = url or load_settings().store_url
    path = sqlite_file(url)
    if path is not None and not path.exists():
        raise ConfigurationError(
            f"store {store_in_use(url)} does not exist; read commands do not create one: "
            "point --store-url or PN_STORE_URL at the store serve uses, or create it with "
            "`partition-notify register` (or serve)")


def say_if_unregistered(app: App, refs: list[tuple[str, str]], timeout: float | None,
                        command: str) -> None:
    """One stderr line when a command is about to wait for tables to be registered."""
    known = {(t.db, t.name) for t in app.store.catalog.tables()}
    if missing := [f"{db}.{name}" for db, name in refs if (db, name) not in known]:
        limit = "" if timeout is None else f" up to {timeout:g} s"
        print(f"partition-notify {command}: {', '.join(missing)} not registered yet; "
              f"waiting{limit} for it", file=sys.stderr, flush=True)


def integer(minimum: int, maximum: int = MAX_INT64) -> Callable[[str], int]:
    """An argparse type: an integer from ``minimum`` to ``maximum``."""

    def parse(value: str) -> int:
        number = int(value)  # ValueError: argparse says "invalid int value: 'x'"
        if not minimum <= number <= maximum:
            raise argparse.ArgumentTypeError(
                f"{value}: expected an integer from {minimum} to {maximum}"
            )
        return number

    parse.__name__ = "int"  # argparse names the type in "invalid int value"
    return parse


def db_table(args: argparse.Namespace) -> tuple[str, str]:
    """The ``table`` argument of a command, already split into ``(db, table)``."""
    db: str
    table: str
    db, table = args.table
    return db, table


def undecodable(argv: Sequence[str]) -> str | None:
    """Describe the first argument that is not valid UTF-8, or None.

    Python hands undecodable bytes over as lone surrogates (surrogateescape);
    they would fail later, in a driver, with a UnicodeEncodeError.
    """
    for position, arg in enumerate(argv, 1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError as exc:
            raw = arg.encode("utf-8", "surrogateescape") if _escaped(arg) else None
            shown = repr(raw)[1:] if raw is not None else repr(arg)
            return (f"argument {position} {shown} is not valid UTF-8 (byte at position "
                    f"{exc.start}); arguments must be UTF-8 text")
    return None


def _escaped(arg: str) -> bool:
    try:
        arg.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return False
    return True


def plain(doc: str | None) -> str:
    """A module docstring as ``--help`` text: reST roles and literals as plain text."""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", doc or "")
    return text.replace("``", "`")
