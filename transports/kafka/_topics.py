"""Kafka driver glue: version differences, retriable errors, and creating topics.

Topics are created with the admin client, not left to broker auto-creation:
many production clusters turn ``auto.create.topics.enable`` off, and a
subscriber needs the topic to exist to pin its start offset. Creation is
best effort - a principal without CREATE permission, or a policy that refuses
it, only gets a warning; publishing then relies on the topic existing (or on
auto-creation) and subscribers wait for it to appear (see transports.kafka.consumer).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, TypeVar

import kafka.errors as kerrors
from partition_notify.transports.kafka.config import KafkaEndpoint

from partition_notify.core.errors import SubscribeError

if TYPE_CHECKING:
    from kafka.admin import KafkaAdminClient

log = logging.getLogger(__name__)


class _HideAdminConfig(logging.Filter):
    """kafka-python's admin client logs its whole configuration, SASL password included,
    at DEBUG; drop that one record."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Starting KafkaAdminClient with configuration")


_HIDE_ADMIN_CONFIG = _HideAdminConfig()


def _hide_admin_config() -> None:
    """Install the filter before the first admin client logs; ``addFilter`` ignores repeats."""
    logging.getLogger("kafka.admin.client").addFilter(_HIDE_ADMIN_CONFIG)

#: Topics per CreateTopics request: small enough to finish well within a request timeout.
CREATE_CHUNK = 200
#: Topics per Metadata request when looking up partitions.
DESCRIBE_CHUNK = 1000
_T = TypeVar("_T")


def client_config(endpoint: KafkaEndpoint, timeout: float | None = None) -> dict[str, object]:
    """``endpoint.client_config()`` plus how long bootstrapping may take."""
    config = endpoint.client_config()
    wait = endpoint.connect_timeout if timeout is None else timeout
    config["bootstrap_timeout_ms"] = max(int(wait * 1000), 100)
    return config


def describe(exc: BaseException) -> str:
    """A driver error as a short message; kafka-python's own str() is often just 'None'."""
    text = str(exc)
    name = type(exc).__name__
    return name if text in ("", "None", name) else f"{name}: {text}"


class TopicAdmin:
    """Creates missing topics and looks up partitions, with a short-lived admin client.

    Remembers which topics exist, so steady-state publishing never opens it.
    """

    def __init__(self, endpoint: KafkaEndpoint) -> None:
        self.endpoint = endpoint
        self._known: set[str] = set()
        self._refused: set[str] = set()
        self._lock = threading.Lock()

    def known(self, topics: Iterable[str]) -> bool:
        with self._lock:
            return self._known.issuperset(topics)

    def mark_known(self, topics: Iterable[str]) -> None:
        with self._lock:
            self._known.update(topics)

    def ensure(self, topics: Iterable[str], deadline: float) -> None:
        """Create the topics not yet known to exist, if the URL allows it.

        Never raises for a driver failure: the caller's own client reports
        the real problem (no broker, no permission) with its own deadline.
        """
        missing = self._unknown(topics)
        if missing and self.endpoint.create_topics:
            self._session(deadline, lambda admin: self._create(admin, missing, deadline))

    def partitions(self, topics: Iterable[str], deadline: float) -> dict[str, set[int]] | None:
        """Create what is missing (if allowed), then the partitions of each topic that exists.

        Topics the cluster does not have are left out. ``None`` when the admin
        client failed; a topic the principal may not describe raises.
        """
        wanted = sorted(set(topics))

        def work(admin: KafkaAdminClient) -> dict[str, set[int]]:
            missing = self._unknown(wanted)
            if missing and self.endpoint.create_topics:
                self._create(admin, missing, deadline)
            return self._describe(admin, wanted)

        return self._session(deadline, work)

    def _unknown(self, topics: Iterable[str]) -> list[str]:
        with self._lock:
            return sorted(set(topics) - self._known)

    def _session(self, deadline: float, work: Callable[[KafkaAdminClient], _T]) -> _T | None:
        from kafka.admin import KafkaAdminClient

        left = deadline - time.monotonic()
        if left <= 0:
            return None
        config = client_config(self.endpoint, min(left, self.endpoint.connect_timeout))
        # One CreateTopics request may legitimately take longer than a connect.
        config["request_timeout_ms"] = max(int(left * 1000), 1000)
        _hide_admin_config()
        try:
            admin = KafkaAdminClient(**config)
        except kerrors.KafkaError as exc:
            log.warning("kafka: admin client cannot connect: %s", describe(exc))
            return None
        try:
            return work(admin)
        except kerrors.KafkaError as exc:
            log.warning("kafka: admin request failed: %s", describe(exc))
            return None
        finally:
            admin.close()

    def _create(self, admin: KafkaAdminClient, topics: list[str], deadline: float) -> None:
        from kafka.admin import NewTopic

        for start in range(0, len(topics), CREATE_CHUNK):
            left = deadline - time.monotonic()
            if left <= 0:
                return
            new = [NewTopic(t, self.endpoint.partitions, self.endpoint.replication_factor)
                   for t in topics[start:start + CREATE_CHUNK]]
            result = admin.create_topics(new, timeout_ms=max(int(left * 1000), 100),
                                         raise_errors=False)
            self.mark_known(self._sort_out(
                (t["name"], t["error_code"], t.get("error_message")) for t in result["topics"]))

    def _sort_out(self, errors: Iterable[tuple[str, int, str | None]]) -> set[str]:
        ok = set()
        for name, code, message in errors:
            error = kerrors.for_code(code)
            if code == 0 or error is kerrors.TopicAlreadyExistsError:
                ok.add(name)
                continue
            with self._lock:
                first = name not in self._refused
                self._refused.add(name)
            if first:
                log.warning("kafka: broker refused to create topic %s (%s%s); publishing needs "
                            "it to exist or auto-creation", name, error.__name__,
                            f": {message}" if message else "")
        return ok

    def _describe(self, admin: KafkaAdminClient, topics: list[str]) -> dict[str, set[int]]:
        found: dict[str, set[int]] = {}
        for start in range(0, len(topics), DESCRIBE_CHUNK):
            for topic in admin.describe_topics(topics[start:start + DESCRIBE_CHUNK]):
                error = kerrors.for_code(topic["error_code"])
                if topic["error_code"] == 0 and topic["partitions"]:
                    found[topic["name"]] = {p["partition_index"] for p in topic["partitions"]}
                elif error is not kerrors.UnknownTopicOrPartitionError \
                        and topic["error_code"] != 0:
                    raise SubscribeError(f"kafka: topic {topic['name']}: {error.__name__}")
        self.mark_known(found)
        return found


def _few(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
