"""Fuzzing what arrives from outside a process: messages on a topic, and CLI arguments.

* subscriber-dispatch: random, malformed and valid raw messages handed to the
  subscriber exactly where a transport's consumer hands them (its on_message
  callback), through the dispatcher thread. No crash, the dispatcher survives,
  ``stats.malformed`` counts exactly the inputs ``decode`` rejects, the user's
  callback sees valid messages only, each id once.
* subscriber-wire: the same over a real broker (raw STOMP frames to ActiveMQ).
* cli-argv: ``partition_notify.cli.main`` with random argv: exit code 0/1/2/3,
  never a traceback, and a failed command leaves the store as it was.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import random
import sqlite3
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from partition_notify.transports import RawMessage

from partition_notify import cli
from partition_notify.app import build_app
from partition_notify.contract import AnyMessage, decode
from partition_notify.core.errors import MalformedMessageError
from tests.fuzz import gen
from tests.fuzz.budget import Counter, batch, examples, fuzz_settings, run
from tests.fuzz.test_fuzz_contract import CORPUS

rngs = st.randoms(use_true_random=True)


def _ours(obj: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """A valid message of the subscribed table (db sales, table orders), fresh id."""
    out = dict(obj)
    out["messageId"] = uuid.UUID(int=rng.getrandbits(128)).hex
    out["topicSeq"] = rng.randint(1, 10**6)
    return out


class Dispatch:
    """A subscriber on the embedded bus, its callback, and a sentinel to sync on."""

    def __init__(self, store_url: str) -> None:
        self.app = build_app(store_url=store_url, transport_url="embedded://")
        self.app.publisher.register_table("sales", "orders", ["ds"])
        self.sub = self.app.subscriber()
        self.seen: dict[str, int] = {}
        self.wrong: list[object] = []
        self.sentinel = threading.Event()
        self.sentinel_id = ""
        self.subscription = self.sub.subscribe("sales.orders", self.callback, history=False)
        consumer = self.sub._consumer  # the transport's consumer owns the on_message hook
        assert consumer is not None
        self.on_message = self.sub._on_raw  # what that consumer calls for every message

    def callback(self, msg: AnyMessage) -> None:
        if msg.message_id == self.sentinel_id:
            self.sentinel.set()
            return
        if (msg.db, msg.table) != ("sales", "orders"):
            self.wrong.append(msg)
        self.seen[msg.message_id] = self.seen.get(msg.message_id, 0) + 1

    def flush(self, rng: random.Random, timeout: float = 30) -> None:
        """Send a valid sentinel last; the dispatcher is FIFO, so all before it is done."""
        self.sentinel.clear()
        body = _ours(CORPUS[0], rng)
        self.sentinel_id = body["messageId"]
        self.on_message(RawMessage("hcat.sales.orders", {}, json.dumps(body).encode()))
        assert self.sentinel.wait(timeout), "the dispatcher stopped (crashed or hung)"

    def close(self) -> None:
        self.sub.close()
        self.app.close()


def _raw(rng: random.Random) -> RawMessage:
    r = rng.random()
    if r < 0.2:
        body = json.dumps(_ours(rng.choice(CORPUS), rng)).encode()
    elif r < 0.25:
        body = b"x" * rng.choice([(1 << 20) + 1, 2 << 20])  # oversized
    else:
        body = gen.body(rng, CORPUS)
    topic = rng.choice(["hcat.sales.orders", "hcat.other.t", gen.text(rng, 10)])
    return RawMessage(topic, gen.headers(rng) or {}, body)


def _malformed(raw: RawMessage) -> bool:
    """Undecodable, or naming another topic than the one it came on."""
    try:
        return decode(raw.body, raw.headers).topic != raw.topic
    except MalformedMessageError:
        return True


def test_fuzz_subscriber_dispatch(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR)
    d = Dispatch(f"sqlite:///{tmp_path}/store.db")
    expected_malformed = 0
    try:
        def build(c: Counter):
            @fuzz_settings("subscriber-dispatch")
            @given(rngs)
            def t(rng: random.Random) -> None:
                nonlocal expected_malformed
                for _ in range(batch("subscriber-dispatch")):
                    raw = _raw(rng)
                    bad = _malformed(raw)
                    expected_malformed += bad
                    c.hit("malformed" if bad else "valid")
                    d.on_message(raw)
                d.flush(rng)
            return t

        counter = run("subscriber-dispatch", build)
        assert d.sub.stats.malformed == expected_malformed
        assert d.sub.stats.received >= counter.n
        assert max(d.seen.values(), default=1) == 1, "a callback saw a message id twice"
        assert not d.wrong, "a message of another table reached the callback"
        assert not [r for r in caplog.records if r.name.startswith("subscriber")], (
            "the dispatcher logged an error")
    finally:
        d.close()


def test_fuzz_subscriber_wire(sqlite_url: str, activemq_url: str) -> None:
    """Raw frames from a real producer on ActiveMQ reach a subscriber over the wire."""
    from tests.faults.support import raw_stomp_send, stomp_app
    from tests.support.accounts import READER_PASSWORD, READER_USER, SERVICE_PASSWORD, SERVICE_USER
    from tests.support.net import wait_until

    url = activemq_url
    port = int(url.rsplit(":", 1)[1])
    db = f"fz{uuid.uuid4().hex[:8]}"
    pub = stomp_app(sqlite_url, url)
    sub_app = stomp_app(sqlite_url, url, user=READER_USER, password=READER_PASSWORD)
    rng = random.Random(int(os.environ.get("PN_FUZZ_SEED", "5")))
    c = Counter("subscriber-wire")
    try:
        info = pub.publisher.register_table(db, "orders", ["ds"])
        got: list[AnyMessage] = []
        with sub_app.subscriber() as sub:
            sub.subscribe(f"{db}.orders", got.append)
            malformed = 0
            for _ in range(examples("subscriber-wire")):
                body = gen.body(rng, CORPUS)
                raw = RawMessage(info.topic, {}, body)
                bad = _malformed(raw)
                malformed += bad
                c.hit("malformed" if bad else "valid")
                command, message = raw_stomp_send(
                    port, SERVICE_USER, SERVICE_PASSWORD, f"/topic/{info.topic}", body,
                    {"content-length": str(len(body))})
                assert command == "RECEIPT", message
            sent = pub.publisher.announce_partitions(db, "orders", ["ds=after"])
            wait_until(lambda: any(m.message_id == sent[0].message_id for m in got), 30,
                       "a valid message after the garbage")
            wait_until(lambda: sub.stats.received >= c.n + 1, 10, "every frame to be read")
            c.report()
            assert sub.stats.malformed == malformed
    finally:
        sub_app.close()
        pub.close()


# -- CLI ------------------------------------------------------------------------------
TOKENS = [
    "sales.orders", "sales", "sales.", ".orders", "Sales.Orders", "a.b.c", "ds=1",
    "ds=1/region=us", "region=us/ds=1", "ds=", "=1", "ds=%ZZ", "--keys", "ds,region", "ds",
    "", ",", "--retention-seconds", "-5", "0", "1", "99999999999999999999", "abc", "--topic",
    "bad topic!", "hcat.custom", "--replace", "--since-seconds", "-1", "nan", "--count",
    "--timeout", "--history", "--location", "/tmp/x", "--help", "-h", "--", "-x", "ds=1/ds=2",
    "é", "\x00", "--once", "begin", "commit", "abort", "status", "snapshot", "define", "list",
]
COMMANDS = ["register", "announce", "mark-done", "wait", "history", "tail", "tables", "purge",
            "serve", "schema", "rev", "dataset", "bogus", "--help"]


def _table(rng: random.Random) -> str:
    return rng.choice(["sales.orders", "sales.orders", "sales.other", "Sales.Orders", "x",
                       "sales.ord ers", gen.text(rng, 8) + "." + gen.text(rng, 8)])


def _spec(rng: random.Random) -> str:
    return rng.choice([f"ds={rng.randint(0, 9)}/region=us", f"ds={rng.randint(0, 9)}",
                       gen.spec_text(rng)])


def _well_formed(rng: random.Random, command: str) -> list[str]:
    """Arguments argparse accepts, so the commands themselves get exercised."""
    if command == "register":
        return [_table(rng), "--keys", rng.choice(["ds,region", "ds", "a,a", "", "1x"]),
                *rng.choice([[], ["--retention-seconds", rng.choice(["5", "0", "-1"])],
                             ["--topic", rng.choice(["hcat.ok", "bad topic", ""])]])]
    if command == "announce":
        return [_table(rng), *[_spec(rng) for _ in range(rng.randint(1, 3))],
                *(["--replace"] if rng.random() < 0.2 else [])]
    if command in ("mark-done", "wait"):
        return [_table(rng), _spec(rng)]
    if command == "history":
        return [_table(rng), *rng.choice([[], ["--since-seconds", rng.choice(["60", "-1"])]])]
    if command == "tail":
        return [_table(rng), *rng.choice([[], ["--count", rng.choice(["0", "1", "-1"])]])]
    return []


def _argv(rng: random.Random, store: str) -> list[str]:
    argv: list[str] = []
    if rng.random() < 0.15:
        argv += ["--store-url", rng.choice([store, "bogus://x", "sqlite:////nonexistent/d/x.db",
                                           "postgresql+psycopg://nobody@127.0.0.1:1/x", ""])]
    if rng.random() < 0.1:
        argv += ["--transport-url", rng.choice(["embedded://", "nope://x", "embedded", ""])]
    command = rng.choice(COMMANDS)
    argv.append(command)
    args = _well_formed(rng, command)
    if rng.random() < 0.4:  # then damage them
        for _ in range(rng.randint(1, 3)):
            i = rng.randint(0, len(args))
            token = rng.choice(TOKENS) if rng.random() < 0.85 else gen.text(rng, 12)
            args = ([*args[:i], token, *args[i + 1:]] if rng.random() < 0.5 else
                    [*args[:i], token, *args[i:]])
    argv += args
    # Keep every command finite: argparse lets the last occurrence win.
    if command in ("wait", "tail"):
        argv += ["--timeout", rng.choice(["0", "0.01", "-1", "nan", "inf", "1e400"])]
    if command == "serve" and "--help" not in argv and "-h" not in argv:
        argv.append("--once")
    return argv


def _counts(path: Path) -> tuple[int, ...]:
    if not path.exists():
        return ()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        names = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'pn_%' "
            "ORDER BY name")]
        return tuple(conn.execute(f"SELECT count(*) FROM {n}").fetchone()[0] for n in names)


def test_fuzz_cli_argv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db_path = tmp_path / "cli.db"
    store = f"sqlite:///{db_path}"
    monkeypatch.setenv("PN_STORE_URL", store)
    monkeypatch.setenv("PN_TRANSPORT_URL", "embedded://")
    monkeypatch.chdir(tmp_path)  # a stray default store file would land here, not in the repo
    assert cli.main(["register", "sales.orders", "--keys", "ds,region"]) == 0

    def build(c: Counter):
        @fuzz_settings("cli-argv")
        @given(rngs)
        def t(rng: random.Random) -> None:
            argv = _argv(rng, store)
            before = _counts(db_path)
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    code = cli.main(argv)
                except SystemExit as exc:  # argparse: usage errors and --help
                    code = exc.code if isinstance(exc.code, int) else 2
            c.hit(f"exit{code}")
            assert code in (0, 1, 2, 3), f"exit {code} for {argv!r}: {err.getvalue()[-500:]}"
            assert "Traceback" not in err.getvalue(), f"traceback for {argv!r}"
            if code != 0:
                assert _counts(db_path) == before, f"{argv!r} failed but changed the store"
        return t

    run("cli-argv", build)


def _cli_process(tmp_path: Path, keys: str) -> tuple[list[str], dict[str, str]]:
    """The CLI as a real process on a fresh store with sales.orders registered."""
    import subprocess
    import sys

    from tests.support.accounts import ROOT

    env = {**os.environ, "PYTHONPATH": str(ROOT), "PN_STORE_URL": f"sqlite:///{tmp_path}/s.db",
           "PN_TRANSPORT_URL": "embedded://"}
    base = [sys.executable, "-m", "partition_notify.cli"]
    subprocess.run([*base, "register", "sales.orders", "--keys", keys], env=env,
                   cwd=tmp_path, check=True, capture_output=True, timeout=60)
    return base, env


@pytest.mark.parametrize("command", [["tail", "sales.orders"],
                                     ["wait", "sales.orders", "ds=1/region=us"]])
def test_cli_rejects_non_finite_timeout(command: list[str], tmp_path: Path) -> None:
    """Found by test_fuzz_cli_argv: --timeout nan made wait/tail spin forever."""
    import subprocess

    base, env = _cli_process(tmp_path, "ds,region")
    try:
        done = subprocess.run([*base, *command, "--timeout", "nan"], env=env, cwd=tmp_path,
                              capture_output=True, timeout=10)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{' '.join(command)} --timeout nan still running after 10 s")
    assert done.returncode == 2, done.stderr


def test_cli_tail_timeout_zero_returns(tmp_path: Path) -> None:
    """Found in CI: ``tail --timeout 0`` meant "no deadline" and never returned."""
    import subprocess

    base, env = _cli_process(tmp_path, "ds")
    subprocess.run([*base, "mark-done", "sales.orders", "ds=1"], env=env,
                   cwd=tmp_path, check=True, capture_output=True, timeout=60)
    try:
        done = subprocess.run([*base, "tail", "sales.orders", "--history", "--timeout", "0"],
                              env=env, cwd=tmp_path, capture_output=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("tail --timeout 0 still running after 30 s")
    assert done.returncode == 0, done.stderr
