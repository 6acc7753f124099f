package io.partitionnotify.spark;

import java.io.IOException;
import java.io.OutputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;

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

  private Delivery() {}

  static void deliver(PendingCommits.Pending p) {
    String body;
    try {
      body = p.manifest.toJson();
    } catch (RuntimeException e) {
      LOG.error("partition-notify: job {}: {}", p.manifest.jobId, e.toString());
      return;
    }
    String why = "no spark.partitionnotify.serveUrl";
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

  /** @return null on success, else why it failed (never the token). */
  private static String post(PendingCommits.Pending p, String body) {
    Duration timeout = Duration.ofMillis(p.settings.timeoutMs);
    try {
      // HTTP/1.1: the default h2c upgrade offer on a POST makes HTTP/1.1 servers
      // (uvicorn/h11) drop the body.
      HttpClient client = HttpClient.newBuilder()
          .version(HttpClient.Version.HTTP_1_1)
          .connectTimeout(timeout)
          .build();
      HttpRequest.Builder req = HttpRequest.newBuilder(URI.create(base(p.settings.serveUrl) + ROUTE))
          .timeout(timeout)
          .header("Content-Type", "application/json")
          .header("Idempotency-Key", p.manifest.jobId)
          .POST(HttpRequest.BodyPublishers.ofString(body, StandardCharsets.UTF_8));
      if (p.settings.token != null) {
        req.header("Authorization", "Bearer " + p.settings.token);
      }
      HttpResponse<String> resp = client.send(req.build(), HttpResponse.BodyHandlers.ofString());
      if (resp.statusCode() / 100 == 2) {
        LOG.info("partition-notify: job {} announced ({} partition(s)): HTTP {}",
            p.manifest.jobId, p.manifest.dirs.size(), resp.statusCode());
        return null;
      }
      String text = resp.body();
      return "serve answered HTTP " + resp.statusCode() + ": "
          + (text.length() > 300 ? text.substring(0, 300) : text);
    } catch (IOException | RuntimeException e) {
      return "serve unreachable: " + e;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return "interrupted while posting";
    }
  }

  private static String base(String url) {
    return Manifest.trimSlash(url);
  }

  /** Write + rename, so the scanner never reads half a manifest. */
  static Path spool(PendingCommits.Pending p, String body) throws IOException {
    Path dir = p.settings.spoolDir != null
        ? new Path(p.settings.spoolDir)
        : new Path(p.manifest.outputPath, SPOOL);
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
