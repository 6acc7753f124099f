package io.partitionnotify.spark;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * Keeps the spool through Spark's delete before a static overwrite. Spark deletes the
 * whole output path of an overwrite of the whole table, and the default spool
 * ({@code <table>/_partition_notify}) is inside it: the manifests of earlier jobs that serve
 * has not picked up yet would go with it, and their partitions would never be announced.
 */
final class SpoolKeeper {
  private SpoolKeeper() {}

  /**
   * The spools a delete of the output {@code path} must keep: the table's default spool and
   * the configured one (either may be inside the deleted directory).
   */
  static List<Path> spools(FileSystem fs, String path, Configuration conf) {
    List<Path> out = new ArrayList<>();
    for (Path p : List.of(Delivery.spoolDir(Settings.from(conf), path),
        new Path(Delivery.tableRoot(new Path(path)), Delivery.SPOOL))) {
      try {
        out.add(fs.makeQualified(p));
      } catch (IllegalArgumentException e) {
        // A spoolDir on another filesystem: this delete cannot reach it.
      }
    }
    return out;
  }

  /** @return the spool of {@code keep} strictly inside {@code dir}, or null if none is */
  static Path inside(Path dir, List<Path> keep) {
    for (Path k : keep) {
      for (Path p = k.getParent(); p != null; p = p.getParent()) {
        if (p.equals(dir)) {
          return k;
        }
      }
    }
    return null;
  }

  /**
   * Deletes what {@code fs.delete(dir, true)} would, except {@code spool} and the
   * directories above it (their other children go).
   *
   * @return true when everything but the spool is gone, as Spark expects of deleteWithJob
   */
  static boolean deleteAllBut(FileSystem fs, Path dir, Path spool) throws IOException {
    boolean ok = true;
    for (FileStatus child : fs.listStatus(dir)) {
      Path c = fs.makeQualified(child.getPath());
      if (c.equals(spool)) {
        continue;
      }
      if (child.isDirectory() && inside(c, List.of(spool)) != null) {
        ok &= deleteAllBut(fs, c, spool);
      } else if (!fs.delete(c, true) && fs.exists(c)) {
        ok = false;
      }
    }
    return ok;
  }
}
