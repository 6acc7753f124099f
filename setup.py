"""Build hook: the wheel carries the Spark commit-protocol jar(s), always.

Everything else about the package is declared in pyproject.toml; this file only
makes ``build_py`` (wheel) and ``sdist`` compile ``writers/jvm/src`` with
``scripts/build_jvm.sh`` first, so ``writers/jvm/*.jar`` is package data of
``partition_notify.writers``. The sdist ships the jar(s) built from its own
sources, so a wheel built from an sdist needs no JDK. A wheel or sdist built
from a checkout needs:

- a JDK >= 17 (``javac`` and ``jar`` on PATH), and
- pyspark's jars to compile against: the Python named by ``PN_BUILD_PYTHON``,
  else the checkout's ``.venv/bin/python`` (what scripts/bootstrap.sh makes),
  must import pyspark. (Not a build requirement: pyspark is ~400 MB and the
  build isolation would download it for every build.)

Either one missing stops the build with an error saying which; a jar-less
wheel is never produced. Editable installs skip this (scripts/bootstrap.sh
builds the jar in place after installing pyspark).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist
from setuptools.errors import ExecError

ROOT = Path(__file__).resolve().parent
JVM = ROOT / "writers" / "jvm"
#: Generous: javac on a busy 2-core machine takes well under a minute.
BUILD_TIMEOUT_SECONDS = 900


def _jars() -> list[Path]:
    return sorted(JVM.glob("*.jar"))


def _spark_python() -> str:
    """A Python that imports pyspark (its jars are the compile classpath)."""
    named = os.environ.get("PN_BUILD_PYTHON")
    tried = [named] if named else [str(ROOT / ".venv" / "bin" / "python"), sys.executable]
    probe = "import os, pyspark; assert os.path.isdir(os.path.join(pyspark.__path__[0], 'jars'))"
    for python in tried:
        if not python or not Path(python).exists():
            continue
        ok = subprocess.run([python, "-c", probe], capture_output=True, timeout=120)
        if ok.returncode == 0:
            return python
    raise ExecError(
        "partition-notify: building the Spark commit-protocol jar needs pyspark's jars to "
        f"compile against, and none of {tried} imports pyspark: set PN_BUILD_PYTHON to a "
        "Python with pyspark installed (e.g. the .venv that scripts/bootstrap.sh makes)"
    )


def build_jars() -> None:
    """Compile writers/jvm into writers/jvm/*.jar, or stop the build saying what is missing."""
    if (ROOT / "PKG-INFO").exists():  # an unpacked sdist: the jar(s) came built with it
        if not _jars():
            raise ExecError(f"partition-notify: this sdist has no {JVM}/*.jar; rebuild the sdist")
        return
    missing = [tool for tool in ("javac", "jar") if shutil.which(tool) is None]
    if missing:
        raise ExecError(
            f"partition-notify: building the Spark commit-protocol jar needs a JDK >= 17, "
            f"but PATH has no {' or '.join(missing)}: install one (e.g. "
            "apt-get install openjdk-17-jdk-headless) and build again"
        )
    env = {**os.environ, "PYTHON": _spark_python()}
    script = ROOT / "scripts" / "build_jvm.sh"
    subprocess.run(["bash", str(script)], cwd=ROOT, env=env, check=True,
                   timeout=BUILD_TIMEOUT_SECONDS)
    if not _jars():
        raise ExecError(f"partition-notify: {script} made no {JVM}/*.jar")


class BuildPyWithJars(build_py):
    def run(self) -> None:
        if not self.editable_mode:
            build_jars()
            # data_files may have been listed (by egg_info) before the jar(s) existed.
            self.__dict__.pop("data_files", None)
        super().run()


class SdistWithJars(sdist):
    def run(self) -> None:
        build_jars()
        super().run()


setup(cmdclass={"build_py": BuildPyWithJars, "sdist": SdistWithJars})
