"""``partition-notify spark-conf`` and ``partition-notify commits ...``.

``spark-conf`` prints the flags that turn the Spark commit protocol on for a
``spark-submit``, ``pyspark`` or ``spark-sql`` run (or the lines of a
``spark-defaults.conf``). ``commits apply`` announces a commit manifest by
hand (one the JVM logged because neither ``serve`` nor the filesystem took
it); ``commits scan`` runs serve's manifest pick-up once (``--retry-ignored``:
the manifests kept because no table matched, listed by ``commits ignored``).
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import re
import shlex
import sys
from dataclasses import asdict
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from partition_notify.cli.common import plain
from partition_notify.core.errors import ConfigurationError, InvalidManifestError
from partition_notify.core.limits import URI_SCHEME

if TYPE_CHECKING:
    from partition_notify.cli.common import SubParsers

PROTOCOL_CLASS = "io.partitionnotify.spark.NotifyingCommitProtocol"
LISTENER_CLASS = "io.partitionnotify.spark.NotifyListener"
JAR_NAME = "partition-notify-spark.jar"
TARGETS = ("spark-submit", "pyspark", "spark-sql", "properties")
#: The Spark lines the one jar supports (SparkCompat.SUPPORTED in writers/jvm says the same).
SUPPORTED_SPARK = "3.5.x and 4.x"


def jar_path() -> Path:
    """The commit-protocol jar shipped as package data of ``partition_notify.writers``: one jar for
    Spark 3.5 (Scala 2.12) and 4.x (Scala 2.13)."""
    jar = Path(str(resources.files("partition_notify.writers") / "jvm" / JAR_NAME))
    if not jar.is_file():
        raise ConfigurationError(
            f"{jar} is missing: build it with `bash scripts/build_jvm.sh` (needs a JDK)"
        )
    return jar


_EXPECTED_URL = "expected http(s)://host:port of `partition-notify serve`"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
#: RFC 2396 host names, as java.net.URI reads them: no '_', no label starting or ending in '-'.
_HOST_NAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*\.?")


def _host_problem(host: str) -> str | None:
    if host.startswith("["):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return f"host {host!r} is not an IPv6 address"
        return None
    labels = host.rstrip(".").split(".")
    ipv4 = len(labels) == 4 and all(x.isascii() and x.isdigit() and int(x) <= 255
                                    for x in labels)
    # URI takes a dotted name whose last label starts with a digit only as an IPv4 address.
    if not _HOST_NAME.fullmatch(host) or (len(labels) > 1 and labels[-1][:1].isdigit()
                                          and not ipv4):
        return (f"host {host!r} is not a host name (letters, digits and '-' in labels "
                "joined by dots; no '_') nor an IP address")
    return None


def serve_url_problem(value: str) -> str | None:
    """Why the Spark jar would refuse ``value`` as ``spark.partitionnotify.serveUrl``, else
    None. The jar (Settings.urlProblem) reads it with java.net.URI, which finds no host
    in ``http://pn_serve:8080`` or ``http://pn:80x``: every write would be refused, so
    spark-conf must not print such a URL. A port out of range, which URI lets through
    and the connection then fails on, is refused too."""
    if any(c.isspace() for c in value):
        return ("it contains whitespace (an inline '# comment' in spark-defaults.conf is "
                f"part of the value); {_EXPECTED_URL}")
    scheme, sep, rest = value.partition("://")
    if scheme not in ("http", "https") or not sep:  # URI compares the scheme exactly
        return _EXPECTED_URL
    # Not urlsplit: it raises on a bracket it cannot match instead of saying what is wrong.
    host_port = re.split(r"[/?#]", rest, maxsplit=1)[0].rpartition("@")[2]
    if host_port.startswith("["):
        end = host_port.find("]") + 1
        host, port = host_port[:end], host_port[end:]
        if not end or (port and not port.startswith(":")):
            return f"host {host_port!r} is not [IPv6 address]:port; {_EXPECTED_URL}"
        port = port[1:]
    else:
        host, _, port = host_port.partition(":")
    if not host:
        return f"it has no host; {_EXPECTED_URL}"
    problem = _host_problem(host)
    if problem:
        return problem
    if port and not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
        return f"port {port!r} is not a port number from 1 to 65535"
    return None


def _url(value: str) -> str:
    problem = serve_url_problem(value)
    if problem:
        raise argparse.ArgumentTypeError(f"--serve-url {value!r}: {problem}")
    return value.rstrip("/")


def _conf_spool_dir(value: str) -> str:
    """The jar refuses a relative spoolDir (Preflight.checkSpoolDir, Hadoop's
    ``Path.isAbsolute``): serve could not find it, so every write would be refused."""
    scheme = URI_SCHEME.match(value)
    path = value[scheme.end():] if scheme else value
    if path.startswith("//"):  # scheme://authority/path
        path = path[2:].partition("/")[1]
    if value and not path.startswith("/"):
        raise argparse.ArgumentTypeError(
            f"--spool-dir {value!r}: expected an absolute path or URI (/srv/spool, "
            "hdfs://nn:8020/spool): serve scans it (PN_SPARK_SPOOL_DIRS), and the jar "
            "refuses every write given a relative one")
    return value


def supported_spark(version: str) -> bool:
    """Whether the jar supports this Spark version (e.g. ``3.5.2``, ``4.0.1``)."""
    parts = version.strip().split(".")
    if len(parts) < 2 or not (parts[0].isdigit() and parts[1].split("-")[0].isdigit()):
        return False
    major, minor = int(parts[0]), int(parts[1].split("-")[0])
    return (major, minor) == (3, 5) or major == 4


def _spark_version(value: str) -> str:
    if not supported_spark(value):
        raise argparse.ArgumentTypeError(
            f"--spark-version {value!r}: the commit protocol supports Spark {SUPPORTED_SPARK} "
            "(on another version it writes as Spark does and announces nothing)"
        )
    return value.strip()


def spark_settings(serve_url: str | None, spool_dir: str | None) -> dict[str, str]:
    """The Spark settings, in the order they are printed."""
    conf = {
        "spark.sql.sources.commitProtocolClass": PROTOCOL_CLASS,
        "spark.sql.queryExecutionListeners": LISTENER_CLASS,
    }
    if serve_url:
        conf["spark.partitionnotify.serveUrl"] = serve_url
    if spool_dir:
        conf["spark.partitionnotify.spoolDir"] = spool_dir
    return conf


def cmd_spark_conf(args: argparse.Namespace) -> int:
    jar = jar_path()
    conf = spark_settings(args.serve_url, args.spool_dir)
    if args.target == "properties":
        print(f"spark.jars {jar}")
        for k, v in conf.items():
            print(f"{k} {v}")
    else:
        flags = ["--jars", str(jar)]
        for k, v in conf.items():
            flags += ["--conf", f"{k}={v}"]
        print(shlex.join(flags))
    # The writer token is a secret: the driver reads it from its environment.
    print("# the driver reads the writer token from PN_WRITER_TOKEN", file=sys.stderr)
    return 0


def cmd_commits_apply(args: argparse.Namespace) -> int:
    from partition_notify.cli.common import open_app as _app
    from partition_notify.writers.commit_manifest import apply_manifest, parse_manifest

    manifest = parse_manifest(_read(args.file))
    with _app(args) as app:
        outcome = apply_manifest(app.publisher, manifest, default_fs=app.settings.default_fs)
    print(json.dumps(asdict(outcome)))
    return 0


def cmd_commits_scan(args: argparse.Namespace) -> int:
    from partition_notify.cli.common import open_app as _app
    from partition_notify.http.store import HttpStore
    from partition_notify.writers.commit_locations import check_spool_dirs
    from partition_notify.writers.commit_spool import scan

    with _app(args) as app:
        s = app.settings
        check_spool_dirs(_extra(s.spark_spool_dirs))
        stats = scan(app.publisher, _extra(s.spark_spool_dirs) + list(args.dirs),
                     keys=HttpStore(app.store).signing_keys(), default_fs=s.default_fs,
                     deadline_seconds=s.spark_spool_scan_deadline_seconds,
                     retry_ignored=args.retry_ignored)
    print(json.dumps(asdict(stats)))
    return 1 if stats.rejected or stats.failed else 0


def cmd_commits_ignored(args: argparse.Namespace) -> int:
    from partition_notify.cli.common import open_app as _app
    from partition_notify.writers.commit_spool import set_aside, spool_dirs

    with _app(args) as app:
        s = app.settings
        dirs = spool_dirs(app.publisher, _extra(s.spark_spool_dirs) + list(args.dirs),
                          s.default_fs)
        for path in set_aside(dirs):
            print(path)
    return 0


def _spool_dir(value: str) -> str:
    """A spool directory named on the command line: an absolute local one that is there
    (a typo, a file or ``hdfs://`` scanned nothing and said so with an empty result)."""
    from partition_notify.writers.commit_spool import local_dir

    path = local_dir(value) if value.startswith(("/", "file:")) else None
    if path is None:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not an absolute local directory (a path or a file: URI)")
    if not path.is_dir():
        state = "not a directory" if path.exists() else "not there"
        raise argparse.ArgumentTypeError(
            f"{value!r} is {state}; expected a directory Spark spools commit manifests into")
    return value


def _extra(dirs: str) -> list[str]:
    return [d for d in dirs.split(",") if d.strip()]


def _read(path: str) -> bytes:
    """At most one byte more than a manifest may have: a device, a data file or an
    endless pipe given by mistake is refused, not read into memory to its end.
    Pipes stay allowed (``-``, ``<(...)``); the spool scan is stricter."""
    from partition_notify.writers.commit_manifest import MAX_MANIFEST_BYTES

    try:
        if path == "-":
            raw = sys.stdin.buffer.read(MAX_MANIFEST_BYTES + 1)
        else:
            # A FIFO nobody writes would block a plain open for ever; opened
            # non-blocking, a read of it ends at once (no writer: end of file).
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            os.set_blocking(fd, True)
            with open(fd, "rb") as f:
                raw = f.read(MAX_MANIFEST_BYTES + 1)
    except OSError as exc:
        raise ConfigurationError(f"cannot read manifest {path!r}: {exc.strerror}") from None
    if len(raw) > MAX_MANIFEST_BYTES:
        raise InvalidManifestError(
            f"manifest is more than {MAX_MANIFEST_BYTES} bytes, the most a manifest may have")
    return raw


def add_parsers(sub: SubParsers, parser_class: type[argparse.ArgumentParser]) -> None:
    sp = sub.add_parser(
        "spark-conf",
        help="print the flags that make every Spark write announce its partitions",
        description=plain(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sp.set_defaults(fn=cmd_spark_conf)
    sp.add_argument("--for", dest="target", choices=TARGETS, default="spark-submit",
                    help="flags for this command, or spark-defaults.conf lines (properties); "
                         "default %(default)s")
    sp.add_argument("--serve-url", type=_url, help="http(s)://host:port of partition-notify serve")
    sp.add_argument("--spark-version", type=_spark_version,
                    help=f"the Spark the flags are for: refused unless {SUPPORTED_SPARK} "
                    "(one jar serves both)")
    sp.add_argument("--spool-dir", type=_conf_spool_dir,
                    help="where manifests go when serve is unreachable "
                    "(default: _partition_notify/ under each output path)")

    grp = sub.add_parser(
        "commits", help="Spark commit manifests", description="Spark commit manifests"
    ).add_subparsers(dest="commits_command", metavar="COMMAND", required=True,
                     parser_class=parser_class)
    sp = grp.add_parser("apply", help="announce one manifest (idempotent by job id)")
    sp.set_defaults(fn=cmd_commits_apply, command="commits apply")
    sp.add_argument("file", help="manifest file, or - for stdin")
    sp = grp.add_parser("scan", help="pick up spooled manifests once (what serve does)")
    sp.set_defaults(fn=cmd_commits_scan, command="commits scan")
    sp.add_argument("dirs", nargs="*", type=_spool_dir, help="extra spool directories")
    sp.add_argument("--retry-ignored", action="store_true",
                    help="apply the manifests set aside as ignored (e.g. after registering "
                    "their table) instead of the new ones")
    sp = grp.add_parser("ignored", help="list the manifests kept because no table matched")
    sp.set_defaults(fn=cmd_commits_ignored, command="commits ignored")
    sp.add_argument("dirs", nargs="*", type=_spool_dir, help="extra spool directories")
