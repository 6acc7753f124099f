package io.partitionnotify.spark;

/**
 * A write partition-notify refuses before Spark writes or deletes anything: a setting it
 * cannot use, a spool it cannot write. The message is one line naming the setting (or
 * location), the value and what was expected, and is the first line of Spark's error.
 *
 * <p>An {@link IllegalArgumentException} because PySpark turns exactly that into its own
 * one-line {@code IllegalArgumentException} (no Java stack); {@code writers.spark_errors.
 * commit_protocol_errors()} turns it into partition-notify's {@code ConfigurationError}.
 */
public final class CommitRefused extends IllegalArgumentException {
  private static final long serialVersionUID = 1L;
  static final String PREFIX = "partition-notify refused the write: ";

  CommitRefused(String message) {
    super(PREFIX + message);
  }

  CommitRefused(String message, Throwable cause) {
    super(PREFIX + message, cause);
  }
}
