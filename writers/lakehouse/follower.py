"""Follow Iceberg or Delta tables commit by commit and announce what each commit did.

One :class:`Follower` per format per ``serve`` process; every run visits the
tables registered with that format: take (or renew) the table's lease, read
the commits after its cursor in commit order, and log each commit's
add-partitions and set-done in one transaction with the cursor moving past
it (:meth:`~.store.LakehouseTables.move_in`), so a commit is announced once
across restarts and processes. What a commit announces is :func:`.commits.plan`.

``register --format`` records the table's current commit (:func:`head_of`):
the commits after it are announced, the partitions it holds count as
existing; a table with no commit yet (or not created yet) is followed from
its first commit. A row registered without a start is started the same way
when a follower first sees it. Commits that can no longer be read (an expired snapshot, a
cleaned log version) are a gap: a ``COMMITS_MISSED`` message on the table's
topic, logged with the cursor's move past the gap (subscribers see it in order,
once), a WARNING and a count; the follower resumes at the table's current commit.
``serve`` stopping ends a run after the commit in hand and releases the leases
(:meth:`Follower.release`), so another process takes over at its next run.
A commit that cannot be announced (:class:`.commits.Unannounceable`) stops the table
before it: recorded with the row, logged at every run, skipped only by an operator
(:mod:`.skip`). A table that cannot be loaded at its cursor (:class:`.commits.Unloadable`:
a corrupt log version or checkpoint, a missing metadata file) is stopped the same way,
waits (no gap: the commits are there) and goes on by itself once it loads. The table's
identity (Delta ``metaData.id``, Iceberg ``table-uuid``) moves with the cursor; the
readers report another one as a gap, resumed from the new table's first commit.
"""

from __future__ import annotations

import functools
import logging
import os
import secrets
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from partition_notify.publisher import Publisher
from partition_notify.store import TableInfo
from partition_notify.store.uow import UnitOfWork
from partition_notify.writers.lakehouse import changes, readers
from partition_notify.writers.lakehouse.bounded import BoundedReads, Pending
from partition_notify.writers.lakehouse.commits import (
    Commit,
    Gap,
    Unannounceable,
    Unloadable,
    plan,
)
from partition_notify.writers.lakehouse.iceberg import Catalogs
from partition_notify.writers.lakehouse.readers import Reader, clip, head_and_uuid, reader_for
from partition_notify.writers.lakehouse.readers import head_of as head_of  # its old home
from partition_notify.writers.lakehouse.schema import BEFORE_FIRST, FORMATS
from partition_notify.writers.lakehouse.skip import missed_draft
from partition_notify.writers.lakehouse.store import Followed, LakehouseTables

from partition_notify.core.errors import (
    InvalidSpecError,
    PartitionNotifyError,
    PublishError,
    TableReadTimeout,
    ValidationError,
)
from partition_notify.settings import Settings

log = logging.getLogger(__name__)
#: How long a follower owns a table without renewing; every run (and commit) renews it.
#: The default of ``PN_LAKEHOUSE_LEASE_SECONDS``, so the library and serve agree.
LEASE_SECONDS: float = Settings.model_fields["lakehouse_lease_seconds"].default
#: The longest one read of a table (pyiceberg, delta-rs) may take: the default of
#: ``PN_LAKEHOUSE_READ_TIMEOUT_SECONDS``.
READ_TIMEOUT_SECONDS = readers.READ_TIMEOUT_SECONDS
#: Commits one read hands over (a catch-up reads again until done).
MAX_COMMITS_PER_READ = 100
#: Tables leased, change-checked and read together: a run's lease renewals stay close
#: to the reads they cover.
BATCH = 200
#: Table reads in flight at once: enough to overlap catalog and file I/O, few enough
#: to keep one catalog's connection pool (SQLAlchemy's default: 5) from overflowing.
READ_THREADS = 4


@dataclass
class FollowStats:
    """What one run did, for the serve job's metrics."""

    tables: int = 0
    commits: int = 0
    messages: int = 0
    gaps: int = 0
    errors: int = 0
    #: Tables another process holds the lease of.
    leased_elsewhere: int = 0
    #: Tables whose read ran past its deadline this run (not counted in ``errors``).
    timeouts: int = 0
    #: Tables skipped because a read of theirs that timed out has not returned yet.
    stuck: int = 0
    #: Tables not read: the change check saw nothing new since the last read.
    unchanged: int = 0
    #: Tables stopped on a commit they cannot announce, waiting for an operator's skip.
    stopped: int = 0


