"""What the writers take from the composition root, named as a Protocol.

The writers sit below the App (docs/architecture.md): they name the parts
they use, and an :class:`~partition_notify.app.App` is one thing that has them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from partition_notify.publisher import Publisher
    from partition_notify.revisions import RevisionManager
    from partition_notify.revisions.datasets import SnapshotDatasets
    from partition_notify.store import Store


class AppParts(Protocol):
    """The store, publisher, revisions and SNAPSHOT datasets of one App."""

    @property
    def store(self) -> Store: ...

    @property
    def publisher(self) -> Publisher: ...

    @property
    def revisions(self) -> RevisionManager: ...

    @property
    def datasets(self) -> SnapshotDatasets: ...
