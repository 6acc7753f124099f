package io.partitionnotify.spark;

import java.io.IOException;
import java.io.OutputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Hands a committed job's manifest to partition-notify: POST to {@code serve}'s HTTP write
 * API; if that is not configured or fails, write it durably next to the data for
 * {@code serve} to pick up. Never throws: the user's data is already committed.
 */
final class Delivery {
  private static final Logger LOG = LoggerFactory.getLogger(Delivery.class);
  static final String SPOOL = "_partition_notify";
  static final String ROUTE = "/v1/commits";
  private static final ObjectMapper JSON = new ObjectMapper();

  private Delivery() {}

  static void deliver(PendingCommits.Pending p) {
    String body;
    try {
      body = p.manifest.toJson();
    } catch (RuntimeException e) {
      LOG.error("partition-notify: job {}: {}", p.manifest.jobId, e.toString());
      return;
    }
    String why = p.settings.serveUrlProblem != null
        ? p.settings.serveUrlProblem : "no spark.partitionnotify.serveUrl";
    if (p.settings.serveUrl != null) {
      why = post(p, body);
      if (why == null) {
        return;
      }
    }
    Path target = null;
    try {
      target = spool(p, body);
      LOG.warn("partition-notify: job {}: {}; manifest written to {} for serve to pick up",
          p.manifest.jobId, why, target);
    } catch (IOException | RuntimeException e) {
      // Neither the service nor the filesystem took it: the job has already succeeded (its
      // data and catalog entries are committed), so log everything needed to replay it.
      LOG.error("partition-notify: job {}: announcement NOT recorded ({}; spool {} failed: {}). "
          + "Replay with `partition-notify commits apply -` and this manifest: {}",
          p.manifest.jobId, why, target, e.toString(), body);
    }
  }

  /**
   * One client per connect timeout for the driver's life, not one per commit: a client
   * starts its own selector thread, and a kept-alive connection to serve spares the next
   * commit the TCP set-up. The deadline stays per request ({@link #post}).
   */
  private static final Map<Integer, HttpClient> CLIENTS = new ConcurrentHashMap<>();

  static HttpClient client(int timeoutMs) {
    // HTTP/1.1: the default h2c upgrade offer on a POST makes HTTP/1.1 servers
    // (uvicorn/h11) drop the body.
    return CLIENTS.computeIfAbsent(timeoutMs, ms -> HttpClient.newBuilder()
        .version(HttpClient.Version.HTTP_1_1)
        .connectTimeout(Duration.ofMillis(ms))
        .build());
  }

  /**
   * At most two tries within one deadline of {@code timeoutMs}. A second try follows an I/O
   * failure that was not the deadline: a kept-alive connection serve closed (its idle
   * timeout, a restart) fails the POST that reuses it at that very moment, and the next
   * try gets a new connection. Safe to repeat: serve applies a job once (the job id is the
   * Idempotency-Key and the job's record).
   *
   * @return null on success, else why it failed (never the token).
   */
  private static String post(PendingCommits.Pending p, String body) {
    long deadline = System.nanoTime() + p.settings.timeoutMs * 1_000_000L;
    HttpClient client = client(p.settings.timeoutMs);
    String why = "serve unreachable: no time left";
    for (int attempt = 1; attempt <= 2; attempt++) {
      long leftMs = (deadline - System.nanoTime()) / 1_000_000L;
      if (leftMs <= 0) {
        return why;
      }
      try {
        HttpResponse<String> resp = client.send(request(p, body, leftMs),
            HttpResponse.BodyHandlers.ofString());
        if (resp.statusCode() / 100 == 2) {
          logAnswer(p, resp.statusCode(), resp.body());
          return null;
        }
        String text = resp.body();
        return "serve answered HTTP " + resp.statusCode() + ": "
            + (text.length() > 300 ? text.substring(0, 300) : text);
      } catch (HttpTimeoutException e) {
        return "serve unreachable: " + e;  // the deadline is spent
      } catch (IOException e) {
        why = "serve unreachable: " + e;
      } catch (RuntimeException e) {
        return "serve unreachable: " + e;
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return "interrupted while posting";
      }
    }
    return why;
  }

  private static HttpRequest request(PendingCommits.Pending p, String body, long timeoutMs) {
    HttpRequest.Builder req = HttpRequest.newBuilder(URI.create(base(p.settings.serveUrl) + ROUTE))
        .timeout(Duration.ofMillis(timeoutMs))
        .header("Content-Type", "application/json")
        .header("Idempotency-Key", p.manifest.jobId)
        .POST(HttpRequest.BodyPublishers.ofString(body, StandardCharsets.UTF_8));
    if (p.settings.token != null) {
      req.header("Authorization", "Bearer " + p.settings.token);
    }
    return req.build();
  }

  /** Says what serve did with the job (its answer's status), not just that HTTP succeeded. */
  static void logAnswer(PendingCommits.Pending p, int code, String body) {
    String status = "unknown";
    String table = p.manifest.table;
    try {
      JsonNode doc = JSON.readTree(body);
      status = doc.path("status").asText("unknown");
      table = doc.path("table").asText(table);
    } catch (IOException | RuntimeException e) {
      status = "unknown (unreadable answer)";
    }
    String job = p.manifest.jobId;
    int n = p.manifest.dirs.size();
    if ("announced".equals(status)) {
      LOG.info("partition-notify: job {} announced {} partition(s) of {} (HTTP {})",
          job, n, table, code);
    } else if ("duplicate".equals(status)) {
      LOG.info("partition-notify: job {} was already announced (duplicate, HTTP {})", job, code);
    } else if ("ignored".equals(status)) {
      LOG.warn("partition-notify: job {} NOT announced: serve ignored it, no registered table "
          + "matches {} at {} (register the table with this location); HTTP {}",
          job, table == null ? "a table" : table, p.manifest.outputPath, code);
    } else {
      LOG.warn("partition-notify: job {} ({} partition(s) at {}): serve answered HTTP {} with "
          + "status {}", job, n, p.manifest.outputPath, code, status);
    }
  }

  private static String base(String url) {
    return Manifest.trimSlash(url);
  }

  /**
   * The table directory above a write into one of its partition directories
   * ({@code .../orders/datestamp=X} with {@code partitionBy("region")}, or a non-partitioned
   * write into {@code .../orders/datestamp=X/region=us}): serve scans the spool of each
   * registered table location, not of its partition directories.
   */
  static Path tableRoot(Path output) {
    Path p = output;
    while (p.getParent() != null && p.getName().indexOf('=') > 0) {
      p = p.getParent();
    }
    return p;
  }

  static Path spoolDir(Settings settings, String outputPath) {
    return settings.spoolDir != null
        ? new Path(settings.spoolDir)
        : new Path(tableRoot(new Path(outputPath)), SPOOL);
  }

  /** Write + rename, so the scanner never reads half a manifest. */
  static Path spool(PendingCommits.Pending p, String body) throws IOException {
    Path dir = spoolDir(p.settings, p.manifest.outputPath);
    FileSystem fs = dir.getFileSystem(p.conf);
    fs.mkdirs(dir);
    Path tmp = new Path(dir, "." + p.manifest.jobId + ".json.tmp");
    Path done = new Path(dir, p.manifest.jobId + ".json");
    try (OutputStream out = fs.create(tmp, true)) {
      out.write(SpoolSignature.signed(body, p.settings.token).getBytes(StandardCharsets.UTF_8));
    }
    if (!fs.rename(tmp, done)) {
      fs.delete(tmp, false);
      throw new IOException("could not rename " + tmp + " to " + done);
    }
    return done;
  }
}
