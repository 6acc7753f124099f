"""A private ActiveMQ Classic instance, for tests that kill the broker.

Same configuration as scripts/services.sh (scripts/activemq/activemq.xml, the
Debian package's jars, same users), on free ports and in a temporary
directory, so killing it disturbs no other test and the test only ends the
process it started.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import stomp

ROOT = Path(__file__).resolve().parents[2]
ACTIVEMQ_HOME = Path(os.environ.get("PN_ACTIVEMQ_HOME", "/usr/share/activemq"))
USER = os.environ.get("PN_TEST_BROKER_USERNAME", "pn_service")
PASSWORD = os.environ.get("PN_TEST_BROKER_PASSWORD", "pn-service-secret")


def available() -> str | None:
    """None when an instance can be started here, else why not."""
    if not (ACTIVEMQ_HOME / "bin" / "activemq.jar").exists():
        return f"ActiveMQ is not installed at {ACTIVEMQ_HOME} (Debian package 'activemq')"
    if shutil.which("java") is None:
        return "java is not on PATH"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ActiveMQInstance:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.stomp_port = free_port()
        self.openwire_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        conf = base / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        (base / "data").mkdir(exist_ok=True)
        xml = (ROOT / "scripts/activemq/activemq.xml").read_text()
        xml = xml.replace(":61613?", f":{self.stomp_port}?").replace(
            ":61616?", f":{self.openwire_port}?")
        assert str(self.stomp_port) in xml and str(self.openwire_port) in xml, \
            "activemq.xml no longer names ports 61613/61616; update this helper"
        (conf / "activemq.xml").write_text(xml)
        log4j = ROOT / "scripts/activemq/log4j.properties"
        if log4j.exists():
            shutil.copy(log4j, conf / "log4j.properties")

    @property
    def url(self) -> str:
        return f"stomp://127.0.0.1:{self.stomp_port}"

    def start(self, timeout: float = 90.0) -> float:
        """Start the JVM and wait until STOMP CONNECT works; returns the seconds it took."""
        started = time.monotonic()
        env = {**os.environ, "PN_BROKER_PASSWORD": PASSWORD, "PN_ACTIVEMQ_BIND": "127.0.0.1"}
        with open(self.base / "activemq.log", "ab") as log:
            self.proc = subprocess.Popen(
                ["java", "-Xmx512m",
                 f"-Dactivemq.home={ACTIVEMQ_HOME}", f"-Dactivemq.base={self.base}",
                 f"-Dactivemq.conf={self.base / 'conf'}", f"-Dactivemq.data={self.base / 'data'}",
                 "-jar", str(ACTIVEMQ_HOME / "bin/activemq.jar"), "start",
                 f"xbean:file:{self.base / 'conf/activemq.xml'}"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                start_new_session=True)
        deadline = started + timeout
        while not self._answers():
            if self.proc.poll() is not None:
                raise RuntimeError(f"ActiveMQ exited with {self.proc.returncode}; see "
                                   f"{self.base / 'activemq.log'}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"ActiveMQ did not accept STOMP within {timeout:g} s")
            time.sleep(0.25)  # polling a port: there is no event to wait on
        return time.monotonic() - started

    def kill(self) -> None:
        """SIGKILL: no shutdown hooks, sockets reset by the kernel, like a crash."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def _answers(self) -> bool:
        conn = stomp.Connection12([("127.0.0.1", self.stomp_port)], vhost="/",
                                  reconnect_attempts_max=1, timeout=2)
        try:
            conn.connect(USER, PASSWORD, wait=False)
        except stomp.exception.StompException:
            return False
        try:
            deadline = time.monotonic() + 3
            while not conn.is_connected() and time.monotonic() < deadline:
                time.sleep(0.05)
            return bool(conn.is_connected())
        finally:
            with contextlib.suppress(Exception):  # a probe: it only has to go away
                conn.transport.disconnect_socket()
