"""The wheel and sdist, built from a fresh clone, and the wheel installed alone (issue 23).

A fresh ``git clone`` of HEAD (nothing untracked, no jar, no .venv) is built
with ``python -m build``: the sdist from the checkout (setup.py compiles
writers/jvm), then the wheel from that sdist, as pip does for an sdist. Both
are read as archives; then the wheel goes into a new venv with nothing else
(no extras), where the CLI and an embedded round trip must work, a broker or
PostgreSQL URL must name its extra, and a third-party transport installed
next to it is found through its entry point.

Build isolation stays on: the build's own setuptools (>=77) is what users get.
pyspark's jars for javac come from this test's interpreter (PN_BUILD_PYTHON).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
NAME = "partition_notify"
#: Data files the package reads at run time, relative to partition_notify/.
DATA = ("py.typed", "store/migrations/env.py", "store/migrations/script.py.mako")
#: Every step here is a build or a pip install on a shared, busy machine.
STEP_TIMEOUT = 600


def _run(cmd: list[str], *, cwd: Path, env: dict[str, str] | None = None,
         ok: bool = True) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                         timeout=STEP_TIMEOUT)
    if ok:
        assert out.returncode == 0, f"{cmd}: {out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


@dataclass(frozen=True)
class Built:
    clone: Path
    wheel: Path
    sdist: Path


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    clone = tmp_path_factory.mktemp("clone") / "partition-notify"
    _run(["git", "clone", "-q", str(ROOT), str(clone)], cwd=ROOT)
    dist = clone.parent / "dist"
    env = {**os.environ, "PN_BUILD_PYTHON": sys.executable}
    _run([sys.executable, "-m", "build", "--outdir", str(dist), str(clone)], cwd=clone, env=env)
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    return Built(clone, wheel, sdist)


@pytest.fixture(scope="module")
def venv(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new venv holding the wheel and its required dependencies only."""
    home = tmp_path_factory.mktemp("venv")
    _run([sys.executable, "-m", "venv", str(home)], cwd=home)
    _run([str(home / "bin" / "python"), "-m", "pip", "install", "-q",
          "--disable-pip-version-check", str(built.wheel)], cwd=home)
    return home


def _transports(venv: Path, tmp_path: Path, urls: list[str]) -> dict[str, Any]:
    """create_transport(url) in the clean venv: "module:Class" built, or the ConfigurationError."""
    code = (
        "import json, sys\n"
        "from partition_notify import ConfigurationError\n"
        "from partition_notify.transports import create_transport\n"
        "out = {'imported before use': [m for m in sys.modules if m.startswith('pn_memo')]}\n"
        f"for url in {urls!r}:\n"
        "    try:\n"
        "        t = create_transport(url)\n"
        "        out[url] = type(t).__module__ + ':' + type(t).__name__\n"
        "    except ConfigurationError as exc:\n"
        "        out[url] = str(exc)\n"
        "print(json.dumps(out))\n"
    )
    got = _py(venv, code, tmp_path)
    assert got.returncode == 0, got.stderr[-2000:]
    result: dict[str, Any] = json.loads(got.stdout)
    return result


