package io.partitionnotify.spark;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * What one Spark job committed: the document posted to {@code POST /v1/commits} and, when
 * the service cannot be reached, written to {@code <output>/_partition_notify/<jobId>.json}.
 * The format is documented in docs/writers.md and parsed by writers/commit_manifest.py.
 */
final class Manifest {
  static final int VERSION = 1;
  /** Marks a task directory that Spark handed over as an absolute path (custom location). */
  static final String ABSOLUTE_PREFIX = "abs:";
  private static final ObjectMapper JSON = new ObjectMapper();

  final String jobId;
  final String outputPath;
  final boolean overwrite;
  final Set<String> dirs;
  final String markSetDone;
  final long committedAtMs;
  final String appId;
  /** Directories Spark deleted before writing (a static-mode overwrite), absolute. */
  final Set<String> deleted;
  volatile String table;
  /**
   * The job replaced the whole table: a CTAS with mode Overwrite ({@code
   * df.write.mode("overwrite").saveAsTable}), which Spark runs after dropping the table, so
   * nothing went through {@code deleteWithJob}. Sent as an overwrite that deleted the output path.
   */
  volatile boolean replacesTable;
  /** Partition specs (possibly partial) an ALTER TABLE ... DROP PARTITION removed. */
  volatile List<Map<String, String>> dropped = List.of();
  /** Partition values of the job's custom locations, by path (from the session catalog). */
  volatile Map<String, Map<String, String>> customValues = Map.of();

  Manifest(String jobId, String outputPath, boolean overwrite, Set<String> dirs,
      Set<String> deleted, String markSetDone, String appId) {
    this.jobId = jobId;
    this.outputPath = trimSlash(outputPath);
    this.overwrite = overwrite;
    this.dirs = dirs;
    this.deleted = deleted;
    this.markSetDone = markSetDone == null || markSetDone.isBlank() ? null : markSetDone.trim();
    this.committedAtMs = System.currentTimeMillis();
    this.appId = appId;
  }

  String toJson() {
    Map<String, Object> doc = new LinkedHashMap<>();
    doc.put("version", VERSION);
    doc.put("jobId", jobId);
    doc.put("table", table);
    doc.put("outputPath", outputPath);
    doc.put("overwrite", overwrite || replacesTable);
    List<Map<String, Object>> parts = new ArrayList<>();
    for (String d : dirs) {
      Map<String, Object> p = new LinkedHashMap<>();
      if (d.startsWith(ABSOLUTE_PREFIX)) {
        String abs = trimSlash(d.substring(ABSOLUTE_PREFIX.length()));
        p.put("path", null);
        p.put("location", abs);
        // The path of a custom location need not name the partition: its values do.
        Map<String, String> values = customValues.get(TableIdentity.pathOf(abs));
        if (values != null) {
          p.put("values", values);
        }
      } else {
        String rel = trimSlash(d);
        p.put("path", rel);
        p.put("location", outputPath + "/" + rel);
      }
      parts.add(p);
    }
    doc.put("partitions", parts);
    List<String> gone = new ArrayList<>();
    for (String g : deleted) {
      gone.add(trimSlash(g));
    }
    if (replacesTable && !gone.contains(outputPath)) {
      gone.add(outputPath);
    }
    doc.put("deleted", gone);
    if (!dropped.isEmpty()) {
      doc.put("dropped", dropped);
    }
    doc.put("markSetDone", markSetDone);
    doc.put("committedAtMs", committedAtMs);
    doc.put("sparkAppId", appId);
    try {
      return JSON.writeValueAsString(doc);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException("manifest of job " + jobId + " is not serialisable", e);
    }
  }

  static String trimSlash(String s) {
    String out = s;
    while (out.length() > 1 && out.endsWith("/")) {
      out = out.substring(0, out.length() - 1);
    }
    return out;
  }
}
