"""The subscriber library for workflow schedulers."""

from subscriber.subscriber import Subscriber, SubscriberStats
from subscriber.subscription import Subscription

__all__ = ["Subscriber", "SubscriberStats", "Subscription"]
