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
  volatile String table;

  Manifest(String jobId, String outputPath, boolean overwrite, Set<String> dirs,
      String markSetDone, String appId) {
    this.jobId = jobId;
    this.outputPath = trimSlash(outputPath);
    this.overwrite = overwrite;
    this.dirs = dirs;
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
    doc.put("overwrite", overwrite);
    List<Map<String, String>> parts = new ArrayList<>();
    for (String d : dirs) {
      Map<String, String> p = new LinkedHashMap<>();
      if (d.startsWith(ABSOLUTE_PREFIX)) {
        String abs = trimSlash(d.substring(ABSOLUTE_PREFIX.length()));
        p.put("path", null);
        p.put("location", abs);
      } else {
        String rel = trimSlash(d);
        p.put("path", rel);
        p.put("location", outputPath + "/" + rel);
      }
      parts.add(p);
    }
    doc.put("partitions", parts);
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
