"""``partition-notify expect add|list|remove|status|check`` and ``wait --fail-on-late``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING

from partition_notify.cli.common import (
    db_table,
    dump,
    integer,
    open_app,
    say_if_unregistered,
    table_arg,
)
from partition_notify.deadlines.schedule import VARIABLES
from partition_notify.subscriber.refs import table_keys

#: `expect status --limit` at most: verdicts are kept for a retention, not for ever.
MAX_STATUS_LIMIT = 10_000

if TYPE_CHECKING:
    from partition_notify.app import App
    from partition_notify.cli.common import Handler, SubParsers

EXIT_LATE = 4


def _app(args: argparse.Namespace) -> App:
    return open_app(args)


def cmd_expect_add(args: argparse.Namespace) -> int:
    with _app(args) as app:
        view = app.deadlines.add(*db_table(args), name=args.name, spec_template=args.spec_template,
                                 cron=args.cron, timezone=args.timezone, deadline=args.deadline)
        print(json.dumps(view.to_json()))
    return 0


def cmd_expect_list(args: argparse.Namespace) -> int:
    with _app(args) as app:
        views = app.deadlines.expectations(*(args.table or (None, None)))
        for v in views:
            print(json.dumps(v.to_json()))
    if not views:  # stdout stays JSON lines (none: zero lines); the word is for a person
        where = f"of {args.table[0]}.{args.table[1]}" if args.table else "declared"
        table = f"{args.table[0]}.{args.table[1]}" if args.table else "DB.TABLE"
        print(f"no expectations {where} (partition-notify expect add {table} ...)",
              file=sys.stderr)
    return 0


def cmd_expect_remove(args: argparse.Namespace) -> int:
    with _app(args) as app:
        view = app.deadlines.remove(*db_table(args), args.name)
        print(f"expectation {view.name!r} of {view.table} removed")
    return 0


def cmd_expect_status(args: argparse.Namespace) -> int:
    with _app(args) as app:
        rows = app.deadlines.status(*db_table(args), args.name, args.limit)
        for row in rows:
            print(json.dumps(row))
    if not rows:  # stdout stays JSON lines (none: zero lines); the word is for a person
        db, table = db_table(args)
        print(f"no verdicts yet for expectation {args.name!r} of {db}.{table} (one is kept "
              "per logical date once its deadline passed; serve's deadline check writes "
              "it, or partition-notify expect check)", file=sys.stderr)
    return 0


def cmd_expect_check(args: argparse.Namespace) -> int:
    with _app(args) as app:
        report = app.deadlines.checker().check()
        print(json.dumps({"late": len(report.late), "recovered": len(report.recovered),
                          "onTime": report.on_time, "doneLate": report.done_late}))
    return 0


def wait_failing_on_late(args: argparse.Namespace) -> int:
    """``wait --fail-on-late``: exit 4 when the spec is declared late first."""
    from partition_notify.core.errors import PartitionLateError

    started = time.monotonic()
    with open_app(args, existing=True) as app:
        say_if_unregistered(app, table_keys([args.table]), args.timeout, "wait")
        try:
            msg = app.deadlines.wait_for_set_done(*db_table(args), args.spec, timeout=args.timeout)
        except PartitionLateError as exc:
            print(f"partition-notify wait: late: {exc}", file=sys.stderr)
            return EXIT_LATE
        print(dump(msg))
        print(f"waited {time.monotonic() - started:.3f} s", file=sys.stderr)
    return 0


def add_parsers(sub: SubParsers, parser_class: type[argparse.ArgumentParser]) -> None:
    """Add ``expect`` to the subcommands ``sub`` of the main parser."""
    grp = sub.add_parser(
        "expect", help="partition deadlines: expected set-done per schedule",
        description="partition deadlines: expected set-done per schedule (docs/http-api.md)",
    ).add_subparsers(dest="expect_command", metavar="COMMAND", required=True,
                     parser_class=parser_class)

    def add(name: str, fn: Handler, help_: str) -> argparse.ArgumentParser:
        sp = grp.add_parser(name, help=help_, description=help_)
        sp.set_defaults(fn=fn, command=f"expect {name}")
        return sp

    sp = add("add", cmd_expect_add, "declare an expectation of a table")
    sp.add_argument("table", type=table_arg, help="db.table")
    sp.add_argument("--name", required=True, help="unique per table: daily")
    sp.add_argument("--spec-template", required=True,
                    help="partial spec with {{ variables }}: datestamp={{ ds_nodash }}; "
                    f"variables: {', '.join(VARIABLES)}")
    sp.add_argument("--cron", required=True, help="5-field crontab of logical dates: '0 0 * * *'")
    sp.add_argument("--timezone", default="UTC", help="IANA zone of the cron (default UTC)")
    sp.add_argument("--deadline", required=True,
                    help="local HH:MM after the interval end (06:00), or an offset "
                    "from +1s to +744h (+6h, +90m)")
    sp = add("list", cmd_expect_list, "list expectations (JSON lines)")
    sp.add_argument("table", type=table_arg, nargs="?", help="only this db.table")
    sp = add("remove", cmd_expect_remove, "remove an expectation and its verdicts")
    sp.add_argument("table", type=table_arg, help="db.table")
    sp.add_argument("name")
    sp = add("status", cmd_expect_status, "latest verdicts of an expectation (JSON lines)")
    sp.add_argument("table", type=table_arg, help="db.table")
    sp.add_argument("name")
    sp.add_argument("--limit", type=integer(1, MAX_STATUS_LIMIT), default=20,
                    help=f"how many, 1 to {MAX_STATUS_LIMIT} (default %(default)s)")
    add("check", cmd_expect_check, "run the deadline check once now (serve does it itself)")
