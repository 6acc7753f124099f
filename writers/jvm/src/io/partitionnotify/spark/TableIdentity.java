package io.partitionnotify.spark;

import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.catalyst.TableIdentifier;
import org.apache.spark.sql.catalyst.catalog.CatalogTable;
import org.apache.spark.sql.catalyst.catalog.CatalogTablePartition;
import org.apache.spark.sql.catalyst.plans.logical.Command;
import org.apache.spark.sql.catalyst.plans.logical.CommandResult;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.QueryExecution;
import org.apache.spark.sql.execution.datasources.InsertIntoHadoopFsRelationCommand;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import scala.collection.Iterator;

/**
 * Which catalog table (if any) a job wrote: found in the plan of the SQL command that ran
 * the job. A path write has none; the service then matches the output path.
 */
final class TableIdentity {
  private static final Logger LOG = LoggerFactory.getLogger(TableIdentity.class);
  private static final String[] TABLE_GETTERS = {"table", "tableDesc"};

  private TableIdentity() {}

  static final class Candidate {
    final String name;
    final String location;
    final TableIdentifier id;
    /** A command that replaces the whole table (a CTAS with mode Overwrite). */
    final boolean replaces;

    Candidate(TableIdentifier id, String name, String location) {
      this(id, name, location, false);
    }

    Candidate(TableIdentifier id, String name, String location, boolean replaces) {
      this.id = id;
      this.name = name;
      this.location = location;
      this.replaces = replaces;
    }
  }

  /** At the job commit: the plan of the (possibly nested) execution that ran the job. */
  static List<Candidate> atCommit(Long execId, Long rootId) {
    List<Candidate> found = new ArrayList<>();
    if (execId != null && !execId.equals(rootId)) {
      try {
        QueryExecution qe = PendingCommits.execution(execId);
        if (qe != null) {
          walk(qe.logical(), found);
        }
      } catch (RuntimeException | LinkageError e) {
        LOG.warn("partition-notify: could not read the plan of execution {}: {}", execId, e.toString());
      }
    }
    return found;
  }

  /**
   * The write options of the command running on this thread, from the plan of its SQL
   * execution ({@code InsertIntoHadoopFsRelationCommand.options}): Spark hands a job's
   * options to {@code setupJob} only, after a static overwrite deleted; the {@code
   * FileSystem} {@code deleteWithJob} gets is cached, its configuration another job's. Empty
   * when there is no execution or no such command (the options are then checked in setupJob).
   */
  static Map<String, String> writeOptions() {
    Map<String, String> out = new LinkedHashMap<>();
    try {
      scala.Option<org.apache.spark.sql.SparkSession> active =
          org.apache.spark.sql.SparkSession.getActiveSession();
      String id = active.isDefined()
          ? active.get().sparkContext().getLocalProperty("spark.sql.execution.id") : null;
      QueryExecution qe = id == null ? null : PendingCommits.execution(Long.parseLong(id));
      if (qe != null) {
        optionsOf(qe.logical(), out);
      }
    } catch (ReflectiveOperationException | RuntimeException | LinkageError e) {
      LOG.warn("partition-notify: could not read the write options before the delete: {}",
          e.toString());
    }
    return out;
  }

  private static void optionsOf(LogicalPlan plan, Map<String, String> out)
      throws ReflectiveOperationException {
    if (plan instanceof CommandResult) {
      optionsOf(((CommandResult) plan).commandLogicalPlan(), out);
    } else if (plan instanceof InsertIntoHadoopFsRelationCommand) {
      // A scala Map: Iterable of Tuple2 on Scala 2.12 and 2.13 alike.
      Object opts = plan.getClass().getMethod("options").invoke(plan);
      Iterator<?> kv = ((scala.collection.Iterable<?>) opts).iterator();
      while (kv.hasNext()) {
        scala.Tuple2<?, ?> e = (scala.Tuple2<?, ?>) kv.next();
        out.put(String.valueOf(e._1()), String.valueOf(e._2()));
      }
    }
    Iterator<?> it = children(plan);
    while (it.hasNext()) {
      optionsOf((LogicalPlan) it.next(), out);
    }
  }

  /** At the end of the command: its executed plan names the table (CTAS included). */
  static void resolve(Manifest m, List<Candidate> found, QueryExecution root) {
    List<Candidate> all = new ArrayList<>(found);
    try {
      walk(root.commandExecuted(), all);
    } catch (RuntimeException | LinkageError e) {
      LOG.warn("partition-notify: could not read the plan of query {}: {}", root.id(), e.toString());
    }
    Candidate table = null;
    String out = m.outputPath;
    for (Candidate c : all) {
      if (table == null && c.location != null && Manifest.trimSlash(c.location).equals(out)) {
        table = c;
      }
    }
    if (table == null && !all.isEmpty() && allSame(all)) {
      table = all.get(0);
    }
    if (table != null) {
      m.table = table.name;
      m.replacesTable = table.replaces;
      customValues(m, table.id, root);
    }
  }

  private static boolean allSame(List<Candidate> found) {
    for (Candidate c : found) {
      if (!c.name.equals(found.get(0).name)) {
        return false;
      }
    }
    return true;
  }

