package io.partitionnotify.spark;

import java.io.IOException;
import java.io.Serializable;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapreduce.JobContext;
import org.apache.hadoop.mapreduce.TaskAttemptContext;
import org.apache.spark.internal.io.FileCommitProtocol;
import org.apache.spark.internal.io.FileNameSpec;
import org.apache.spark.internal.io.HadoopMapReduceCommitProtocol;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import scala.Option;

/**
 * Spark's default commit protocol, plus: remember which partition directories each
 * committed task wrote and, once the job commit succeeded, hand the job's partitions
 * to {@link PendingCommits}. Nothing is announced here: the query-execution listener
 * announces when the whole command (including the catalog update) succeeded.
 *
 * <p>Set with {@code spark.sql.sources.commitProtocolClass}. One jar for Spark 3.5 (Scala
 * 2.12) and 4.x (Scala 2.13), see {@link SparkCompat}; on any other Spark it is exactly
 * Spark's own protocol and says so in one ERROR line per job.
 */
public class NotifyingCommitProtocol extends HadoopMapReduceCommitProtocol {
  private static final long serialVersionUID = 1L;
  private static final Logger LOG = LoggerFactory.getLogger(NotifyingCommitProtocol.class);
  private static final MethodHandle SUPER_COMMIT_JOB =
      SparkCompat.findSuperCommitJob(MethodHandles.lookup());

  private final String jobId;
  private final String path;
  private final boolean dynamicOverwrite;
  /** False on an unsupported Spark: every call is the parent's, unchanged. */
  private final boolean active;
  /** Driver only: what Spark deleted before this write (static-mode overwrite). */
  private transient Set<String> deletedBeforeWrite;
  /** Task side: the partition directories this task attempt wrote to. */
  private transient Set<String> taskDirs;
  /** Driver only: the settings were checked before Spark's first delete. */
  private transient boolean checkedBeforeDelete;

  public NotifyingCommitProtocol(String jobId, String path, boolean dynamicPartitionOverwrite) {
    super(jobId, path, dynamicPartitionOverwrite);
    this.jobId = jobId;
    this.path = path;
    this.dynamicOverwrite = dynamicPartitionOverwrite;
    // The constructor runs on the driver, once per write job (tasks get a copy).
    String unsupported = SparkCompat.unsupportedReason(SUPER_COMMIT_JOB);
    this.active = unsupported == null;
    if (!active) {
      LOG.error("partition-notify: {}; job {} at {} runs with Spark's own commit protocol "
          + "and announces nothing", unsupported, jobId, path);
    }
  }

  /** Carried from a committed task to the job commit next to the parent's own message. */
  static final class TaskPartitions implements Serializable {
    private static final long serialVersionUID = 1L;
    final Object parent;
    final String[] dirs;

    TaskPartitions(Object parent, String[] dirs) {
      this.parent = parent;
      this.dirs = dirs;
    }
  }

  /** Driver, before the job writes: a setting we cannot use refuses the write here. */
  @Override
  public void setupJob(JobContext jobContext) {
    if (active) {
      Preflight.check(jobId, path, jobContext.getConfiguration());
    }
    super.setupJob(jobContext);
  }

  @Override
  public void setupTask(TaskAttemptContext taskContext) {
    super.setupTask(taskContext);
    taskDirs = new LinkedHashSet<>();
  }

  @Override
  public String newTaskTempFile(TaskAttemptContext ctx, Option<String> dir, FileNameSpec spec) {
    if (active && dir.isDefined()) {
      dirs().add(dir.get());
    }
    return super.newTaskTempFile(ctx, dir, spec);
  }

  @Override
  public String newTaskTempFileAbsPath(TaskAttemptContext ctx, String absoluteDir, FileNameSpec spec) {
    // A partition with a custom location: remembered by its absolute directory.
    if (active) {
      dirs().add(Manifest.ABSOLUTE_PREFIX + absoluteDir);
    }
    return super.newTaskTempFileAbsPath(ctx, absoluteDir, spec);
  }

  private Set<String> dirs() {
    if (taskDirs == null) {
      taskDirs = new LinkedHashSet<>();
    }
    return taskDirs;
  }

  @Override
  public FileCommitProtocol.TaskCommitMessage commitTask(TaskAttemptContext taskContext) {
    FileCommitProtocol.TaskCommitMessage parent = super.commitTask(taskContext);
    if (!active) {
      return parent;
    }
    String[] dirs = dirs().toArray(new String[0]);
    return new FileCommitProtocol.TaskCommitMessage(new TaskPartitions(parent.obj(), dirs));
  }

