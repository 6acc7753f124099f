"""Shared pieces of the fault, service and security tests.

* :class:`PrivateActiveMQ` — an ActiveMQ of our own, started from the shipped
  ``scripts/activemq/activemq.xml`` (same users, same authorization map) on
  free ports. Tests may kill or freeze it without disturbing the shared broker
  other suites use; it is restarted by whoever broke it (self-healing).
* :class:`Collector` — a subscriber callback that records every delivery.
* :func:`tally` — the line each fault test prints.
* :func:`wait_until` — poll a condition on *another process* (a broker, a
  child, the database) with a deadline; nothing in-process is awaited this way.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from partition_notify.contract import AnyMessage

ROOT = Path(__file__).resolve().parents[2]
ACTIVEMQ_HOME = Path(os.environ.get("PN_TEST_ACTIVEMQ_HOME", "/usr/share/activemq"))
SERVICE_USER = os.environ.get("PN_TEST_BROKER_USERNAME", "pn_service")
SERVICE_PASSWORD = os.environ.get("PN_TEST_BROKER_PASSWORD", "pn-service-secret")
READER_USER = os.environ.get("PN_TEST_READER_USERNAME", "pn_reader")
READER_PASSWORD = os.environ.get("PN_TEST_READER_PASSWORD", "pn-reader-secret")
ADMIN_PASSWORD = os.environ.get("PN_TEST_BROKER_ADMIN_PASSWORD", "pn-admin-secret")


def wait_until(predicate: Callable[[], bool], timeout: float, what: str,
               interval: float = 0.05) -> float:
    """Poll ``predicate`` until true; return the seconds it took, or raise AssertionError."""
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)
    return time.monotonic() - started


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stomp_probe(port: int, login: str, passcode: str, timeout: float = 3.0) -> str:
    """CONNECT with raw frames; returns the first frame's command ('' if none)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(
                f"CONNECT\naccept-version:1.2\nhost:/\nlogin:{login}\npasscode:{passcode}\n"
                "heart-beat:0,0\n\n\0".encode()
            )
            data = b""
            while b"\0" not in data:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
            if data.lstrip(b"\r\n").startswith(b"CONNECTED"):
                with contextlib.suppress(OSError):
                    s.sendall(b"DISCONNECT\n\n\0")
            return data.lstrip(b"\r\n").split(b"\n", 1)[0].decode(errors="replace").strip()
    except OSError:
        return ""


