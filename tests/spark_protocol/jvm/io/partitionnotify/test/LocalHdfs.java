package io.partitionnotify.test;

import java.io.IOException;
import java.net.URI;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.RawLocalFileSystem;

/**
 * Test only: an {@code hdfs://host[:port]/x} filesystem that is the local directory
 * {@code /x}. Spark then reports {@code hdfs://} paths as on a cluster (with the port
 * as written, or none), which is what location matching must handle; no name node
 * needed. Registered with {@code fs.hdfs.impl} in the session's Hadoop configuration.
 */
public class LocalHdfs extends RawLocalFileSystem {
  private static final int DEFAULT_PORT = 8020;
  private static final URI BEFORE_INIT = URI.create("hdfs://localhost:" + DEFAULT_PORT);
  /** Null while the parent's constructor runs (it asks for the URI): see getUri. */
  private URI uri;

  @Override
  public void initialize(URI name, Configuration conf) throws IOException {
    uri = URI.create("hdfs://" + name.getHost() + ":"
        + (name.getPort() == -1 ? DEFAULT_PORT : name.getPort()));
    super.initialize(name, conf);
  }

  @Override
  public URI getUri() {
    return uri == null ? BEFORE_INIT : uri;
  }

  @Override
  public String getScheme() {
    return "hdfs";
  }

  @Override
  protected int getDefaultPort() {
    return DEFAULT_PORT;
  }

  /** The port made explicit, without the DNS look-up Hadoop's canonical form does. */
  @Override
  protected URI canonicalizeUri(URI u) {
    if (u.getPort() != -1 || u.getHost() == null) {
      return u;
    }
    return URI.create(u.getScheme() + "://" + u.getHost() + ":" + DEFAULT_PORT + u.getRawPath());
  }
}