def _py(venv: Path, code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # cwd outside the clone and no PYTHONPATH: only what the wheel installed.
    return _run([str(venv / "bin" / "python"), "-c", code], cwd=cwd,
                env={"PATH": f"{venv / 'bin'}:/usr/bin:/bin"}, ok=False)


def test_the_wheel_holds_only_partition_notify_with_jars_and_data(built: Built) -> None:
    with zipfile.ZipFile(built.wheel) as whl:
        names = whl.namelist()
    tops = {n.split("/", 1)[0] for n in names}
    assert tops == {NAME, f"{NAME}-0.1.0.dist-info"}, sorted(tops)
    jars = [n for n in names if n.startswith(f"{NAME}/writers/jvm/") and n.endswith(".jar")]
    assert jars, "the wheel carries no Spark jar"
    with zipfile.ZipFile(built.wheel) as whl:
        for jar in jars:
            with whl.open(jar) as fh, zipfile.ZipFile(fh) as inner:
                assert "io/partitionnotify/spark/NotifyingCommitProtocol.class" in (
                    inner.namelist()), jar
    for data in DATA:
        assert f"{NAME}/{data}" in names, data
    assert any(n.startswith(f"{NAME}/store/migrations/versions/") for n in names)
    assert any(n.startswith(f"{NAME}/store/sql/") and n.endswith(".sql") for n in names)
    assert not any("/src/" in n or n.endswith(".java") for n in names)


def test_the_sdist_carries_the_jar_sources_and_build_script(built: Built) -> None:
    root = f"{NAME}-0.1.0"
    with tarfile.open(built.sdist) as sdist:
        names = sdist.getnames()
    assert {n.split("/", 1)[0] for n in names} == {root}
    rel = {n.removeprefix(f"{root}/") for n in names}
    assert {"PKG-INFO", "setup.py", "pyproject.toml", "scripts/build_jvm.sh",
            "partition_notify/py.typed", "store/migrations/env.py"} <= rel
    assert any(n.startswith("writers/jvm/src/") and n.endswith(".java") for n in rel)
    assert any(n.startswith("writers/jvm/") and n.endswith(".jar") for n in rel)
    assert any(n.startswith("store/sql/") and n.endswith(".sql") for n in rel)
    assert not any(n.startswith((".git/", ".venv/")) for n in rel)


def test_installed_alone_the_cli_and_an_embedded_round_trip_work(venv: Path,
                                                                  tmp_path: Path) -> None:
    cli = str(venv / "bin" / "partition-notify")
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin"}
    assert "usage: partition-notify" in _run([cli, "--help"], cwd=tmp_path, env=env).stdout
    urls = ["--store-url", f"sqlite:///{tmp_path / 'pn.db'}", "--transport-url", "embedded://"]
    for args in (["register", "sales.orders", "--keys", "datestamp,region"],
                 ["mark-done", "sales.orders", "datestamp=20110228"],
                 ["wait", "sales.orders", "datestamp=20110228/region=us", "--timeout", "60"]):
        _run([cli, *urls, *args], cwd=tmp_path, env=env)
    history = _run([cli, *urls, "history", "sales.orders"], cwd=tmp_path, env=env).stdout
    assert "datestamp=20110228" in history


def test_spark_conf_points_at_the_jar_the_wheel_installed(venv: Path, tmp_path: Path) -> None:
    cli = str(venv / "bin" / "partition-notify")
    got = _run([cli, "spark-conf", "--for", "properties", "--serve-url", "http://pn:8080"],
               cwd=tmp_path, env={"PATH": "/usr/bin:/bin"}, ok=False)
    assert got.returncode == 0, got.stderr[-2000:]
    (jar,) = [line.split(None, 1)[1] for line in got.stdout.splitlines()
              if line.startswith("spark.jars ")]
    assert Path(jar).is_file() and Path(jar).is_relative_to(venv), jar
    with zipfile.ZipFile(jar) as inner:
        assert "io/partitionnotify/spark/NotifyListener.class" in inner.namelist()


def test_installed_alone_it_pulls_no_driver_and_names_the_missing_extra(
        venv: Path, tmp_path: Path) -> None:
    found = _py(venv, "import importlib.util as u, json; print(json.dumps([m for m in "
                "('stomp', 'kafka', 'psycopg', 'pyspark', 'fastapi') if u.find_spec(m)]))",
                tmp_path)
    assert json.loads(found.stdout) == [], found.stderr
    errors = _transports(venv, tmp_path, ["stomp://localhost:61613",
                                          "stomp+ssl://localhost:61614", "kafka://localhost:9092"])
    assert "pip install 'partition-notify[stomp]'" in errors["stomp://localhost:61613"]
    assert "pip install 'partition-notify[stomp]'" in errors["stomp+ssl://localhost:61614"]
    assert "pip install 'partition-notify[kafka]'" in errors["kafka://localhost:9092"]
    cli = _run([str(venv / "bin" / "partition-notify"), "--store-url",
                "postgresql+psycopg://pn:secret@localhost:5432/pn", "tables"],
               cwd=tmp_path, env={"PATH": "/usr/bin:/bin"}, ok=False)
    assert cli.returncode == 1, (cli.stdout, cli.stderr)
    assert "pip install 'partition-notify[postgres]'" in cli.stderr
    assert len(cli.stderr.strip().splitlines()) == 1 and "secret" not in cli.stderr


def test_public_names_load_from_the_wheel_and_report_the_package(venv: Path,
                                                                  tmp_path: Path) -> None:
    got = _py(venv, "import partition_notify as p\n"
              "print(sorted({getattr(p, n).__module__ for n in p.__all__}))", tmp_path)
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip() == "['partition_notify']"


PLUGIN = '''
from partition_notify.transports.base import Transport


class MemoTransport(Transport):
    scheme = "memo"

    @classmethod
    def from_url(cls, url, **options):
        return cls.__new__(cls)  # nothing to connect: the registry's part is under test

    def publish(self, envelopes, *, timeout):
        raise NotImplementedError

    def consumer(self, on_message):
        raise NotImplementedError


class NotATransport:
    pass
'''


def _install_plugin(venv: Path, tmp_path: Path) -> None:
    """A tiny distribution, installed as pip would: module + dist-info with entry points."""
    site = Path(_py(venv, "import sysconfig; print(sysconfig.get_paths()['purelib'])",
                    tmp_path).stdout.strip())
    (site / "pn_memo_transport.py").write_text(PLUGIN)
    info = site / "pn_memo_transport-1.0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pn-memo-transport\n"
                                   "Version: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[partition_notify.transports]\n"
        "memo = pn_memo_transport:MemoTransport\n"
        "stomp = pn_memo_transport:MemoTransport\n"  # a built-in scheme stays ours
        "broken = pn_memo_transport:NotATransport\n"
        "gone = pn_memo_missing:Transport\n"
    )
    (info / "RECORD").write_text("")


