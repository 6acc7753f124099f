"""The subscriber library for workflow schedulers."""

from partition_notify.subscriber.stats import SubscriberStats
from partition_notify.subscriber.subscriber import Subscriber
from partition_notify.subscriber.subscription import Subscription

__all__ = ["Subscriber", "SubscriberStats", "Subscription"]
