"""Message transports: embedded (the store's log), STOMP (ActiveMQ, RabbitMQ) and Kafka."""

from partition_notify.transports.base import Consumer, OnMessage, RawMessage, Transport
from partition_notify.transports.registry import TRANSPORTS, create_transport, resolve

__all__ = [
    "TRANSPORTS",
    "Consumer",
    "OnMessage",
    "RawMessage",
    "Transport",
    "create_transport",
    "resolve",
]