class Follower:
    def __init__(self, publisher: Publisher, fmt: str, *, owner: str | None = None,
                 lease_seconds: float = LEASE_SECONDS, catalogs: Catalogs | None = None,
                 should_stop: Callable[[], bool] = lambda: False,
                 read_timeout: float = READ_TIMEOUT_SECONDS) -> None:
        if fmt not in FORMATS:
            raise ValueError(f"format {fmt!r} is not one of {FORMATS}")
        self.publisher = publisher
        self.format = fmt
        self.tables = LakehouseTables(publisher.store)
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self.lease_seconds = lease_seconds
        self.catalogs = catalogs or Catalogs()
        #: ``serve`` is stopping: end the run after the commit in hand.
        self.should_stop = should_stop
        #: Every pyiceberg / delta-rs call runs here, under ``read_timeout``.
        self.reads = BoundedReads(read_timeout, name=f"pn-{fmt}-read")
        #: table id -> (cursor, change token) when last caught up (:mod:`.changes`);
        #: bounded by the followed tables (pruned every run).
        self._seen: dict[int, tuple[int, str]] = {}

    def run_once(self) -> FollowStats:
        """Visit every table of this format once; errors are logged per table.

        In batches of BATCH tables: their leases in one transaction, one cheap change
        check for all of them (:mod:`.changes`), then the changed ones read
        READ_THREADS at a time and announced in order, table by table."""
        stats = FollowStats()
        followed = self.tables.of_format(self.format)
        ids = {f.table_id for f in followed}
        for gone in [k for k in self._seen if k not in ids]:  # bounded by followed tables
            del self._seen[gone]
        stats.stopped = sum(1 for f in followed if f.stopped_at is not None)
        if not followed:
            return stats
        infos = self.publisher.store.catalog.tables_by_id(f.table_id for f in followed)
        wanted = [f.table_id for f in followed if f.table_id in infos]
        for i in range(0, len(wanted), BATCH):
            if self.should_stop():
                break
            self._batch(wanted[i:i + BATCH], infos, stats)
        return stats

    def _batch(self, ids: list[int], infos: dict[int, TableInfo], stats: FollowStats) -> None:
        free = [t for t in ids if not self.reads.stuck(t)]
        stats.stuck += len(ids) - len(free)  # no second thread for it; its lease lapses
        mine = self.tables.claim_many(free, self.owner, self.lease_seconds)
        stats.leased_elsewhere += len(free) - len(mine)
        stats.tables += len(mine)
        try:
            seen = self.reads.run(("check", ids[0]), functools.partial(
                changes.tokens, self.format, mine, self.catalogs),
                f"{self.format} change check")
        except Exception as exc:  # the catalog's or filesystem's: read every table instead
            log.warning("%s follower: change check failed (%s: %s); reading every table",
                        self.format, type(exc).__name__, exc)
            seen = {}
        todo = [(f, seen.get(f.table_id)) for f in mine
                if changes.must_read(f, seen.get(f.table_id), self._seen.get(f.table_id))]
        stats.unchanged += len(mine) - len(todo)
        for j in range(0, len(todo), READ_THREADS):
            if self.should_stop():
                return
            group = todo[j:j + READ_THREADS]
            started = [self._start(f, infos[f.table_id]) for f, _ in group]
            for (f, token), pending in zip(group, started, strict=True):
                self._guarded(f, infos[f.table_id], token, pending, stats)

    def _guarded(self, f: Followed, info: TableInfo, token: str | None,
                 pending: Pending[Any] | Exception, stats: FollowStats) -> None:
        try:
            if isinstance(pending, Exception):
                raise pending
            caught_up = self._follow(f, info, pending, stats)
            if caught_up is not None and token is not None:
                self._seen[f.table_id] = (caught_up, token)
            if f.stopped_at is not None:  # read through: repaired, or rolled back
                self.tables.unstop(f.table_id, self.owner)
                stats.stopped -= 1
        except Unannounceable as exc:  # stopped before it until an operator skips it
            stats.errors += 1
            stats.stopped += f.stopped_at is None
            self.tables.stop(f.table_id, self.owner, exc.revision, clip(str(exc)))
            log.warning("%s follower: %s: %s (skip it: partition-notify lakehouse skip %s "
                        "--version %d)", self.format, info.qualified, clip(str(exc)),
                        info.qualified, exc.revision, extra={"pn_event": "lakehouse.failed"})
        except Unloadable as exc:  # stopped at the cursor until it loads, or is skipped
            stats.errors += 1
            stats.stopped += f.stopped_at is None
            self._unloadable(f, info, exc)
        except TableReadTimeout as exc:  # the others go on; this one waits for its read
            stats.timeouts += 1
            log.warning("%s follower: %s: %s", self.format, info.qualified, exc,
                        extra={"pn_event": "lakehouse.read_timeout"})
        except PartitionNotifyError as exc:  # clipped: it may quote a writer's text
            stats.errors += 1
            log.warning("%s follower: %s: %s", self.format, info.qualified,
                        clip(str(exc)), extra={"pn_event": "lakehouse.failed"})
        except Exception as exc:  # the format's driver: pyiceberg, delta-rs, pyarrow
            stats.errors += 1
            log.warning("%s follower: %s: %s: %s", self.format, info.qualified,
                        type(exc).__name__, clip(str(exc)),
                        extra={"pn_event": "lakehouse.failed"})

    def _unloadable(self, f: Followed, info: TableInfo, exc: Unloadable) -> None:
        """Record that the table cannot be loaded at its cursor: stopped at the commit a
        skip resumes at, or at the cursor itself when there is nothing to skip to."""
        at = exc.cursor if exc.resume_at is None else exc.resume_at
        self.tables.stop_loading(f.table_id, self.owner, exc.cursor, at, clip(str(exc)))
        way = ("nothing of it can be read to skip to" if exc.resume_at is None else
               f"or skip to commit {at}: partition-notify lakehouse skip {info.qualified} "
               f"--version {at}")
        log.warning("%s follower: %s: %s (repair it and the follower goes on by itself; "
                    "%s)", self.format, info.qualified, clip(str(exc)), way,
                    extra={"pn_event": "lakehouse.failed"})

    def release(self) -> int:
        """Let this follower's leases go (``serve`` stopping), so another process takes
        the tables over at its next run; returns how many it held."""
        n = self.tables.release_all(self.format, self.owner)
        if n:
            log.info("%s follower: released the lease of %d table(s)", self.format, n,
                     extra={"pn_event": "lakehouse.released"})
        return n

    def _start(self, f: Followed, info: TableInfo) -> Pending[Any] | Exception:
        """Start the table's first read of this run: its head when it has no cursor
        yet, else the commits after its cursor."""
        reader = self._reader_of(f, info)
        fn: Callable[[], Any] = ((lambda: head_and_uuid(reader())) if f.cursor is None
                                 else functools.partial(_read_after, reader, f.cursor,
                                                        f.table_uuid))
        try:
            return self.reads.start(f.table_id, fn, self._what(info))
        except Exception as exc:  # raised where the table is handled, with its name
            return exc

    def _reader_of(self, f: Followed, info: TableInfo) -> Callable[[], Reader]:
        keys = list(info.partition_keys)
        return lambda: reader_for(f.format, f.catalog, f.identifier, f.location, keys,
                               self.catalogs)

    def _what(self, info: TableInfo) -> str:
        return f"{self.format} table {info.qualified}"

    def _follow(self, f: Followed, info: TableInfo, pending: Pending[Any],
                stats: FollowStats) -> int | None:
        """Announce the table's commits from its first read on; the cursor it left the
        table at when it caught up with it (None: not caught up, read it next run)."""
        if f.cursor is None:
            head, uuid = self.reads.wait(pending, self._what(info))
            start = BEFORE_FIRST if head is None else head
            self.tables.move(f.table_id, self.owner, None, start, self.lease_seconds,
                             uuid=uuid)
            log.info("%s follower: following %s from %s", self.format, info.qualified,
                     "its first commit" if head is None else f"after commit {head}",
                     extra={"pn_event": "lakehouse.started"})
            return None  # the commits after it: next run
        cursor, uuid = f.cursor, f.table_uuid
        read: _Read = self.reads.wait(pending, self._what(info))
        if uuid is None and read.uuid is not None and not read.commits:  # once per table
            self.tables.move(f.table_id, self.owner, cursor, cursor, self.lease_seconds,
                             uuid=read.uuid)
        while True:
            for commit in read.commits:
                stats.messages += self._announce(info, commit, cursor)
                cursor, uuid = commit.revision, commit.table_uuid or uuid
                stats.commits += 1
                if self.should_stop():
                    return None  # the commits after it are the next owner's
            if read.error is not None:
                raise read.error
            if read.gap is not None:
                stats.gaps += 1
                log.warning("%s follower: GAP in %s: %s; the commits in between are not "
                            "announced, following on after commit %d", self.format,
                            info.qualified, read.gap, read.gap.resume_at,
                            extra={"pn_event": "lakehouse.gap"})
                stats.messages += self._missed(info, cursor, read.gap)
                return None
            if not read.more:
                return cursor
            if self.should_stop():
                return None
            read = self.reads.run(f.table_id, functools.partial(
                _read_after, self._reader_of(f, info), cursor, uuid), self._what(info))

    def _missed(self, info: TableInfo, before: int, gap: Gap) -> int:
        """Log a ``COMMITS_MISSED`` on the table's topic and move the cursor past the gap,
        in one transaction: subscribers learn of the gap where the commits would have been,
        in order, once."""

        def record(uow: UnitOfWork, messages: object) -> None:
            del messages
            self.tables.move_in(uow, info.id, self.owner, before, gap.resume_at,
                                self.lease_seconds, gap=True, uuid=gap.table_uuid)

        draft = missed_draft(self.publisher, info, self.format, before, gap.resume_at,
                             str(gap))
        try:
            self.publisher.append_and_deliver([draft], in_txn=record)
        except PublishError as exc:  # logged with the cursor; the relay delivers it
            log.warning("%s follower: %s: %s", self.format, info.qualified, exc)
        return 1

    def _announce(self, info: TableInfo, commit: Commit, before: int) -> int:
        """Log ``commit``'s messages and move the cursor past it, in one transaction."""
        todo = plan(commit, info.partition_keys)
        done = self._set_done(info, todo.set_done, commit)

        def record(uow: UnitOfWork, messages: object) -> None:
            del messages
            self.tables.move_in(uow, info.id, self.owner, before, commit.revision,
                                self.lease_seconds, uuid=commit.table_uuid)

        parts = todo.partitions
        try:
            logged = self.publisher.announce_commit(
                info.db, info.name, parts, locations=[None] * len(parts), replace=True,
                set_done=done, revision=commit.revision, in_txn=record)
            count = len(logged)
        except ValidationError as exc:  # a value over the limit: this commit, for good
            raise Unannounceable(commit.revision, exc) from exc
        except PublishError as exc:  # logged with the cursor; the relay delivers them
            log.warning("%s follower: %s commit %d: %s", self.format, info.qualified,
                        commit.revision, exc)
            count = len(parts) + (done is not None)
        if count:
            log.info("%s follower: %s commit %d (%s): %d new, %d replaced partition(s)%s",
                     self.format, info.qualified, commit.revision, commit.operation,
                     len(todo.new), len(todo.replaced), ", set-done" if done else "",
                     extra={"pn_event": "lakehouse.commit"})
        return count

    def _set_done(self, info: TableInfo, raw: str | None, commit: Commit) -> str | None:
        if raw is None:
            return None
        try:
            Publisher.validate_set_done(info, raw)
        except InvalidSpecError as exc:
            # The writer's property is wrong, not the data: announce the partitions anyway.
            # Clipped: the property is the writer's, of any size (a 3 MB one was one
            # 3 MB log line), and the error quotes it too.
            log.error("%s follower: %s commit %d: set-done property %r ignored: %s",
                      self.format, info.qualified, commit.revision, clip(raw),
                      clip(str(exc)), extra={"pn_event": "lakehouse.bad_set_done"})
            return None
        return raw


