"""``-m "not broker and not postgres and not spark"`` means it: the tests it keeps
reach none of those services.

The proof runs those tests, in CI mode (a missing service fails a test instead
of skipping it), with every service address pointing at a closed port and no
ActiveMQ, tansu or Spark installation to start: any test that still reaches a
broker, PostgreSQL or Spark fails, and so does this test.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.accounts import ROOT
from tests.support.net import free_port

#: The directories whose tests use brokers the most, the fault and service tests first.
DIRS = ["tests/transports", "tests/contract", "tests/faults", "tests/security", "tests/serve",
        "tests/fuzz/test_fuzz_inputs.py"]
NO_SERVICES = "not broker and not postgres and not spark"


def no_services_env() -> dict[str, str]:
    closed = free_port()  # nothing listens there
    return {
        **os.environ,
        "CI": "true",
        "PYTHONPATH": str(ROOT),
        "PN_TEST_STOMP_URL": f"stomp://127.0.0.1:{closed}",
        "PN_TEST_RABBIT_STOMP_URL": f"stomp://127.0.0.1:{closed}",
        "PN_TEST_KAFKA_URL": f"kafka://127.0.0.1:{closed}",
        "PN_TEST_KAFKA_BOOTSTRAP": f"127.0.0.1:{closed}",
        "PN_TEST_POSTGRES_URL": f"postgresql+psycopg://postgres@127.0.0.1:{closed}/postgres",
        "PN_ACTIVEMQ_HOME": "/nonexistent/activemq",
        "PN_TANSU_BIN": "/nonexistent/tansu",
        "SPARK_HOME": "/nonexistent/spark",
        "PN_FUZZ_EXAMPLES": "2000",
    }


def pytest_run(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
        cwd=ROOT, env=no_services_env(), capture_output=True, text=True, timeout=timeout)


def test_collection_deselects_the_service_tests() -> None:
    """The markers are there at all: the broker tests of these directories are deselected."""
    done = pytest_run("--collect-only", "-m", NO_SERVICES, *DIRS, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    kept = [line for line in done.stdout.splitlines() if "::" in line]
    assert kept, "nothing left to run"
    assert "deselected" in done.stdout.splitlines()[-1], done.stdout[-500:]
    for service_test in ("test_contract.py::test_delivery_and_per_table_order[activemq]",
                         "test_broker_down.py::test_broker_down_then_relay_delivers_everything",
                         "test_activemq_auth.py::"):
        assert not any(service_test in line for line in kept), service_test
    assert any("test_delivery_and_per_table_order[embedded]" in line for line in kept)


@pytest.mark.slow
def test_unmarked_tests_pass_with_no_service_reachable() -> None:
    done = pytest_run("-x", "-m", NO_SERVICES, *DIRS, timeout=900)
    assert done.returncode == 0, (
        "a test not marked broker/postgres/spark reached one of them:\n"
        + done.stdout[-4000:] + done.stderr[-2000:])
