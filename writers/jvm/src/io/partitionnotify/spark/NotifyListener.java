package io.partitionnotify.spark;

import org.apache.spark.sql.execution.QueryExecution;
import org.apache.spark.sql.util.QueryExecutionListener;

/**
 * Announces a command's commits once the whole command succeeded: by then Spark has
 * committed the data and, for a catalog table, added the partitions to the catalog.
 * Set with {@code spark.sql.queryExecutionListeners}; the commit protocol also registers
 * one itself if the setting was forgotten.
 */
public class NotifyListener implements QueryExecutionListener {
  @Override
  public void onSuccess(String funcName, QueryExecution qe, long durationNs) {
    PendingCommits.succeeded(qe);
  }

  @Override
  public void onFailure(String funcName, QueryExecution qe, Exception exception) {
    PendingCommits.failed(qe.id(), exception);
  }
}
