"""An ActiveMQ Classic instance from the shipped configuration, in a directory of its own.

The service manager runs the suite's shared broker with it (the ports of
scripts/activemq/activemq.xml, detached, recorded in a pid file); fault tests
run private ones on free ports, which they may kill or freeze without
disturbing the shared broker. Stdlib only.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from tests.support import accounts
from tests.support.net import free_port, stomp_probe, wait_until

SHIPPED_CONF = accounts.ROOT / "scripts" / "activemq"
#: The ports the shipped activemq.xml names; an instance replaces them by its own.
SHIPPED_STOMP_PORT = 61613
SHIPPED_OPENWIRE_PORT = 61616


def unavailable(home: Path = accounts.ACTIVEMQ_HOME) -> str | None:
    """None when an instance can be started here, else why not."""
    if not (home / "bin" / "activemq.jar").is_file():
        return f"ActiveMQ is not installed at {home} (scripts/services.sh up)"
    if shutil.which("java") is None:
        return "java is not on PATH"
    return None


class ActiveMQ:
    """One broker process; ``stomp_port``/``openwire_port`` None means a free port."""

    def __init__(self, base: Path, *, stomp_port: int | None = None,
                 openwire_port: int | None = None,
                 heap: tuple[str, ...] = ("-Xms64m", "-Xmx512m"),
                 service_password: str = accounts.SERVICE_PASSWORD) -> None:
        self.base = base
        self.stomp_port = stomp_port or free_port()
        self.openwire_port = openwire_port or free_port()
        self.heap = heap
        self.service_password = service_password
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.log = base / "activemq.log"

    @property
    def url(self) -> str:
        return f"stomp://127.0.0.1:{self.stomp_port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def write_config(self) -> None:
        """conf/ = the shipped activemq.xml (with this instance's ports) + log4j.properties."""
        conf = self.base / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        (self.base / "data").mkdir(exist_ok=True)
        xml = (SHIPPED_CONF / "activemq.xml").read_text()
        ports = ((f":{SHIPPED_STOMP_PORT}?", f":{self.stomp_port}?"),
                 (f":{SHIPPED_OPENWIRE_PORT}?", f":{self.openwire_port}?"))
        for old, new in ports:
            assert old in xml, f"shipped activemq.xml no longer has a {old} connector"
            xml = xml.replace(old, new)
        (conf / "activemq.xml").write_text(xml)
        shutil.copy(SHIPPED_CONF / "log4j.properties", conf / "log4j.properties")

    def argv(self, home: Path = accounts.ACTIVEMQ_HOME) -> list[str]:
        # The service manager finds its broker again by "-Dactivemq.base=<dir>".
        return ["java", *self.heap, f"-Dactivemq.home={home}", f"-Dactivemq.base={self.base}",
                f"-Dactivemq.conf={self.base / 'conf'}", f"-Dactivemq.data={self.base / 'data'}",
                "-jar", str(home / "bin" / "activemq.jar"),
                "start", f"xbean:file:{self.base / 'conf' / 'activemq.xml'}"]

    def launch(self) -> subprocess.Popen[bytes]:
        """Start the JVM in a session of its own (a test's Ctrl-C does not reach it)."""
        self.write_config()
        env = {**os.environ, **accounts.broker_env(self.service_password)}
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, env=env,
                                         start_new_session=True)
        self.starts += 1
        return self.proc

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def answer(self) -> str:
        """The reply to the service account's STOMP CONNECT ('CONNECTED', 'ERROR', '')."""
        return stomp_probe(self.stomp_port, accounts.SERVICE_USER, self.service_password)

    def ready(self) -> bool:
        return self.answer() == "CONNECTED"

    def start(self, timeout: float = 90.0) -> float:
        """Start (if not running) and wait for STOMP CONNECT; returns the seconds taken."""
        started = time.monotonic()
        if not self.running():
            self.launch()
        wait_until(lambda: self.ready() or not self.running(), timeout,
                   f"ActiveMQ to accept STOMP CONNECT on {self.stomp_port}", interval=0.2)
        if not self.running():
            raise AssertionError(f"ActiveMQ exited; see {self.log}")
        return time.monotonic() - started

    def kill(self) -> None:
        """A crash: SIGKILL (no shutdown hooks, sockets reset by the kernel)."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGCONT)  # a frozen JVM must be able to die
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        self.proc = None

    def freeze(self) -> None:
        os.kill(self.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        if self.running():
            os.kill(self.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self.proc is None:
            return
        self.thaw()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)
        self.proc = None
