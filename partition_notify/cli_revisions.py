"""``partition-notify rev ...`` and ``partition-notify dataset ...``.

Revisions, snapshots and SNAPSHOT datasets from the shell. Every command
prints JSON on stdout (one object per line) and follows the exit codes of
:mod:`partition_notify.cli`. They need only the store: no broker is opened,
so a broker that is down or not configured does not stop them.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from partition_notify.cli_types import integer
from partition_notify.errors import ConfigurationError, PartitionNotifyError
from partition_notify.limits import MAX_INT64

Command = Callable[[argparse.Namespace], int]


def _print(obj: Any) -> None:
    print(json.dumps(obj), flush=True)


def _families(value: str) -> list[str]:
    return value.split(",")


@contextmanager
def _store(args: argparse.Namespace) -> Iterator[Any]:
    from partition_notify.settings import load_settings
    from store import Store

    settings = load_settings(**({"store_url": args.store_url} if args.store_url else {}))
    store = Store.open(
        settings.store_url,
        connect_timeout_seconds=settings.connect_timeout_seconds,
        sqlite_synchronous=settings.sqlite_synchronous,
    )
    try:
        yield store
    finally:
        store.close()


@contextmanager
def _revisions(args: argparse.Namespace) -> Iterator[Any]:
    from revisions import RevisionManager

    with _store(args) as store:
        yield RevisionManager(store, clock=store.clock)


# -- rev ------------------------------------------------------------------------
def cmd_rev_begin(args: argparse.Namespace) -> int:
    from partition_notify import cli_rev_commands as rc

    with _revisions(args) as rm:
        _print(rc.begin(rm, args.table, args.families, args.keep_alive_seconds))
    return 0


def cmd_rev_commit(args: argparse.Namespace) -> int:
    from partition_notify import cli_rev_commands as rc

    with _revisions(args) as rm:
        _print(rc.commit(rm, args.table, args.revision))
    return 0


def cmd_rev_abort(args: argparse.Namespace) -> int:
    from partition_notify import cli_rev_commands as rc

    with _revisions(args) as rm:
        _print(rc.abort(rm, args.table, args.revision))
    return 0


def cmd_rev_keep_alive(args: argparse.Namespace) -> int:
    from partition_notify import cli_rev_commands as rc

    with _revisions(args) as rm:
        _print(rc.keep_alive(rm, args.table, args.revision, args.keep_alive_seconds))
    return 0


def cmd_rev_snapshot(args: argparse.Namespace) -> int:
    from partition_notify import cli_rev_commands as rc

    with _revisions(args) as rm:
        _print(rc.snapshot(rm, args.table, args.revision))
    return 0


def cmd_rev_status(args: argparse.Namespace) -> int:
    from partition_notify import cli_rev_commands as rc

    with _revisions(args) as rm:
        _print(rc.status(rm, args.table))
    return 0


def cmd_rev_tables(args: argparse.Namespace) -> int:
    from partition_notify import cli_rev_commands as rc

    with _revisions(args) as rm:
        for name in rc.tables(rm):
            _print(name)
    return 0


# -- dataset --------------------------------------------------------------------
def cmd_dataset_define(args: argparse.Namespace) -> int:
    from writers.snapshot_dataset import SnapshotDataset, describe_dataset

    with _store(args) as store:
        ds = SnapshotDataset.define(
            store,
            args.name,
            args.location,
            ttl_seconds=args.ttl_seconds,
            min_versions=args.min_versions,
        )
        _print(describe_dataset(store, ds.name))
    return 0


def cmd_dataset_describe(args: argparse.Namespace) -> int:
    from writers.snapshot_dataset import describe_dataset

    with _store(args) as store:
        _print(describe_dataset(store, args.name))
    return 0


def cmd_dataset_versions(args: argparse.Namespace) -> int:
    from writers.snapshot_dataset import dataset_versions

    with _store(args) as store:
        for v in dataset_versions(store, args.name):
            _print(v.to_dict())
    return 0


def cmd_dataset_list(args: argparse.Namespace) -> int:
    from writers.snapshot_dataset import datasets

    with _store(args) as store:
        for name in datasets(store):
            _print(name)
    return 0


def cmd_dataset_expire(args: argparse.Namespace) -> int:
    from writers.snapshot_dataset import EXPIRING, dataset_versions, datasets, expire_versions

    with _spark(args.spark) as spark, _store(args) as store:
        removed = expire_versions(store, spark=spark, dataset=args.name)
        names = [args.name] if args.name is not None else datasets(store)
        stuck = [
            v.to_dict() for n in names for v in dataset_versions(store, n) if v.state == EXPIRING
        ]
    _print({"removed": [{"dataset": n, "version": v} for n, v in removed], "expiring": stuck})
    if stuck:
        hint = "" if args.spark else "; locations other than local paths need --spark"
        raise PartitionNotifyError(
            f"{len(stuck)} version(s) left expiring: deleting their files failed (logged "
            f"above), the next expire retries{hint}"
        )
    return 0


@contextmanager
def _spark(wanted: bool) -> Iterator[Any]:
    """A Spark session for the Hadoop FileSystem API (HDFS, S3A, ...), or None."""
    if not wanted:
        yield None
        return
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:
        raise ConfigurationError(f"--spark needs pyspark installed: {exc}") from exc
    # Stop only a session this command started, never one its host process owns.
    ours = SparkSession.getActiveSession() is None
    session = SparkSession.builder.appName("partition-notify dataset expire").getOrCreate()
    try:
        yield session
    finally:
        if ours:
            session.stop()


def add_parsers(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    """Add ``rev`` and ``dataset`` to the subcommands ``sub`` of the main parser."""
    from revisions import DEFAULT_KEEP_ALIVE_SECONDS  # the help text states it

    def group(name: str, help_: str) -> Any:
        return sub.add_parser(name, help=help_, description=help_).add_subparsers(
            dest=f"{name}_command", metavar="COMMAND", required=True, parser_class=parser_class
        )

    def add(grp: Any, prefix: str, name: str, fn: Command, help_: str) -> Any:
        sp = grp.add_parser(name, help=help_, description=help_)
        # ``command`` names the full command in one-line error messages.
        sp.set_defaults(fn=fn, command=f"{prefix} {name}")
        return sp

    rev = group("rev", "revisions and snapshots of tables (repeatable reads)")
    sp = add(rev, "rev", "begin", cmd_rev_begin, "begin a write transaction; prints it")
    sp.add_argument("table", help="table name, by convention db.table")
    sp.add_argument(
        "--families",
        type=_families,
        default=["data"],
        help="column families it writes: a,b (default: data)",
    )
    sp.add_argument(
        "--keep-alive-seconds",
        type=float,
        help="it counts as aborted if not committed or kept alive within this (default "
        f"{DEFAULT_KEEP_ALIVE_SECONDS:g})",
    )
    for name, fn, help_ in (
        ("commit", cmd_rev_commit, "commit a write transaction (idempotent)"),
        ("abort", cmd_rev_abort, "abort a write transaction (idempotent)"),
    ):
        sp = add(rev, "rev", name, fn, help_)
        sp.add_argument("table", help="table name")
        sp.add_argument("revision", type=integer(0), help="the revision begin printed")
    sp = add(rev, "rev", "keep-alive", cmd_rev_keep_alive, "push a transaction's expiry out")
    sp.add_argument("table", help="table name")
    sp.add_argument("revision", type=integer(0), help="the revision begin printed")
    sp.add_argument(
        "--keep-alive-seconds",
        type=float,
        help="expire this long from now (default: its keep-alive from begin)",
    )
    sp = add(rev, "rev", "snapshot", cmd_rev_snapshot, "print a snapshot to hand to a job")
    sp.add_argument("table", help="table name")
    sp.add_argument(
        "--revision", type=integer(0), help="the snapshot at this revision (default latest)"
    )
    sp = add(rev, "rev", "status", cmd_rev_status, "latest snapshot, running and aborted")
    sp.add_argument("table", help="table name")
    add(rev, "rev", "tables", cmd_rev_tables, "list tables that have revisions")

    ds = group("dataset", "SNAPSHOT datasets: full-refresh datasets read as one version")
    sp = add(ds, "dataset", "define", cmd_dataset_define, "define a dataset or set its retention")
    sp.add_argument("name", help="dataset name, by convention db.table")
    sp.add_argument("location", help="directory or URI of its versions; cannot change later")
    sp.add_argument(
        "--ttl-seconds",
        type=float,
        help="keep a superseded version this long (default: no TTL, only --min-versions kept)",
    )
    sp.add_argument(
        "--min-versions",
        # Only the store's range here; the dataset itself says why 0 is refused.
        type=integer(-MAX_INT64 - 1),
        default=1,
        help="newest complete versions always kept (default %(default)s)",
    )
    sp = add(ds, "dataset", "describe", cmd_dataset_describe, "location, pointer, retention")
    sp.add_argument("name", help="dataset name")
    sp = add(ds, "dataset", "versions", cmd_dataset_versions, "its versions, newest first")
    sp.add_argument("name", help="dataset name")
    add(ds, "dataset", "list", cmd_dataset_list, "list defined datasets")
    sp = add(ds, "dataset", "expire", cmd_dataset_expire, "delete versions retention lets go")
    sp.add_argument("name", nargs="?", help="only this dataset (default: all)")
    sp.add_argument(
        "--spark",
        action="store_true",
        help="delete through a Spark session's Hadoop FileSystem (needed for hdfs://, s3a://)",
    )
