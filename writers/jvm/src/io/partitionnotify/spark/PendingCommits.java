package io.partitionnotify.spark;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.WeakHashMap;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.hadoop.conf.Configuration;
import org.apache.spark.SparkContext;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.execution.QueryExecution;
import org.apache.spark.sql.execution.SQLExecution;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import scala.Option;

/**
 * Driver-side hand-over from the job commit to the end of the SQL command.
 *
 * <p>The commit protocol records each committed job under the root SQL execution id of the
 * command that ran it; the listener delivers them when that execution succeeds and drops
 * them when it fails (a failed catalog update, a failed later job of the same command).
 */
final class PendingCommits {
  private static final Logger LOG = LoggerFactory.getLogger(PendingCommits.class);
  private static final String EXECUTION_ID = "spark.sql.execution.id";
  private static final String ROOT_ID = "spark.sql.execution.root.id";

  private static final Map<Long, List<Pending>> BY_ROOT = new ConcurrentHashMap<>();
  private static final Map<Object, Boolean> LISTENING = Collections.synchronizedMap(new WeakHashMap<>());

  static final class Pending {
    final Manifest manifest;
    final Settings settings;
    final Configuration conf;
    List<TableIdentity.Candidate> tables = List.of();

    Pending(Manifest manifest, Settings settings, Configuration conf) {
      this.manifest = manifest;
      this.settings = settings;
      this.conf = conf;
    }
  }

  private PendingCommits() {}

  static void committed(
      String jobId, String path, boolean overwrite, Set<String> dirs, Set<String> deleted,
      Configuration conf) {
    Settings settings = Settings.from(conf);
    Option<SparkSession> active = SparkSession.getActiveSession();
    SparkContext sc = active.isDefined() ? active.get().sparkContext() : null;
    Manifest m = new Manifest(
        jobId, path, overwrite, dirs, deleted, settings.markSetDone,
        sc == null ? null : sc.applicationId());
    Long execId = sc == null ? null : parse(sc.getLocalProperty(EXECUTION_ID));
    Long rootId = sc == null ? null : parse(sc.getLocalProperty(ROOT_ID));
    if (rootId == null) {
      rootId = execId;
    }
    Pending p = new Pending(m, settings, conf);
    QueryExecution root = execution(rootId);
    if (root == null) {
      // Not a SQL command (no catalog step follows): the data is committed, deliver now.
      Delivery.deliver(p);
      return;
    }
    p.tables = TableIdentity.atCommit(execId, rootId);
    // The listener sees the QueryExecution, whose id is not the execution id.
    long key = root.id();
    BY_ROOT.computeIfAbsent(key, k -> Collections.synchronizedList(new ArrayList<>())).add(p);
    ensureListening(active.get());
    LOG.info("partition-notify: job {} committed {} partition(s) at {}; announcing when "
        + "query {} (execution {}) succeeds", jobId, dirs.size(), path, key, rootId);
  }

  static void succeeded(QueryExecution qe) {
    List<Pending> done = BY_ROOT.remove(qe.id());
    if (done == null) {
      DroppedPartitions.announce(qe);
      return;
    }
    synchronized (done) {
      for (Pending p : done) {
        TableIdentity.resolve(p.manifest, p.tables, qe);
        Delivery.deliver(p);
      }
    }
  }

  static void failed(long queryId, Exception cause) {
    List<Pending> dropped = BY_ROOT.remove(queryId);
    if (dropped != null) {
      LOG.warn("partition-notify: command (query {}) failed after {} job commit(s); "
          + "announcing nothing: {}", queryId, dropped.size(), String.valueOf(cause));
    }
  }

  /** The listener setting may have been forgotten: register one per session, once. */
  private static void ensureListening(SparkSession session) {
    Object manager = session.listenerManager();
    synchronized (LISTENING) {
      if (LISTENING.containsKey(manager)) {
        return;
      }
      LISTENING.put(manager, Boolean.TRUE);
    }
    // A second listener (from spark.sql.queryExecutionListeners) is harmless: the first
    // to see the execution end takes its commits, the other finds nothing.
    session.listenerManager().register(new NotifyListener());
  }

  static QueryExecution execution(Long id) {
    return id == null ? null : SQLExecution.getQueryExecution(id);
  }

  private static Long parse(String s) {
    if (s == null || s.isEmpty()) {
      return null;
    }
    try {
      return Long.parseLong(s);
    } catch (NumberFormatException e) {
      return null;
    }
  }
}
