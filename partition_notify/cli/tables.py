"""Fixing a registered table: ``alter`` and ``unregister``."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from partition_notify.cli.common import db_table, keys_arg, open_app, table_arg
from partition_notify.core.errors import ValidationError

if TYPE_CHECKING:
    from partition_notify.cli.common import SubParsers

ALTER_HELP = ("change a registered table's topic, keys (only before its first announce or "
              "set-done), location or retention")
UNREGISTER_HELP = ("remove a table with its partitions and retained set-done rows; logged "
                   "events are still delivered")


def cmd_alter(args: argparse.Namespace) -> int:
    changes = (args.keys, args.topic, args.location, args.retention_seconds)
    if all(change is None for change in changes):
        raise ValidationError(
            "nothing to change: give --keys, --topic, --location or --retention-seconds")
    with open_app(args) as app:
        before = app.publisher.table(*db_table(args))
        info = app.alter_table(
            *db_table(args), partition_keys=args.keys, topic=args.topic,
            location=args.location, retention_seconds=args.retention_seconds)
        if before.topic != info.topic:
            print(f"partition-notify alter: messages logged from now on go to {info.topic!r}; "
                  f"subscribers of {before.topic!r} receive nothing more of "
                  f"{info.qualified}", file=sys.stderr)
        print(f"{info.qualified} keys={','.join(info.partition_keys)} topic={info.topic} "
              f"retention_seconds={info.retention_seconds} location={info.location or ''}")
    return 0


def cmd_unregister(args: argparse.Namespace) -> int:
    with open_app(args) as app:
        info, partitions, set_done = app.unregister_table(*db_table(args))
        print(f"unregistered {info.qualified}: removed {partitions} partition(s) and "
              f"{set_done} retained set-done row(s); topic {info.topic} keeps its messages")
    return 0


def _alter_args(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("table", type=table_arg, help="db.table")
    sp.add_argument("--keys", type=keys_arg, help="new partition keys, in order: a,b")
    sp.add_argument("--topic", help="new explicit topic")
    sp.add_argument("--location", help="new table location ('' clears it)")
    sp.add_argument("--retention-seconds", type=int,
                    help="how long set-done rows saved from now on are kept")


def add_parsers(sub: SubParsers, parser_class: type[argparse.ArgumentParser]) -> None:
    del parser_class  # no sub-commands of their own
    sp = sub.add_parser("alter", help=ALTER_HELP, description=ALTER_HELP)
    sp.set_defaults(fn=cmd_alter)
    _alter_args(sp)
    sp = sub.add_parser("unregister", help=UNREGISTER_HELP, description=UNREGISTER_HELP)
    sp.set_defaults(fn=cmd_unregister)
    sp.add_argument("table", type=table_arg, help="db.table")
