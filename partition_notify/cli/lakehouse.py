"""``partition-notify lakehouse skip``: past an Iceberg/Delta commit the follower cannot
announce (writers/lakehouse/skip.py)."""

from __future__ import annotations

import argparse
import getpass
from typing import TYPE_CHECKING

from partition_notify.cli.common import db_table, integer, open_app, table_arg
from partition_notify.core.limits import MAX_INT64

if TYPE_CHECKING:
    from partition_notify.cli.common import SubParsers

HELP = "act on a followed Iceberg or Delta table"
SKIP_HELP = (
    "skip the one commit the table's follower is stopped on (it cannot announce "
    "it, or, unable to load the table at its cursor, the commit it would resume at): "
    "a COMMITS_MISSED goes out instead and the follower goes on with the next "
    "commit; recorded with who and when on the /ui operations page"
)


def principal() -> str:
    """Who skipped, as the audit row names them: the OS user running the command."""
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):  # no user name for this uid (a bare container)
        return "cli"


def cmd_skip(args: argparse.Namespace) -> int:
    from partition_notify.writers.lakehouse.skip import skip

    with open_app(args, existing=True) as app:
        info = app.publisher.table(*db_table(args))
        done = skip(app.publisher, info, args.version, principal=principal())
        print(
            f"skipped {done.commits} of {done.table} (after commit "
            f"{done.after}): COMMITS_MISSED event {done.message.event_id}; the follower "
            "goes on with the next commit"
        )
    return 0


def add_parsers(sub: SubParsers, parser_class: type[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("lakehouse", help=HELP, description=HELP)
    cmds = p.add_subparsers(dest="lakehouse_command", required=True, parser_class=parser_class)
    sp = cmds.add_parser("skip", help=SKIP_HELP, description=SKIP_HELP)
    sp.set_defaults(fn=cmd_skip, command="lakehouse skip")
    sp.add_argument("table", type=table_arg, help="db.table")
    sp.add_argument(
        "--version",
        type=integer(0, MAX_INT64),
        required=True,
        help="the commit the follower is stopped on: the Delta version or the "
        "Iceberg snapshot id its log line names",
    )