  @Override
  public boolean deleteWithJob(FileSystem fs, Path p, boolean recursive) {
    // Called on the driver before the job for an overwrite in static mode: the static
    // prefix of the partitions replaced (the whole output path when there is none) and
    // each matching custom location. What was there and is not written again is dropped.
    synchronized (this) {
      if (active && !checkedBeforeDelete) {
        // A static overwrite deletes before setupJob: refuse before anything is gone. The
        // job's write options reach setupJob only: read from the command's plan here.
        checkedBeforeDelete = true;
        Configuration conf = Preflight.sessionConf(fs.getConf());
        for (Map.Entry<String, String> o : TableIdentity.writeOptions().entrySet()) {
          conf.set(o.getKey(), o.getValue());
        }
        Preflight.check(jobId, path, conf);
      }
      if (deletedBeforeWrite == null) {
        deletedBeforeWrite = new TreeSet<>();
      }
      deletedBeforeWrite.add(fs.makeQualified(p).toString());
    }
    Path spool = active && recursive
        ? SpoolKeeper.inside(fs.makeQualified(p),
            SpoolKeeper.spools(fs, path, Preflight.sessionConf(fs.getConf())))
        : null;
    if (spool == null) {
      return super.deleteWithJob(fs, p, recursive);
    }
    // An overwrite of the whole table: the spool holds earlier jobs' manifests serve has
    // not picked up yet; deleting it would lose their announcements.
    try {
      return SpoolKeeper.deleteAllBut(fs, fs.makeQualified(p), spool);
    } catch (IOException e) {
      throw NotifyingCommitProtocol.<RuntimeException>sneaky(e);  // as fs.delete's own
    }
  }

  /** Spark 4.x (Scala 2.13): the parent's commitJob, overridden. */
  public void commitJob(JobContext jobContext,
      scala.collection.immutable.Seq<FileCommitProtocol.TaskCommitMessage> taskCommits) {
    commitAll(jobContext, taskCommits.iterator());
  }

  /** Spark 3.5 (Scala 2.12): the parent's commitJob, overridden. */
  public void commitJob(JobContext jobContext,
      scala.collection.Seq<FileCommitProtocol.TaskCommitMessage> taskCommits) {
    commitAll(jobContext, taskCommits.iterator());
  }

  private void commitAll(
      JobContext jobContext, scala.collection.Iterator<FileCommitProtocol.TaskCommitMessage> it) {
    List<FileCommitProtocol.TaskCommitMessage> unwrapped = new ArrayList<>();
    Set<String> dirs = new TreeSet<>();
    while (it.hasNext()) {
      FileCommitProtocol.TaskCommitMessage m = it.next();
      if (m.obj() instanceof TaskPartitions) {
        TaskPartitions tp = (TaskPartitions) m.obj();
        unwrapped.add(new FileCommitProtocol.TaskCommitMessage(tp.parent));
        for (String d : tp.dirs) {
          dirs.add(d);
        }
      } else {
        unwrapped.add(m);
      }
    }
    superCommitJob(jobContext, scalaList(unwrapped));
    if (!active) {
      return;
    }
    // The data is committed. From here on nothing may fail the user's job.
    Set<String> deleted;
    synchronized (this) {
      deleted = deletedBeforeWrite == null ? Set.of() : deletedBeforeWrite;
    }
    try {
      PendingCommits.committed(jobId, path, dynamicOverwrite || !deleted.isEmpty(), dirs, deleted,
          jobContext.getConfiguration());
    } catch (RuntimeException | LinkageError e) {
      LOG.error("partition-notify: could not record the commit of job {} at {}", jobId, path, e);
    }
  }

  private void superCommitJob(JobContext jobContext, Object commits) {
    try {
      SUPER_COMMIT_JOB.invoke(this, jobContext, commits);
    } catch (Throwable t) {
      throw NotifyingCommitProtocol.<RuntimeException>sneaky(t);
    }
  }

  /** Rethrows the parent's exception as it is (Scala declares no checked exceptions). */
  @SuppressWarnings("unchecked")
  private static <T extends Throwable> T sneaky(Throwable t) throws T {
    throw (T) t;
  }

  /** An immutable Scala list: a Seq of both Scala 2.12 and 2.13, built the same way in both. */
  @SuppressWarnings({"unchecked", "rawtypes"})
  private static Object scalaList(List<FileCommitProtocol.TaskCommitMessage> items) {
    scala.collection.immutable.List out = scala.collection.immutable.Nil$.MODULE$;
    for (int i = items.size() - 1; i >= 0; i--) {
      out = out.$colon$colon(items.get(i));
    }
    return out;
  }
}
