"""``withdraw``: take a partition or a set back (PARTITION_WITHDRAWN)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from partition_notify.cli.common import db_table, dump, idempotency_key, open_app, table_arg

if TYPE_CHECKING:
    from partition_notify.cli.common import SubParsers

HELP = ("take a partition or a set back (its data is bad): its partitions are removed, "
        "set-dones sharing a partition no longer count, rules retract what they derived")


def cmd_withdraw(args: argparse.Namespace) -> int:
    with open_app(args) as app:
        msg = app.publisher.withdraw(*db_table(args), args.spec, reason=args.reason,
                                     idempotency_key=args.idempotency_key)
        print(dump(msg))
        print(f"withdrew {len(msg.partitions)} partition(s) and {len(msg.set_dones)} "
              f"set-done(s) of {msg.db}.{msg.table}; restate with announce, then mark-done",
              file=sys.stderr)
    return 0


def add_parsers(sub: SubParsers, parser_class: type[argparse.ArgumentParser]) -> None:
    del parser_class  # no sub-commands of its own
    sp = sub.add_parser("withdraw", help=HELP, description=HELP)
    sp.set_defaults(fn=cmd_withdraw)
    sp.add_argument("table", type=table_arg, help="db.table")
    sp.add_argument("spec", help="full or partial spec: datestamp=20110228/region=us")
    sp.add_argument("--reason", required=True, help="why, for consumers (e.g. 'bad data')")
    sp.add_argument("--idempotency-key", metavar="KEY", type=idempotency_key,
                    help="a retry with the same key and arguments withdraws nothing again")