@dataclass
class _Read:
    """What one bounded read found after a cursor: at most MAX_COMMITS_PER_READ commits."""

    commits: list[Commit] = field(default_factory=list)
    #: Set when the commits after ``commits`` can no longer be read.
    gap: Gap | None = None
    #: There may be more commits after ``commits``: read again.
    more: bool = False
    #: The commit after ``commits`` could not be read: raised once they are announced.
    error: Exception | None = None
    #: The table's identity at the cursor, read when none is recorded yet.
    uuid: str | None = None


def _read_after(reader: Callable[[], Reader], cursor: int, uuid: str | None) -> _Read:
    """The commits after ``cursor`` (on a reader thread): bounded in count so a catch-up
    after downtime holds few commits in memory and each read fits its deadline."""
    out = _Read()
    try:
        r = reader()
    except PartitionNotifyError:  # ours (configuration): said as it is
        raise
    except Exception as exc:  # the catalog, metadata file or log listing: the driver's
        first = (str(exc).strip().splitlines() or [""])[0]
        raise Unloadable(f"the table cannot be loaded ({type(exc).__name__}: {clip(first)})",
                         cursor, None) from exc
    if uuid is None and cursor != BEFORE_FIRST:  # a row followed before migration 0015
        out.uuid = r.uuid_at(cursor)
    try:
        for commit in r.commits_after(cursor, uuid):
            if len(out.commits) == MAX_COMMITS_PER_READ:
                out.more = True
                break
            out.commits.append(commit)
    except Gap as gap:
        out.gap = gap
    except Exception as exc:  # the driver's, or ours (a commit the keys do not fit)
        if not out.commits:
            raise
        out.error = exc  # the commits before it are announced first, as they come
    return out
