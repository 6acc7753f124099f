package io.partitionnotify.spark;

import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.catalyst.TableIdentifier;
import org.apache.spark.sql.catalyst.catalog.CatalogTable;
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

    Candidate(String name, String location) {
      this.name = name;
      this.location = location;
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

  /** At the end of the command: its executed plan names the table (CTAS included). */
  static void resolve(Manifest m, List<Candidate> found, QueryExecution root) {
    List<Candidate> all = new ArrayList<>(found);
    try {
      walk(root.commandExecuted(), all);
    } catch (RuntimeException | LinkageError e) {
      LOG.warn("partition-notify: could not read the plan of query {}: {}", root.id(), e.toString());
    }
    String out = m.outputPath;
    for (Candidate c : all) {
      if (c.location != null && Manifest.trimSlash(c.location).equals(out)) {
        m.table = c.name;
        return;
      }
    }
    if (!all.isEmpty() && allSame(all)) {
      m.table = all.get(0).name;
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
        out.add(new Candidate(name(c.catalogTable().get()), c.outputPath().toString()));
      }
    } else {
      // CTAS-like and Hive commands differ between Spark versions
      // (CreateDataSourceTableAsSelectCommand.table, SaveAsV1TableCommand.tableDesc,
      // InsertIntoHiveTable.table, ...): any command naming a CatalogTable.
      CatalogTable t = catalogTableOf(plan);
      if (t != null) {
        out.add(new Candidate(name(t), location(t)));
      }
    }
    Iterator<?> it = children(plan);
    while (it.hasNext()) {
      walk((LogicalPlan) it.next(), out);
    }
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
