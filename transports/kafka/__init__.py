"""The Kafka transport (kafka-python).

``transport`` publishes, ``consumer`` follows topics, ``config`` parses
``kafka://`` URLs and their options, ``_topics`` creates topics and holds the
driver glue, ``_sasl`` checks SASL before the driver retries blindly.
"""

from partition_notify.transports.kafka.config import KafkaEndpoint, parse_url
from partition_notify.transports.kafka.transport import KafkaTransport

__all__ = ["KafkaEndpoint", "KafkaTransport", "parse_url"]
