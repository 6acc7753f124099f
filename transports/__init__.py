"""Message transports: embedded (the store's log), STOMP (ActiveMQ, RabbitMQ) and Kafka."""

from transports.base import Consumer, OnMessage, RawMessage, Transport
from transports.registry import TRANSPORTS, create_transport, resolve

__all__ = [
    "TRANSPORTS",
    "Consumer",
    "OnMessage",
    "RawMessage",
    "Transport",
    "create_transport",
    "resolve",
]
