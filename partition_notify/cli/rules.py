"""``partition-notify rule add|list|remove|dry-run``: completeness rules (README)."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from partition_notify.cli.common import keys_arg, open_app

if TYPE_CHECKING:
    from partition_notify.cli.common import Handler, SubParsers

#: The kinds, here as well as in partition_notify.rules.kinds: the CLI parses its
#: arguments before importing any feature (tests/rules/test_cli_and_restart.py checks
#: the two agree).
KINDS = ("all-of", "calendar", "cross-table", "quiet")
KEY_FORMATS = ("YYYYMMDDHH", "YYYY-MM-DDTHH", "YYYYMMDD", "YYYY-MM-DD")
INTO_FORMATS = ("YYYYMMDD", "YYYY-MM-DD", "YYYYMM", "YYYY-MM")


def _ref(value: str) -> str:
    db, sep, table = value.partition(".")
    if not sep or not db or not table:
        raise argparse.ArgumentTypeError(f"table {value!r} must be written db.table")
    return value


def params(args: argparse.Namespace) -> dict[str, object]:
    """The rule parameters the command line gave (the API validates them)."""
    given = {"inputs": args.input, "key": args.key, "values": args.values, "by": args.by,
             "keyFormat": args.key_format, "into": args.into, "intoFormat": args.into_format,
             "timezone": args.timezone, "quietSeconds": args.quiet_seconds}
    return {k: v for k, v in given.items() if v is not None}


def cmd_add(args: argparse.Namespace) -> int:
    with open_app(args) as app:
        view = app.rules.add(args.table, name=args.name, kind=args.kind, params=params(args),
                             from_now=args.from_now)
        print(json.dumps(view.to_json()))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    with open_app(args) as app:
        for view in app.rules.rules(args.table):
            print(json.dumps(view.to_json()))
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    with open_app(args) as app:
        view = app.rules.remove(args.table, args.name)
        print(f"rule {view.name!r} of {view.table} removed")
    return 0


def cmd_dry_run(args: argparse.Namespace) -> int:
    with open_app(args) as app:
        report = app.rules.dry_run(args.table, name=args.name, kind=args.kind,
                                   params=params(args))
        print(json.dumps(report))
    return 0


def _definition(sp: argparse.ArgumentParser, *, required: bool) -> None:
    sp.add_argument("--kind", choices=KINDS, required=required, help="the kind of rule")
    sp.add_argument("--input", action="append", type=_ref, metavar="DB.TABLE",
                    help="input table (repeat; default: the rule's own table)")
    sp.add_argument("--key", help="all-of: the key whose values count (region); calendar: "
                    "the key holding hours or days (hour)")
    sp.add_argument("--values", type=keys_arg, help="all-of: every value required: us,eu,apac")
    sp.add_argument("--by", type=keys_arg,
                    help="all-of, cross-table, quiet: the keys of the derived spec: datestamp")
    sp.add_argument("--key-format", choices=KEY_FORMATS,
                    help="calendar: hour keys are UTC hours; day keys calendar days")
    sp.add_argument("--into", help="calendar: the key of the derived day or month (datestamp)")
    sp.add_argument("--into-format", choices=INTO_FORMATS, help="calendar: its format")
    sp.add_argument("--timezone", help="calendar: IANA zone of the derived days (default UTC)")
    sp.add_argument("--quiet-seconds", type=int, metavar="N",
                    help="quiet: done once no new partition of the --by values came for N s")


def add_parsers(sub: SubParsers, parser_class: type[argparse.ArgumentParser]) -> None:
    """Add ``rule`` to the subcommands ``sub`` of the main parser."""
    grp = sub.add_parser(
        "rule", help="completeness rules: set-dones derived by serve",
        description="completeness rules: serve derives a set-done once a rule's inputs are "
        "complete (README, Completeness rules)",
    ).add_subparsers(dest="rule_command", metavar="COMMAND", required=True,
                     parser_class=parser_class)

    def add(name: str, fn: Handler, help_: str) -> argparse.ArgumentParser:
        sp = grp.add_parser(name, help=help_, description=help_)
        sp.set_defaults(fn=fn, command=f"rule {name}")
        return sp

    sp = add("add", cmd_add, "add a rule to a table (its derived set-dones go there)")
    sp.add_argument("table", type=_ref, help="db.table")
    sp.add_argument("--name", required=True, help="unique per table: regions")
    _definition(sp, required=True)
    sp.add_argument("--from-now", action="store_true",
                    help="ignore the retained history: count only events from now on")
    sp = add("list", cmd_list, "list rules (JSON lines)")
    sp.add_argument("table", type=_ref, nargs="?", help="only this db.table")
    sp = add("remove", cmd_remove, "remove a rule, its counted inputs and firings")
    sp.add_argument("table", type=_ref, help="db.table")
    sp.add_argument("name")
    sp = add("dry-run", cmd_dry_run, "what a stored rule (NAME) or a definition (--kind ...) "
             "would have derived over the retained log; writes nothing")
    sp.add_argument("table", type=_ref, help="db.table")
    sp.add_argument("name", nargs="?", help="a stored rule")
    _definition(sp, required=False)
