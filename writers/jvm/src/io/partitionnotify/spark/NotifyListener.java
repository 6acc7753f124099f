package io.partitionnotify.spark;

import org.apache.spark.SparkConf;
import org.apache.spark.sql.execution.QueryExecution;
import org.apache.spark.sql.util.QueryExecutionListener;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Announces a command's commits once the whole command succeeded: by then Spark has
 * committed the data and, for a catalog table, added the partitions to the catalog.
 * Set with {@code spark.sql.queryExecutionListeners}; the commit protocol also registers
 * one itself if the setting was forgotten.
 */
public class NotifyListener implements QueryExecutionListener {
  private static final Logger LOG = LoggerFactory.getLogger(NotifyListener.class);

  public NotifyListener() {}

  /** What Spark calls at session start: a malformed serve URL is refused loudly, here. */
  public NotifyListener(SparkConf conf) {
    String key = Settings.PREFIX + "serveUrl";
    String url = conf.get(key, null);
    if (url == null || url.isBlank()) {
      key = Settings.ENV_SERVE_URL_SOURCE;
      url = Settings.envServeUrl();
    }
    String problem = Settings.urlProblem(url == null ? null : url.trim());
    if (problem != null) {
      LOG.error("partition-notify: {} '{}' refused: {}. Every write of this session is "
          + "refused (CommitRefused) until it is fixed", key, url.trim(), problem);
    }
  }

  @Override
  public void onSuccess(String funcName, QueryExecution qe, long durationNs) {
    PendingCommits.succeeded(qe);
  }

  @Override
  public void onFailure(String funcName, QueryExecution qe, Exception exception) {
    PendingCommits.failed(qe.id(), exception);
  }
}
