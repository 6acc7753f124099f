"""Publishing add-partition and mark-set-done messages."""

from publisher.publisher import Publisher, PublisherConfig

__all__ = ["Publisher", "PublisherConfig"]
