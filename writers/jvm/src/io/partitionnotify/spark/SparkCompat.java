package io.partitionnotify.spark;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.reflect.Method;

import org.apache.hadoop.mapreduce.JobContext;
import org.apache.spark.internal.io.HadoopMapReduceCommitProtocol;

/**
 * What differs between the Spark lines this one jar supports: Spark 3.5 (Scala 2.12) and
 * Spark 4.x (Scala 2.13). Their {@code commitJob} takes a {@code scala.collection.Seq}
 * (2.12) or a {@code scala.collection.immutable.Seq} (2.13), so the protocol overrides
 * both and calls the parent's through a method handle found here at run time.
 *
 * <p>Any other Spark version is unsupported: the protocol then delegates every call to
 * Spark's own protocol unchanged, so a job never fails because of this jar.
 */
final class SparkCompat {
  /** Pretends another Spark version (tests of the unsupported path). */
  static final String VERSION_OVERRIDE = "partitionnotify.sparkVersion";
  static final String SUPPORTED = "3.5.x and 4.x";

  private SparkCompat() {}

  /**
   * @param superCommitJob what {@link #findSuperCommitJob} found
   * @return null if this Spark is supported, else why not (for one ERROR line)
   */
  static String unsupportedReason(MethodHandle superCommitJob) {
    String version = sparkVersion();
    if (!supportedVersion(version)) {
      return "Spark " + version + " is not supported (supported: " + SUPPORTED + ")";
    }
    if (superCommitJob == null) {
      return "Spark " + version + " has no HadoopMapReduceCommitProtocol.commitJob(JobContext, Seq)";
    }
    return null;
  }

  static boolean supportedVersion(String version) {
    String[] p = version.split("[.-]");
    if (p.length < 2) {
      return false;
    }
    try {
      int major = Integer.parseInt(p[0]);
      int minor = Integer.parseInt(p[1]);
      return (major == 3 && minor == 5) || major == 4;
    } catch (NumberFormatException e) {
      return false;
    }
  }

  /** {@code org.apache.spark.SPARK_VERSION}: a package object, which Java cannot name. */
  static String sparkVersion() {
    String forced = System.getProperty(VERSION_OVERRIDE);
    if (forced != null && !forced.isBlank()) {
      return forced.trim();
    }
    try {
      Class<?> pkg = Class.forName("org.apache.spark.package$");
      Object module = pkg.getField("MODULE$").get(null);
      return String.valueOf(pkg.getMethod("SPARK_VERSION").invoke(module));
    } catch (ReflectiveOperationException | LinkageError e) {
      return "unknown (" + e + ")";
    }
  }

  /**
   * The parent's {@code commitJob}, callable as {@code (protocol, JobContext, Object)}, or
   * null when its shape is not one we know.
   *
   * @param lookup the protocol's own lookup: only it may call its super methods
   */
  static MethodHandle findSuperCommitJob(MethodHandles.Lookup lookup) {
    try {
      for (Method m : HadoopMapReduceCommitProtocol.class.getDeclaredMethods()) {
        Class<?>[] params = m.getParameterTypes();
        if (m.getName().equals("commitJob") && params.length == 2 && params[0] == JobContext.class
            && params[1].isAssignableFrom(scala.collection.immutable.List.class)) {
          MethodType type = MethodType.methodType(void.class, JobContext.class, params[1]);
          return lookup
              .findSpecial(HadoopMapReduceCommitProtocol.class, "commitJob", type,
                  NotifyingCommitProtocol.class)
              .asType(MethodType.methodType(
                  void.class, NotifyingCommitProtocol.class, JobContext.class, Object.class));
        }
      }
    } catch (ReflectiveOperationException | RuntimeException | LinkageError e) {
      return null;
    }
    return null;
  }
}
