"""``partition-notify rev ...`` and ``partition-notify dataset ...``.

Revisions, snapshots and SNAPSHOT datasets from the shell. Every command
prints JSON on stdout (one object per line) and follows the exit codes of
:mod:`partition_notify.cli`. They need only the store: their App uses the
embedded transport, so a broker that is down or not configured does not
stop them.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from partition_notify.cli.common import integer
from partition_notify.core.errors import ConfigurationError, PartitionNotifyError
from partition_notify.core.limits import MAX_INT64

if TYPE_CHECKING:
    from partition_notify.app import App
    from partition_notify.revisions import RevisionManager

Command = Callable[[argparse.Namespace], int]
#: Positional or option names and ``add_argument`` keywords of one argument.
Arg = tuple[tuple[str, ...], dict[str, Any]]


def _print(obj: Any) -> None:
    print(json.dumps(obj), flush=True)


def _families(value: str) -> list[str]:
    return value.split(",")


@contextmanager
def _app(args: argparse.Namespace) -> Iterator[App]:
    """An App over the configured store; the embedded transport opens no broker."""
    from partition_notify.app import build_app
    from partition_notify.cli.common import refuse_in_memory
    from partition_notify.settings import load_settings

    store = {"store_url": args.store_url} if args.store_url else {}
    refuse_in_memory(load_settings(**store).store_url)
    with build_app(transport_url="embedded://", **store) as app:
        yield app


# -- rev: one table row per command ------------------------------------------------
@dataclass(frozen=True)
class RevCommand:
    name: str
    help: str
    args: tuple[Arg, ...]
    #: (revision manager, parsed arguments) -> a JSON value to print.
    run: Callable[[RevisionManager, argparse.Namespace], Any]
    #: Print each item of the returned list on its own line.
    lines: bool = False


def rev_commands() -> tuple[RevCommand, ...]:
    """The ``rev`` commands; built with the parser, so importing the CLI loads no store."""
    from partition_notify.cli import rev_commands as rc
    from partition_notify.revisions.model import DEFAULT_FAMILY, DEFAULT_KEEP_ALIVE_SECONDS

    table: Arg = (("table",), {"help": "table name, by convention db.table"})
    revision: Arg = (("revision",), {"type": integer(0), "help": "the revision begin printed"})
    return (
        RevCommand("begin", "begin a write transaction; prints it", (
            table,
            (("--families",), {"type": _families, "default": [DEFAULT_FAMILY], "help":
                               f"column families it writes: a,b (default: {DEFAULT_FAMILY})"}),
            (("--keep-alive-seconds",), {"type": float, "help": "it counts as aborted if not "
                                         "committed or kept alive within this (default "
                                         f"{DEFAULT_KEEP_ALIVE_SECONDS:g})"}),
        ), lambda rm, a: rc.begin(rm, a.table, a.families, a.keep_alive_seconds)),
        RevCommand("commit", "commit a write transaction (idempotent)", (table, revision),
                   lambda rm, a: rc.commit(rm, a.table, a.revision)),
        RevCommand("abort", "abort a write transaction (idempotent)", (table, revision),
                   lambda rm, a: rc.abort(rm, a.table, a.revision)),
        RevCommand("keep-alive", "push a transaction's expiry out", (
            table, revision,
            (("--keep-alive-seconds",), {"type": float, "help": "expire this long from now "
                                         "(default: its keep-alive from begin)"}),
        ), lambda rm, a: rc.keep_alive(rm, a.table, a.revision, a.keep_alive_seconds)),
        RevCommand("snapshot", "print a snapshot to hand to a job", (
            table,
            (("--revision",), {"type": integer(0),
                               "help": "the snapshot at this revision (default latest)"}),
        ), lambda rm, a: rc.snapshot(rm, a.table, a.revision)),
        RevCommand("status", "latest snapshot, running and aborted", (table,),
                   lambda rm, a: rc.status(rm, a.table)),
        RevCommand("tables", "list tables that have revisions", (),
                   lambda rm, a: rc.tables(rm), lines=True),
    )


def cmd_rev(args: argparse.Namespace) -> int:
    spec: RevCommand = args.rev_command_spec
    with _app(args) as app:
        out = spec.run(app.revisions, args)
    for item in out if spec.lines else [out]:
        _print(item)
    return 0


# -- dataset ------------------------------------------------------------------------
def cmd_dataset_define(args: argparse.Namespace) -> int:
    with _app(args) as app:
        name, _ = app.datasets.define(args.name, args.location, ttl_seconds=args.ttl_seconds,
                                      min_versions=args.min_versions)
        _print(app.datasets.describe(name))
    return 0


def cmd_dataset_describe(args: argparse.Namespace) -> int:
    with _app(args) as app:
        _print(app.datasets.describe(args.name))
    return 0


def cmd_dataset_versions(args: argparse.Namespace) -> int:
    with _app(args) as app:
        for v in app.datasets.versions(args.name):
            _print(v.to_dict())
    return 0


def cmd_dataset_list(args: argparse.Namespace) -> int:
    with _app(args) as app:
        for name in app.datasets.names():
            _print(name)
    return 0


def cmd_dataset_expire(args: argparse.Namespace) -> int:
    from partition_notify.revisions.datasets import EXPIRING
    from partition_notify.writers.snapshot_dataset import expire_versions

    with _spark(args.spark) as spark, _app(args) as app:
        removed = expire_versions(app.datasets, spark=spark, dataset=args.name)
        names = [args.name] if args.name is not None else app.datasets.names()
        stuck = [v.to_dict() for n in names for v in app.datasets.versions(n)
                 if v.state == EXPIRING]
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


def dataset_commands() -> tuple[tuple[str, Command, str, tuple[Arg, ...]], ...]:
    """The ``dataset`` commands: (name, function, help, arguments)."""
    from partition_notify.revisions.datasets import DEFAULT_MIN_VERSIONS

    name: Arg = (("name",), {"help": "dataset name, by convention db.table"})
    return (
        ("define", cmd_dataset_define, "define a dataset or set its retention", (
            name,
            (("location",), {"help": "directory or URI of its versions; cannot change later"}),
            (("--ttl-seconds",), {"type": float, "help": "keep a superseded version this long "
                                  "(default: no TTL, only --min-versions kept)"}),
            # Only the store's range here; the dataset itself says why 0 is refused.
            (("--min-versions",), {"type": integer(-MAX_INT64 - 1), "default": DEFAULT_MIN_VERSIONS,
                                   "help": "newest complete versions always kept "
                                   "(default %(default)s)"}),
        )),
        ("describe", cmd_dataset_describe, "location, pointer, retention", (name,)),
        ("versions", cmd_dataset_versions, "its versions, newest first", (name,)),
        ("list", cmd_dataset_list, "list defined datasets", ()),
        ("expire", cmd_dataset_expire, "delete versions retention lets go", (
            (("name",), {"nargs": "?", "help": "only this dataset (default: all)"}),
            (("--spark",), {"action": "store_true", "help": "delete through a Spark session's "
                            "Hadoop FileSystem (needed for hdfs://, s3a://)"}),
        )),
    )


def add_parsers(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    """Add ``rev`` and ``dataset`` to the subcommands ``sub`` of the main parser."""

    def group(name: str, help_: str) -> Any:
        return sub.add_parser(name, help=help_, description=help_).add_subparsers(
            dest=f"{name}_command", metavar="COMMAND", required=True, parser_class=parser_class
        )

    def add(grp: Any, path: str, fn: Command, help_: str, args: tuple[Arg, ...]) -> Any:
        sp = grp.add_parser(path.split()[-1], help=help_, description=help_)
        # ``command`` names the full command in one-line error messages.
        sp.set_defaults(fn=fn, command=path)
        for flags, kwargs in args:
            sp.add_argument(*flags, **kwargs)
        return sp

    rev = group("rev", "revisions and snapshots of tables (repeatable reads)")
    for spec in rev_commands():
        add(rev, f"rev {spec.name}", cmd_rev, spec.help, spec.args).set_defaults(
            rev_command_spec=spec)
    ds = group("dataset", "SNAPSHOT datasets: full-refresh datasets read as one version")
    for command, fn, help_, args in dataset_commands():
        add(ds, f"dataset {command}", fn, help_, args)
