"""``spark-conf --serve-url`` prints only a URL the Spark jar accepts.

The jar reads ``spark.partitionnotify.serveUrl`` with ``java.net.URI`` and refuses
every write when it finds no host (README: "A setting the jar cannot use (a
malformed serveUrl, ...) refuses the write"). ``spark-conf`` checked only the
scheme with Python's ``urlsplit``, so ``http://pn_serve:8080`` (a Compose service
name), ``http://pn:80x`` or ``http://pn :8080`` were printed as flags that then
refused every Spark write of the cluster. Here the jar's own check
(``Settings.urlProblem``, called by reflection in a real JVM) judges each URL.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from partition_notify.cli import main

#: Refused by the jar (no host, whitespace, URI syntax), so by spark-conf too.
JAR_REFUSES = ["http://pn_serve:8080", "http://pn:80x", "http://pn :8080", "http://:8080",
               "http://pn:8080:90", "http://a.1b:8080", "HTTP://pn:8080", "http://[zz]:8080",
               "http://pn:-1", "http://ü:8080"]
#: Accepted by the jar but no port to connect to: spark-conf refuses them as well.
NO_PORT = ["http://pn:99999", "http://pn:0"]
GOOD = ["http://pn:8080", "https://pn.example.com:443", "http://10.0.0.1:8080",
        "http://[::1]:8080", "http://pn-serve.", "http://pn:8080/", "http://u:p@pn:80"]

CHECK = """
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
public class UrlCheck {
  public static void main(String[] args) throws Exception {
    Method url = Class.forName("io.partitionnotify.spark.Settings")
        .getDeclaredMethod("urlProblem", String.class);
    Method spool = Class.forName("io.partitionnotify.spark.Preflight")
        .getDeclaredMethod("checkSpoolDir", String.class);
    url.setAccessible(true);
    spool.setAccessible(true);
    for (String a : args) {
      String value = a.substring(a.indexOf(':') + 1);
      if (a.startsWith("url:")) {
        System.out.println(url.invoke(null, value) == null ? "ok" : "refused");
        continue;
      }
      try {
        spool.invoke(null, value);
        System.out.println("ok");
      } catch (InvocationTargetException e) {  // CommitRefused: the write would be refused
        System.out.println("refused");
      }
    }
  }
}
"""


def _jar_verdicts(jar: Path, tmp_path: Path, args: list[str]) -> list[str]:
    """The jar's verdict on each ``url:<serveUrl>`` or ``spool:<spoolDir>``."""
    import pyspark  # the jar's Settings class refers to Hadoop's Configuration

    source = tmp_path / "UrlCheck.java"
    source.write_text(CHECK)
    cp = f"{jar}:{Path(pyspark.__file__).parent / 'jars'}/*"
    run = subprocess.run(["java", "-cp", cp, str(source), *args],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout.split()


def _spark_conf(url: str, capsys: pytest.CaptureFixture[str],
                flag: str = "--serve-url") -> tuple[int, str]:
    capsys.readouterr()
    try:
        code = main(["spark-conf", "--for", "properties", flag, url])
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out + err


def test_spark_conf_prints_only_urls_the_jar_accepts(
    jar: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    urls = JAR_REFUSES + NO_PORT + GOOD
    verdicts = dict(zip(urls, _jar_verdicts(jar, tmp_path, [f"url:{u}" for u in urls]),
                        strict=True))
    assert {u for u, v in verdicts.items() if v == "refused"} == set(JAR_REFUSES), verdicts
    for url in JAR_REFUSES + NO_PORT:
        code, text = _spark_conf(url, capsys)
        lines = text.splitlines()
        assert code == 2 and len(lines) == 1, (url, text)
        assert f"--serve-url {url!r}: " in lines[0] and "invalid" not in lines[0], lines[0]
    for url in GOOD:
        code, text = _spark_conf(url, capsys)
        assert code == 0 and f"spark.partitionnotify.serveUrl {url.rstrip('/')}\n" in text, (
            url, text)


#: The jar refuses a relative spoolDir (Preflight.checkSpoolDir: Hadoop's Path.isAbsolute).
SPOOL_REFUSED = ["spool", "rel/spool", "./spool", "file:spool"]
SPOOL_GOOD = ["/srv/spool", "file:/srv/spool", "file:///srv/spool", "hdfs://nn:8020/spool"]


def test_spark_conf_prints_only_spool_dirs_the_jar_accepts(
    jar: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--spool-dir rel/spool`` was printed as is: every write was then refused."""
    dirs = SPOOL_REFUSED + SPOOL_GOOD
    verdicts = dict(zip(dirs, _jar_verdicts(jar, tmp_path, [f"spool:{d}" for d in dirs]),
                        strict=True))
    assert {d for d, v in verdicts.items() if v == "refused"} == set(SPOOL_REFUSED), verdicts
    for spool in SPOOL_REFUSED:
        code, text = _spark_conf(spool, capsys, "--spool-dir")
        lines = text.splitlines()
        assert code == 2 and len(lines) == 1, (spool, text)
        assert f"--spool-dir {spool!r}: expected an absolute path or URI" in lines[0], lines[0]
    for spool in SPOOL_GOOD:
        code, text = _spark_conf(spool, capsys, "--spool-dir")
        assert code == 0 and f"spark.partitionnotify.spoolDir {spool}\n" in text, (spool, text)