class PrivateActiveMQ:
    """ActiveMQ Classic from the shipped configuration, on ports of its own."""

    def __init__(self, workdir: Path) -> None:
        self.dir = workdir
        self.stomp_port = free_port()
        self.openwire_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        conf = workdir / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        (workdir / "data").mkdir(exist_ok=True)
        xml = (ROOT / "scripts/activemq/activemq.xml").read_text()
        ports = ((":61613?", f":{self.stomp_port}?"), (":61616?", f":{self.openwire_port}?"))
        for old, new in ports:
            assert old in xml, f"shipped activemq.xml no longer has a {old} connector"
            xml = xml.replace(old, new)
        (conf / "activemq.xml").write_text(xml)
        shutil.copy(ROOT / "scripts/activemq/log4j.properties", conf / "log4j.properties")

    @staticmethod
    def available() -> tuple[bool, str]:
        if not (ACTIVEMQ_HOME / "bin/activemq.jar").is_file():
            return False, f"ActiveMQ not installed at {ACTIVEMQ_HOME} (scripts/services.sh up)"
        if shutil.which("java") is None:
            return False, "java not found"
        return True, ""

    @property
    def url(self) -> str:
        return f"stomp://127.0.0.1:{self.stomp_port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def ready(self) -> bool:
        return stomp_probe(self.stomp_port, SERVICE_USER, SERVICE_PASSWORD) == "CONNECTED"

    def start(self, timeout: float = 90.0) -> float:
        """Start (if not running) and wait for STOMP CONNECT; returns seconds taken."""
        started = time.monotonic()
        if not self.running():
            env = {
                **os.environ,
                "PN_BROKER_PASSWORD": SERVICE_PASSWORD,
                "PN_READER_PASSWORD": READER_PASSWORD,
                "PN_BROKER_ADMIN_PASSWORD": ADMIN_PASSWORD,
                "PN_ACTIVEMQ_BIND": "127.0.0.1",
            }
            log = open(self.dir / "activemq.log", "ab")  # noqa: SIM115 - owned by the child
            self.proc = subprocess.Popen(
                [
                    "java", "-Xms64m", "-Xmx512m",
                    f"-Dactivemq.home={ACTIVEMQ_HOME}",
                    f"-Dactivemq.base={self.dir}",
                    f"-Dactivemq.conf={self.dir / 'conf'}",
                    f"-Dactivemq.data={self.dir / 'data'}",
                    "-jar", str(ACTIVEMQ_HOME / "bin/activemq.jar"),
                    "start", f"xbean:file:{self.dir / 'conf/activemq.xml'}",
                ],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                start_new_session=True,
            )
            log.close()
            self.starts += 1
        wait_until(lambda: self.ready() or not self.running(), timeout, "ActiveMQ to accept "
                   f"STOMP CONNECT on {self.stomp_port}", interval=0.2)
        if not self.running():
            raise AssertionError(f"ActiveMQ exited; see {self.dir / 'activemq.log'}")
        return time.monotonic() - started

    def kill(self) -> None:
        """A crash: SIGKILL, then wait until the process and its port are gone."""
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


@dataclass
class Collector:
    """A subscriber callback: counts deliveries per message id, thread-safe."""

    expected: set[str] = field(default_factory=set)
    seen: Counter[str] = field(default_factory=Counter)
    order: list[tuple[str, int]] = field(default_factory=list)
    _cond: threading.Condition = field(default_factory=threading.Condition)

    def __call__(self, msg: AnyMessage) -> None:
        with self._cond:
            self.seen[msg.message_id] += 1
            self.order.append((msg.topic, msg.topic_seq))
            self._cond.notify_all()

    def wait_for(self, ids: set[str], timeout: float) -> bool:
        """Wait until every id in ``ids`` was delivered (the callback notifies)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not ids <= self.seen.keys():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def delivered(self, ids: set[str]) -> int:
        with self._cond:
            return len(ids & self.seen.keys())

    def max_per_id(self) -> int:
        with self._cond:
            return max(self.seen.values(), default=0)


def tally(name: str, *, acknowledged: int, delivered: int, duplicates_suppressed: int,
          **extra: object) -> str:
    lost = acknowledged - delivered
    more = "".join(f" {k}={v}" for k, v in extra.items())
    line = (f"[tally] {name}: acknowledged={acknowledged} delivered={delivered} lost={lost} "
            f"duplicates_suppressed={duplicates_suppressed}{more}")
    print(line, flush=True)
    with contextlib.suppress(OSError), open(tally_file(), "a") as fh:
        fh.write(line + "\n")
    return line


def tally_file() -> Path:
    return Path(os.environ.get("PN_TALLY_FILE", "/tmp/partition-notify-tally.txt"))


def logged_message_ids(store_url: str) -> list[str]:
    """Every message id in the event log, oldest first (read straight from SQL)."""
    from sqlalchemy import create_engine, text

    engine = create_engine(store_url)
    try:
        with engine.connect() as conn:
            return [r[0] for r in conn.execute(
                text("SELECT message_id FROM pn_events ORDER BY event_id"))]
    finally:
        engine.dispose()


@contextlib.contextmanager
def child(argv: list[str], **kwargs: object) -> Iterator[subprocess.Popen[bytes]]:
    """A child process that is killed (by its own pid) if the test leaves early."""
    proc = subprocess.Popen(argv, **kwargs)  # type: ignore[call-overload]
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


class BlackHole:
    """A TCP listener that accepts connections and never answers (a hung broker)."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._socks: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, name="black-hole", daemon=True).start()

    @property
    def url(self) -> str:
        return f"stomp://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self._socks.append(conn)

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        for s in self._socks:
            with contextlib.suppress(OSError):
                s.close()


