"""Bad CLI input: one line on stderr, exit 1 or 2, no traceback (issue 10, item 13).

In-process through ``main`` where that is faithful; in a child process where
the interpreter's own behaviour matters (undecodable argv bytes, the logging
module's last-resort handler).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from partition_notify import build_app
from partition_notify.cli import main
from partition_notify.cli.entry import EXIT_ERROR, EXIT_USAGE

ROOT = Path(__file__).resolve().parents[2]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, list[str]]:
    capsys.readouterr()
    try:
        code = main(list(argv))
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err.splitlines()


def one_line(capsys: pytest.CaptureFixture[str], codes: tuple[int, ...], *argv: str) -> str:
    code, out, err = run(capsys, *argv)
    assert code in codes, (code, err)
    assert out == ""
    assert len(err) == 1, err
    assert "Traceback" not in err[0]
    return err[0]


@pytest.fixture
def store(sqlite_url: str) -> list[str]:
    build_app(store_url=sqlite_url, transport_url="embedded://").close()  # `tables` only reads
    return ["--store-url", sqlite_url]


def test_retention_beyond_int64_is_refused(capsys, store):
    line = one_line(capsys, (EXIT_ERROR, EXIT_USAGE), *store, "register", "x.y", "--keys", "k",
                    "--retention-seconds", "9223372036854775808")
    assert "retention" in line and "9223372036854775808" in line and "at most" in line


def test_min_versions_beyond_int64_is_refused(capsys, store, tmp_path):
    line = one_line(capsys, (EXIT_USAGE,), *store, "dataset", "define", "a.b",
                    str(tmp_path / "ds"), "--min-versions", "99999999999999999999999")
    assert "--min-versions" in line and "expected an integer from" in line


@pytest.mark.parametrize("value", ["0", "-1", "x"])
def test_min_versions_must_be_a_positive_integer(capsys, store, tmp_path, value):
    line = one_line(capsys, (EXIT_ERROR, EXIT_USAGE), *store, "dataset", "define", "a.b",
                    str(tmp_path / "ds"), "--min-versions", value)
    assert "min-versions" in line or "min_versions" in line


@pytest.mark.parametrize("value", ["-1", "0", "x", "99999999999999999999999"])
def test_tail_count_must_be_positive(capsys, store, value):
    line = one_line(capsys, (EXIT_USAGE,), *store, "tail", "x.y", "--count", value,
                    "--timeout", "0")
    assert "--count" in line


def test_undecodable_argv_is_refused_in_one_line(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "partition_notify.cli", "--store-url",
         f"sqlite:///{tmp_path}/s.db", "rev", "begin", b"n\xffews.a"],
        env=env, capture_output=True, timeout=60, check=False,
    )
    err = proc.stderr.decode("utf-8", "replace").splitlines()
    assert proc.returncode == EXIT_USAGE, err
    assert len(err) == 1 and "Traceback" not in err[0], err
    assert "UTF-8" in err[0] and "\\xff" in err[0]


def test_transport_url_that_does_not_parse(capsys, store):
    line = one_line(capsys, (EXIT_ERROR,), *store, "--transport-url", "stomp://[::1", "tables")
    assert "stomp://[::1" in line and "transport URL" in line


@pytest.mark.parametrize(
    ("env", "needles"),
    [
        ({"PN_TOPIC_POLICY": "nope"}, ["PN_TOPIC_POLICY", "'nope'", "per-table"]),
        ({"PN_CONNECT_TIMEOUT_SECONDS": "abc"}, ["PN_CONNECT_TIMEOUT_SECONDS", "'abc'", "number"]),
        ({"PN_PUBLISH_TIMEOUT_SECONDS": "-1"}, ["PN_PUBLISH_TIMEOUT_SECONDS", "greater than 0"]),
    ],
)
def test_bad_environment_variable_is_named(capsys, monkeypatch, store, env, needles):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    line = one_line(capsys, (EXIT_ERROR,), *store, "tables")
    for needle in needles:
        assert needle in line, line
    assert "pydantic" not in line


def test_two_bad_variables_each_named_and_a_secret_never_echoed(capsys, monkeypatch, store):
    monkeypatch.setenv("PN_TOPIC_POLICY", "nope")
    monkeypatch.setenv("PN_HEARTBEAT_MS", "soon")
    monkeypatch.setenv("PN_BROKER_PASSWORD", "")  # valid; must not appear either way
    line = one_line(capsys, (EXIT_ERROR,), *store, "tables")
    assert "PN_TOPIC_POLICY" in line and "PN_HEARTBEAT_MS" in line


def test_unreachable_stomp_broker_gives_only_our_line(tmp_path):
    """stomp.py logs 'could not connect ...' itself; that must not reach stderr first."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PN_CONNECT_TIMEOUT_SECONDS": "1"}
    base = [sys.executable, "-m", "partition_notify.cli", "--store-url",
            f"sqlite:///{tmp_path}/s.db"]
    subprocess.run([*base, "register", "x.y", "--keys", "k"], env=env, check=True,
                   capture_output=True, timeout=60)
    proc = subprocess.run([*base, "--transport-url", "stomp://127.0.0.1:1", "wait", "x.y", "k=1",
                           "--timeout", "1"], env=env, capture_output=True, text=True, timeout=60,
                          check=False)
    err = proc.stderr.splitlines()
    assert proc.returncode == EXIT_ERROR
    assert len(err) == 1, err
    assert err[0].startswith("partition-notify wait: error: cannot connect")


def test_main_leaves_the_callers_driver_log_levels_alone(capsys, store):
    # main() quiets stomp.py and kafka for its one-line errors; a program that
    # calls it in-process (and later tests) must get its own levels back.
    import logging

    for name in ("stomp.py", "kafka"):
        logging.getLogger(name).setLevel(logging.DEBUG)
    code, _, _ = run(capsys, *store, "tables")
    assert code == 0
    assert [logging.getLogger(n).level for n in ("stomp.py", "kafka")] == [logging.DEBUG] * 2
    for name in ("stomp.py", "kafka"):
        logging.getLogger(name).setLevel(logging.NOTSET)
