"""A real Iceberg REST catalog for tests/lakehouse: Lakana's server (PyPI ``lakana-server``,
a FastAPI implementation of the Iceberg REST catalog API), in its own venv
(``scripts/bootstrap_rest.sh``: its pins must not move ours), on a free port, its metadata
in a SQLite file and its tables' files in a local directory.

Lakana calls the REST ``prefix`` an environment (one per test: isolated tables) and creates
tables only under the top-level namespaces ``bronze``, ``silver`` and ``gold``. Requests are
authenticated with a personal access token fixed at the server's first start.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.support.accounts import ROOT
from tests.support.net import free_port

#: The venv ``scripts/bootstrap_rest.sh`` builds.
VENV = Path(os.environ.get("PN_REST_VENV", str(ROOT / ".venv-rest")))
SERVER = VENV / "bin" / "lakana-server"
_KEY_ID, _SECRET = "pntests0001", "pn-rest-catalog-tests-secret-00000001"
#: The bootstrap administrator's token: ``lakana_pat_<key id>_<secret>``.
TOKEN = f"lakana_pat_{_KEY_ID}_{_SECRET}"
#: Migrations plus start-up on a loaded 2-core machine take a few seconds; far more here.
START_SECONDS = 90.0
#: Every request of the helpers below (the server answers in milliseconds).
HTTP_SECONDS = 15.0


def available() -> bool:
    return SERVER.is_file() and os.access(SERVER, os.X_OK)


class RestCatalogServer:
    """One ``lakana-server`` process; :meth:`stop` ends it (by its pid)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self.log = workdir / "lakana-server.log"
        self.env = {**os.environ, "LAKANA_DATABASE__URL": f"sqlite:///{workdir}/meta.db",
                    "LAKANA_BOOTSTRAP_PAT_KEY_ID": _KEY_ID,
                    "LAKANA_BOOTSTRAP_PAT_SECRET": _SECRET,
                    "LAKANA_HOST": "127.0.0.1", "LAKANA_PORT": str(self.port),
                    "LAKANA_LOG__LEVEL": "WARNING"}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> RestCatalogServer:
        """Migrate its database, start it, wait until ``/v1/config`` answers."""
        deadline = time.monotonic() + START_SECONDS
        with open(self.log, "ab") as out:
            migrate = subprocess.run([str(SERVER), "migrate"], env=self.env, stdout=out,
                                     stderr=subprocess.STDOUT, timeout=START_SECONDS,
                                     check=False)
            if migrate.returncode != 0:
                raise RuntimeError(f"lakana-server migrate failed: {self.tail()}")
            self.proc = subprocess.Popen([str(SERVER)], env=self.env, stdout=out,
                                         stderr=subprocess.STDOUT)
        while not self._answers():
            if self.proc.poll() is not None:
                raise RuntimeError(f"lakana-server exited {self.proc.returncode}: "
                                   f"{self.tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"lakana-server did not answer in {START_SECONDS:g} s: "
                                   f"{self.tail()}")
            time.sleep(0.1)
        return self

    def _answers(self) -> bool:
        try:
            self.request("GET", "/v1/config", timeout=2.0)
            return True
        except (OSError, urllib.error.URLError):
            return False

    def request(self, method: str, path: str, body: object = None,
                timeout: float = HTTP_SECONDS) -> object:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.uri + path, data=data, method=method, headers={
            "Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read() or b"null")

    def environment(self, name: str) -> str:
        """A new environment (REST prefix) ``name``, its files under the work dir."""
        root = self.workdir / f"warehouse-{name}"
        root.mkdir()
        self.request("POST", "/api/v1/environments", {
            "name": name, "storage": {"scheme": "file", "root": root.as_uri()}})
        return name

    def catalog_env(self, catalog: str, prefix: str) -> dict[str, str]:
        """The ``PN_ICEBERG_CATALOG__<NAME>__*`` variables of this REST catalog."""
        p = f"PN_ICEBERG_CATALOG__{catalog.upper()}__"
        return {f"{p}TYPE": "rest", f"{p}URI": self.uri, f"{p}TOKEN": TOKEN,
                f"{p}PREFIX": prefix}

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(15)
