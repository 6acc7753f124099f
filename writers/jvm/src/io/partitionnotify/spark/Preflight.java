package io.partitionnotify.spark;

import java.io.IOException;
import java.io.OutputStream;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.internal.SQLConf;

/**
 * What is checked on the driver before a write job writes or deletes anything, so that a
 * setting partition-notify cannot use fails the write with one clear line
 * ({@link CommitRefused}) instead of an announcement that silently never arrives.
 */
final class Preflight {
  /** Settings, by their lower-cased name after {@link Settings#PREFIX}. */
  static final List<String> KNOWN = List.of("serveUrl", "token", "markSetDone", "spoolDir",
      "timeoutMs");

  private Preflight() {}

  /** Throws {@link CommitRefused} naming the first thing wrong with the job's settings. */
  static void check(String jobId, String output, Configuration conf) {
    checkNames(conf);
    Settings s = Settings.from(conf);
    if (s.serveUrlProblem != null) {
      throw new CommitRefused(s.serveUrlProblem);
    }
    checkTimeout(conf);
    checkSpoolDir(s.spoolDir);
    if (s.serveUrl == null) {
      // The spool is the only way the announcement can go: it must take a file now.
      checkSpoolWritable(Delivery.spoolDir(s, output), jobId, conf);
    }
  }

  /** A misspelt setting would be ignored and the write would announce nothing. */
  static void checkNames(Configuration conf) {
    for (Map.Entry<String, String> e : conf) {
      String key = e.getKey();
      String lower = key.toLowerCase(Locale.ROOT);
      String name = null;
      if (lower.startsWith(Settings.PREFIX.toLowerCase(Locale.ROOT))) {
        name = lower.substring(Settings.PREFIX.length());
      } else if (lower.startsWith(Settings.OPTION_PREFIX)) {
        name = lower.substring(Settings.OPTION_PREFIX.length());
        if (!"marksetdone".equals(name)) {
          throw new CommitRefused("unknown write option '" + key + "'; expected "
              + Settings.OPTION_PREFIX + "markSetDone (the others are Spark settings "
              + Settings.PREFIX + "*)");
        }
      }
      if (name != null && !known(name)) {
        throw new CommitRefused("unknown setting '" + key + "'; expected one of "
            + Settings.PREFIX + "{" + String.join(", ", KNOWN) + "}");
      }
    }
  }

  private static boolean known(String lowerName) {
    return KNOWN.stream().anyMatch(k -> k.toLowerCase(Locale.ROOT).equals(lowerName));
  }

  static void checkTimeout(Configuration conf) {
    String raw = Settings.raw(conf, "timeoutMs");
    if (raw == null || raw.isBlank()) {  // the default, as in Settings.from
      return;
    }
    String why = "expected a whole number of milliseconds from 1 to " + Integer.MAX_VALUE;
    try {
      if (Integer.parseInt(raw.trim()) >= 1) {
        return;
      }
    } catch (NumberFormatException e) {
      // refused below
    }
    throw new CommitRefused(Settings.PREFIX + "timeoutMs '" + raw + "' refused: " + why);
  }

  static void checkSpoolDir(String spoolDir) {
    if (spoolDir == null) {
      return;
    }
    String why = null;
    try {
      Path p = new Path(spoolDir);
      if (!p.isAbsolute()) {
        why = "expected an absolute path or URI (serve scans it: PN_SPARK_SPOOL_DIRS)";
      }
    } catch (IllegalArgumentException e) {
      why = "it is no path: " + e.getMessage();
    }
    if (why != null) {
      throw new CommitRefused(Settings.PREFIX + "spoolDir '" + spoolDir + "' refused: " + why);
    }
  }

  /** The session's settings over {@code base}: what a job's configuration is made of. */
  static Configuration sessionConf(Configuration base) {
    Configuration conf = new Configuration(base);
    scala.collection.Iterator<scala.Tuple2<String, String>> it =
        SQLConf.get().getAllConfs().iterator();
    while (it.hasNext()) {
      scala.Tuple2<String, String> kv = it.next();
      conf.set(kv._1(), kv._2());
    }
    return conf;
  }

  /** Creates the spool and a probe file in it, and deletes the probe. */
  static void checkSpoolWritable(Path dir, String jobId, Configuration conf) {
    Path probe = new Path(dir, ".probe-" + jobId);
    try {
      FileSystem fs = dir.getFileSystem(conf);
      if (!fs.mkdirs(dir)) {
        throw new IOException("could not create the directory");
      }
      try (OutputStream out = fs.create(probe, true)) {
        out.write('\n');
      }
      fs.delete(probe, false);
    } catch (IOException | RuntimeException e) {
      throw new CommitRefused("the spool " + dir + " cannot be written (" + e.getMessage()
          + "); with no " + Settings.PREFIX + "serveUrl every announcement goes there: expected "
          + "a directory the driver may create files in, or set " + Settings.PREFIX
          + "serveUrl", e);
    }
  }
}
