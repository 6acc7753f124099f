"""``partition-notify dead-letters ...``: events the broker or Airflow refused for good.

Two sources (``--source``). ``relay``: the relay dead-letters an event after
``PN_RELAY_MAX_ATTEMPTS`` refusals for good (too large, not authorized,
invalid destination); see :mod:`partition_notify.store.dead_letters`.
``airflow-push``: the Airflow push sink of ``serve`` dead-letters a set-done
Airflow refused for good (asset gone, forbidden, invalid) or could not
confirm; see :mod:`partition_notify.store.push_letters`.
These commands list them (both sources unless ``--source`` is given), send
them again (``redrive``: fix the cause first; the relay or the sink sends
them on its next run) or give up on them (``discard``: kept, marked, never sent). Output
is JSON, one object per line, with its ``source``; exit codes as in
``partition-notify --help``. Only the store is opened: no broker is needed.
``damaged`` lists rows of the event log whose headers are damaged
(store/damaged_rows.py): rebuilt from the body when read, or unverifiable
(the body does not decode either: never sent, dead-lettered by the relay).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from partition_notify.cli.common import plain, table_arg

if TYPE_CHECKING:
    from partition_notify.cli.common import Handler, SubParsers
    from partition_notify.store.dead_letters import DeadLetter, DeadLetters
    from partition_notify.store.push_letters import PushLetter, PushLetters


RELAY, PUSH = "relay", "airflow-push"


@contextmanager
def _letters(args: argparse.Namespace) -> Iterator[tuple[DeadLetters, PushLetters]]:
    from partition_notify.settings import load_settings
    from partition_notify.store import Store
    from partition_notify.store.dead_letters import DeadLetters
    from partition_notify.store.push_letters import PushLetters

    settings = load_settings(**({"store_url": args.store_url} if args.store_url else {}))
    store = Store.open(settings.store_url, connect_timeout_seconds=settings.connect_timeout_seconds,
                       store_reply_timeout_seconds=settings.store_reply_timeout_seconds)
    try:
        yield DeadLetters(store), PushLetters(store)
    finally:
        store.close()


def _event_id(value: str) -> int:
    try:
        event_id = int(value)
    except ValueError:
        event_id = 0
    if event_id <= 0 or event_id >= 2**63:
        raise argparse.ArgumentTypeError(f"event id {value!r} must be a positive integer")
    return event_id


def _print_all(letters: list[DeadLetter] | list[PushLetter], **extra: object) -> None:
    for d in letters:
        print(json.dumps({"source": RELAY, **d.as_dict(), **extra}), flush=True)


def cmd_list(args: argparse.Namespace) -> int:
    from partition_notify.contract import names

    # Checked and normalised as every other command's table (SALES.orders is sales.orders).
    table = None if args.table is None else (names.db_name(args.table[0]),
                                             names.table_name(args.table[1]))
    with _letters(args) as (dl, pl):
        relay = dl.find(table) if args.source in (None, RELAY) else []
        push = [] if args.source == RELAY else pl.find(None if table is None else ".".join(table))
        if table is not None and not relay and not push:
            # A typo must not read as "no dead letters". An unregistered table's
            # push letters (the table string is kept) are still listed above.
            dl.store.catalog.get_table(*table)
        _print_all(relay)
        _print_all(push)
    return 0


def cmd_damaged(args: argparse.Namespace) -> int:
    import sys

    from partition_notify.store.damaged_rows import find_damaged

    with _letters(args) as (dl, _):
        found = find_damaged(dl.store, args.limit, args.scan)
    for d in found.rows:
        print(json.dumps({"source": "event-log", **d.as_dict()}), flush=True)
    # What was looked at, apart from the JSON lines: "none" must not read as "none anywhere".
    print(f"checked events {found.first}..{found.last}; {len(found.rows)} damaged row(s) "
          f"shown (at most {args.limit}, newest first)", file=sys.stderr)
    return 0


def _count(what: str, low: int) -> Callable[[str], int]:
    def parse(value: str) -> int:
        n = int(value) if value.isascii() and value.isdigit() and len(value) <= 9 else -1
        if n < low:
            raise argparse.ArgumentTypeError(
                f"{what} {value[:20]!r} must be an integer >= {low} (at most 9 digits)")
        return n
    return parse


def cmd_redrive(args: argparse.Namespace) -> int:
    if bool(args.event_ids) == bool(args.all):
        args.parser.error("give EVENT_IDs or --all, not both or neither")
    ids = None if args.all else args.event_ids
    with _letters(args) as (dl, pl):
        _print_all(pl.redrive(ids) if args.source == PUSH else dl.redrive(ids),
                   action="redriven")
    return 0


def cmd_discard(args: argparse.Namespace) -> int:
    with _letters(args) as (dl, pl):
        letters = pl.discard(args.event_ids) if args.source == PUSH else dl.discard(
            args.event_ids)
        _print_all(letters, action="discarded")
    return 0


def add_parsers(sub: SubParsers, parser_class: type[argparse.ArgumentParser]) -> None:
    """Add ``dead-letters`` to the subcommands ``sub`` of the main parser."""
    help_ = "events the broker or Airflow refused for good: list, redrive, discard"
    grp = sub.add_parser("dead-letters", help=help_, description=plain(__doc__),
                         formatter_class=argparse.RawDescriptionHelpFormatter).add_subparsers(
        dest="dead_letters_command", metavar="COMMAND", required=True, parser_class=parser_class)

    def add(name: str, fn: Handler, text: str) -> argparse.ArgumentParser:
        sp = grp.add_parser(name, help=text, description=text)
        sp.set_defaults(fn=fn, command=f"dead-letters {name}")
        sp.set_defaults(parser=sp)
        return sp

    sp = add("list", cmd_list, "list dead letters (discarded ones too), oldest first")
    sp.add_argument("--table", type=table_arg, help="only this table: db.table")
    sp.add_argument("--source", choices=[RELAY, PUSH], help="only this source (default: both)")
    sp = add("damaged", cmd_damaged, "rows of the event log whose headers are damaged, "
             "newest first (unverifiable ones are never sent)")
    # 100,000: store/damaged_rows.py SCAN_EVENTS (not imported: --help opens no store).
    sp.add_argument("--scan", type=_count("--scan", 0), default=100_000,
                    help="look at the newest N events (default: %(default)s); zero looks at "
                         "the whole log, which reads every row")
    sp.add_argument("--limit", type=_count("--limit", 1), default=200,
                    help="list at most N rows (default: %(default)s)")
    sp = add("redrive", cmd_redrive, "send dead letters again: back to pending, attempts reset")
    sp.add_argument("event_ids", nargs="*", type=_event_id, metavar="EVENT_ID")
    sp.add_argument("--all", action="store_true", help="every dead letter not discarded")
    sp.add_argument("--source", choices=[RELAY, PUSH], default=RELAY,
                    help="whose dead letters (default: %(default)s)")
    sp = add("discard", cmd_discard, "keep dead letters in the log as discarded, never sent")
    sp.add_argument("event_ids", nargs="+", type=_event_id, metavar="EVENT_ID")
    sp.add_argument("--source", choices=[RELAY, PUSH], default=RELAY,
                    help="whose dead letters (default: %(default)s)")
