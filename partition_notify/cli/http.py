"""``partition-notify token create|list|revoke``: bearer tokens of the HTTP API."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from partition_notify.core.api_roles import ROLES

if TYPE_CHECKING:
    from partition_notify.app import App
    from partition_notify.cli.common import Handler, SubParsers
    from partition_notify.http.store import HttpStore


def _when(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


def _tokens(args: argparse.Namespace) -> tuple[App, HttpStore]:
    from partition_notify.cli.common import open_app as _app
    from partition_notify.http.store import HttpStore

    app = _app(args)
    return app, HttpStore(app.store)


def cmd_token_create(args: argparse.Namespace) -> int:
    app, tokens = _tokens(args)
    with app:
        info, token = tokens.create_token(args.name, args.role)
    # The token itself goes to stdout alone (scripts capture it); it is not stored.
    print(token)
    print(
        f"token {info.name!r} (role {info.role}) created; it is shown only now",
        file=sys.stderr,
    )
    return 0


def cmd_token_list(args: argparse.Namespace) -> int:
    app, tokens = _tokens(args)
    with app:
        for t in tokens.tokens():
            print(json.dumps({"name": t.name, "role": t.role, "created": _when(t.created_at)}))
    return 0


def cmd_token_revoke(args: argparse.Namespace) -> int:
    app, tokens = _tokens(args)
    with app:
        info = tokens.revoke_token(args.name)
    print(f"token {info.name!r} (role {info.role}) revoked")
    return 0


def add_parsers(sub: SubParsers, parser_class: type[argparse.ArgumentParser]) -> None:
    """Add ``token`` to the subcommands ``sub`` of the main parser."""
    grp = sub.add_parser(
        "token", help="bearer tokens of the HTTP API", description="bearer tokens of the HTTP API"
    ).add_subparsers(dest="token_command", metavar="COMMAND", required=True,
                     parser_class=parser_class)

    def add(name: str, fn: Handler, help_: str) -> argparse.ArgumentParser:
        sp = grp.add_parser(name, help=help_, description=help_)
        sp.set_defaults(fn=fn, command=f"token {name}")
        return sp

    sp = add("create", cmd_token_create, "create a token; prints it once (stdout)")
    sp.add_argument("--name", required=True, help="unique name (letters, digits, '._@-')")
    sp.add_argument(
        "--role", required=True, choices=ROLES,
        help=f"{' < '.join(ROLES)}: each includes the ones before",
    )
    add("list", cmd_token_list, "list tokens (names and roles, never the tokens)")
    sp = add("revoke", cmd_token_revoke, "revoke a token now (its name can be reused)")
    sp.add_argument("name", help="the token's name")
