"""The Airflow REST calls of the push sink: a deadline each, token renewal, and
a look-up of earlier sends that Airflow 3.3.2 can answer.

Only the standard library is used: ``serve`` does not need Airflow installed.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request
from datetime import UTC, datetime
from typing import Any

from partition_notify.core.errors import ConfigurationError, PushError, PushRefused

#: Page size of the look-up of earlier sends.
PAGE = 100
#: Answers that will not change however often the same event is sent again:
#: bad request, forbidden, asset not found, conflict, too large, invalid.
#: 401 is not here (the token is renewed); 408, 429 and 5xx are retried.
PERMANENT_STATUSES = frozenset({400, 403, 404, 409, 413, 422})
#: Most single-event pages the look-up reads when a page of 100 fails (below).
MAX_PROBES = 200
#: "No upper bound" for a timestamp window (epoch seconds, year 2242).
FAR_FUTURE = float(2**33)
#: Largest answer read (a page of 100 asset events with their extras is far
#: smaller): a bigger one is refused, not read into memory.
MAX_RESPONSE_BYTES = 8 << 20


class AirflowClient:
    """The calls the sink needs, with a deadline each and token renewal."""

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
        what = f"Airflow {method} {path}"
        for attempt in (1, 2):
            headers = {"Content-Type": "application/json", "Accept": "application/json"}
            if auth:
                headers["Authorization"] = f"Bearer {self.token()}"
            req = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers=headers)
            deadline = _Deadline(self.timeout)
            try:
                with deadline, urllib.request.build_opener(
                        _Watched(deadline), _WatchedTLS(deadline)).open(
                            req, timeout=self.timeout) as resp:
                    return json.loads(_read_capped(resp, what) or b"null")
            except urllib.error.HTTPError as exc:
                if deadline.expired:
                    raise deadline.error(what) from exc
                if exc.code == 401 and auth and attempt == 1:
                    self._token = None  # expired: renew once
                    continue
                detail = exc.read(300).decode("utf-8", "replace")
                text = f"{what}: HTTP {exc.code}: {detail}"
                if exc.code in PERMANENT_STATUSES and auth:
                    raise PushRefused(text, exc.code) from exc
                raise PushError(text, exc.code) from exc
            except (urllib.error.URLError, http.client.HTTPException, ValueError,
                    OSError) as exc:
                if deadline.expired:
                    raise deadline.error(what) from exc
                raise PushError(f"{what}: {exc}") from exc
        raise PushError(f"{what}: still unauthorized after a new token", 401)

    def token(self) -> str:
        """The bearer token, fetched from ``POST /auth/token`` when there is none."""
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

    def _events(self, asset_id: int, since: float, until: float, limit: int,
                offset: int) -> dict[str, Any]:
        q = urllib.parse.urlencode({
            "asset_id": asset_id, "limit": limit, "offset": offset, "order_by": "timestamp",
            "timestamp_gte": datetime.fromtimestamp(since, UTC).isoformat(),
            "timestamp_lte": datetime.fromtimestamp(until, UTC).isoformat()})
        page: dict[str, Any] = self._request("GET", f"/api/v2/assets/events?{q}")
        return page

    def sent_since(self, asset_id: int, since: float) -> list[dict[str, Any]]:
        """Asset events of ``asset_id`` created at or after ``since`` (epoch seconds)."""
        return self._all(asset_id, since, FAR_FUTURE)

    def was_sent(self, asset_id: int, message_id: str, since: float,
                 until: float, *, key: str | None = None) -> bool | None:
        """Did an asset event with ``extra.key`` (or ``extra.messageId``) reach Airflow
        between the two times?

        None when Airflow cannot say. Airflow 3.3.2 answers a listing with 500
        when one listed event created a DAG run that is still queued (its
        ``start_date`` is None, which the response model does not allow), so on
        a 500 the window is read one event per page: the pages that still fail
        are events we cannot read, and only if none of those could be ours is
        the answer "not sent".
        """
        try:
            return any(_matches(e, message_id, key)
                       for e in self._all(asset_id, since, until))
        except PushError as exc:
            if exc.status != 500:
                raise
        total = int(self._events(asset_id, since, until, 0, 0).get("total_entries", 0))
        unreadable = 0
        for offset in range(min(total, MAX_PROBES)):
            try:
                page = self._events(asset_id, since, until, 1, offset)
            except PushError as exc:
                if exc.status != 500:
                    raise
                unreadable += 1
                continue
            if any(_matches(e, message_id, key) for e in page.get("asset_events", [])):
                return True
        return None if unreadable or total > MAX_PROBES else False

    def _all(self, asset_id: int, since: float, until: float) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        while True:
            page = self._events(asset_id, since, until, PAGE, len(out))
            events = page.get("asset_events", [])
            out.extend(events)
            if not events or len(out) >= int(page.get("total_entries", 0)):
                return out


def _matches(event: dict[str, Any], message_id: str, key: str | None) -> bool:
    extra = event.get("extra") or {}
    return bool(extra.get("messageId") == message_id
                or (key is not None and extra.get("key") == key))


def _read_capped(resp: http.client.HTTPResponse, what: str) -> bytes:
    """The answer's body, at most :data:`MAX_RESPONSE_BYTES` of it (PushError beyond)."""
    declared = resp.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > MAX_RESPONSE_BYTES:
        raise PushError(f"{what}: the answer has {declared} bytes, more than "
                        f"{MAX_RESPONSE_BYTES} bytes (MAX_RESPONSE_BYTES); not read")
    body = resp.read(MAX_RESPONSE_BYTES + 1)
    if len(body) > MAX_RESPONSE_BYTES:
        raise PushError(f"{what}: the answer has more than {MAX_RESPONSE_BYTES} bytes "
                        "(MAX_RESPONSE_BYTES); not read further")
    return body


