"""The ``partition-notify`` command line.

Exit codes: 0 success; 1 an error (bad input, store or broker failure) and
nothing was saved — one line on stderr, no traceback; 2 bad command-line
usage; 3 ``wait`` timed out; 4 ``wait --fail-on-late``: the spec was declared
late; 5 a write was saved but the broker did not confirm it: the relay
(``serve``) delivers it, do not retry (or retry with the same
--idempotency-key); 6 a write was saved but the broker refused it for good:
the relay dead-letters it unless the refusal is fixed; 130 interrupted;
141 the reader of stdout went away (``| head``), output cut short, nothing else.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from partition_notify.cli import (
    commands,
    deadletters,
    deadlines,
    http,
    lakehouse,
    revisions,
    rules,
    spark,
    tables,
    withdraw,
)
from partition_notify.cli.common import plain, undecodable
from partition_notify.core.errors import (
    MessageRejected,
    PartitionNotifyError,
    PublishError,
    WaitTimeout,
)

EXIT_ERROR, EXIT_USAGE, EXIT_TIMEOUT = 1, 2, 3
#: A write the store saved but the broker did not confirm (5) or refused for good (6).
EXIT_PENDING, EXIT_REFUSED = 5, 6
#: stdout's reader went away (``| head``): as a Unix tool killed by SIGPIPE (128 + 13).
EXIT_BROKEN_PIPE = 141
#: Drivers that log their own connection failures; a one-shot command reports
#: them in its one error line instead (``serve`` keeps them: it configures logging).
DRIVER_LOGGERS = ("stomp.py", "kafka")
#: The command groups, in ``--help`` order. Each module has
#: ``add_parsers(sub, parser_class)``; adding a group is one entry here.
GROUPS = (commands, withdraw, tables, revisions, deadletters, http, deadlines, rules, spark,
          lakehouse)


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One line, not argparse's usage block: scripts grep stderr.
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="partition-notify",
        description=plain(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--store-url", help="overrides PN_STORE_URL")
    p.add_argument("--transport-url", help="overrides PN_TRANSPORT_URL")
    # Typed as the base class, so the group modules take any ArgumentParser's sub-commands.
    parser_class: type[argparse.ArgumentParser] = Parser
    sub = p.add_subparsers(dest="command", required=True, parser_class=parser_class)
    for group in GROUPS:
        group.add_parsers(sub, Parser)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    bad = undecodable(argv)
    if bad is not None:
        print(f"partition-notify: error: {bad} (see --help)", file=sys.stderr)
        return EXIT_USAGE
    args = build_parser().parse_args(argv)
    # Restored on return: a program that calls main() keeps its own logging.
    saved = {name: logging.getLogger(name).level for name in DRIVER_LOGGERS}
    if args.command != "serve":
        for name in DRIVER_LOGGERS:
            logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    try:
        code: int = args.fn(args)
        sys.stdout.flush()  # a closed pipe surfaces here, not at interpreter exit
        return code
    except WaitTimeout as exc:
        print(f"partition-notify {args.command}: timeout: {exc}", file=sys.stderr)
        return EXIT_TIMEOUT
    except PartitionNotifyError as exc:
        return _failed(args.command, exc)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # Nothing more can be printed; point stdout at /dev/null so the flush
        # at interpreter exit does not raise (and print) the same error again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    finally:
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)


def _failed(command: str, exc: PartitionNotifyError) -> int:
    """One stderr line; the exit code tells "nothing saved" (1) from "saved" (5, 6)."""
    one_line = " ".join(str(exc).split())
    code, what = EXIT_ERROR, "error"
    if isinstance(exc, PublishError) and exc.logged:
        code, what = ((EXIT_REFUSED, "saved, refused by the broker")
                      if isinstance(exc, MessageRejected)
                      else (EXIT_PENDING, "saved, delivery pending"))
    print(f"partition-notify {command}: {what}: {one_line}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
