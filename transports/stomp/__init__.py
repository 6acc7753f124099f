"""The STOMP transport (stomp.py): ActiveMQ, RabbitMQ's STOMP plugin, any STOMP 1.2 broker.

``transport`` is the :class:`~partition_notify.transports.base.Transport` (URL parsing,
publish, consumers), ``_link`` the one shared connection with its reconnect
loop, ``_pending`` the receipts awaited per batch.
"""

from partition_notify.transports.stomp._wire import Endpoint
from partition_notify.transports.stomp.transport import StompTransport, parse_url

__all__ = ["Endpoint", "StompTransport", "parse_url"]
