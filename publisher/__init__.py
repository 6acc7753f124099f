"""Publishing add-partition and mark-set-done messages."""

from partition_notify.publisher.publisher import Publisher, PublisherConfig

__all__ = ["Publisher", "PublisherConfig"]