  private static void walk(LogicalPlan plan, List<Candidate> out) {
    if (plan instanceof CommandResult) {
      walk(((CommandResult) plan).commandLogicalPlan(), out);
    } else if (plan instanceof InsertIntoHadoopFsRelationCommand) {
      InsertIntoHadoopFsRelationCommand c = (InsertIntoHadoopFsRelationCommand) plan;
      if (c.catalogTable().isDefined()) {
        CatalogTable t = c.catalogTable().get();
        out.add(new Candidate(t.identifier(), name(t), c.outputPath().toString()));
      }
    } else {
      // CTAS-like and Hive commands differ between Spark versions
      // (CreateDataSourceTableAsSelectCommand.table, SaveAsV1TableCommand.tableDesc,
      // InsertIntoHiveTable.table, ...): any command naming a CatalogTable.
      CatalogTable t = catalogTableOf(plan);
      if (t != null) {
        out.add(new Candidate(t.identifier(), name(t), location(t), overwrites(plan)));
      }
    }
    Iterator<?> it = children(plan);
    while (it.hasNext()) {
      walk((LogicalPlan) it.next(), out);
    }
  }

  /**
   * The partition values of the job's custom-location partitions (the directories Spark
   * handed to {@code newTaskTempFileAbsPath}), from the session catalog, matched by path:
   * Spark qualified the catalog's location to get that directory. Reflection where the
   * compiled signatures differ between Spark 3.5 and 4 (the session's class, Seq).
   */
  private static void customValues(Manifest m, TableIdentifier table, QueryExecution root) {
    java.util.Set<String> wanted = new java.util.HashSet<>();
    for (String d : m.dirs) {
      if (d.startsWith(Manifest.ABSOLUTE_PREFIX)) {
        wanted.add(pathOf(d.substring(Manifest.ABSOLUTE_PREFIX.length())));
      }
    }
    if (wanted.isEmpty()) {
      return;
    }
    Map<String, Map<String, String>> out = new HashMap<>();
    try {
      Object session = root.getClass().getMethod("sparkSession").invoke(root);
      Object state = session.getClass().getMethod("sessionState").invoke(session);
      Object catalog = state.getClass().getMethod("catalog").invoke(state);
      Object parts = catalog.getClass()
          .getMethod("listPartitions", TableIdentifier.class, scala.Option.class)
          .invoke(catalog, table, scala.Option.apply(null));
      Iterator<?> it = ((scala.collection.Iterable<?>) parts).iterator();
      while (it.hasNext()) {
        CatalogTablePartition p = (CatalogTablePartition) it.next();
        if (p.storage().locationUri().isDefined()) {
          String path = pathOf(p.storage().locationUri().get().toString());
          if (wanted.contains(path)) {
            out.put(path, values(p.spec()));
          }
        }
      }
    } catch (ReflectiveOperationException | RuntimeException | LinkageError e) {
      LOG.warn("partition-notify: could not read the custom partition locations of {}: {}",
          table, e.toString());
    }
    m.customValues = out;
  }

  /** The path part of a location: how the manifest and the catalog spell it may differ. */
  static String pathOf(String location) {
    return Manifest.trimSlash(new org.apache.hadoop.fs.Path(location).toUri().getPath());
  }

  private static Map<String, String> values(Object spec) {
    Map<String, String> values = new LinkedHashMap<>();
    Iterator<?> kv = ((scala.collection.Iterable<?>) spec).iterator();
    while (kv.hasNext()) {
      scala.Tuple2<?, ?> v = (scala.Tuple2<?, ?>) kv.next();
      values.put(String.valueOf(v._1()), String.valueOf(v._2()));
    }
    return values;
  }

  /**
   * {@code plan.children()}: a {@code scala.collection.Seq} on Scala 2.12 (Spark 3.5), an
   * {@code immutable.Seq} on 2.13 (Spark 4), so not called by its compiled signature.
   */
  private static Iterator<?> children(LogicalPlan plan) {
    try {
      Object kids = plan.getClass().getMethod("children").invoke(plan);
      return ((scala.collection.Iterable<?>) kids).iterator();
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("no children() on " + plan.getClass().getName(), e);
    }
  }

  /**
   * A CTAS-like command run with {@code SaveMode.Overwrite}: {@code saveAsTable} in mode
   * overwrite, which drops an existing table (its directory too, for a managed one) and
   * creates it from the job's output. Read by name: the command classes differ by version.
   */
  private static boolean overwrites(LogicalPlan plan) {
    try {
      Method mode = plan.getClass().getMethod("mode");
      return "Overwrite".equals(String.valueOf(mode.invoke(plan)));
    } catch (ReflectiveOperationException | RuntimeException e) {
      return false;
    }
  }

  private static CatalogTable catalogTableOf(LogicalPlan plan) {
    if (!(plan instanceof Command)) {
      return null;
    }
    for (String getter : TABLE_GETTERS) {
      try {
        Method m = plan.getClass().getMethod(getter);
        if (CatalogTable.class.isAssignableFrom(m.getReturnType())) {
          return (CatalogTable) m.invoke(plan);
        }
      } catch (ReflectiveOperationException e) {
        // not this getter
      }
    }
    return null;
  }

  private static String name(CatalogTable t) {
    TableIdentifier id = t.identifier();
    String db = id.database().isDefined() ? id.database().get() : "default";
    return db + "." + id.table();
  }

  private static String location(CatalogTable t) {
    return t.storage().locationUri().isDefined() ? t.storage().locationUri().get().toString() : null;
  }
}