def test_a_third_party_transport_registers_through_its_entry_point(venv: Path,
                                                                    tmp_path: Path) -> None:
    _install_plugin(venv, tmp_path)
    out = _transports(venv, tmp_path, ["memo://somewhere/x", "stomp://h:61613",
                                       "broken://x", "gone://x", "memx://x"])
    assert out["imported before use"] == []  # entry points are resolved lazily
    assert out["memo://somewhere/x"] == "pn_memo_transport:MemoTransport"
    # stomp:// stays the built-in one (whose driver this venv lacks), not the plugin's.
    assert "partition-notify[stomp]" in out["stomp://h:61613"]
    assert "is not a Transport subclass" in out["broken://x"]
    assert "does not import" in out["gone://x"] and "pn_memo_missing" in out["gone://x"]
    assert "did you mean memo://" in out["memx://x"]


def test_a_build_without_a_jdk_or_pyspark_stops_saying_which(built: Built, venv: Path,
                                                              tmp_path: Path) -> None:
    """Never a jar-less wheel: the build fails and says what it lacks."""
    cases = {
        # No javac/jar on PATH (the build itself needs no PATH: absolute interpreter).
        "PATH has no javac or jar": {"PATH": str(tmp_path / "empty"),
                                     "PN_BUILD_PYTHON": sys.executable},
        # A Python without pyspark, and the clone has no .venv to fall back to.
        "set PN_BUILD_PYTHON": {"PN_BUILD_PYTHON": str(venv / "bin" / "python")},
    }
    for expected, overrides in cases.items():
        out = tmp_path / "dist"
        got = _run([sys.executable, "-m", "build", "--wheel", "--outdir", str(out),
                    str(built.clone)], cwd=built.clone, env={**os.environ, **overrides},
                   ok=False)
        assert got.returncode != 0, got.stdout[-2000:]
        assert expected in got.stdout + got.stderr, (got.stdout[-2000:], got.stderr[-2000:])
        assert not list(out.glob("*.whl"))
