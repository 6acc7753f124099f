"""/openapi.json tells the truth: schemathesis against a real ``serve`` finds no status,
content type or body that the document does not describe, and no server error.

A client generated from the document must be able to read every answer, errors
included (``application/problem+json``, partition_notify/http/openapi.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.http.support import Server, start_server

CHECKS = ",".join((
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_schema_conformance",
))
#: A fixed seed: the same tree generates the same requests, in CI and on a laptop.
SEED = "20261130"


@pytest.fixture(scope="module", params=["sqlite"])
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    yield from start_server(request)


def _schemathesis(server: Server, phases: str, examples: int,
                  *auth: str) -> subprocess.CompletedProcess[str]:
    # Run in the server's scratch folder: schemathesis leaves a .schemathesis/ cache.
    cli = Path(sys.executable).with_name("schemathesis")
    cmd = [str(cli), "run", f"{server.base}/openapi.json", "--checks", CHECKS,
           "--phases", phases, "--max-examples", str(examples), "--seed", SEED,
           "--request-timeout", "20",
           "--exclude-path", "/metrics", "--no-color", *auth]
    env = {**os.environ, "SCHEMATHESIS_HOOKS": ""}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env,
                          check=False, cwd=server.serve.log.parent)


#: With a token that may do everything, every phase (the stateful one chains a
#: registration to the reads and writes of that table); without one, or with a
#: read token, the answers are 401 and 403, which the fuzzing phase alone reaches.
@pytest.mark.parametrize(("role", "phases", "examples"), [
    ("admin", "examples,coverage,fuzzing,stateful", 25),
    ("read", "fuzzing", 5),
    (None, "fuzzing", 5),
])
def test_every_answer_is_documented(server: Server, role: str | None, phases: str,
                                    examples: int) -> None:
    auth = () if role is None else ("-H", f"Authorization: Bearer {server.tokens[role]}")
    run = _schemathesis(server, phases, examples, *auth)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-6000:]
    assert "generated" in out, out[-2000:]  # it ran cases, not just loaded the document