class _Deadline:
    """One request's deadline: when it passes, its sockets are shut down.

    ``urlopen``'s timeout bounds each socket operation, not the request: a
    server sending a byte at a time would hold a push for ever. Shutting the
    socket down from a timer ends whatever read is blocked on it.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.expired = False
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._socks.append(sock)
            if self.expired:
                _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._socks:
                _shut(sock)

    def error(self, what: str) -> PushError:
        return PushError(f"{what}: no complete answer within {self.seconds:g} s "
                         "(PN_AIRFLOW_TIMEOUT_SECONDS bounds the whole request)")


def _shut(sock: socket.socket) -> None:
    # The plain socket's shutdown, also for TLS: SSLSocket.shutdown would drop
    # its SSL object under the thread reading it.
    with contextlib.suppress(OSError):  # already closed
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


def _open_watched(handler: _Watched | _WatchedTLS, http_class: Any,
                  req: urllib.request.Request, **kw: Any) -> http.client.HTTPResponse:
    """``do_open`` with a connection class that hands its socket to the deadline."""
    deadline = handler.deadline

    class Connection(http_class):  # type: ignore[misc]
        def connect(self) -> None:
            super().connect()
            deadline.watch(self.sock)

    return urllib.request.AbstractHTTPHandler.do_open(handler, Connection, req, **kw)


class _Watched(urllib.request.HTTPHandler):
    """Hands every connection's socket to the request's :class:`_Deadline`."""

    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self.deadline = deadline

    def do_open(self, http_class: Any, req: urllib.request.Request,
                **kw: Any) -> http.client.HTTPResponse:
        return _open_watched(self, http_class, req, **kw)


class _WatchedTLS(urllib.request.HTTPSHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self.deadline = deadline

    def do_open(self, http_class: Any, req: urllib.request.Request,
                **kw: Any) -> http.client.HTTPResponse:
        return _open_watched(self, http_class, req, **kw)
