"""The Hadoop FileSystem as seen from the Spark driver, through py4j.

Table data may live on HDFS, S3 or a local disk shared by nobody but the
driver, so every file operation goes through the Hadoop ``FileSystem`` of the
table location, never ``os``. Each py4j call is a socket round trip (0.1 to
0.3 ms on a busy driver), so nothing here loops over partitions calling the
JVM: a listing comes back as one string, and the move into place is one
``FileOutputCommitter`` job commit that loops in the JVM.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Collection, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from partition_notify.core.errors import ConfigurationError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Hadoop glob metacharacters; a literal one is escaped with a backslash.
_GLOB_META = re.compile(r"([\\*?\[\]{}])")
#: Never part of a path, so it separates listed paths unambiguously.
_SEP = "\u0000"
#: Name of the committed-task directory the FileOutputCommitter merges.
TASK_DIR = "pn-task"


def glob_escape(path: str) -> str:
    return _GLOB_META.sub(r"\\\1", path)


class HadoopFs:
    """The FileSystem of one table location."""

    def __init__(self, spark: SparkSession, location: str) -> None:
        try:
            jsc = spark.sparkContext._jsc
            jvm: Any = spark.sparkContext._jvm
        except Exception as exc:  # Spark Connect raises its own types here
            raise ConfigurationError(
                "partition-notify writers need a classic SparkSession with a driver JVM "
                f"(Spark Connect is not supported): {exc}"
            ) from exc
        if jsc is None or jvm is None:
            raise ConfigurationError("the SparkSession has been stopped")
        self._jvm = jvm
        self._Path = jvm.org.apache.hadoop.fs.Path
        # A copy: our committer settings must not leak into the user's jobs.
        self.conf = jvm.org.apache.hadoop.conf.Configuration(jsc.hadoopConfiguration())
        self.fs = self._Path(location).getFileSystem(self.conf)
        self.root = self.qualify(location)

    # -- single operations ----------------------------------------------------
    def path(self, path: str) -> Any:
        return self._Path(path)

    def qualify(self, path: str) -> str:
        return str(self.fs.makeQualified(self._Path(path)).toString()).rstrip("/")

    def exists(self, path: str) -> bool:
        return bool(self.fs.exists(self._Path(path)))

    def mkdirs(self, path: str) -> None:
        self.fs.mkdirs(self._Path(path))

    def delete(self, path: str, *, recursive: bool = True) -> bool:
        return bool(self.fs.delete(self._Path(path), recursive))

    def rename(self, src: str, dst: str) -> bool:
        return bool(self.fs.rename(self._Path(src), self._Path(dst)))

    def _unless_missing(self, call: Any, path: str) -> Any:
        """``call(Path(path))``, or None when the FileSystem says the path is not there."""
        try:
            return call(self._Path(path))
        except Exception as exc:
            if _java_class(exc) == "java.io.FileNotFoundException":
                return None
            raise

    def mtime_ms(self, path: str) -> int | None:
        status = self._unless_missing(self.fs.getFileStatus, path)
        return None if status is None else int(status.getModificationTime())

    def kind(self, path: str) -> str | None:
        """"file", "dir" or "link" (the link itself, where the FileSystem has links);
        None: absent."""
        status = self._unless_missing(self.fs.getFileLinkStatus, path)
        if status is None:
            return None
        return "link" if status.isSymlink() else "dir" if status.isDirectory() else "file"

    def touch(self, path: str, now_ms: int) -> None:
        self.fs.setTimes(self._Path(path), now_ms, -1)

    def read(self, path: str) -> bytes | None:
        stream = self._unless_missing(self.fs.open, path)
        if stream is None:
            return None
        try:
            return bytes(stream.readAllBytes())
        finally:
            stream.close()

    def create(self, path: str, data: bytes, *, exclusive: bool) -> bool:
        """Write a small file; with ``exclusive`` return False if it already exists."""
        try:
            out = self.fs.create(self._Path(path), not exclusive)
        except Exception as exc:
            if exclusive and _java_class(exc).endswith("FileAlreadyExistsException"):
                return False
            raise
        try:
            out.write(bytearray(data))
        finally:
            out.close()
        return True

    def write_atomic(self, path: str, data: bytes) -> None:
        """Create ``path`` (absent) so readers see all of it or nothing: write, then rename."""
        tmp = f"{path}.tmp"
        self.create(tmp, data, exclusive=False)
        if not self.rename(tmp, path):
            raise OSError(f"could not rename {tmp} to {path}")

    # -- bulk operations ------------------------------------------------------
    def glob(self, base: str, pattern: str) -> list[str]:
        """Paths under ``base`` matching the glob ``pattern``, relative to ``base``.

        One JVM listing and one string back, whatever the number of matches.
        """
        qbase = self.qualify(base)
        statuses = self.fs.globStatus(self._Path(f"{glob_escape(qbase)}/{pattern}"))
        if statuses is None or len(statuses) == 0:
            return []
        paths = self._jvm.org.apache.hadoop.fs.FileUtil.stat2Paths(statuses)
        joined = str(self._jvm.scala.Predef.genericWrapArray(paths).mkString(_SEP))
        prefix = qbase + "/"
        out: list[str] = []
        for p in joined.split(_SEP):
            if not p.startswith(prefix):
                raise OSError(f"listing of {qbase} returned {p!r}, which is not below it")
            out.append(p[len(prefix):])
        return out

    def delete_many(self, paths: Iterable[str], *, threads: int = 8) -> int:
        """Delete directories recursively; py4j round trips overlap across threads."""
        todo = list(paths)
        if not todo:
            return 0
        with ThreadPoolExecutor(max_workers=min(threads, len(todo)),
                                thread_name_prefix="pn-delete") as pool:
            return sum(pool.map(self.delete, todo))

    def retire_files(self, base: str, partitions: Iterable[str], sub: str, *,
                     keep: Collection[str] = (), threads: int = 8,
                     guard: Callable[[], None] | None = None) -> int:
        """Move the data files of each partition directory into its subdirectory ``sub``.

        Names starting with ``_`` or ``.`` (earlier retired files, checksums)
        stay. Spark and Hive readers skip ``sub`` (it starts with ``_``), while
        a reader naming a retired file still gets its partition values from
        the directories above it. ``keep``: ``<partition>/<name>`` paths that stay
        (a later revision's files). A second call finishes what a first left.
        ``guard`` runs before each rename and raises to stop them (a placement
        lease lost: revisions/placement.py). Returns the number of files moved.
        """
        check = guard if guard is not None else _no_guard
        todo = list(partitions)
        if not todo:
            return 0

        def retire(partition: str) -> int:
            directory = f"{base}/{partition}"
            names = [n for n in self.glob(directory, "*")
                     if not n.startswith(("_", ".")) and f"{partition}/{n}" not in keep]
            if names:
                self.mkdirs(f"{directory}/{sub}")
            for name in names:
                check()
                if not self.rename(f"{directory}/{name}", f"{directory}/{sub}/{name}"):
                    raise OSError(f"could not move {directory}/{name} into {sub}")
            return len(names)

        with ThreadPoolExecutor(max_workers=min(threads, len(todo)),
                                thread_name_prefix="pn-retire") as pool:
            return sum(pool.map(retire, todo))

    def merge_pending(self, source: str, dest: str, attempt: int) -> bool:
        """Whether :meth:`merge_into` has anything left to move (a resumed write)."""
        return self.exists(source) or self.exists(f"{dest}/_temporary/{attempt}/{TASK_DIR}")

    def discard_merge(self, dest: str, attempt: int) -> None:
        """Delete what a merge begun by job attempt ``attempt`` left in ``dest/_temporary``."""
        self.delete(f"{dest}/_temporary/{attempt}")

    def merge_into(self, source: str, dest: str, attempt: int, *,
                   guard: Callable[[], None] | None = None) -> None:
        """Move the tree ``source`` into ``dest``, merging directories that exist.

        This is Hadoop's FileOutputCommitter (algorithm 1) job commit, the very
        merge Spark's own job commit performs: a directory missing at the
        destination is renamed whole, an existing one is descended into and
        its files are added. ``source`` is first renamed to a committed-task
        directory of job attempt ``attempt`` (``dest/_temporary/<attempt>``),
        which is where that committer looks. Idempotent: a second call after
        a crash finishes what the first left. ``guard`` runs before each of its
        two steps (the rename, the JVM merge) and raises to stop them.
        """
        check = guard if guard is not None else _no_guard
        job_dir = f"{dest}/_temporary/{attempt}"
        task_dir = f"{job_dir}/{TASK_DIR}"
        if self.exists(source):
            if self.exists(task_dir):
                raise OSError(f"{task_dir} exists already: another write uses attempt {attempt}")
            check()
            self.mkdirs(job_dir)
            if not self.rename(source, task_dir):
                raise OSError(f"could not rename {source} to {task_dir}")
        if self.exists(task_dir):
            check()
            jvm = self._jvm
            conf = jvm.org.apache.hadoop.conf.Configuration(self.conf)
            conf.setInt("mapreduce.job.application.attempt.id", attempt)
            conf.setInt("mapreduce.fileoutputcommitter.algorithm.version", 1)
            # Cleanup would delete all of dest/_temporary, other writers' too.
            conf.setBoolean("mapreduce.fileoutputcommitter.cleanup.skipped", True)
            conf.setBoolean("mapreduce.fileoutputcommitter.marksuccessfuljobs", False)
            context = jvm.org.apache.hadoop.mapreduce.task.JobContextImpl(
                conf, jvm.org.apache.hadoop.mapreduce.JobID("pn", attempt))
            committer = jvm.org.apache.hadoop.mapreduce.lib.output.FileOutputCommitter(
                self._Path(dest), context)
            committer.commitJob(context)
        self.delete(job_dir)
        with contextlib.suppress(Exception):  # not empty: another writer's job is in there
            self.delete(f"{dest}/_temporary", recursive=False)


def _no_guard() -> None:
    pass


def _java_class(exc: BaseException) -> str:
    """The Java exception class behind a Py4JJavaError, or ''."""
    java_exc = getattr(exc, "java_exception", None)
    if java_exc is None:
        return ""
    try:
        return str(java_exc.getClass().getName())
    except Exception:  # the gateway may be gone
        return ""
