"""A private PgBouncer in front of the suite's PostgreSQL, one per test.

Debian's ``pgbouncer`` package (scripts/bootstrap.sh installs it), never its
system service: our own process with a temporary ini, listening on a free
127.0.0.1 port, ``auth_type = trust`` with an auth file naming the URL's user,
every database name passed through to the server (a ``*`` entry: the tests use
fresh databases). PgBouncer refuses to run as root; as root it is started with
``-u nobody``, so its files live in a directory that user can read.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy.engine import make_url

from tests.support.net import free_port, postgres_probe, wait_until

#: Seconds PgBouncer has to listen after starting, and to exit after SIGINT/SIGTERM.
START_SECONDS = 10.0
STOP_SECONDS = 5.0


def binary() -> str | None:
    """The pgbouncer executable: ``PN_TEST_PGBOUNCER_BIN`` if set, else Debian's (in
    /usr/sbin, often not on a user's PATH); None if there is none."""
    given = os.environ.get("PN_TEST_PGBOUNCER_BIN")
    if given is not None:
        return given if os.access(given, os.X_OK) else None
    return shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin:/usr/bin")


class PgBouncer:
    """One PgBouncer process; :meth:`url` is ``server_url`` with its host and port."""

    def __init__(self, server_url: str, *, pool_mode: str, pool_size: int = 2,
                 ignore: str = "") -> None:
        self.server = make_url(server_url)
        self.pool_mode = pool_mode
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="pn-pgbouncer-"))
        os.chmod(self.dir, 0o755)  # -u nobody reads the ini from here
        self.log = self.dir / "pgbouncer.log"
        user = self.server.username or "postgres"
        (self.dir / "users.txt").write_text(f'"{user}" ""\n')
        ini = "\n".join([
            "[databases]",
            f"* = host={self.server.host or '127.0.0.1'} port={self.server.port or 5432}",
            "[pgbouncer]",
            "listen_addr = 127.0.0.1", f"listen_port = {self.port}", "unix_socket_dir =",
            "auth_type = trust", f"auth_file = {self.dir / 'users.txt'}",
            f"admin_users = {user}",
            f"pool_mode = {pool_mode}", f"default_pool_size = {pool_size}",
            "max_client_conn = 100", "server_login_retry = 1",
            *([f"ignore_startup_parameters = {ignore}"] if ignore else []),
            ""])
        (self.dir / "pgbouncer.ini").write_text(ini)
        for f in self.dir.iterdir():
            f.chmod(0o644)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> PgBouncer:
        exe = binary()
        assert exe is not None, "pgbouncer is not installed (scripts/bootstrap.sh)"
        as_nobody = ["-u", "nobody"] if os.geteuid() == 0 else []
        with self.log.open("wb") as out:  # PgBouncer logs to stderr without a logfile
            self.proc = subprocess.Popen([exe, *as_nobody, str(self.dir / "pgbouncer.ini")],
                                         stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        try:
            wait_until(lambda: self._exited() or postgres_probe("127.0.0.1", self.port),
                       START_SECONDS, f"pgbouncer to listen on 127.0.0.1:{self.port}")
            assert not self._exited(), f"pgbouncer exited: {self.log_text()}"
        except BaseException:
            self.stop()
            raise
        return self

    def _exited(self) -> bool:
        return self.proc is None or self.proc.poll() is not None

    def url(self, server_url: str) -> str:
        """``server_url`` (a database of the same server) reached through this PgBouncer."""
        return make_url(server_url).set(host="127.0.0.1", port=self.port).render_as_string(
            hide_password=False)

    def log_text(self) -> str:
        with contextlib.suppress(OSError):
            return self.log.read_text(errors="replace")
        return ""

    def stop(self) -> None:
        """SIGINT (PgBouncer's immediate shutdown), SIGKILL past :data:`STOP_SECONDS`."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(STOP_SECONDS)
        shutil.rmtree(self.dir, ignore_errors=True)


@contextlib.contextmanager
def running(server_url: str, *, pool_mode: str, pool_size: int = 2,
            ignore: str = "") -> Iterator[PgBouncer]:
    bouncer = PgBouncer(server_url, pool_mode=pool_mode, pool_size=pool_size,
                        ignore=ignore).start()
    try:
        yield bouncer
    finally:
        bouncer.stop()
