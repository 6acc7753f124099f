"""The system's PostgreSQL and RabbitMQ (Debian packages), driven by their own tools.

Only ``pg_ctlcluster``, ``rabbitmq-server``/``rabbitmqctl``/``rabbitmq-plugins``
run as commands, each with a deadline. Stdlib only.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.support import accounts
from tests.support.net import port_open, postgres_probe, stomp_probe
from tests.support.service_state import SERVICES_DIR, Failures, State, log, run, wait_ready

RABBIT_CONF = Path("/etc/rabbitmq/rabbitmq.conf")
POSTGRES_VERSION_FILE = SERVICES_DIR / "postgres.version"


def postgres_ready() -> bool:
    return postgres_probe("127.0.0.1", accounts.POSTGRES_PORT)


def rabbit_ready() -> bool:
    return port_open("127.0.0.1", accounts.RABBIT_AMQP_PORT)


def rabbit_stomp_ready() -> bool:
    return stomp_probe(accounts.RABBIT_STOMP_PORT, "guest", "guest") == "CONNECTED"


def _postgres_version() -> str | None:
    """The newest cluster version under /etc/postgresql (e.g. '15')."""
    root = Path("/etc/postgresql")
    versions = [p.name for p in root.iterdir()] if root.is_dir() else []
    return max(versions, key=lambda n: int(n) if n.isdigit() else 0) if versions else None


def postgres_up(state: State, failures: Failures) -> bool:
    if postgres_ready():
        log(f"postgres: already accepting connections on 127.0.0.1:{accounts.POSTGRES_PORT}")
        return True
    version = _postgres_version()
    if version is None:
        return failures.add("postgres", "no cluster under /etc/postgresql")
    log(f"postgres: starting cluster {version}/main")
    if not run(["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "start"], 120):
        return failures.add("postgres", f"pg_ctlcluster {version} main start failed")
    POSTGRES_VERSION_FILE.write_text(version + "\n")
    state.add("postgres")
    if not wait_ready(f"postgres (127.0.0.1:{accounts.POSTGRES_PORT})", postgres_ready, 30):
        return failures.add("postgres", "not accepting connections")
    return True


def postgres_down(state: State) -> None:
    if not state.has("postgres"):
        return
    try:
        version: str | None = POSTGRES_VERSION_FILE.read_text().strip()
    except OSError:
        version = _postgres_version()
    log(f"postgres: stopping cluster {version}/main")
    if version is None or not run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "stop"], 60):
        log("postgres: stop failed")
    state.remove("postgres")


def _rabbitmqctl(*args: str, timeout: float = 30) -> bool:
    return run(["rabbitmqctl", "-q", *args], timeout)


def _enable_stomp_plugin(failures: Failures) -> bool:
    """Move the plugin's listener off 61613 (ActiveMQ's) in the running node, then
    (re)start the plugin: no broker restart."""
    port = accounts.RABBIT_STOMP_PORT
    log(f"rabbitmq: enabling rabbitmq_stomp on 127.0.0.1:{port}")
    listeners = f'[{{"127.0.0.1", {port}}}]'
    if not _rabbitmqctl("eval", f"application:set_env(rabbitmq_stomp, tcp_listeners, "
                                f"{listeners}, [{{persistent, true}}]).", timeout=30):
        return failures.add("rabbitmq-stomp", "rabbitmqctl eval set_env failed")
    plugins = ["rabbitmq-plugins", "-q"]
    if run([*plugins, "is_enabled", "rabbitmq_stomp"], 30):
        run([*plugins, "disable", "rabbitmq_stomp"], 60)
    if not run([*plugins, "enable", "rabbitmq_stomp"], 60):
        return failures.add("rabbitmq-stomp", "rabbitmq-plugins enable rabbitmq_stomp failed")
    if not wait_ready(f"rabbitmq STOMP (127.0.0.1:{port})", rabbit_stomp_ready, 30):
        return failures.add("rabbitmq-stomp", f"STOMP CONNECT guest/guest on {port} failed")
    return True


def _ensure_rabbit_reader(failures: Failures) -> bool:
    """A STOMP account that may subscribe to /topic/... but not publish: no write
    permission on amq.topic, where /topic/ SENDs go. rabbitmqctl needs seconds a
    call, so only when the account cannot log in yet; ``verify`` checks the refusal."""
    user, password = accounts.RABBIT_READER_USER, accounts.RABBIT_READER_PASSWORD
    if stomp_probe(accounts.RABBIT_STOMP_PORT, user, password) == "CONNECTED":
        return True
    log(f"rabbitmq: creating/updating user {user} (subscribe-only)")
    if not (_rabbitmqctl("add_user", user, password)
            or _rabbitmqctl("change_password", user, password)):
        return failures.add("rabbitmq-users", f"could not create user {user}")
    if not _rabbitmqctl("set_permissions", "-p", "/", user, "^stomp-subscription-.*",
                        "^stomp-subscription-.*", r"^(amq\.topic|stomp-subscription-.*)$"):
        return failures.add("rabbitmq-users", f"set_permissions for {user} failed")
    return True


def _persist_stomp_port() -> None:
    """Keep the port for the next broker restart (written only once the plugin is
    enabled: a node without it rejects the stomp.* keys)."""
    line = f"stomp.listeners.tcp.1 = 127.0.0.1:{accounts.RABBIT_STOMP_PORT}"
    try:
        old = RABBIT_CONF.read_text() if RABBIT_CONF.exists() else ""
        if re.search(r"^stomp\.listeners\.tcp\.1", old, re.M):
            new = re.sub(r"^stomp\.listeners\.tcp\.1 .*$", line, old, flags=re.M)
        else:
            new = old + ("\n" if old and not old.endswith("\n") else "") + line + "\n"
        if new != old:
            RABBIT_CONF.write_text(new)
    except OSError as exc:
        log(f"rabbitmq: could not persist the STOMP port in {RABBIT_CONF}: {exc}")


def rabbit_up(state: State, failures: Failures) -> bool:
    if not rabbit_ready():
        log("rabbitmq: not running, starting rabbitmq-server -detached")
        if not run(["rabbitmq-server", "-detached"], 60):
            return failures.add("rabbitmq", "rabbitmq-server -detached failed")
        state.add("rabbitmq")
        if not (_rabbitmqctl("await_startup", timeout=90)
                and wait_ready("rabbitmq (AMQP 127.0.0.1:5672)", rabbit_ready, 30)):
            return failures.add("rabbitmq", "did not start within 90 s")
    if rabbit_stomp_ready():
        log(f"rabbitmq: STOMP already on 127.0.0.1:{accounts.RABBIT_STOMP_PORT}")
    elif not _enable_stomp_plugin(failures):
        return False
    if not _ensure_rabbit_reader(failures):
        return False
    _persist_stomp_port()
    return True


def rabbit_down(state: State) -> None:
    """Stop a broker ``up`` started; the STOMP plugin stays enabled and configured."""
    if not state.has("rabbitmq"):
        return
    log("rabbitmq: stopping (started by services.sh)")
    if not run(["rabbitmqctl", "stop"], 60):
        log("rabbitmq: rabbitmqctl stop failed")
    state.remove("rabbitmq")
