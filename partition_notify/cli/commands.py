"""The core commands: register, announce, mark-done, wait, history, tail, tables,
purge, serve, schema and demo."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from partition_notify.cli import deadlines
from partition_notify.cli.common import (
    Handler,
    db_table,
    dump,
    idempotency_key,
    integer,
    keys_arg,
    open_app,
    say_if_unregistered,
    seconds,
    store_in_use,
    table_arg,
)
from partition_notify.contract import names
from partition_notify.core import limits
from partition_notify.core.errors import HistoryTimeout, ValidationError
from partition_notify.subscriber.refs import table_keys

if TYPE_CHECKING:
    from partition_notify.cli.common import SubParsers


def cmd_register(args: argparse.Namespace) -> int:
    start: int | None = None
    if args.format is not None:
        from partition_notify.writers.lakehouse.follower import head_of
        from partition_notify.writers.lakehouse.store import checked

        # Refused before anything is stored; then the commit to follow from. The name
        # as stored (lower case): the identifier's default, which the follower reads.
        db, table = db_table(args)
        fmt, catalog, ident, location = checked(
            f"{names.db_name(db)}.{names.table_name(table)}", args.format, args.catalog,
            args.identifier, args.location)
        start = head_of(fmt, catalog=catalog, identifier=ident, location=location,
                        keys=args.keys)
        if start < 0:  # followed from its first commit: also what a typo looks like
            where = (f"{ident} in catalog {catalog}" if fmt == "iceberg" else location)
            print(f"partition-notify register: warning: {fmt} table {where} has no commit "
                  "yet (or does not exist: check the name); it is followed from its first "
                  "commit", file=sys.stderr)
    elif args.catalog or args.identifier:
        raise ValidationError("--catalog and --identifier need --format iceberg")
    with open_app(args) as app:
        info = app.publisher.register_table(
            *db_table(args),
            args.keys,
            retention_seconds=args.retention_seconds,
            topic=args.topic,
            location=args.location,
        )
        if args.location and args.format is None:
            from partition_notify.writers.commit_locations import may_not_match, never_matches

            if why := never_matches(args.location, app.settings.default_fs):
                print(f"partition-notify register: warning: location {args.location!r} will "
                      f"never match what Spark reports: {why}", file=sys.stderr)
            elif why := may_not_match(args.location, app.settings.default_fs):
                print(f"partition-notify register: warning: location {args.location!r} may "
                      f"not match what Spark reports: {why}", file=sys.stderr)
        followed = ""
        if args.format is not None:
            from partition_notify.writers.lakehouse.store import LakehouseTables

            f = LakehouseTables(app.store).register(
                info, args.format, catalog=args.catalog, identifier=args.identifier,
                location=args.location, start=start)
            followed = (f" format={f.format}" + (f" catalog={f.catalog} identifier="
                        f"{f.identifier}" if f.catalog else f" location={f.location}")
                        + f" after_commit={f.cursor}")
        print(
            f"{info.qualified} keys={','.join(info.partition_keys)} topic={info.topic} "
            f"retention_seconds={info.retention_seconds}{followed}"
        )
    return 0


def cmd_announce(args: argparse.Namespace) -> int:
    with open_app(args) as app:
        sent = app.publisher.announce_partitions(
            *db_table(args), args.partitions, replace=args.replace,
            idempotency_key=args.idempotency_key,
        )
        for msg in sent:
            print(dump(msg))
        skipped = len(args.partitions) - len(sent)
        if skipped:
            print(f"{skipped} partition(s) already announced, not sent again", file=sys.stderr)
    return 0


def cmd_mark_done(args: argparse.Namespace) -> int:
    with open_app(args) as app:
        print(dump(app.publisher.send_mark_set_done(
            *db_table(args), args.spec, idempotency_key=args.idempotency_key)))
    return 0


def cmd_wait(args: argparse.Namespace) -> int:
    if args.fail_on_late:
        return deadlines.wait_failing_on_late(args)
    started = time.monotonic()
    with open_app(args, existing=True) as app, app.subscriber() as sub:
        say_if_unregistered(app, table_keys([args.table]), args.timeout, "wait")
        msg = sub.wait_for_set_done(*db_table(args), args.spec, timeout=args.timeout)
        print(dump(msg))
        print(f"waited {time.monotonic() - started:.3f} s", file=sys.stderr)
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    since = 0.0 if args.since_seconds is None else time.time() - args.since_seconds
    with open_app(args, existing=True) as app, app.subscriber() as sub:
        for msg in sub.set_done_history(*db_table(args), since=since):
            print(dump(msg))
    return 0


def cmd_tail(args: argparse.Namespace) -> int:
    # 0 means "what is already there, then stop", not "forever".
    deadline = None if args.timeout is None else time.monotonic() + args.timeout
    with open_app(args, existing=True) as app, app.subscriber() as sub:
        # Tables not registered yet are waited for, as `wait` does.
        say_if_unregistered(app, table_keys(args.tables), args.timeout, "tail")
        sub.wait_for_tables(args.tables, args.timeout)
        try:
            subscription = sub.subscribe(args.tables, history=args.history)
        except HistoryTimeout as late:  # still open: it prints the history once merged
            # The exception's own text speaks to Python callers (exc.subscription).
            print(f"partition-notify tail: history of topic{'s'[:len(late.topics) - 1]} "
                  f"{', '.join(late.topics)} not merged within {late.timeout:g} s "
                  "(PN_CONNECT_TIMEOUT_SECONDS); it is still printed, history first, then "
                  "live messages, each once", file=sys.stderr)
            subscription = late.subscription
        seen = 0
        while args.count is None or seen < args.count:
            left = None if deadline is None else deadline - time.monotonic()
            # Past --timeout, what the store already held is still printed: a late
            # merge (an empty queue for now) is not the end of the history.
            merged = subscription.history_merged
            wait = 1.0 if left is None or not merged else min(max(left, 0.0), 1.0)
            msg = subscription.get(timeout=wait)
            if msg is None:
                if left is not None and left <= 0 and merged:
                    break
                continue
            print(dump(msg), flush=True)
            seen += 1
    return 0


def cmd_tables(args: argparse.Namespace) -> int:
    with open_app(args, existing=True) as app:
        print(f"store: {store_in_use(args.store_url)}", file=sys.stderr)
        for t in app.store.catalog.tables():
            print(
                f"{t.qualified}\tkeys={','.join(t.partition_keys)}\ttopic={t.topic}\t"
                f"retention_seconds={t.retention_seconds}"
            )
    return 0


def cmd_purge(args: argparse.Namespace) -> int:
    with open_app(args) as app:
        n = app.store.retention.purge_expired(batch_size=app.settings.purge_batch_size)
        print(f"purged {n} expired set-done row(s)")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from partition_notify.serve import service
    from partition_notify.settings import load_settings

    settings = load_settings()  # before the store opens: its migrations log too
    service.configure_logging(settings.log_level, settings.log_format)
    with open_app(args) as app:
        if args.once:
            svc = service.Service(app)
            failures = svc.run_once()
            count, age = app.store.log.relay_lag()
            print(
                f"relay published {svc.relay.stats.published}; pending {count} (oldest {age:.1f} s)"
            )
            if failures:  # a cron job or health check reads the exit code
                lines = "; ".join(" ".join(f.split())[:300] for f in failures)
                print(f"partition-notify serve: {len(failures)} job run(s) failed: {lines}",
                      file=sys.stderr)
                return 1
            return 0
        service.run(app)
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from pathlib import Path

    from partition_notify.contract import json_schemas

    schemas = json_schemas()
    if args.out is None:
        print(json.dumps(schemas, indent=2, sort_keys=True))
        return 0
    out = Path(args.out)
    where = f"--out {args.out!r}"
    # The directory itself, not its parents: a typo in a parent would put the files
    # somewhere nobody looks (session 24).
    if not out.parent.is_dir():
        raise ValidationError(f"{where}: its parent {str(out.parent)!r} does not exist; "
                              "expected a directory whose parent exists")
    if out.exists() and not out.is_dir():
        raise ValidationError(f"{where} is not a directory; expected a directory for "
                              "one NAME.schema.json per message")
    written = []
    try:
        out.mkdir(exist_ok=True)
        for name, schema in schemas.items():
            written.append(out / f"{name}.schema.json")
            written[-1].write_text(json.dumps(schema, indent=2, sort_keys=True) + "\n")
    except OSError as exc:
        raise ValidationError(f"{where}: cannot write there ({exc.strerror})") from None
    # Printed after the writes, outside their handler: a reader of stdout that left
    # (`| head`) is a broken pipe (exit 141), not a failure to write the directory.
    for path in written:
        print(path)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from partition_notify.cli.demo import run_demo

    return run_demo(workdir=args.workdir, spark=args.spark)


def _register_args(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("table", type=table_arg, help="db.table")
    sp.add_argument("--keys", type=keys_arg, required=True, help="partition keys, in order: a,b")
    sp.add_argument("--retention-seconds", type=int,
                    help="how long set-done is kept, in seconds "
                    "(default PN_DEFAULT_RETENTION_SECONDS)")
    sp.add_argument("--topic", help="explicit topic instead of the naming policy")
    sp.add_argument("--location", help="table location: where Spark writes it (the commit "
                    "protocol matches writes by it); with --format delta the table's root, "
                    "where _delta_log is")
    sp.add_argument("--format", choices=("iceberg", "delta"),
                    help="serve follows the table's commits and announces their partitions")
    sp.add_argument("--catalog", help="--format iceberg: catalog name; its properties come "
                    "from PN_ICEBERG_CATALOG__<NAME>__<PROPERTY>")
    sp.add_argument("--identifier", help="--format iceberg: the table in the catalog "
                    "(default: db.table)")


def _announce_args(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("table", type=table_arg, help="db.table")
    sp.add_argument("partitions", nargs="+", help="full specs: datestamp=20110228/region=us")
    sp.add_argument("--replace", action="store_true", help="announce again (overwrite)")
    _idempotency_arg(sp)


def _mark_done_args(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("table", type=table_arg, help="db.table")
    sp.add_argument("spec", help="partial spec: datestamp=20110228")
    _idempotency_arg(sp)


def _idempotency_arg(sp: argparse.ArgumentParser) -> None:
    sp.add_argument(
        "--idempotency-key", metavar="KEY", type=idempotency_key,
        help="a retry with the same key (and arguments) logs and sends nothing again and "
        f"prints what the first run saved; kept {limits.IDEMPOTENCY_TTL_SECONDS // 3600} h "
        "(PN_HTTP_IDEMPOTENCY_TTL_SECONDS)",
    )


def _wait_args(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("table", type=table_arg, help="db.table")
    sp.add_argument("spec", help="partial or full spec")
    sp.add_argument(
        "--timeout", type=seconds, default=3600.0, help="seconds (default %(default)g)"
    )
    sp.add_argument("--fail-on-late", action="store_true",
                    help=f"exit {deadlines.EXIT_LATE} if the spec is declared late first")


def _history_args(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("table", type=table_arg, help="db.table")
    sp.add_argument("--since-seconds", type=seconds, help="only the last N seconds")


def _tail_args(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("tables", nargs="+", help="db.table ...")
    sp.add_argument("--history", action="store_true", help="start with retained set-done")
    sp.add_argument("--count", type=integer(1), help="stop after N messages")
    sp.add_argument("--timeout", type=seconds, help="stop after N seconds")


def _serve_args(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--once", action="store_true",
                    help="run each job once and exit (1 if a run failed)")


def _schema_args(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--out", help="write one NAME.schema.json per message into this "
                    "directory (made if missing; its parent must exist)")


def _demo_args(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--workdir", default="demo-run",
                    help="where the demo keeps its files: a new or empty directory "
                         "(default %(default)s)")
    sp.add_argument(
        "--spark",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="write the table with a local PySpark job (default on)",
    )


def _no_args(sp: argparse.ArgumentParser) -> None:
    del sp


#: The core sub-commands, in ``--help`` order: name, handler, help, arguments.
COMMANDS: tuple[tuple[str, Handler, str, Callable[[argparse.ArgumentParser], None]], ...] = (
    ("register", cmd_register, "register a table and its ordered partition keys",
     _register_args),
    ("announce", cmd_announce, "announce new partitions (one message each)", _announce_args),
    ("mark-done", cmd_mark_done, "mark every partition matching a partial spec done",
     _mark_done_args),
    ("wait", cmd_wait, "wait until a set-done covers the spec (exit 3 on timeout)", _wait_args),
    ("history", cmd_history, "print retained set-done messages of a table", _history_args),
    ("tail", cmd_tail, "print messages of tables as they arrive (JSON lines)", _tail_args),
    ("tables", cmd_tables, "list registered tables", _no_args),
    ("purge", cmd_purge, "delete expired set-done rows now (in batches)", _no_args),
    ("serve", cmd_serve, ("run the relay, purges, Spark commit pick-up, completeness rules, "
               "deadlines, Iceberg/Delta followers and health checks; the HTTP API and "
               "/ui with PN_HTTP_BIND"), _serve_args),
    ("schema", cmd_schema, "print the JSON Schema of every message", _schema_args),
    ("demo", cmd_demo, "end-to-end demo on the embedded defaults (SQLite, no broker)",
     _demo_args),
)


def add_parsers(sub: SubParsers, parser_class: type[argparse.ArgumentParser]) -> None:
    del parser_class  # no sub-commands of their own
    for name, fn, help_, add_arguments in COMMANDS:
        sp = sub.add_parser(name, help=help_, description=help_)
        sp.set_defaults(fn=fn)
        add_arguments(sp)
