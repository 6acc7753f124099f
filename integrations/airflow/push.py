"""The Airflow push sink of ``partition-notify serve``: set-done → partitioned asset event.

Each set-done of a mapped table becomes ``POST /api/v2/assets/events`` with
``asset_id``, ``partition_key`` (the spec's values in partition-key order,
``|``-joined; a coarser set-done gives a shorter key, see docs/schedulers.md)
and ``extra`` = messageId, eventId, revision, spec. Airflow does not
de-duplicate asset events, so the sink keeps a cursor in our store and writes
an intent (the event id) before each POST; after a crash it asks Airflow
whether that event went out (``GET /api/v2/assets/events`` of the asset since
the intent, matching ``extra.eventId``) before sending it again.

Auth: a JWT from the auth manager's ``POST /auth/token`` (the simple auth
manager and FAB both serve it), renewed once on a 401. Only the standard
library is used: ``serve`` does not need Airflow installed.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from partition_notify.integrations.shared import payload
from partition_notify.store import Store, TableInfo
from partition_notify.store.cursors import Cursors
from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from partition_notify.contract import SetDoneMessage, decode
from partition_notify.contract.messages import (
    HCAT_EVENT,
    PARTITION_DONE,
    PN_MESSAGE_ID,
    PN_TABLE,
)
from partition_notify.core.errors import (
    ConfigurationError,
    MalformedMessageError,
    PartitionNotifyError,
    PushError,
)

log = logging.getLogger(__name__)

#: Clock skew allowed between us and Airflow when looking for an earlier send.
SKEW_SECONDS = 300.0
#: Page size of the look-up of earlier sends.
PAGE = 100


class AirflowPushSettings(BaseSettings):
    """``PN_AIRFLOW_*``: where and what the sink pushes. Off unless ``PN_AIRFLOW_URL`` is set."""

    model_config = SettingsConfigDict(env_prefix="PN_AIRFLOW_", env_file=".env", extra="ignore")

    url: str | None = Field(None, description="Airflow API server, e.g. http://airflow:8080")
    username: str | None = None
    password: SecretStr | None = None
    assets: dict[str, str | int] = Field(
        default_factory=dict,
        description='JSON: {"db.table": asset name or id}; only these tables are pushed',
    )
    timeout_seconds: float = Field(10.0, gt=0)
    interval_seconds: float = Field(1.0, gt=0)
    batch_size: int = Field(500, gt=0)


class AirflowClient:
    """The three calls the sink needs, with a deadline each and token renewal."""

    def __init__(self, base_url: str, username: str | None, password: str | None,
                 timeout: float) -> None:
        self.base = base_url.rstrip("/")
        self._user = username
        self._password = password
        self.timeout = timeout
        self._token: str | None = None
        self._lock = threading.Lock()

    def _request(self, method: str, path: str, body: object = None, *, auth: bool = True) -> Any:
        data = None if body is None else json.dumps(body).encode()
        for attempt in (1, 2):
            headers = {"Content-Type": "application/json", "Accept": "application/json"}
            if auth:
                headers["Authorization"] = f"Bearer {self._bearer()}"
            req = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers=headers)
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    return json.loads(resp.read() or b"null")
            except urllib.error.HTTPError as exc:
                if exc.code == 401 and auth and attempt == 1:
                    self._token = None  # expired: renew once
                    continue
                detail = exc.read()[:300].decode("utf-8", "replace")
                raise PushError(f"Airflow {method} {path}: HTTP {exc.code}: {detail}") from exc
            except (urllib.error.URLError, TimeoutError, OSError) as exc:
                raise PushError(f"Airflow {method} {path}: {exc}") from exc
        raise PushError(f"Airflow {method} {path}: still unauthorized after a new token")

    def _bearer(self) -> str:
        with self._lock:
            if self._token is None:
                body = {"username": self._user or "", "password": self._password or ""}
                got = self._request("POST", "/auth/token", body, auth=False)
                self._token = str(got["access_token"])
            return self._token

    def asset_id(self, name: str) -> int:
        q = urllib.parse.urlencode({"name_pattern": name, "limit": PAGE})
        found = self._request("GET", f"/api/v2/assets?{q}")
        ids = [a["id"] for a in found.get("assets", []) if a.get("name") == name]
        if len(ids) != 1:
            raise ConfigurationError(
                f"PN_AIRFLOW_ASSETS: Airflow has {len(ids)} assets named {name!r}, expected 1"
            )
        return int(ids[0])

    def post_event(self, asset_id: int, partition_key: str, extra: dict[str, object]) -> Any:
        body = {"asset_id": asset_id, "partition_key": partition_key, "extra": extra}
        return self._request("POST", "/api/v2/assets/events", body)

    def sent_since(self, asset_id: int, since: float) -> list[dict[str, Any]]:
        """Asset events of ``asset_id`` created at or after ``since`` (epoch seconds)."""
        stamp = datetime.fromtimestamp(since, UTC).isoformat()
        out: list[dict[str, Any]] = []
        offset = 0
        while True:
            q = urllib.parse.urlencode({"asset_id": asset_id, "timestamp_gte": stamp,
                                        "limit": PAGE, "offset": offset})
            page = self._request("GET", f"/api/v2/assets/events?{q}")
            events = page.get("asset_events", [])
            out.extend(events)
            offset += len(events)
            if not events or offset >= int(page.get("total_entries", 0)):
                return out


class AirflowPushSink:
    """Pushes set-dones after its cursor. Several ``serve`` processes may run one
    each: a lease on the cursor row lets one push at a time."""

    def __init__(self, store: Store, config: AirflowPushSettings,
                 client: AirflowClient | None = None) -> None:
        if not config.url:
            raise ConfigurationError("PN_AIRFLOW_URL is not set")
        self.store = store
        self.config = config
        pw = config.password.get_secret_value() if config.password else None
        self.client = client or AirflowClient(config.url, config.username, pw,
                                              config.timeout_seconds)
        self.cursors = Cursors(store)
        self.cursor = f"airflow-push:{config.url.rstrip('/')}"
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        # Long enough for one POST and a settle look-up, renewed before each send.
        self.lease_seconds = 3 * config.timeout_seconds + 5
        self._assets: dict[str, int] = {}
        self._tables: dict[str, TableInfo] = {}
        self.sent = 0
        self.recovered = 0

    def _asset(self, table: str) -> int:
        if table not in self._assets:
            ref = self.config.assets[table]
            self._assets[table] = ref if isinstance(ref, int) else (
                int(ref) if ref.isdigit() else self.client.asset_id(ref))
        return self._assets[table]

    def _table(self, qualified: str) -> TableInfo:
        if qualified not in self._tables:
            db, name = qualified.split(".", 1)
            self._tables[qualified] = self.store.catalog.get_table(db, name)
        return self._tables[qualified]

    def run_once(self) -> int:
        """Push what is after the cursor (one batch); returns how many events were sent.

        Returns 0 at once while another process holds the cursor's lease.
        """
        self.cursors.open(self.cursor)
        if not self.cursors.claim(self.cursor, self.owner, self.lease_seconds):
            return 0
        try:
            return self._run_batch()
        finally:
            self.cursors.release(self.cursor, self.owner)

    def _run_batch(self) -> int:
        cur = self.cursors.open(self.cursor)
        if cur.pending_event_id is not None and cur.pending_since is not None:
            self._settle(cur.pending_event_id, cur.pending_since)
            cur = self.cursors.open(self.cursor)
        events = self.store.log.events_after(cur.event_id, self.config.batch_size)
        sent = 0
        for ev in events:
            table = str(ev.headers.get(PN_TABLE, ""))
            if ev.headers.get(HCAT_EVENT) != PARTITION_DONE or table not in self.config.assets:
                continue
            try:
                msg = decode(ev.body)
            except MalformedMessageError as exc:
                log.warning("push sink: skipping malformed event %d: %s", ev.event_id, exc)
                continue
            if isinstance(msg, SetDoneMessage):
                self.cursors.intend(self.cursor, ev.event_id, self.owner, self.lease_seconds)
                self._send(msg)
                self.cursors.advance(self.cursor, ev.event_id)
                sent += 1
        if events:
            self.cursors.advance(self.cursor, events[-1].event_id)
        self.sent += sent
        return sent

    def _send(self, msg: SetDoneMessage) -> None:
        info = self._table(f"{msg.db}.{msg.table}")
        p = payload(msg, info.partition_keys)
        extra = {"messageId": msg.message_id, "eventId": msg.event_id,
                 "revision": msg.revision, "spec": msg.spec}
        self.client.post_event(self._asset(info.qualified), str(p["partition_key"]), extra)

    def _settle(self, event_id: int, since: float) -> None:
        """A crash left ``event_id`` maybe-sent: advance past it if Airflow has it.

        Matched by messageId (a UUID): event ids repeat across stores, and
        one Airflow may hear from several.
        """
        logged = self.store.log.events_after(event_id - 1, 1)
        if not logged or logged[0].event_id != event_id:
            self.cursors.advance(self.cursor, event_id)
            return
        message_id = logged[0].headers.get(PN_MESSAGE_ID)
        table = str(logged[0].headers.get(PN_TABLE, ""))
        seen = self.client.sent_since(self._asset(table), since - SKEW_SECONDS)
        if any((e.get("extra") or {}).get("messageId") == message_id for e in seen):
            log.info("push sink: event %d already reached Airflow before the restart", event_id)
            self.recovered += 1
            self.cursors.advance(self.cursor, event_id)


def push_job(store: Store) -> tuple[Callable[[], None], float] | None:
    """``serve``'s job (and its interval) when ``PN_AIRFLOW_URL`` is set, else None."""
    config = AirflowPushSettings()  # type: ignore[call-arg]  # fields come from PN_AIRFLOW_*
    if not config.url:
        return None
    if not config.assets:
        raise ConfigurationError(
            'PN_AIRFLOW_URL is set but PN_AIRFLOW_ASSETS is empty: expected JSON like '
            '{"sales.orders": "sales_orders"}'
        )
    sink = AirflowPushSink(store, config)

    def job() -> None:
        try:
            sink.run_once()
        except PartitionNotifyError as exc:
            log.warning("Airflow push failed (retried next run): %s", exc,
                        extra={"pn_event": "airflow_push.failed"})

    return job, config.interval_seconds
