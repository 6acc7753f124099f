package io.partitionnotify.spark;

import java.net.URI;
import java.net.URISyntaxException;

import org.apache.hadoop.conf.Configuration;

/**
 * The job's settings, read from the Hadoop configuration of the write job: Spark copies
 * every Spark/SQL conf ({@code --conf}, {@code SET}) and every write option into it.
 * Write options arrive with lower-cased keys.
 */
final class Settings {
  static final String PREFIX = "spark.partitionnotify.";
  static final String OPTION_PREFIX = "partitionnotify.";
  static final int DEFAULT_TIMEOUT_MS = 10_000;
  /** The serve URL when no spark.partitionnotify.serveUrl is set, and how a refusal names it. */
  static final String ENV_SERVE_URL = "PN_SERVE_URL";
  static final String ENV_SERVE_URL_SOURCE = "environment variable " + ENV_SERVE_URL;

  /** Null when unset or malformed (then {@link #serveUrlProblem} says why). */
  final String serveUrl;
  final String serveUrlProblem;
  final String token;
  final String markSetDone;
  final String spoolDir;
  final int timeoutMs;

  private Settings(String serveUrl, String urlSource, String token, String markSetDone,
      String spoolDir, int timeoutMs) {
    String problem = urlProblem(serveUrl);
    this.serveUrl = problem == null ? serveUrl : null;
    // Named where it came from: a user looking for a bad value in their Spark conf when it
    // is in the driver's environment would find nothing.
    this.serveUrlProblem = problem == null ? null
        : urlSource + " '" + serveUrl + "' refused: " + problem;
    this.token = token;
    this.markSetDone = markSetDone;
    this.spoolDir = spoolDir;
    this.timeoutMs = timeoutMs;
  }

  static Settings from(Configuration conf) {
    String url = get(conf, "serveUrl", null);
    String urlSource = PREFIX + "serveUrl";
    if (url == null) {
      url = envServeUrl();
      urlSource = ENV_SERVE_URL_SOURCE;
    }
    String token = get(conf, "token", System.getenv("PN_WRITER_TOKEN"));
    String done = option(conf, "markSetDone");
    if (done == null) {
      done = get(conf, "markSetDone", null);
    }
    String spool = get(conf, "spoolDir", null);
    int timeout = DEFAULT_TIMEOUT_MS;
    String t = get(conf, "timeoutMs", null);
    if (t != null) {
      try {
        timeout = Math.max(1, Integer.parseInt(t.trim()));
      } catch (NumberFormatException e) {
        timeout = DEFAULT_TIMEOUT_MS;
      }
    }
    return new Settings(url, urlSource, token, done, spool, timeout);
  }

  /** {@code PN_SERVE_URL}, null when unset or blank (as a blank setting). */
  static String envServeUrl() {
    String v = System.getenv(ENV_SERVE_URL);
    return v == null || v.isBlank() ? null : v.trim();
  }

  /**
   * @return null if {@code url} is unset or an http(s) URL with a host, else what is wrong.
   *     Spark's properties format has no inline comments: a {@code # ...} after the value
   *     becomes part of it, hence the hint.
   */
  static String urlProblem(String url) {
    if (url == null) {
      return null;
    }
    if (url.chars().anyMatch(Character::isWhitespace)) {
      return "it contains whitespace (an inline '# comment' in spark-defaults.conf is part of "
          + "the value)";
    }
    try {
      URI u = new URI(url);
      if (!"http".equals(u.getScheme()) && !"https".equals(u.getScheme())) {
        return "expected http(s)://host:port of partition-notify serve";
      }
      if (u.getHost() == null) {
        return "it has no host";
      }
      return null;
    } catch (URISyntaxException e) {
      return e.getMessage();
    }
  }

  private static String get(Configuration conf, String key, String fallback) {
    String v = raw(conf, key);
    return v == null || v.isBlank() ? fallback : v.trim();
  }

  /** The setting {@code PREFIX + key} as given (a write option's key is lower-cased). */
  static String raw(Configuration conf, String key) {
    String v = conf.get(PREFIX + key);
    return v != null ? v : conf.get((PREFIX + key).toLowerCase());
  }

  private static String option(Configuration conf, String key) {
    String v = conf.get(OPTION_PREFIX + key);
    if (v == null) {
      v = conf.get((OPTION_PREFIX + key).toLowerCase());
    }
    return v == null || v.isBlank() ? null : v.trim();
  }
}