def stomp_app(store_url: str, transport_url: str, *, user: str = SERVICE_USER,
              password: str = SERVICE_PASSWORD, publish_timeout: float = 5.0,
              connect_timeout: float = 3.0, heartbeat_ms: int = 1000) -> object:
    """An app on a real STOMP broker with the given principal."""
    from pydantic import SecretStr

    from partition_notify.app import build_app

    return build_app(
        store_url=store_url,
        transport_url=transport_url,
        broker_username=user,
        broker_password=SecretStr(password),
        publish_timeout_seconds=publish_timeout,
        connect_timeout_seconds=connect_timeout,
        heartbeat_ms=heartbeat_ms,
    )


def raw_stomp_send(port: int, login: str, passcode: str, destination: str, body: bytes,
                   headers: dict[str, str] | None = None, timeout: float = 10.0) -> tuple[str, str]:
    """CONNECT + SEND with a receipt over a plain socket; returns (reply command, message).

    No client library: exactly the frames an arbitrary client could write.
    """
    extra = "".join(f"{k}:{v}\n" for k, v in (headers or {}).items())
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.settimeout(timeout)
        s.sendall(f"CONNECT\naccept-version:1.2\nhost:/\nlogin:{login}\npasscode:{passcode}\n"
                  "heart-beat:0,0\n\n\0".encode())
        frames = _read_frames(s, 1)
        if not frames or frames[0][0] != "CONNECTED":
            return (frames[0][0], frames[0][1].get("message", "")) if frames else ("", "")
        s.sendall(f"SEND\ndestination:{destination}\nreceipt:r1\n{extra}".encode() + b"\n"
                  + body + b"\0")
        frames = _read_frames(s, 1)
        with contextlib.suppress(OSError):
            s.sendall(b"DISCONNECT\n\n\0")
    if not frames:
        return "", ""
    command, hdrs = frames[0]
    return command, hdrs.get("message", "")


def _read_frames(s: socket.socket, n: int) -> list[tuple[str, dict[str, str]]]:
    data = b""
    out: list[tuple[str, dict[str, str]]] = []
    while len(out) < n:
        while b"\0" not in data:
            try:
                chunk = s.recv(65536)
            except OSError:
                return out
            if not chunk:
                return out
            data += chunk
        frame, _, data = data.partition(b"\0")
        head = frame.lstrip(b"\r\n").split(b"\n\n", 1)[0].decode(errors="replace").split("\n")
        if not head[0]:
            continue
        hdrs = dict(line.split(":", 1) for line in head[1:] if ":" in line)
        out.append((head[0].strip(), hdrs))
    return out


def bulk_set_done(app: object, db: str, table: str, start: int, count: int, *,
                  key: str = "d", batch: int = 5000) -> list[str]:
    """Log ``count`` set-done events straight into the store, marked published.

    What a subscriber sees when many messages were sent while it was away:
    they are in the event log but will never arrive live. Fast (one
    transaction per ``batch``), unlike one publish at a time.
    """
    from partition_notify.contract import spec

    info = app.store.catalog.get_table(db, table)  # type: ignore[attr-defined]
    draft = app.publisher._set_done_draft  # type: ignore[attr-defined]
    ids: list[str] = []
    for lo in range(start, start + count, batch):
        drafts = [draft(info, spec.coerce({key: str(i)}), None)
                  for i in range(lo, min(lo + batch, start + count))]
        logged = app.store.log.append(drafts, published=True)  # type: ignore[attr-defined]
        ids.extend(m.message_id for m in logged)
    return ids


def rss_mb() -> float:
    """This process's resident set size now (not the peak), in MiB."""
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
