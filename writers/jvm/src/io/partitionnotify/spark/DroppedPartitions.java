package io.partitionnotify.spark;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;

import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.catalyst.TableIdentifier;
import org.apache.spark.sql.catalyst.catalog.CatalogTable;
import org.apache.spark.sql.catalyst.plans.logical.CommandResult;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.QueryExecution;
import org.apache.spark.sql.execution.command.AlterTableDropPartitionCommand;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import scala.collection.Iterator;

/**
 * {@code ALTER TABLE ... DROP PARTITION}: no write job, so no commit; the listener sees
 * the succeeded command and delivers a manifest with no partitions and the dropped
 * (possibly partial) specs, which serve announces as DROP_PARTITION (reason "drop").
 * Reflection where the compiled signatures differ between Spark 3.5 and 4 (the session's
 * class, {@code specs()}'s Seq).
 */
final class DroppedPartitions {
  private static final Logger LOG = LoggerFactory.getLogger(DroppedPartitions.class);

  private DroppedPartitions() {}

  /** Deliver the drops of {@code qe} if it is a succeeded DROP PARTITION; never throws. */
  static void announce(QueryExecution qe) {
    try {
      LogicalPlan plan = qe.commandExecuted();
      if (plan instanceof CommandResult) {
        plan = ((CommandResult) plan).commandLogicalPlan();
      }
      if (plan instanceof AlterTableDropPartitionCommand) {
        deliver(qe, (AlterTableDropPartitionCommand) plan);
      }
    } catch (ReflectiveOperationException | RuntimeException | LinkageError e) {
      LOG.error("partition-notify: could not announce the partitions dropped by query {}: {}",
          qe.id(), e.toString());
    }
  }

  private static void deliver(QueryExecution qe, AlterTableDropPartitionCommand c)
      throws ReflectiveOperationException {
    Object session = qe.getClass().getMethod("sparkSession").invoke(qe);
    Object state = session.getClass().getMethod("sessionState").invoke(session);
    Object catalog = state.getClass().getMethod("catalog").invoke(state);
    TableIdentifier id = c.tableName();
    CatalogTable table = (CatalogTable) catalog.getClass()
        .getMethod("getTableMetadata", TableIdentifier.class).invoke(catalog, id);
    Configuration conf = (Configuration) state.getClass().getMethod("newHadoopConf").invoke(state);
    List<Map<String, String>> specs = new ArrayList<>();
    Object seq = c.getClass().getMethod("specs").invoke(c);
    Iterator<?> it = ((scala.collection.Iterable<?>) seq).iterator();
    while (it.hasNext()) {
      Map<String, String> values = new LinkedHashMap<>();
      Iterator<?> kv = ((scala.collection.Iterable<?>) it.next()).iterator();
      while (kv.hasNext()) {
        scala.Tuple2<?, ?> v = (scala.Tuple2<?, ?>) kv.next();
        values.put(String.valueOf(v._1()), String.valueOf(v._2()));
      }
      specs.add(values);
    }
    String location = table.storage().locationUri().isDefined()
        ? table.storage().locationUri().get().toString() : null;
    if (location == null || specs.isEmpty()) {
      return;
    }
    Settings settings = Settings.from(conf);
    String db = id.database().isDefined() ? id.database().get() : "default";
    // No set-done: a drop completes nothing.
    Manifest m = new Manifest("drop-" + UUID.randomUUID(), location, false, Set.of(), Set.of(),
        null, null);
    m.table = db + "." + id.table();
    m.dropped = specs;
    Delivery.deliver(new PendingCommits.Pending(m, settings, conf));
  }
}
